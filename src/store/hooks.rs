//! What the store calls out to when its data directory takes part in a
//! shared store, as traits the store defines and the `cluster` module
//! implements: the store knows no object store, no lease and no S3.
//!
//! - [`Shipper`]: a commit that flushed parts ships them before the WAL
//!   segments they cover go (an ingest node's layout carries one).
//! - [`Upstream`]: the shared store a data directory is a copy of (the
//!   detect role's): the flusher pulls from it, the sealer seals through
//!   it, and its holder's upkeep runs on the flusher's clock.
//! - [`Fence`]: a check a sweep makes before it commits.
//!
//! Beside them, the few store pieces an implementation needs: [`adopt`]
//! (a day's downloaded parts committed), part names, the clock retirements
//! are stamped with.

use std::path::PathBuf;

use super::catalog::commit::{self, Intent};
pub use super::catalog::ship::Shipper;
use super::seal_types::{SealOptions, SealReport};
use super::{fsutil, Catalog, StoreError};

pub use super::catalog::layout::is_seal_output;
pub use super::catalog::manifest::is_part_name;
pub use super::catalog::retire::now_ms;

/// What one pull did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    /// Days the shared store holds.
    pub days: usize,
    /// Days whose part set changed here.
    pub changed: usize,
    pub fetched: usize,
    pub bytes: u64,
    /// Parts dropped here (no longer live there).
    pub dropped: usize,
}

/// The shared store a data directory is a copy of. Every call blocks; the
/// flusher thread makes them.
pub trait Upstream: std::fmt::Debug + Send + Sync {
    /// The shared store's address, for logs.
    fn url(&self) -> &str;

    /// How often the flusher pulls (and a flush pulls first anyway).
    fn pull_every(&self) -> std::time::Duration;

    /// Bring the copy in `catalog`'s directory up to the shared store: what
    /// it did, and the days it changed.
    fn pull(&self, catalog: &Catalog) -> Result<(Pulled, Vec<i32>), StoreError>;

    /// Whether this node seals (and trims) the shared store now.
    fn may_seal(&self) -> bool;

    /// Seal `day` of the copy and publish the seal on the shared store;
    /// `None` when not sealed now.
    fn seal(
        &self,
        catalog: &Catalog,
        day: i32,
        opts: &SealOptions,
    ) -> Result<Option<SealReport>, StoreError>;

    /// The holder's upkeep of the shared store (what seals replaced, days
    /// past the retention): the number of objects deleted.
    fn upkeep(&self, grace: std::time::Duration) -> Result<usize, StoreError>;
}

/// A check made before a sweep commits: may this process still write the
/// detect role's state? The error says why not.
pub trait Fence: std::fmt::Debug + Send + Sync {
    fn check(&self) -> Result<(), FenceLost>;
}

/// A fence that no longer holds: the lease generation the sweep began
/// under is no longer the one this node acts under.
#[derive(Debug, Clone, thiserror::Error)]
#[error("this node no longer holds the detect lease (generation {generation}); the sweep's changes are dropped, and the holder sweeps again")]
pub struct FenceLost {
    /// The generation the sweep began under.
    pub generation: u64,
}

/// Commit parts downloaded into `day`'s directory: `fetched` as (temporary
/// path, final file name), with the parts named `dropped` replaced; one
/// commit, so a reader sees the day's old set or its new one.
pub fn adopt(
    catalog: &Catalog,
    day: i32,
    fetched: &[(PathBuf, String)],
    dropped: &[String],
) -> Result<(), StoreError> {
    let layout = catalog.layout();
    let dir = layout.day_dir(day);
    fsutil::sync_dir(&dir)?;
    let intent = Intent {
        rollup_days: vec![day],
        renames: fetched
            .iter()
            .map(|(tmp, name)| (layout.relative(tmp), layout.relative(&dir.join(name))))
            .collect(),
        deletes: dropped
            .iter()
            .map(|n| layout.relative(&dir.join(n)))
            .collect(),
        ..Intent::default()
    };
    commit::commit(catalog, &intent)
}
