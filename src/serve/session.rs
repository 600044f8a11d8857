//! The dashboard's session cookie, set by `/login` (`super::auth`).
//!
//! The cookie is `v2.<issued>.<mac>`: the second it was issued (Unix time)
//! and an HMAC-SHA256 over it, keyed with a key derived from the API token.
//! It never holds the token, and a new token revokes every cookie signed
//! with the old one. A cookie is good for [`TTL_SECS`] (12 h) from its issue,
//! which its `Max-Age` tells the browser too; one older than half of that
//! is replaced on its next request by a fresh one (`Set-Cookie` on the
//! answer), so a dashboard in use — the overview polls its feed every 10 s —
//! stays signed in, and one left alone for 12 h is signed out. An expired,
//! forged, tampered or malformed cookie counts as no cookie (a page is sent to
//! `/login`, the API answers 401), with a debug line saying which it was.
//! The MAC is checked in constant time.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

/// The cookie's name.
pub const COOKIE: &str = "stormwatch_session";

/// How long a cookie is good for, from its issue (seconds).
pub const TTL_SECS: i64 = 12 * 3600;

/// A cookie older than this is renewed on its next request (seconds).
pub const RENEW_AFTER_SECS: i64 = TTL_SECS / 2;

/// How far in the future an issue time may lie (another replica's clock).
const SKEW_SECS: i64 = 60;

const VERSION: &str = "v2";

type HmacSha256 = hmac::Hmac<Sha256>;

/// Signs and checks session cookies with a key derived from the token.
pub struct Sessions {
    key: [u8; 32],
    /// Mark the cookie `Secure` (the dashboard is reached over https).
    secure: bool,
}

/// What a request's cookies say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// No session cookie.
    Absent,
    /// A good cookie; `renew`: old enough to be replaced.
    Valid { issued: i64, renew: bool },
    /// Only cookies that are not good, and why.
    Refused(String),
}

impl Sessions {
    /// The session key for `secret` (the API token).
    pub fn new(secret: &str, secure: bool) -> Sessions {
        let mut mac =
            HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(b"stormwatch-session-key-v2");
        Sessions {
            key: mac.finalize().into_bytes().into(),
            secure,
        }
    }

    fn mac(&self, issued: i64) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(format!("{VERSION}.{issued}").as_bytes());
        mac
    }

    /// The cookie's value for a session issued at `issued`.
    pub fn value(&self, issued: i64) -> String {
        let mac: String = self
            .mac(issued)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{VERSION}.{issued}.{mac}")
    }

    /// The `Set-Cookie` header of a session issued at `issued`.
    pub fn set_cookie(&self, issued: i64) -> String {
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={TTL_SECS}{}",
            self.value(issued),
            self.secure_attr()
        )
    }

    /// The `Set-Cookie` header that removes the cookie.
    pub fn clear_cookie(&self) -> String {
        format!(
            "{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
            self.secure_attr()
        )
    }

    fn secure_attr(&self) -> &'static str {
        if self.secure {
            "; Secure"
        } else {
            ""
        }
    }

    /// When a cookie's value was issued, if it is good at `now`.
    pub fn verify(&self, value: &str, now: i64) -> Result<i64, String> {
        let malformed = || {
            format!("malformed (expected {VERSION}.<issued>.<signature>; an earlier version's cookie needs a new sign-in)")
        };
        let rest = value
            .strip_prefix(VERSION)
            .and_then(|r| r.strip_prefix('.'))
            .ok_or_else(malformed)?;
        let (issued_text, mac_hex) = rest.split_once('.').ok_or_else(malformed)?;
        if issued_text.is_empty()
            || issued_text.len() > 19
            || !issued_text.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(malformed());
        }
        let issued: i64 = issued_text.parse().map_err(|_| malformed())?;
        let presented = hex32(mac_hex).ok_or_else(malformed)?;
        self.mac(issued).verify_slice(&presented).map_err(|_| {
            "its signature does not match: forged, tampered with, or signed with an earlier token"
                .to_string()
        })?;
        if issued > now + SKEW_SECS {
            return Err(format!("issued {} s in the future", issued - now));
        }
        let expired = now - (issued + TTL_SECS);
        if expired >= 0 {
            return Err(format!(
                "expired {expired} s ago (a session lasts {TTL_SECS} s)"
            ));
        }
        Ok(issued)
    }

    /// What the session cookies in `cookie_headers` say at `now`: the
    /// newest good one, else why none was.
    pub fn check<'a>(&self, cookie_headers: impl Iterator<Item = &'a str>, now: i64) -> Session {
        let mut refused = None;
        let mut newest: Option<i64> = None;
        for (k, v) in cookie_headers
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
        {
            if k != COOKIE {
                continue;
            }
            match self.verify(v, now) {
                Ok(issued) => newest = Some(newest.map_or(issued, |n| n.max(issued))),
                Err(why) => refused = Some(why),
            }
        }
        match (newest, refused) {
            (Some(issued), _) => Session::Valid {
                issued,
                renew: now - issued >= RENEW_AFTER_SECS,
            },
            (None, Some(why)) => Session::Refused(why),
            (None, None) => Session::Absent,
        }
    }
}

/// 64 hex digits as 32 bytes.
fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests;
