//! The [`Catalog`]: one per open data directory, holding its [`Layout`],
//! the lock that makes its commits one at a time, and what this process
//! knows of its retirements and readers' pins ([`super::retire`]). No
//! static holds any of it: everything in the process that writes or reads
//! the directory shares the one value (an `Arc`) — the `Store`'s writer and
//! flusher, its compaction, seal and retention, every `Reader` it hands out
//! and every `Pin` those take. A directory opened again on its own (a
//! `Reader::open` beside a running `Store`) gets a catalog of its own, whose
//! pins the store cannot see: it is protected, as a reader in another
//! process is, by `StoreOptions::retired_grace` only.

use std::sync::{Arc, Mutex, MutexGuard};

use super::layout::Layout;
use super::retire;

/// A data directory's layout, commit lock and retire state (see the module doc).
pub struct Catalog {
    layout: Layout,
    /// Held by a commit, a recovery, a rollup publication and a reclaim:
    /// each reads and replaces the intent file and the manifests.
    commits: Mutex<()>,
    /// Retirements and live pins.
    pub(super) retire: Mutex<retire::State>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("root", &self.layout.root())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// The catalog of the data directory `layout` describes, knowing no
    /// retirement and no pin yet (as a new process would).
    pub fn new(layout: Layout) -> Arc<Catalog> {
        Arc::new(Catalog {
            layout,
            commits: Mutex::new(()),
            retire: Mutex::new(retire::State::default()),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Hold off this directory's other commits (and reclaims: both replace
    /// manifests) until the guard is dropped.
    pub(in crate::store) fn exclusive(&self) -> MutexGuard<'_, ()> {
        self.commits.lock().unwrap_or_else(|e| e.into_inner())
    }
}
