//! The dashboard's session cookie, set by `/login` (`super::auth`).
//!
//! The cookie is `v3.<signed_in>.<issued>.<mac>`: the second its sign-in
//! happened and the second this cookie was issued (Unix time), and an
//! HMAC-SHA256 over both, keyed with a key derived from the API token. It
//! never holds the token, and a new token revokes every cookie signed with
//! the old one. A cookie is good for [`TTL_SECS`] (12 h) from its issue,
//! which its `Max-Age` tells the browser too; one older than half of that
//! is replaced on its next request by a fresh one (`Set-Cookie` on the
//! answer) carrying the same sign-in time, so a dashboard in use — the
//! overview polls its feed every 10 s — stays signed in, and one left alone
//! for 12 h is signed out. However often it is renewed, no cookie is good
//! past [`MAX_LIFETIME_SECS`] (7 days) from its sign-in: then the browser
//! signs in again. A `v2.<issued>.<mac>` cookie (before the sign-in time was
//! carried) is still good, its issue time taken as its sign-in time. An
//! expired, forged, tampered or malformed cookie counts as no cookie (a page
//! is sent to `/login`, the API answers 401), with a debug line saying which
//! it was. The MAC is checked in constant time.
//!
//! Signing out clears the browser's cookie; the value itself stays good (to
//! whoever copied it) until it expires, as nothing is kept server-side.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

/// The cookie's name.
pub const COOKIE: &str = "stormwatch_session";

/// How long a cookie is good for, from its issue (seconds).
pub const TTL_SECS: i64 = 12 * 3600;

/// A cookie older than this is renewed on its next request (seconds).
pub const RENEW_AFTER_SECS: i64 = TTL_SECS / 2;

/// How long a sign-in lasts however often its cookie is renewed (seconds).
pub const MAX_LIFETIME_SECS: i64 = 7 * 24 * 3600;

/// How far in the future an issue time may lie (another replica's clock).
const SKEW_SECS: i64 = 60;

const VERSION: &str = "v3";

/// The version before the sign-in time was carried: `v2.<issued>.<mac>`.
const VERSION_2: &str = "v2";

type HmacSha256 = hmac::Hmac<Sha256>;

/// Signs and checks session cookies with a key derived from the token.
pub struct Sessions {
    key: [u8; 32],
    /// Mark the cookie `Secure` (the dashboard is reached over https).
    secure: bool,
}

/// A good cookie's times (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// When its sign-in happened: the cookie is good for
    /// [`MAX_LIFETIME_SECS`] from here at most.
    pub signed_in: i64,
    /// When this cookie was issued (at sign-in, or renewed since).
    pub issued: i64,
}

/// What a request's cookies say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// No session cookie.
    Absent,
    /// A good cookie; `renew`: old enough to be replaced.
    Valid { times: Times, renew: bool },
    /// Only cookies that are not good, and why.
    Refused(CookieError),
}

/// Why a session cookie is not good.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    #[error("malformed (expected {version}.<signed-in>.<issued>.<signature>; an earlier version's cookie needs a new sign-in)", version = VERSION)]
    Malformed,
    #[error(
        "its signature does not match: forged, tampered with, or signed with an earlier token"
    )]
    Forged,
    #[error("signed in after it was issued")]
    SignedInLater,
    #[error("issued {0} s in the future")]
    Future(i64),
    #[error("expired {0} s ago (a session lasts {ttl} s)", ttl = TTL_SECS)]
    Expired(i64),
    #[error("expired {past} s ago: signed in {ago} s ago, and a sign-in lasts {max} s however often its cookie is renewed", max = MAX_LIFETIME_SECS)]
    SignInExpired { past: i64, ago: i64 },
}

impl Sessions {
    /// The session key for `secret` (the API token).
    pub fn new(secret: &str, secure: bool) -> Sessions {
        let mut mac =
            HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
        // The label predates v3; keeping it keeps v2 cookies good.
        mac.update(b"stormwatch-session-key-v2");
        Sessions {
            key: mac.finalize().into_bytes().into(),
            secure,
        }
    }

    /// The MAC over a cookie's text before its signature (`v3.<signed_in>.<issued>`
    /// or `v2.<issued>`).
    fn mac(&self, signed: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(signed.as_bytes());
        mac
    }

    /// The cookie's value for a session signed in at `times.signed_in`,
    /// issued at `times.issued`.
    pub fn value(&self, times: Times) -> String {
        self.signed(&format!("{VERSION}.{}.{}", times.signed_in, times.issued))
    }

    /// `signed` with its MAC appended in hex: `<signed>.<mac>`.
    fn signed(&self, signed: &str) -> String {
        let mac: String = self
            .mac(signed)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{signed}.{mac}")
    }

    /// The `Set-Cookie` header of a session with `times`: its `Max-Age`
    /// the cookie's life, cut short where the sign-in's ends first.
    pub fn set_cookie(&self, times: Times) -> String {
        let max_age = TTL_SECS
            .min(times.signed_in + MAX_LIFETIME_SECS - times.issued)
            .max(0);
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
            self.value(times),
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

    /// A cookie's times, if its value is good at `now`.
    pub fn verify(&self, value: &str, now: i64) -> Result<Times, CookieError> {
        let malformed = || CookieError::Malformed;
        let (signed, mac_hex) = value.rsplit_once('.').ok_or_else(malformed)?;
        let mut fields = signed.split('.');
        let times = match (fields.next(), fields.next(), fields.next(), fields.next()) {
            (Some(VERSION), Some(signed_in), Some(issued), None) => Times {
                signed_in: secs(signed_in).ok_or_else(malformed)?,
                issued: secs(issued).ok_or_else(malformed)?,
            },
            (Some(VERSION_2), Some(issued), None, None) => {
                let issued = secs(issued).ok_or_else(malformed)?;
                Times {
                    signed_in: issued,
                    issued,
                }
            }
            _ => return Err(malformed()),
        };
        let presented = hex32(mac_hex).ok_or_else(malformed)?;
        self.mac(signed)
            .verify_slice(&presented)
            .map_err(|_| CookieError::Forged)?;
        if times.signed_in > times.issued {
            return Err(CookieError::SignedInLater);
        }
        if times.issued > now + SKEW_SECS {
            return Err(CookieError::Future(times.issued - now));
        }
        let expired = now - (times.issued + TTL_SECS);
        if expired >= 0 {
            return Err(CookieError::Expired(expired));
        }
        let past = now - (times.signed_in + MAX_LIFETIME_SECS);
        if past >= 0 {
            return Err(CookieError::SignInExpired {
                past,
                ago: now - times.signed_in,
            });
        }
        Ok(times)
    }

    /// What the session cookies in `cookie_headers` say at `now`: the
    /// newest good one, else why none was.
    pub fn check<'a>(&self, cookie_headers: impl Iterator<Item = &'a str>, now: i64) -> Session {
        let mut refused = None;
        let mut newest: Option<Times> = None;
        for (k, v) in cookie_headers
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
        {
            if k != COOKIE {
                continue;
            }
            match self.verify(v, now) {
                Ok(t) if newest.is_none_or(|n| t.issued > n.issued) => newest = Some(t),
                Ok(_) => {}
                Err(why) => refused = Some(why),
            }
        }
        match (newest, refused) {
            (Some(times), _) => Session::Valid {
                times,
                renew: now - times.issued >= RENEW_AFTER_SECS,
            },
            (None, Some(why)) => Session::Refused(why),
            (None, None) => Session::Absent,
        }
    }
}

/// Unix seconds written as plain digits (no sign, at most 19 of them).
fn secs(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 19 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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
