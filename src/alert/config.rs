//! `[alert]` and `[[alert.targets]]` in the config file: where incident and
//! signal notifications go, when, and how hard delivery tries.

use serde::{Deserialize, Serialize};

use crate::signal::Kind;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    Slack,
    Discord,
    Teams,
    Webhook,
    /// PagerDuty's Events API v2 (alerting.md, "PagerDuty").
    #[serde(rename = "pagerduty")]
    PagerDuty,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Slack => "slack",
            TargetKind::Discord => "discord",
            TargetKind::Teams => "teams",
            TargetKind::Webhook => "webhook",
            TargetKind::PagerDuty => "pagerduty",
        }
    }

    /// A chat target: people read it, nobody acts on an `acknowledged`.
    pub fn is_chat(self) -> bool {
        matches!(
            self,
            TargetKind::Slack | TargetKind::Discord | TargetKind::Teams
        )
    }
}

/// What a target is told about (alerting.md, "Incidents and
/// notifications"): one message per incident, its members inhibited
/// (the default), or the signals themselves, grouped per sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    #[default]
    Incident,
    Signal,
}

impl GroupBy {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Incident => "incident",
            GroupBy::Signal => "signal",
        }
    }
}

/// Where a `kind = "pagerduty"` target posts unless `url` says otherwise.
pub const PAGERDUTY_URL: &str = "https://events.pagerduty.com/v2/enqueue";

pub use crate::signal::Severity;

/// One `[[alert.targets]]` entry. Its `Debug` hides the URL, the secret
/// and the routing key.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// How the target is named in logs, `alerts` commands and metrics.
    pub name: String,
    pub kind: TargetKind,
    /// The webhook URL, or the environment variable holding it (a webhook
    /// URL is itself a secret for Slack and Discord). PagerDuty's defaults
    /// to the Events API v2 endpoint.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub url_env: Option<String>,
    /// The signing secret of a generic webhook (`whsec_…`), or its env var.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub secret_env: Option<String>,
    /// A PagerDuty target's integration key (Events API v2), or the
    /// environment variable holding it: exactly one of the two.
    #[serde(default)]
    pub routing_key: Option<String>,
    #[serde(default)]
    pub routing_key_env: Option<String>,
    /// `incident` (one message per incident; its signals are not sent on
    /// their own) or `signal` (each signal's notices, grouped per sweep).
    #[serde(default)]
    pub group_by: GroupBy,
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
            .field(
                "routing_key",
                &self.routing_key.as_ref().map(|_| "<redacted>"),
            )
            .field("routing_key_env", &self.routing_key_env)
            .field("group_by", &self.group_by)
            .finish()
    }
}

/// A target ready to send to: URL, secret and routing key resolved. Its
/// `Debug` shows none of them.
#[derive(Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub kind: TargetKind,
    pub url: String,
    pub secret: Option<String>,
    /// PagerDuty's integration key: added to a body only as it is sent,
    /// never stored in the outbox (a sweep routes without it).
    pub routing_key: Option<String>,
    pub group_by: GroupBy,
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
            .field(
                "routing_key",
                &self.routing_key.as_ref().map(|_| "<redacted>"),
            )
            .field("group_by", &self.group_by)
            .finish()
    }
}

impl Target {
    /// A target of `kind` posting to `url`, told per incident, no filters
    /// (tests and tools build on it).
    pub fn new(name: &str, kind: TargetKind, url: &str) -> Target {
        Target {
            name: name.to_string(),
            kind,
            url: url.to_string(),
            secret: None,
            routing_key: None,
            group_by: GroupBy::Incident,
            kinds: Vec::new(),
            tools: Vec::new(),
            min_severity: None,
        }
    }

    /// Whether a signal of `kind` about `tool`, of `severity`, goes to this target.
    pub fn wants(&self, kind: Kind, tool: &str, severity: Severity) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&kind))
            && (self.tools.is_empty() || self.tools.iter().any(|t| t == tool))
            && self.min_severity.is_none_or(|m| severity >= m)
    }

    /// Whether `incident` goes to this target: when any of its open members
    /// passes the filters (every member, once none is open).
    pub fn wants_incident(&self, incident: &crate::incident::Incident) -> bool {
        let open: Vec<&crate::incident::Member> = incident
            .members
            .iter()
            .filter(|m| crate::signal::Lifecycle::parse(&m.state).is_some_and(|l| l.is_open()))
            .collect();
        let members: Vec<&crate::incident::Member> = if open.is_empty() {
            incident.members.iter().collect()
        } else {
            open
        };
        members.iter().any(|m| {
            let kind: Option<Kind> = serde_json::from_value(serde_json::json!(m.kind)).ok();
            let severity = match m.severity.as_str() {
                "critical" => Severity::Critical,
                "warning" => Severity::Warning,
                _ => Severity::Info,
            };
            kind.is_some_and(|k| self.wants(k, &m.tool, severity))
        })
    }
}

impl TargetConfig {
    /// What can be checked without the environment: each key where its
    /// kind takes it, exactly one of a pair, the name. Errors name the
    /// target and the key, never a value.
    pub fn check_shape(&self) -> Result<(), String> {
        let who = format!("alert target {:?}", self.name);
        if self.name.is_empty() || self.name.len() > 64 {
            return Err("alert target: name must be 1 to 64 characters".into());
        }
        let both = |a: &Option<String>, b: &Option<String>, key: &str| {
            if a.is_some() && b.is_some() {
                Err(format!("{who}: set {key} or {key}_env, not both"))
            } else {
                Ok(())
            }
        };
        both(&self.url, &self.url_env, "url")?;
        both(&self.secret, &self.secret_env, "secret")?;
        both(&self.routing_key, &self.routing_key_env, "routing_key")?;
        if self.kind != TargetKind::Webhook && (self.secret.is_some() || self.secret_env.is_some())
        {
            return Err(format!(
                "{who}: secret applies only to kind = \"webhook\" (Standard Webhooks signing)"
            ));
        }
        let has_key = self.routing_key.is_some() || self.routing_key_env.is_some();
        if self.kind == TargetKind::PagerDuty {
            if !has_key {
                return Err(format!(
                    "{who}: kind = \"pagerduty\" needs routing_key or routing_key_env (the Events API v2 integration key)"
                ));
            }
            if self.group_by == GroupBy::Signal {
                return Err(format!(
                    "{who}: kind = \"pagerduty\" follows incidents (one PagerDuty alert per incident, dedup_key = the incident key); group_by = \"signal\" is for chat and webhook targets"
                ));
            }
        } else if has_key {
            return Err(format!(
                "{who}: routing_key applies only to kind = \"pagerduty\""
            ));
        }
        if self.kind != TargetKind::PagerDuty && self.url.is_none() && self.url_env.is_none() {
            return Err(format!("{who}: needs url or url_env"));
        }
        if let Some(k) = &self.routing_key {
            check_routing_key(k).map_err(|e| format!("{who}: routing_key: {e}"))?;
        }
        Ok(())
    }

    /// Resolve the URL, secret and routing key (from the environment where
    /// named); errors name the target and the key, never the value.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Target, String> {
        self.check_shape()?;
        let who = format!("alert target {:?}", self.name);
        let pick = |value: &Option<String>, var: &Option<String>, key: &str| match (value, var) {
            (Some(v), _) => Ok(Some(v.clone())),
            (None, Some(name)) => env(name)
                .filter(|v| !v.is_empty())
                .map(Some)
                .ok_or_else(|| format!("{who}: {key}_env names {name}, which is not set")),
            (None, None) => Ok(None),
        };
        let url = match pick(&self.url, &self.url_env, "url")? {
            Some(url) => url,
            None if self.kind == TargetKind::PagerDuty => PAGERDUTY_URL.to_string(),
            None => return Err(format!("{who}: needs url or url_env")),
        };
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(format!("{who}: url must start with https:// or http://"));
        }
        let secret = pick(&self.secret, &self.secret_env, "secret")?;
        if let Some(s) = &secret {
            super::sign::key(s).map_err(|e| format!("{who}: secret: {e}"))?;
        }
        let routing_key = pick(&self.routing_key, &self.routing_key_env, "routing_key")?;
        if let Some(k) = &routing_key {
            check_routing_key(k).map_err(|e| format!("{who}: routing_key_env: {e}"))?;
        }
        Ok(Target {
            name: self.name.clone(),
            kind: self.kind,
            url,
            secret,
            routing_key,
            group_by: self.group_by,
            kinds: self.kinds.clone(),
            tools: self.tools.clone(),
            min_severity: self.min_severity,
        })
    }

    /// Whether every value this target needs is in the file (none from the
    /// environment), so `config check` can resolve it as it stands.
    fn is_literal(&self) -> bool {
        self.url_env.is_none() && self.secret_env.is_none() && self.routing_key_env.is_none()
    }
}

/// A routing key as PagerDuty issues them: printable, no spaces (an
/// integration key is 32 characters; others are let through). The value
/// is never in the error.
fn check_routing_key(k: &str) -> Result<(), String> {
    if k.is_empty() || k.len() > 256 {
        return Err("must be 1 to 256 characters".into());
    }
    if k.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not hold spaces or control characters".into());
    }
    Ok(())
}

impl AlertConfig {
    /// The targets as a sweep needs them: names, kinds, grouping and
    /// filters. URLs, secrets and routing keys are left empty (a cron job
    /// may run without the sender's environment); the sender resolves them.
    pub fn routing(&self) -> Result<Vec<Target>, String> {
        let mut out: Vec<Target> = Vec::new();
        for t in &self.targets {
            if out.iter().any(|o| o.name == t.name) {
                return Err(format!("alert target {:?} is named twice", t.name));
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
        // Targets whose values come from the environment are checked when
        // used (their shape now); the rest whole, so a typo fails `config check`.
        for t in &self.targets {
            t.check_shape()?;
            if t.is_literal() {
                let r = t.resolve(|_| None)?;
                hosts
                    .check_static(&r.url)
                    .map_err(|why| format!("alert target {:?}: refused: {why}", t.name))?;
            } else if let Some(url) = t
                .url
                .as_deref()
                .or((t.kind == TargetKind::PagerDuty && t.url_env.is_none())
                    .then_some(PAGERDUTY_URL))
            {
                hosts
                    .check_static(url)
                    .map_err(|why| format!("alert target {:?}: refused: {why}", t.name))?;
            }
        }
        Ok(())
    }
}
