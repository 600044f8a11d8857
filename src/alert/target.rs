//! `[[alert.targets]]`: where notifications go — a target's kind, what it
//! is told about and its filters, as configured ([`TargetConfig`]) and
//! resolved, ready to send to ([`Target`]).

use serde::{Deserialize, Serialize};

use crate::signal::{Kind, Severity};

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
    pub fn check_shape(&self) -> Result<(), TargetError> {
        let target = || self.name.clone();
        if self.name.is_empty() || self.name.len() > 64 {
            return Err(TargetError::Name);
        }
        let both = |a: &Option<String>, b: &Option<String>, key: &'static str| {
            if a.is_some() && b.is_some() {
                Err(TargetError::Both {
                    target: target(),
                    key,
                })
            } else {
                Ok(())
            }
        };
        both(&self.url, &self.url_env, "url")?;
        both(&self.secret, &self.secret_env, "secret")?;
        both(&self.routing_key, &self.routing_key_env, "routing_key")?;
        if self.kind != TargetKind::Webhook && (self.secret.is_some() || self.secret_env.is_some())
        {
            return Err(TargetError::SecretNotWebhook(target()));
        }
        let has_key = self.routing_key.is_some() || self.routing_key_env.is_some();
        if self.kind == TargetKind::PagerDuty {
            if !has_key {
                return Err(TargetError::NoRoutingKey(target()));
            }
            if self.group_by == GroupBy::Signal {
                return Err(TargetError::PagerDutyBySignal(target()));
            }
        } else if has_key {
            return Err(TargetError::RoutingKeyNotPagerDuty(target()));
        }
        if self.kind != TargetKind::PagerDuty && self.url.is_none() && self.url_env.is_none() {
            return Err(TargetError::NoUrl(target()));
        }
        if let Some(k) = &self.routing_key {
            check_routing_key(k).map_err(|source| TargetError::RoutingKey {
                target: target(),
                key: "routing_key",
                source,
            })?;
        }
        Ok(())
    }

    /// Resolve the URL, secret and routing key (from the environment where
    /// named); errors name the target and the key, never the value.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Target, TargetError> {
        self.check_shape()?;
        let target = || self.name.clone();
        let pick =
            |value: &Option<String>, var: &Option<String>, key: &'static str| match (value, var) {
                (Some(v), _) => Ok(Some(v.clone())),
                (None, Some(name)) => {
                    env(name)
                        .filter(|v| !v.is_empty())
                        .map(Some)
                        .ok_or_else(|| TargetError::Unset {
                            target: target(),
                            key,
                            var: name.clone(),
                        })
                }
                (None, None) => Ok(None),
            };
        let url = match pick(&self.url, &self.url_env, "url")? {
            Some(url) => url,
            None if self.kind == TargetKind::PagerDuty => PAGERDUTY_URL.to_string(),
            None => return Err(TargetError::NoUrl(target())),
        };
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(TargetError::Scheme(target()));
        }
        let secret = pick(&self.secret, &self.secret_env, "secret")?;
        if let Some(s) = &secret {
            super::sign::key(s).map_err(|source| TargetError::Secret {
                target: target(),
                source,
            })?;
        }
        let routing_key = pick(&self.routing_key, &self.routing_key_env, "routing_key")?;
        if let Some(k) = &routing_key {
            check_routing_key(k).map_err(|source| TargetError::RoutingKey {
                target: target(),
                key: "routing_key_env",
                source,
            })?;
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
    pub(super) fn is_literal(&self) -> bool {
        self.url_env.is_none() && self.secret_env.is_none() && self.routing_key_env.is_none()
    }
}

/// A routing key as PagerDuty issues them: printable, no spaces (an
/// integration key is 32 characters; others are let through). The value
/// is never in the error.
fn check_routing_key(k: &str) -> Result<(), RoutingKeyError> {
    if k.is_empty() || k.len() > 256 {
        return Err(RoutingKeyError::Length);
    }
    if k.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(RoutingKeyError::Characters);
    }
    Ok(())
}

/// Why a routing key is refused (the value is never in it).
#[derive(Debug, thiserror::Error)]
pub enum RoutingKeyError {
    #[error("must be 1 to 256 characters")]
    Length,
    #[error("must not hold spaces or control characters")]
    Characters,
}

/// Why a target cannot be used: each names the target (its `name`) and
/// the key, never a value.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("alert target: name must be 1 to 64 characters")]
    Name,
    #[error("alert target {target:?}: set {key} or {key}_env, not both")]
    Both { target: String, key: &'static str },
    #[error(
        "alert target {0:?}: secret applies only to kind = \"webhook\" (Standard Webhooks signing)"
    )]
    SecretNotWebhook(String),
    #[error("alert target {0:?}: kind = \"pagerduty\" needs routing_key or routing_key_env (the Events API v2 integration key)")]
    NoRoutingKey(String),
    #[error("alert target {0:?}: kind = \"pagerduty\" follows incidents (one PagerDuty alert per incident, dedup_key = the incident key); group_by = \"signal\" is for chat and webhook targets")]
    PagerDutyBySignal(String),
    #[error("alert target {0:?}: routing_key applies only to kind = \"pagerduty\"")]
    RoutingKeyNotPagerDuty(String),
    #[error("alert target {0:?}: needs url or url_env")]
    NoUrl(String),
    #[error("alert target {0:?}: url must start with https:// or http://")]
    Scheme(String),
    #[error("alert target {target:?}: {key}_env names {var}, which is not set")]
    Unset {
        target: String,
        key: &'static str,
        var: String,
    },
    #[error("alert target {target:?}: {key}: {source}")]
    RoutingKey {
        target: String,
        /// `routing_key` (from the file) or `routing_key_env`.
        key: &'static str,
        #[source]
        source: RoutingKeyError,
    },
    #[error("alert target {target:?}: secret: {source}")]
    Secret {
        target: String,
        #[source]
        source: super::sign::SecretError,
    },
}
