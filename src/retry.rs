//! The retry policy stormwatch's own code follows (the file follower, the
//! flusher, the alert sender): classify first, back off with full jitter
//! under a cap, stop on a budget of attempts and time.

use std::time::Duration;

/// Full-jitter backoff: a uniform delay in `[0, min(cap, base · 2^(attempt-1))]`.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let ceiling = exp.min(cap);
    // fastrand's per-thread generator, seeded once per thread: good enough
    // to spread retries, not for anything secret. A number in [0, 1).
    ceiling.mul_f64(fastrand::f64())
}

/// How an IO failure should be handled by a loop that reads files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFailure {
    /// The file went away: nothing to retry.
    Gone,
    /// Waiting will not fix it (permissions, a directory where a file was expected).
    Permanent,
    /// Might pass on a later try (busy, interrupted, out of space, …).
    Transient,
}

pub fn classify_io(e: &std::io::Error) -> IoFailure {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => IoFailure::Gone,
        PermissionDenied | IsADirectory | InvalidInput | InvalidData | Unsupported => {
            IoFailure::Permanent
        }
        _ => IoFailure::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn jitter_stays_under_the_cap(attempt in 1u32..64, base_ms in 1u64..5_000, cap_ms in 1u64..120_000) {
            let d = full_jitter(Duration::from_millis(base_ms), Duration::from_millis(cap_ms), attempt);
            prop_assert!(d <= Duration::from_millis(cap_ms));
            let exp = base_ms.saturating_mul(1u64 << (attempt - 1).min(20));
            prop_assert!(d <= Duration::from_millis(exp.min(cap_ms)));
        }
    }

    #[test]
    fn io_failures_are_classified() {
        use std::io::{Error, ErrorKind};
        assert_eq!(
            classify_io(&Error::from(ErrorKind::NotFound)),
            IoFailure::Gone
        );
        assert_eq!(
            classify_io(&Error::from(ErrorKind::PermissionDenied)),
            IoFailure::Permanent
        );
        assert_eq!(
            classify_io(&Error::from(ErrorKind::Interrupted)),
            IoFailure::Transient
        );
    }
}
