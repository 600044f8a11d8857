//! Admission of request bodies, shared by both OTLP transports: the
//! in-flight memory budget and the reading of a body under it.
//!
//! The budget ([`Budget`]) is `ingest.max_inflight_bytes` in KiB permits, in
//! two parts: the general part, and a reserve (`admission.reserved_share`)
//! that a body still arriving may only borrow for [`LEND`] once the general
//! part is taken, so bodies that arrive slowly can never hold all of it. A
//! body is charged for the bytes that have arrived, never for the length it
//! declares ([`Intake`]), must keep arriving at `admission.min_body_rate_bytes`
//! (judged over every [`RATE_WINDOW`]) and must be whole within
//! `admission.body_timeout_secs`. What a whole body then grows into
//! (decompressed, decoded) is charged by [`Charge::add_work`], which may use
//! the reserve without a time limit: that work runs on the blocking pool and
//! ends.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a body still arriving may hold permits lent by the reserve.
pub const LEND: Duration = Duration::from_secs(2);

/// A body's receive rate is judged over each window this long.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);

/// KiB permits for `bytes` (at least one).
pub fn kib(bytes: usize) -> u32 {
    (bytes.div_ceil(1024)).clamp(1, u32::MAX as usize) as u32
}

/// The in-flight budget: the general part and the reserve, in KiB permits.
#[derive(Debug)]
pub struct Budget {
    general: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    total: u32,
    reserve_total: u32,
}

impl Budget {
    /// `total_bytes`, of which `share` is the reserve, but never so much of it
    /// that the general part cannot hold one body of `max_body_bytes`.
    pub fn new(total_bytes: usize, share: f64, max_body_bytes: usize) -> Budget {
        let total = kib(total_bytes);
        let wanted = (f64::from(total) * share.clamp(0.0, 1.0)) as u32;
        let reserve = wanted.min(total.saturating_sub(kib(max_body_bytes)));
        Budget {
            general: Arc::new(Semaphore::new((total - reserve) as usize)),
            reserve: Arc::new(Semaphore::new(reserve as usize)),
            total,
            reserve_total: reserve,
        }
    }

    /// The whole budget, in KiB.
    pub fn total_kib(&self) -> u32 {
        self.total
    }

    /// The reserve's size, in KiB.
    pub fn reserve_kib(&self) -> u32 {
        self.reserve_total
    }

    /// KiB free now, in both parts.
    pub fn available_kib(&self) -> usize {
        self.general.available_permits() + self.reserve.available_permits()
    }

    /// Take `kib` permits now, from the general part and then the reserve;
    /// `None` when they are not free.
    pub fn try_hold(self: &Arc<Self>, kib: u32) -> Option<Charge> {
        let mut charge = Charge::new(self);
        charge.add_kib(kib).ok()?;
        Some(charge)
    }
}

/// Why a charge did not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// Not free now: retry later.
    Busy,
    /// More than the whole budget: never admitted.
    NeverFits,
}

/// The permits one request holds: from the general part and, lent, from the
/// reserve. Returned when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    general: Option<OwnedSemaphorePermit>,
    reserve: Option<OwnedSemaphorePermit>,
    /// When the reserve first lent to a body still arriving.
    lent_at: Option<Instant>,
}

fn held(p: &Option<OwnedSemaphorePermit>) -> u32 {
    p.as_ref().map_or(0, |p| p.num_permits() as u32)
}

fn add(slot: &mut Option<OwnedSemaphorePermit>, more: OwnedSemaphorePermit) {
    match slot {
        Some(p) => p.merge(more),
        None => *slot = Some(more),
    }
}

impl Charge {
    pub fn new(budget: &Arc<Budget>) -> Charge {
        Charge {
            budget: Arc::clone(budget),
            general: None,
            reserve: None,
            lent_at: None,
        }
    }

    /// KiB held.
    pub fn kib(&self) -> u32 {
        held(&self.general) + held(&self.reserve)
    }

    /// Hold at least `bytes` in all for a body still arriving: the general
    /// part first; the reserve lends only for [`LEND`] (see [`Charge::overdue`]).
    pub fn hold_body(&mut self, bytes: usize) -> Result<(), Short> {
        let want = kib(bytes);
        if want > self.budget.total {
            return Err(Short::NeverFits);
        }
        let have = self.kib();
        if want <= have {
            return Ok(());
        }
        let more = want - have;
        if let Ok(p) = Arc::clone(&self.budget.general).try_acquire_many_owned(more) {
            add(&mut self.general, p);
            self.repay();
            return Ok(());
        }
        let p = Arc::clone(&self.budget.reserve)
            .try_acquire_many_owned(more)
            .map_err(|_| Short::Busy)?;
        add(&mut self.reserve, p);
        self.lent_at.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Hold `bytes` more for work on a whole body (decompressing, decoding):
    /// the general part, then the reserve.
    pub fn add_work(&mut self, bytes: usize) -> Result<(), Short> {
        self.add_kib(kib(bytes))
    }

    fn add_kib(&mut self, more: u32) -> Result<(), Short> {
        if self.kib() as u64 + more as u64 > self.budget.total as u64 {
            return Err(Short::NeverFits);
        }
        if let Ok(p) = Arc::clone(&self.budget.general).try_acquire_many_owned(more) {
            add(&mut self.general, p);
            return Ok(());
        }
        let p = Arc::clone(&self.budget.reserve)
            .try_acquire_many_owned(more)
            .map_err(|_| Short::Busy)?;
        add(&mut self.reserve, p);
        Ok(())
    }

    /// Give back what is held past `bytes` (the reserve's permits first).
    pub fn shrink_to(&mut self, bytes: usize) {
        let keep = kib(bytes);
        let mut extra = self.kib().saturating_sub(keep);
        for slot in [&mut self.reserve, &mut self.general] {
            let n = extra.min(held(slot));
            if n > 0 {
                if let Some(p) = slot.as_mut() {
                    drop(p.split(n as usize));
                }
                extra -= n;
            }
        }
        if held(&self.reserve) == 0 {
            self.lent_at = None;
        }
    }

    /// Move what the reserve lent into the general part, as far as it has
    /// room now.
    fn repay(&mut self) {
        let lent = held(&self.reserve);
        if lent == 0 {
            return;
        }
        let room = (self.budget.general.available_permits() as u32).min(lent);
        if room == 0 {
            return;
        }
        if let Ok(p) = Arc::clone(&self.budget.general).try_acquire_many_owned(room) {
            add(&mut self.general, p);
            if let Some(r) = self.reserve.as_mut() {
                drop(r.split(room as usize));
            }
            if room == lent {
                self.reserve = None;
                self.lent_at = None;
            }
        }
    }

    /// Whether a body still arriving has held a loan from the reserve past
    /// [`LEND`] (after trying to repay it).
    pub fn overdue(&mut self, now: Instant) -> bool {
        self.repay();
        self.lent_at.is_some_and(|at| now >= at + LEND)
    }

    fn lend_deadline(&self) -> Option<Instant> {
        self.lent_at.map(|at| at + LEND)
    }
}

mod intake;
pub use intake::{BodyLimits, Cut, Intake};

#[cfg(test)]
mod tests;
