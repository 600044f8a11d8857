//! A span's *dependency* (docs/detection.md §1, "The dependency"): the
//! server it talks to, from `peer.service`, an MCP server's resource,
//! `server.address` or the host of its URL.

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};

use super::attrs;

/// OTLP span kinds the dependency rule reads (`Span.kind`).
const KIND_SERVER: i32 = 2;
const KIND_CLIENT: i32 = 3;
const KIND_PRODUCER: i32 = 4;

/// The server a span talks to, its *dependency* (docs/detection.md §1,
/// "The dependency"): what groups failing tools that share a server. Read
/// only on tool calls (`is_call`), MCP server spans (a span the MCP
/// convention marks, kind SERVER) and CLIENT and PRODUCER spans; every
/// other span has none. The first of these that holds a value wins:
///
/// 1. `peer.service`, as sent (trimmed);
/// 2. on an MCP server span, the `service.name` of its resource
///    (`resource`): the server process names itself;
/// 3. `server.address`, its host only: no port, lowercased (a URL there is
///    read as one);
/// 4. the host of `url.full`, else of the legacy `http.url`: lowercased,
///    without userinfo or port; a value that does not parse as a URL with
///    a host gives nothing.
pub fn dependency<'a>(
    attrs: &'a [KeyValue],
    kind: i32,
    is_call: bool,
    resource: &'a [KeyValue],
) -> Option<Cow<'a, str>> {
    let mcp_server = kind == KIND_SERVER && attrs::get(attrs, "mcp.method.name").is_some();
    if !(is_call || mcp_server || kind == KIND_CLIENT || kind == KIND_PRODUCER) {
        return None;
    }
    // The four keys in one pass over the attributes (a tool span carries
    // none of them most of the time): the first of each key, as
    // `attrs::get` reads it, a string that is not blank.
    let mut found: [Option<Option<&str>>; 4] = [None; 4];
    for kv in attrs {
        let at = match kv.key.as_str() {
            "peer.service" => 0,
            "server.address" => 1,
            "url.full" => 2,
            "http.url" => 3,
            _ => continue,
        };
        if found[at].is_none() {
            let text = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => Some(s.trim()).filter(|s| !s.is_empty()),
                _ => None,
            };
            found[at] = Some(text);
        }
    }
    let [peer, address, full, legacy] = found.map(Option::flatten);
    if let Some(peer) = peer {
        return Some(Cow::Borrowed(peer));
    }
    if mcp_server {
        let name: Option<Cow<'a, str>> = match attrs::string_cow(resource, "service.name") {
            Some(Cow::Borrowed(b)) => Some(Cow::Borrowed(b.trim())),
            Some(Cow::Owned(o)) => Some(Cow::Owned(o.trim().to_string())),
            None => None,
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            return Some(name);
        }
    }
    if let Some(host) = address.and_then(address_host) {
        return Some(host);
    }
    full.and_then(url_host)
        .or_else(|| legacy.and_then(url_host))
}

/// The host of a `server.address`: the value less a port (`host:443`,
/// `[::1]:8080`), a bare IPv6 address as it is, a URL's host; lowercased.
fn address_host(address: &str) -> Option<Cow<'_, str>> {
    if address.contains("://") {
        return url_host(address);
    }
    let colons = address.bytes().filter(|&b| b == b':').count();
    if colons > 1 && !address.starts_with('[') {
        // A bare IPv6 address: all of it is the host.
        return ipv6(address).then(|| lowercase(address));
    }
    host_port(address)
}

/// The host of an absolute URL (`scheme://authority…`, or `//authority…`),
/// lowercased, without userinfo or port; `None` when it has no scheme and
/// authority, an empty host, a port that is not a number or a character no
/// host may hold.
pub fn url_host(url: &str) -> Option<Cow<'_, str>> {
    let rest = match url.find("://") {
        Some(at) => {
            let scheme = &url[..at];
            let mut chars = scheme.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !valid {
                return None;
            }
            &url[at + 3..]
        }
        None => url.strip_prefix("//")?,
    };
    let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
    // Userinfo ends at the last '@' (a password may hold one, escaped or not).
    let host_port_text = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port(host_port_text)
}

/// `host`, `host:port` or `[v6]:port` → the host, lowercased (a bracketed
/// IPv6 address without its brackets).
fn host_port(text: &str) -> Option<Cow<'_, str>> {
    let (host, port, v6) = match text.strip_prefix('[') {
        Some(inner) => {
            let (host, after) = inner.split_once(']')?;
            let port = match after {
                "" => "",
                p => p.strip_prefix(':')?,
            };
            (host, port, true)
        }
        None => match text.rsplit_once(':') {
            Some((host, port)) => (host, port, false),
            None => (text, "", false),
        },
    };
    let valid = if v6 { ipv6(host) } else { host_name(host) };
    if !port.bytes().all(|b| b.is_ascii_digit()) || !valid {
        return None;
    }
    Some(lowercase(host))
}

/// A host name or IPv4 address: not empty, letters, digits and `-._~%`
/// only.
fn host_name(host: &str) -> bool {
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%'))
}

/// An IPv6 address: hex digits, `:` and `.` (an IPv4 tail), with at least
/// two `:`; a zone after `%` as a host name.
fn ipv6(host: &str) -> bool {
    let (address, zone) = match host.split_once('%') {
        Some((a, z)) => (a, Some(z)),
        None => (host, None),
    };
    address.bytes().filter(|&b| b == b':').count() >= 2
        && address
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        && zone.is_none_or(host_name)
}

fn lowercase(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_uppercase) {
        Cow::Owned(s.to_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}
