//! Where the alert sender may post: `[alert] allow_hosts` / `deny_hosts`
//! (alerting.md, "Target hosts"), and never this instance's own listeners
//! (a target on the dashboard's port would post into its own API).
//!
//! An entry is a host name (`hooks.slack.com`; `*.example.com` for any name
//! under it), an IP address, a CIDR block (`10.0.0.0/8`, `fd00::/8`) or a
//! class: `loopback` (127.0.0.0/8, ::1, and 0.0.0.0 / ::, which reach this
//! host), `private` (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) or
//! `link-local` (169.254/16 — cloud metadata services live there — and
//! fe80::/10). A target is refused when its name or any address it resolves
//! to is denied; with an allow list, it must be allowed by name or every
//! address it resolves to must be. Checked when the config is read (names
//! and literal addresses), when `serve` starts (resolved, against its bound
//! listeners) and at every attempt; the sender's DNS resolver also drops
//! denied addresses, so a name re-pointed between the check and the
//! connection does not slip through.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// One `allow_hosts` / `deny_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Name(String),
    /// `*.suffix`: any name ending in `.suffix`.
    Under(String),
    Net(IpAddr, u8),
    Loopback,
    Private,
    LinkLocal,
}

impl Rule {
    fn parse(entry: &str) -> Result<Rule, RuleError> {
        let e = entry.trim().to_ascii_lowercase();
        let rule = match e.as_str() {
            "loopback" => Rule::Loopback,
            "private" => Rule::Private,
            "link-local" => Rule::LinkLocal,
            _ => {
                if let Some(suffix) = e.strip_prefix("*.") {
                    if !valid_name(suffix) {
                        return Err(bad(entry));
                    }
                    Rule::Under(suffix.to_string())
                } else if let Some((ip, bits)) = e.split_once('/') {
                    let ip: IpAddr = ip.parse().map_err(|_| bad(entry))?;
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    match bits.parse::<u8>() {
                        Ok(b) if b <= max => Rule::Net(canonical(ip), b),
                        _ => return Err(bad(entry)),
                    }
                } else if let Ok(ip) = e.trim_matches(['[', ']']).parse::<IpAddr>() {
                    let ip = canonical(ip);
                    Rule::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
                } else if let Some(class) = misspelt_class(&e) {
                    return Err(RuleError::Misspelt {
                        entry: entry.to_string(),
                        class,
                    });
                } else if valid_name(&e) {
                    Rule::Name(e.clone())
                } else {
                    return Err(bad(entry));
                }
            }
        };
        Ok(rule)
    }

    fn matches_name(&self, name: &str) -> bool {
        match self {
            Rule::Name(n) => n == name,
            Rule::Under(s) => name.len() > s.len() + 1 && name.ends_with(&format!(".{s}")),
            _ => false,
        }
    }

    fn matches_ip(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self, ip) {
            (Rule::Net(net, bits), _) => in_net(ip, *net, *bits),
            (Rule::Loopback, _) => ip.is_loopback() || ip.is_unspecified(),
            (Rule::Private, IpAddr::V4(v4)) => {
                v4.is_private() || in_net(ip, IpAddr::V4(Ipv4Addr::new(100, 64, 0, 0)), 10)
            }
            (Rule::Private, IpAddr::V6(v6)) => (v6.segments()[0] & 0xfe00) == 0xfc00,
            (Rule::LinkLocal, IpAddr::V4(v4)) => v4.is_link_local(),
            (Rule::LinkLocal, IpAddr::V6(v6)) => (v6.segments()[0] & 0xffc0) == 0xfe80,
            _ => false,
        }
    }
}

/// The class a one-label name is a slip of (`loopbak`, `linklocal`,
/// `privat`): within two edits of one, which no real host name on a list
/// like this is likely to be.
fn misspelt_class(name: &str) -> Option<&'static str> {
    if name.contains('.') {
        return None;
    }
    ["loopback", "private", "link-local"]
        .into_iter()
        .find(|class| edits(name, class) <= 2)
}

/// Levenshtein distance, by the two-row table (short strings only).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            row.push((prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()]
}

fn bad(entry: &str) -> RuleError {
    RuleError::Bad(entry.to_string())
}

/// Why an `allow_hosts` / `deny_hosts` entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("expected a host name, *.domain, an IP address, a CIDR block (10.0.0.0/8) or one of loopback, private, link-local; got {0:?}")]
    Bad(String),
    #[error("expected a host name, *.domain, an IP address, a CIDR block (10.0.0.0/8) or one of loopback, private, link-local; got {entry:?} (did you mean {class}? a name with no dot is taken as a host name)")]
    Misspelt { entry: String, class: &'static str },
}

/// An entry of `alert.{key}` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("alert.{key}: {source}")]
pub struct HostListError {
    pub key: &'static str,
    #[source]
    pub source: RuleError,
}

/// Why a URL does not parse (`url::ParseError`, named through reqwest).
pub type UrlParseError = <reqwest::Url as std::str::FromStr>::Err;

/// Why the sender may not post to a target's host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The lists did not parse: everything is refused.
    #[error("{0}")]
    Broken(#[source] HostListError),
    #[error("its host is in alert.deny_hosts")]
    DeniedName,
    #[error("its host resolves to {0}, which alert.deny_hosts refuses")]
    DeniedAddress(IpAddr),
    #[error("its host is not in alert.allow_hosts")]
    NotAllowed,
    #[error("its host is not in alert.allow_hosts (it resolves to {0}, which no entry admits)")]
    NotAllowedAddress(IpAddr),
    #[error("its URL does not parse: {0}")]
    Url(#[source] UrlParseError),
    #[error("its URL has no host")]
    NoHost,
    #[error("its URL has no port")]
    NoPort,
    #[error("{ip}:{port} is this server's own {what} listener ({listener}); an alert posted there would call this server's own routes, so no allow_hosts entry lifts this")]
    OwnListener {
        ip: IpAddr,
        port: u16,
        what: &'static str,
        listener: SocketAddr,
    },
}

/// A DNS name: dot-separated labels of letters, digits and `-`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The allow and deny lists, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostPolicy {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// Lists that did not parse: everything is refused, saying why (fail
    /// closed; a config file with them is refused before this is built).
    broken: Option<HostListError>,
}

/// The default `deny_hosts`: link-local addresses (the cloud metadata
/// service at 169.254.169.254 among them), which no webhook lives on.
pub fn default_deny() -> Vec<String> {
    vec!["link-local".to_string()]
}

impl HostPolicy {
    /// Parse both lists; errors name the key and the entry.
    pub fn parse(allow: &[String], deny: &[String]) -> Result<HostPolicy, HostListError> {
        let list = |key: &'static str, entries: &[String]| -> Result<Vec<Rule>, HostListError> {
            entries
                .iter()
                .map(|e| Rule::parse(e).map_err(|source| HostListError { key, source }))
                .collect()
        };
        Ok(HostPolicy {
            allow: list("allow_hosts", allow)?,
            deny: list("deny_hosts", deny)?,
            broken: None,
        })
    }

    /// The policy of an `allow_hosts` and a `deny_hosts` list (`[alert]`'s);
    /// one that refuses everything if they do not parse.
    pub fn of(allow: &[String], deny: &[String]) -> HostPolicy {
        HostPolicy::parse(allow, deny).unwrap_or_else(|why| HostPolicy {
            broken: Some(why),
            ..HostPolicy::default()
        })
    }

    /// Whether `name` (lowercase, no port) and the addresses it resolved to
    /// may be posted to.
    pub fn check(&self, name: Option<&str>, addrs: &[IpAddr]) -> Result<(), Refusal> {
        if let Some(why) = &self.broken {
            return Err(Refusal::Broken(why.clone()));
        }
        let name_hit =
            |rules: &[Rule]| name.is_some_and(|n| rules.iter().any(|r| r.matches_name(n)));
        if name_hit(&self.deny) {
            return Err(Refusal::DeniedName);
        }
        if let Some(ip) = addrs
            .iter()
            .find(|ip| self.deny.iter().any(|r| r.matches_ip(**ip)))
        {
            return Err(Refusal::DeniedAddress(*ip));
        }
        if self.allow.is_empty() || name_hit(&self.allow) {
            return Ok(());
        }
        match addrs
            .iter()
            .find(|ip| !self.allow.iter().any(|r| r.matches_ip(**ip)))
        {
            None if !addrs.is_empty() => Ok(()),
            None => Err(Refusal::NotAllowed),
            Some(ip) => Err(Refusal::NotAllowedAddress(*ip)),
        }
    }

    /// What can be told of `url` without resolving it (`config check`): a
    /// literal address checked whole, a name against the deny list.
    pub fn check_static(&self, url: &str) -> Result<(), Refusal> {
        match host_of(url)? {
            (_, Some(ip), _) => self.check(None, &[ip]),
            (Some(name), None, _) if self.broken.is_none() => {
                if self.deny.iter().any(|r| r.matches_name(&name)) {
                    Err(Refusal::DeniedName)
                } else {
                    Ok(())
                }
            }
            _ => self.check(None, &[]),
        }
    }

    /// Whether the sender may connect to `ip` at all (the DNS filter).
    fn admits_ip(&self, ip: IpAddr) -> bool {
        self.broken.is_none() && !self.deny.iter().any(|r| r.matches_ip(ip))
    }
}

/// A URL's host: its name (lowercase) or literal address, and its port.
pub fn host_of(url: &str) -> Result<(Option<String>, Option<IpAddr>, u16), Refusal> {
    let u = reqwest::Url::parse(url).map_err(Refusal::Url)?;
    let host = u.host_str().ok_or(Refusal::NoHost)?;
    let port = u.port_or_known_default().ok_or(Refusal::NoPort)?;
    match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => Ok((None, Some(canonical(ip)), port)),
        Err(_) => Ok((Some(host.to_ascii_lowercase()), None, port)),
    }
}

/// The target checks the sender makes: the policy, and this process's
/// own listeners (none outside `serve`).
#[derive(Debug, Clone, Default)]
pub struct Guard {
    pub policy: HostPolicy,
    /// What `serve` listens on (OTLP/HTTP, OTLP/gRPC, the dashboard).
    pub own: Vec<(&'static str, SocketAddr)>,
}

/// Why a target may not be posted to.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    /// Its host name did not resolve (now: it may later).
    #[error("its host does not resolve: {0}")]
    Unresolved(#[source] std::sync::Arc<std::io::Error>),
    #[error("{0}")]
    Refused(#[from] Refusal),
}

impl Guard {
    /// Check `url` (resolving its name); errors say why, never the URL.
    pub async fn check(&self, url: &str) -> Result<(), HostError> {
        let (name, literal, port) = host_of(url)?;
        let addrs: Vec<IpAddr> = match (&name, literal) {
            (_, Some(ip)) => vec![ip],
            (Some(n), None) => tokio::net::lookup_host((n.as_str(), port))
                .await
                .map_err(|e| HostError::Unresolved(std::sync::Arc::new(e)))?
                .map(|a| canonical(a.ip()))
                .collect(),
            (None, None) => Vec::new(),
        };
        self.policy
            .check(name.as_deref(), &addrs)
            .and_then(|()| self.not_own(&addrs, port))
            .map_err(HostError::Refused)
    }

    /// Refused when an address and port reach one of this process's listeners.
    pub fn not_own(&self, addrs: &[IpAddr], port: u16) -> Result<(), Refusal> {
        for ip in addrs.iter().map(|a| canonical(*a)) {
            for (what, l) in &self.own {
                let l_ip = canonical(l.ip());
                let reaches = l.port() == port
                    && (l_ip == ip
                        || ip.is_unspecified()
                        || (l_ip.is_unspecified() && is_local(ip)));
                if reaches {
                    return Err(Refusal::OwnListener {
                        ip,
                        port,
                        what,
                        listener: *l,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether `ip` is an address of this host: loopback, or one a socket
/// can bind to (binding to an address the host does not have fails).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// The sender's DNS resolver: the system's, less the addresses
/// `deny_hosts` refuses (none left is an error naming why).
pub struct Resolver(pub Arc<HostPolicy>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.0);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = all
                .iter()
                .copied()
                .filter(|a| policy.admits_ip(canonical(a.ip())))
                .collect();
            if kept.is_empty() && !all.is_empty() {
                let why = format!("alert target host {host}: every address it resolves to is refused by alert.deny_hosts");
                return Err(why.into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
