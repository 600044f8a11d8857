//! `[alert]` in the config file: when incident and signal notifications
//! go out, how hard delivery tries, which hosts it may reach, and the
//! targets (each in [`super::target`]).

use serde::{Deserialize, Serialize};

use super::target::{Target, TargetConfig, TargetError, TargetKind, PAGERDUTY_URL};

/// `[alert]`: when to notify and the delivery policy (alerting.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AlertConfig {
    /// The dashboard's address as people reach it, for trace links
    /// (`--public-url` wins); links are left out when empty.
    pub public_url: String,
    /// Evidence traces per signal (or per incident) in a message (the
    /// rest are counted).
    pub evidence_per_signal: usize,
    /// A reminder while a signal or incident stays open (seconds).
    pub repeat_interval_secs: u64,
    /// A signal or incident that flaps fires at most once per this (seconds).
    pub cooldown_secs: u64,
    /// Delivery gives up after this many attempts…
    pub max_attempts: u32,
    /// … or once a message is this old (seconds), whichever comes first.
    pub max_age_secs: u64,
    /// Full-jitter backoff: base and cap.
    pub backoff_base_ms: u64,
    pub backoff_cap_secs: u64,
    /// At most one message per target per this (milliseconds).
    pub pace_ms: u64,
    /// One HTTP request's time limit (seconds).
    pub request_timeout_secs: u64,
    /// Target hosts the sender may post to (empty: any host not denied);
    /// names, `*.domain`, addresses, CIDR blocks, `loopback`, `private`,
    /// `link-local` ([`super::hosts`]).
    pub allow_hosts: Vec<String>,
    /// Target hosts it never posts to (the same forms); wins over
    /// `allow_hosts`. This instance's own listeners are always refused.
    pub deny_hosts: Vec<String>,
    #[serde(skip_serializing)]
    pub targets: Vec<TargetConfig>,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            public_url: String::new(),
            evidence_per_signal: 5,
            repeat_interval_secs: 24 * 3600,
            cooldown_secs: 6 * 3600,
            max_attempts: 10,
            max_age_secs: 24 * 3600,
            backoff_base_ms: 1000,
            backoff_cap_secs: 300,
            pace_ms: 1000,
            request_timeout_secs: 10,
            allow_hosts: Vec::new(),
            deny_hosts: super::hosts::default_deny(),
            targets: Vec::new(),
        }
    }
}

impl AlertConfig {
    /// Where the sender may post, from `allow_hosts` and `deny_hosts`: a
    /// policy that refuses everything if they do not parse.
    pub fn host_policy(&self) -> super::hosts::HostPolicy {
        super::hosts::HostPolicy::of(&self.allow_hosts, &self.deny_hosts)
    }

    /// The targets as a sweep needs them: names, kinds, grouping and
    /// filters. URLs, secrets and routing keys are left empty (a cron job
    /// may run without the sender's environment); the sender resolves them.
    pub fn routing(&self) -> Result<Vec<Target>, AlertConfigError> {
        let mut out: Vec<Target> = Vec::new();
        for t in &self.targets {
            if out.iter().any(|o| o.name == t.name) {
                return Err(AlertConfigError::NamedTwice(t.name.clone()));
            }
            t.check_shape()?;
            out.push(Target {
                name: t.name.clone(),
                kind: t.kind,
                url: String::new(),
                secret: None,
                routing_key: None,
                group_by: t.group_by,
                kinds: t.kinds.clone(),
                tools: t.tools.clone(),
                min_severity: t.min_severity,
            });
        }
        Ok(out)
    }

    /// Every target resolved, or the first problem; names must be unique.
    pub fn targets(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Target>, AlertConfigError> {
        let mut out: Vec<Target> = Vec::new();
        for t in &self.targets {
            let r = t.resolve(&env)?;
            if out.iter().any(|o| o.name == r.name) {
                return Err(AlertConfigError::NamedTwice(r.name));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// The checks `Config::parse` runs.
    pub fn validate(&self) -> Result<(), AlertConfigError> {
        let invalid = |key, expected| Err(AlertConfigError::Setting { key, expected });
        if self.max_attempts == 0 {
            return invalid("max_attempts", "must be at least 1");
        }
        if self.backoff_base_ms == 0 || self.backoff_cap_secs == 0 {
            return invalid("backoff_base_ms / backoff_cap_secs", "must be at least 1");
        }
        if self.request_timeout_secs == 0 {
            return invalid("request_timeout_secs", "must be at least 1");
        }
        let url = &self.public_url;
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return invalid("public_url", "must start with https:// or http://");
        }
        let hosts = super::hosts::HostPolicy::parse(&self.allow_hosts, &self.deny_hosts)?;
        // Targets whose values come from the environment are checked when
        // used (their shape now); the rest whole, so a typo fails `config check`.
        for t in &self.targets {
            t.check_shape()?;
            if t.is_literal() {
                let r = t.resolve(|_| None)?;
                hosts
                    .check_static(&r.url)
                    .map_err(|source| AlertConfigError::Refused {
                        target: t.name.clone(),
                        source,
                    })?;
            } else if let Some(url) = t
                .url
                .as_deref()
                .or((t.kind == TargetKind::PagerDuty && t.url_env.is_none())
                    .then_some(PAGERDUTY_URL))
            {
                hosts
                    .check_static(url)
                    .map_err(|source| AlertConfigError::Refused {
                        target: t.name.clone(),
                        source,
                    })?;
            }
        }
        Ok(())
    }
}

/// Why `[alert]` is refused.
#[derive(Debug, thiserror::Error)]
pub enum AlertConfigError {
    #[error("alert.{key}: {expected}")]
    Setting {
        key: &'static str,
        expected: &'static str,
    },
    #[error("alert target {0:?} is named twice")]
    NamedTwice(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Hosts(#[from] super::hosts::HostListError),
    /// A target's host that `allow_hosts` / `deny_hosts` refuse.
    #[error("alert target {target:?}: refused: {source}")]
    Refused {
        target: String,
        #[source]
        source: super::hosts::Refusal,
    },
}
