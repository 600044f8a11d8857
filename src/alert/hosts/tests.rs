//! The host lists: what each entry form admits, deny over allow, the
//! default, broken lists failing closed, and this server's own listeners.

use std::net::{IpAddr, SocketAddr};

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// (allow, deny, host name, resolved addresses) → allowed?
fn check(allow: &[&str], deny: &[&str], name: Option<&str>, addrs: &[&str], expected: bool) {
    let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let p = HostPolicy::parse(&own(allow), &own(deny)).unwrap();
    let addrs: Vec<IpAddr> = addrs.iter().map(|a| ip(a)).collect();
    let got = p.check(name, &addrs);
    assert_eq!(
        got.is_ok(),
        expected,
        "allow {allow:?} deny {deny:?} {name:?} {addrs:?}: {got:?}"
    );
}

#[test]
fn entries_deny_and_allow_as_documented() {
    let default = ["link-local"];
    // The default: anything but link-local (the metadata service).
    check(&[], &default, Some("hooks.slack.com"), &["52.1.2.3"], true);
    check(&[], &default, None, &["127.0.0.1"], true);
    check(&[], &default, None, &["10.1.2.3"], true);
    check(&[], &default, None, &["169.254.169.254"], false);
    check(
        &[],
        &default,
        Some("metadata.google.internal"),
        &["169.254.169.254"],
        false,
    );
    check(&[], &default, None, &["fe80::1"], false);
    // A name that resolves to a denied address among others is refused.
    check(
        &[],
        &default,
        Some("x.example"),
        &["52.1.2.3", "169.254.1.1"],
        false,
    );
    // Classes.
    let local = ["loopback", "private", "link-local"];
    for a in [
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "0.0.0.0",
        "::",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "fd00::1",
        "::ffff:127.0.0.1",
    ] {
        check(&[], &local, None, &[a], false);
    }
    for a in ["172.32.0.1", "8.8.8.8", "2001:db8::1", "100.128.0.1"] {
        check(&[], &local, None, &[a], true);
    }
    // CIDR and single addresses.
    check(&[], &["10.1.0.0/16"], None, &["10.1.200.3"], false);
    check(&[], &["10.1.0.0/16"], None, &["10.2.0.1"], true);
    check(&[], &["2001:db8::/32"], None, &["2001:db8:1::1"], false);
    check(&[], &["192.0.2.7"], None, &["192.0.2.7"], false);
    check(&[], &["192.0.2.7"], None, &["192.0.2.8"], true);
    // Names: exact, and *.domain (not the apex).
    check(
        &[],
        &["evil.example"],
        Some("evil.example"),
        &["8.8.8.8"],
        false,
    );
    check(
        &[],
        &["*.evil.example"],
        Some("a.b.evil.example"),
        &["8.8.8.8"],
        false,
    );
    check(
        &[],
        &["*.evil.example"],
        Some("evil.example"),
        &["8.8.8.8"],
        true,
    );
    check(
        &[],
        &["*.evil.example"],
        Some("notevil.example"),
        &["8.8.8.8"],
        true,
    );
    // An allow list: by name, or every address allowed.
    let slack = ["hooks.slack.com", "*.discord.com"];
    check(&slack, &[], Some("hooks.slack.com"), &["52.1.2.3"], true);
    check(&slack, &[], Some("api.discord.com"), &["1.2.3.4"], true);
    check(&slack, &[], Some("example.org"), &["1.2.3.4"], false);
    check(&["10.0.0.0/8"], &[], None, &["10.0.0.1"], true);
    check(
        &["10.0.0.0/8"],
        &[],
        Some("hook.internal"),
        &["10.0.0.1", "192.168.0.1"],
        false,
    );
    check(
        &["loopback"],
        &[],
        Some("localhost"),
        &["127.0.0.1", "::1"],
        true,
    );
    // Deny wins over allow.
    check(&["loopback"], &["127.0.0.1"], None, &["127.0.0.1"], false);
    check(
        &["hooks.slack.com"],
        &["link-local"],
        Some("hooks.slack.com"),
        &["169.254.169.254"],
        false,
    );
}

#[test]
fn a_bad_entry_is_an_error_naming_key_and_entry_and_a_broken_policy_refuses_all() {
    for (entry, ok) in [
        ("hooks.slack.com", true),
        ("*.slack.com", true),
        ("10.0.0.0/8", true),
        ("[::1]", true),
        ("Loopback", true),
        ("10.0.0.0/33", false),
        ("fd00::/129", false),
        ("http://x", false),
        ("", false),
        ("a..b", false),
        ("*.", false),
        ("loopbak", false),
        ("linklocal", false),
        ("privat", false),
        ("localhost", true),
        ("alertmanager", true),
    ] {
        let r = HostPolicy::parse(&[], &[entry.to_string()]);
        assert_eq!(r.is_ok(), ok, "{entry:?}: {r:?}");
        if let Err(e) = r.map_err(|e| e.to_string()) {
            assert!(
                e.starts_with("alert.deny_hosts: expected a host name"),
                "{e}"
            );
            assert!(e.contains(&format!("{entry:?}")), "{e}");
        }
    }
    let cfg = crate::alert::AlertConfig {
        allow_hosts: vec!["10.0.0.0/99".into()],
        ..Default::default()
    };
    let p = cfg.host_policy();
    assert!(p.check(Some("hooks.slack.com"), &[ip("52.1.2.3")]).is_err());
    assert!(!p.admits_ip(ip("52.1.2.3")));
}

#[test]
fn this_servers_own_listeners_are_refused() {
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    let g = Guard {
        policy: HostPolicy::default(),
        own: vec![
            ("dashboard", addr("127.0.0.1:8080")),
            ("OTLP/HTTP", addr("0.0.0.0:4318")),
        ],
    };
    let refused = |a: &str, port| g.not_own(&[ip(a)], port).is_err();
    assert!(refused("127.0.0.1", 8080));
    assert!(refused("0.0.0.0", 8080), "0.0.0.0 connects to this host");
    assert!(
        !refused("127.0.0.2", 8080),
        "another loopback address is another socket"
    );
    assert!(!refused("127.0.0.1", 8081));
    // Bound to every address: any address of this host on that port.
    assert!(refused("127.0.0.1", 4318));
    assert!(refused("::ffff:127.0.0.1", 4318));
    assert!(!refused("192.0.2.1", 4318), "not an address of this host");
    let e = g.not_own(&[ip("127.0.0.1")], 8080).unwrap_err().to_string();
    assert!(
        e.contains("127.0.0.1:8080 is this server's own dashboard listener (127.0.0.1:8080)"),
        "{e}"
    );
}

#[tokio::test]
async fn a_url_is_checked_by_its_literal_or_resolved_host() {
    let g = Guard {
        policy: HostPolicy::parse(&[], &["loopback".into()]).unwrap(),
        own: Vec::new(),
    };
    let refused = |r: Result<(), HostError>| matches!(r, Err(HostError::Refused(_)));
    assert!(refused(g.check("http://127.0.0.1:9/x").await));
    assert!(refused(g.check("http://[::1]:9/x").await));
    assert!(refused(g.check("http://localhost:9/x").await));
    assert!(refused(g.check("http://0.0.0.0:9/x").await));
    assert!(g.check("http://192.0.2.1:9/x").await.is_ok());
    assert!(refused(g.check("not a url").await));
    // A name that does not resolve is told apart (checked again later).
    assert!(matches!(
        g.check("http://no-such-host.invalid/x").await,
        Err(HostError::Unresolved(_))
    ));
    assert_eq!(
        HostPolicy::parse(&[], &["loopback".into()])
            .unwrap()
            .check_static("http://localhost:9/x"),
        Ok(()),
        "a name is not resolved by config check"
    );
}
