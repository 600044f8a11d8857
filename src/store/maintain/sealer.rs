//! When the flusher seal-compacts a day: once the day ended at least
//! `seal_after` ago (wall clock), has a part that is not a seal output (so
//! late spans re-seal it), and took no flush for a quiet spell (a day being
//! imported is sealed once, after). One day per pass, oldest first, so
//! merges and rollups interleave with a backlog (flushes go on during a
//! seal: the flusher runs it on a thread of its own); a failed or panicking
//! seal logs a warning, leaves the parts as they are and is retried later.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::model::{day_to_string, NANOS_PER_DAY};
use crate::store::maintain::seal::{self, SealReport};
use crate::store::{Shared, StoreError, StoreOptions};

/// A day whose seal failed is tried again after this long.
const RETRY_AFTER: Duration = Duration::from_secs(600);

/// The flusher's seal trigger.
pub struct Sealer {
    after: Option<Duration>,
    /// How often due days are looked for, and the quiet spell.
    every: Duration,
    last_check: Instant,
    /// A day was sealed at the last check: look again at once.
    more: bool,
    written: HashMap<i32, Instant>,
    failed: HashMap<i32, Instant>,
}

impl Sealer {
    /// The first look comes one interval after the start.
    pub fn new(opts: &StoreOptions) -> Sealer {
        Sealer {
            after: opts.seal_after,
            every: opts
                .seal_after
                .unwrap_or_default()
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
            last_check: Instant::now(),
            more: false,
            written: HashMap::new(),
            failed: HashMap::new(),
        }
    }

    /// A flush just committed parts of `days`.
    pub fn wrote(&mut self, days: &[i32]) {
        let now = Instant::now();
        for &d in days {
            self.written.insert(d, now);
        }
    }

    /// The oldest day due for a seal, when it is time to look; the caller
    /// seals it ([`seal_guarded`]) and says how that went ([`Sealer::sealed`]).
    pub fn due(&mut self, shared: &Shared) -> Option<i32> {
        let after = self.after?;
        if !self.more && self.last_check.elapsed() < self.every {
            return None;
        }
        self.last_check = Instant::now();
        self.more = false;
        if shared.poisoned.load(Ordering::Acquire) {
            return None;
        }
        // A copy of the shared store seals only on the lease holder.
        if shared.opts.mirror.as_ref().is_some_and(|m| !m.may_seal()) {
            return None;
        }
        let every = self.every;
        self.written.retain(|_, t| t.elapsed() < every);
        self.failed.retain(|_, t| t.elapsed() < RETRY_AFTER);
        let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        let after_ns = i64::try_from(after.as_nanos()).unwrap_or(i64::MAX);
        let days = match shared.layout().days() {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the days to seal");
                return None;
            }
        };
        days.into_iter().find(|&d| {
            let ended = (i64::from(d) + 1).saturating_mul(NANOS_PER_DAY);
            now_ns.saturating_sub(ended) >= after_ns
                && !self.written.contains_key(&d)
                && !self.failed.contains_key(&d)
                && seal::needs_seal(shared.layout(), d).unwrap_or(false)
        })
    }

    /// The seal of a day [`Sealer::due`] gave ended: after a success look
    /// again at once; a failed day waits [`RETRY_AFTER`].
    pub fn sealed(&mut self, day: i32, ok: bool) {
        if ok {
            self.more = true;
        } else {
            self.failed.insert(day, Instant::now());
        }
    }
}

/// Seal-compact `day` (on a thread the flusher starts for it, while it keeps
/// flushing); a panic becomes an error, and any error is logged and leaves
/// the parts as they were.
pub fn seal_guarded(
    shared: &Shared,
    day: i32,
    dirty: &mut BTreeSet<i32>,
) -> Result<Option<SealReport>, StoreError> {
    if shared.poisoned.load(Ordering::Acquire) {
        return Err(StoreError::Closed);
    }
    let started = Instant::now();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &shared.opts.mirror {
            Some(m) => m.seal(&shared.catalog, day, &shared.opts.seal),
            None => seal::seal_compact(&shared.catalog, day, &shared.opts.seal),
        }))
        .unwrap_or_else(|_| {
            Err(StoreError::data(
                format!("seal-compacting {}", day_to_string(day)),
                "the seal compaction panicked",
            ))
        });
    match &result {
        Ok(Some(r)) => {
            shared
                .stats
                .seal_compactions
                .fetch_add(1, Ordering::Relaxed);
            if r.duplicates > 0 {
                dirty.insert(day);
            }
            tracing::info!(
                day = %day_to_string(day),
                sources = r.sources.len(),
                outputs = r.outputs.len(),
                rows = r.rows,
                duplicates = r.duplicates,
                sub_ranges = r.sub_ranges,
                manifest = ?r.manifest,
                took_ms = started.elapsed().as_millis() as u64,
                "seal-compacted a day"
            );
        }
        Ok(None) => {}
        Err(e) => {
            shared.stats.seal_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(day = %day_to_string(day), error = %e, "seal compaction failed; the parts stay as they are")
        }
    }
    result
}
