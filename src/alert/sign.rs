//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>): the
//! `webhook-id`, `webhook-timestamp` and `webhook-signature` headers, with
//! `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")), the key
//! being the base64 part of a `whsec_…` secret.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Why a signing secret cannot sign.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("expected whsec_ followed by base64")]
    NotBase64(#[source] base64::DecodeError),
    #[error("the key is shorter than 16 bytes")]
    TooShort,
    #[error("{0}")]
    Key(#[source] hmac::digest::InvalidLength),
}

/// The HMAC key of a secret: base64 after an optional `whsec_` prefix.
pub fn key(secret: &str) -> Result<Vec<u8>, SecretError> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = STANDARD.decode(b64).map_err(SecretError::NotBase64)?;
    if key.len() < 16 {
        return Err(SecretError::TooShort);
    }
    Ok(key)
}

/// The `webhook-signature` value for one delivery attempt.
pub fn signature(
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SecretError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key(secret)?).map_err(SecretError::Key)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// Whether `header` (space-separated `v1,…` signatures) holds a valid one;
/// what a receiver runs, and what the tests check deliveries with.
pub fn verify(secret: &str, id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let Ok(expected) = signature(secret, id, timestamp, body) else {
        return false;
    };
    header
        .split(' ')
        .any(|s| same_bytes(s.as_bytes(), expected.as_bytes()))
}

/// Whether `a` and `b` are equal, in time that does not depend on where
/// they first differ (for secrets: signatures, tokens, session cookies).
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of alerting.md case 9 (from the Standard Webhooks spec).
    #[test]
    fn the_standard_webhooks_test_vector() {
        let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        let sig = signature(secret, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, body).unwrap();
        assert_eq!(sig, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
        assert!(verify(
            secret,
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1649367553,
            body,
            &sig
        ));
        assert!(!verify(
            secret,
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1649367554,
            body,
            &sig
        ));
    }

    #[test]
    fn a_bad_secret_is_refused() {
        assert!(key("whsec_not base64!").is_err());
        assert!(key("whsec_c2hvcnQ=").is_err());
    }
}
