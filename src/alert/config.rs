//! `[alert]` and `[[alert.targets]]` in the config file: where signal
//! notifications go, when, and how hard delivery tries.

use serde::{Deserialize, Serialize};

use crate::signal::Kind;

/// `[alert]`: when to notify and the delivery policy (alerting.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AlertConfig {
    /// The dashboard's address as people reach it, for trace links
    /// (`--public-url` wins); links are left out when empty.
    pub public_url: String,
    /// Evidence traces per signal in a message (the rest are counted).
    pub evidence_per_signal: usize,
    /// A reminder while a signal stays open (seconds).
    pub repeat_interval_secs: u64,
    /// A signal that flaps notifies at most once per this (seconds).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    Slack,
    Discord,
    Teams,
    Webhook,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Slack => "slack",
            TargetKind::Discord => "discord",
            TargetKind::Teams => "teams",
            TargetKind::Webhook => "webhook",
        }
    }
}

pub use crate::signal::Severity;

/// One `[[alert.targets]]` entry. Its `Debug` hides the URL and secret.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// How the target is named in logs, `alerts` commands and metrics.
    pub name: String,
    pub kind: TargetKind,
    /// The webhook URL, or the environment variable holding it (a webhook
    /// URL is itself a secret for Slack and Discord).
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub url_env: Option<String>,
    /// The signing secret of a generic webhook (`whsec_…`), or its env var.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Only these signal kinds (all when empty).
    #[serde(default)]
    pub kinds: Vec<Kind>,
    /// Only these tools (all when empty).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Only signals at least this severe.
    #[serde(default)]
    pub min_severity: Option<Severity>,
}

impl std::fmt::Debug for TargetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .field("url_env", &self.url_env)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .finish()
    }
}

/// A target ready to send to: URL and secret resolved. Its `Debug` shows
/// neither.
#[derive(Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub kind: TargetKind,
    pub url: String,
    pub secret: Option<String>,
    pub kinds: Vec<Kind>,
    pub tools: Vec<String>,
    pub min_severity: Option<Severity>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &"<redacted>")
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Target {
    /// Whether a signal of `kind` about `tool`, of `severity`, goes to this target.
    pub fn wants(&self, kind: Kind, tool: &str, severity: Severity) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&kind))
            && (self.tools.is_empty() || self.tools.iter().any(|t| t == tool))
            && self.min_severity.is_none_or(|m| severity >= m)
    }
}

impl TargetConfig {
    /// Resolve the URL and secret (from the environment where named);
    /// errors name the target and the key, never the value.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Target, String> {
        let who = format!("alert target {:?}", self.name);
        let pick = |value: &Option<String>, var: &Option<String>, key: &str| match (value, var) {
            (Some(_), Some(_)) => Err(format!("{who}: set {key} or {key}_env, not both")),
            (Some(v), None) => Ok(Some(v.clone())),
            (None, Some(name)) => env(name)
                .filter(|v| !v.is_empty())
                .map(Some)
                .ok_or_else(|| format!("{who}: {key}_env names {name}, which is not set")),
            (None, None) => Ok(None),
        };
        let url = pick(&self.url, &self.url_env, "url")?
            .ok_or_else(|| format!("{who}: needs url or url_env"))?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(format!("{who}: url must start with https:// or http://"));
        }
        let secret = pick(&self.secret, &self.secret_env, "secret")?;
        if self.kind != TargetKind::Webhook && secret.is_some() {
            return Err(format!(
                "{who}: secret applies only to kind = \"webhook\" (Standard Webhooks signing)"
            ));
        }
        if let Some(s) = &secret {
            super::sign::key(s).map_err(|e| format!("{who}: secret: {e}"))?;
        }
        if self.name.is_empty() || self.name.len() > 64 {
            return Err("alert target: name must be 1 to 64 characters".into());
        }
        Ok(Target {
            name: self.name.clone(),
            kind: self.kind,
            url,
            secret,
            kinds: self.kinds.clone(),
            tools: self.tools.clone(),
            min_severity: self.min_severity,
        })
    }
}

impl AlertConfig {
    /// The targets as a sweep needs them: names, kinds and filters. A URL or
    /// secret whose environment variable is not set here (a cron job
    /// without the sender's secrets) is left empty; the sender resolves it.
    pub fn routing(&self) -> Result<Vec<Target>, String> {
        let mut out: Vec<Target> = Vec::new();
        for t in &self.targets {
            if out.iter().any(|o| o.name == t.name) {
                return Err(format!("alert target {:?} is named twice", t.name));
            }
            out.push(Target {
                name: t.name.clone(),
                kind: t.kind,
                url: String::new(),
                secret: None,
                kinds: t.kinds.clone(),
                tools: t.tools.clone(),
                min_severity: t.min_severity,
            });
        }
        Ok(out)
    }

    /// Every target resolved, or the first problem; names must be unique.
    pub fn targets(&self, env: impl Fn(&str) -> Option<String>) -> Result<Vec<Target>, String> {
        let mut out: Vec<Target> = Vec::new();
        for t in &self.targets {
            let r = t.resolve(&env)?;
            if out.iter().any(|o| o.name == r.name) {
                return Err(format!("alert target {:?} is named twice", r.name));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// The checks `Config::parse` runs.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_attempts == 0 {
            return Err("alert.max_attempts: must be at least 1".into());
        }
        if self.backoff_base_ms == 0 || self.backoff_cap_secs == 0 {
            return Err("alert.backoff_base_ms / backoff_cap_secs: must be at least 1".into());
        }
        if self.request_timeout_secs == 0 {
            return Err("alert.request_timeout_secs: must be at least 1".into());
        }
        let url = &self.public_url;
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err("alert.public_url: must start with https:// or http://".into());
        }
        let hosts = super::hosts::HostPolicy::parse(&self.allow_hosts, &self.deny_hosts)?;
        // Targets whose URL comes from the environment are checked when used;
        // the rest now, so a typo fails `config check`.
        for t in &self.targets {
            if t.url_env.is_none() && t.secret_env.is_none() {
                let r = t.resolve(|_| None)?;
                hosts
                    .check_static(&r.url)
                    .map_err(|why| format!("alert target {:?}: refused: {why}", t.name))?;
            }
        }
        Ok(())
    }
}
