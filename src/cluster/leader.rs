//! The detect role over a shared store: the lease kept, and the state
//! (`state.sqlite`: signals, history, the alert outbox, per-day results)
//! shipped by the holder to `state/state.sqlite` on the shared store and
//! read back by whoever holds the lease next.
//!
//! What the holder may do is fenced by its generation:
//! - a sweep commits its state change (and the alerts it queues) only if
//!   the generation it began under is still held ([`Leader::fence`],
//!   [`super::fence`]);
//! - a message goes out only if the lease is held and the message is in
//!   the state last shipped ([`Leader::may_send`]): a holder that dies after
//!   a sweep queued it but before shipping never sent it, so its successor,
//!   which sweeps again, cannot send a second message for the same change;
//!   one that dies after sending and before shipping the delivery leaves
//!   it pending in the shipped state, and its successor sends it again
//!   under the same `webhook-id` (a receiver that keeps ids sees one).
//! - each shipment is a conditional put over the version the holder shipped
//!   or read last, and a new holder first ships what it read in over the
//!   version it read (even unchanged), so a holder that lost the lease
//!   cannot overwrite its successor's state, even with a put that was
//!   still retrying when its lease lapsed.
//!
//! On taking the lease the node reads the shipped state into its own
//! `state.sqlite` (SQLite's backup API, under its readers), then acts. A
//! standby reads it whenever it changes, so its dashboard shows the
//! holder's signals.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::client::{Put, Remote, Version};
use super::error::ClusterError;
use super::fence::{Acting, LeaseFence};
use super::lease::{Lease, Status};

/// Where the holder's state lives on the shared store.
pub const STATE: &str = "state/state.sqlite";

/// The detect role's lease and state shipping.
pub struct Leader {
    lease: Arc<Lease>,
    remote: Remote,
    state_db: PathBuf,
    /// The generation whose state this node has read in (0: none).
    ready: AtomicU64,
    /// The highest outbox row in the state last shipped or read in.
    watermark: AtomicI64,
    sync: Mutex<Shipped>,
}

#[derive(Default)]
struct Shipped {
    /// The shipped state's version, as this node last wrote or read it.
    version: Option<Version>,
    /// The local files as they were then (mtime and size of the database
    /// and its WAL): unchanged files are not shipped again.
    files: Option<[(Option<SystemTime>, u64); 2]>,
}

impl std::fmt::Debug for Leader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leader")
            .field("lease", &self.lease)
            .field("ready", &self.ready.load(Ordering::Relaxed))
            .finish()
    }
}

fn files(db: &Path) -> [(Option<SystemTime>, u64); 2] {
    let stat =
        |p: PathBuf| std::fs::metadata(p).map_or((None, 0), |m| (m.modified().ok(), m.len()));
    [
        stat(db.to_path_buf()),
        stat(db.with_extension("sqlite-wal")),
    ]
}

/// The highest outbox row of a state file (0 when there is none).
fn max_outbox_id(db: &Path) -> rusqlite::Result<i64> {
    let c = rusqlite::Connection::open(db)?;
    let has: bool = c.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'outbox'",
        [],
        |r| r.get(0),
    )?;
    if !has {
        return Ok(0);
    }
    c.query_row("SELECT coalesce(max(id), 0) FROM outbox", [], |r| r.get(0))
}

fn db_err(context: String) -> impl FnOnce(rusqlite::Error) -> ClusterError {
    move |e| ClusterError::state(context, e)
}

impl Leader {
    pub fn new(lease: Arc<Lease>, remote: Remote, state_db: PathBuf) -> Leader {
        Leader {
            lease,
            remote,
            state_db,
            ready: AtomicU64::new(0),
            watermark: AtomicI64::new(-1),
            sync: Mutex::new(Shipped::default()),
        }
    }

    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// Who holds the lease as this node last saw it.
    pub fn holder_seen(&self) -> String {
        self.lease
            .last_seen()
            .map_or_else(|| "no node yet".to_string(), |d| d.holder)
    }

    /// The generation this node holds and acts under: the lease held, and
    /// the state shipped under it read in.
    pub fn acting(&self) -> Option<u64> {
        let g = self.lease.held()?;
        (self.ready.load(Ordering::Acquire) == g).then_some(g)
    }

    /// The check a sweep makes before it commits: its generation still
    /// held ([`LeaseFence`]).
    pub fn fence(self: &Arc<Self>, generation: u64) -> LeaseFence {
        LeaseFence::new(Arc::clone(self) as Arc<dyn Acting>, generation)
    }

    /// The highest outbox row that may be sent now; `None`: none may.
    pub fn may_send(&self) -> Option<i64> {
        self.acting()?;
        Some(self.watermark.load(Ordering::Acquire))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shipped> {
        self.sync.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read the shipped state into `state.sqlite` (blocking). `false`: there
    /// is none yet, and the local state stands (and is shipped next).
    pub fn read_in(&self) -> Result<bool, ClusterError> {
        let got = Remote::block(self.remote.get(STATE))?;
        let Some((bytes, version)) = got else {
            let mut s = self.lock();
            s.version = None;
            s.files = None;
            self.watermark.store(
                max_outbox_id(&self.state_db)
                    .map_err(db_err(format!("reading {}", self.state_db.display())))?,
                Ordering::Release,
            );
            return Ok(false);
        };
        let tmp = self.state_db.with_extension("sqlite.incoming");
        std::fs::write(&tmp, &bytes)
            .map_err(|e| ClusterError::file(format!("writing {}", tmp.display()), e))?;
        let restored = (|| {
            let watermark = max_outbox_id(&tmp)?;
            let mut c = rusqlite::Connection::open(&self.state_db)?;
            c.busy_timeout(Duration::from_secs(10))?;
            c.restore(
                rusqlite::MAIN_DB,
                &tmp,
                None::<fn(rusqlite::backup::Progress)>,
            )?;
            Ok::<_, rusqlite::Error>(watermark)
        })();
        let _ = std::fs::remove_file(&tmp);
        let watermark = restored.map_err(db_err(format!(
            "reading the shipped state into {}",
            self.state_db.display()
        )))?;
        self.watermark.store(watermark, Ordering::Release);
        let mut s = self.lock();
        s.version = Some(version);
        s.files = Some(files(&self.state_db));
        Ok(true)
    }

    /// Ship `state.sqlite` if it changed since it was last shipped or read
    /// (blocking). `Ok(false)`: someone else shipped since (this node has
    /// lost the lease, or is about to); nothing was written.
    pub fn ship(&self) -> Result<bool, ClusterError> {
        let now = files(&self.state_db);
        let over = {
            let s = self.lock();
            if s.files == Some(now) {
                return Ok(true);
            }
            s.version.clone()
        };
        let tmp = self.state_db.with_extension("sqlite.outgoing");
        let _ = std::fs::remove_file(&tmp);
        let snapshot = (|| {
            let c = rusqlite::Connection::open(&self.state_db)?;
            c.busy_timeout(Duration::from_secs(10))?;
            c.execute("VACUUM INTO ?1", [tmp.to_string_lossy().as_ref()])?;
            max_outbox_id(&tmp)
        })()
        .map_err(db_err(format!(
            "taking a snapshot of {}",
            self.state_db.display()
        )))
        .and_then(|watermark| {
            std::fs::read(&tmp)
                .map(|bytes| (watermark, bytes))
                .map_err(|e| ClusterError::file(format!("reading {}", tmp.display()), e))
        });
        let _ = std::fs::remove_file(&tmp);
        let (watermark, bytes) = snapshot?;
        if self.lease.held().is_none() {
            // Lapsed while the snapshot was taken: not this node's to ship.
            return Ok(false);
        }
        match Remote::block(self.remote.put_if(STATE, Bytes::from(bytes), over))? {
            Put::Done(v) => {
                self.watermark.store(watermark, Ordering::Release);
                let mut s = self.lock();
                s.version = Some(v);
                s.files = Some(now);
                Ok(true)
            }
            Put::Lost => Ok(false),
        }
    }

    /// Keep the lease and the state until `stop`: renew (or try to take)
    /// the lease every third of its ttl, and every `sync_every` ship the
    /// state (holder) or read it in when it changed (standby). On stop, the
    /// holder ships a last time and releases the lease.
    pub async fn run(
        self: Arc<Self>,
        sync_every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        // The lease is renewed on a task of its own, so a slow state
        // shipment never delays a renewal.
        let renewing = tokio::spawn(renew(Arc::clone(&self.lease), stop.clone()));
        loop {
            let me = Arc::clone(&self);
            match tokio::task::spawn_blocking(move || me.sync_step()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not sync the detect state with the shared store; trying again")
                }
                Err(e) => tracing::error!(error = %e, "the state sync panicked"),
            }
            tokio::select! {
                _ = tokio::time::sleep(sync_every) => {}
                () = stop.cancelled() => break,
            }
        }
        let _ = renewing.await;
        if self.acting().is_some() {
            let me = Arc::clone(&self);
            match tokio::task::spawn_blocking(move || me.ship()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not ship the detect state at shutdown; the next holder sweeps again")
                }
                Err(e) => tracing::error!(error = %e, "shipping the state at shutdown panicked"),
            }
        }
        let lease = Arc::clone(&self.lease);
        if let Err(e) = Remote::run(async move { lease.release().await }).await {
            tracing::warn!(error = %e, "could not release the detect lease; a standby takes it once it lapses");
        }
    }

    /// One sync: the holder reads in on taking over, then ships changes; a
    /// standby reads in what the holder shipped.
    fn sync_step(&self) -> Result<(), ClusterError> {
        match self.lease.held() {
            Some(g) if self.ready.load(Ordering::Acquire) != g => {
                // The shipped state is read in unless it is this node's
                // own last shipment (the lease lapsed for a moment and
                // came back): then the local state is as new or newer.
                let own = self.lock().version.clone();
                let head = Remote::block(self.remote.version(STATE))?;
                let found = match head {
                    Some(h) if Some(&h) == own.as_ref() => true,
                    _ => self.read_in()?,
                };
                // Claim it: ship over the version read, even unchanged, so
                // that a late shipment of the previous holder (its put
                // still retrying when its lease lapsed) fails rather than
                // overwriting what this node acts on.
                self.lock().files = None;
                if !self.ship()? {
                    tracing::warn!(
                        "the shipped state changed while taking over the detect role; reading it again"
                    );
                    self.lock().version = None;
                    return Ok(());
                }
                self.ready.store(g, Ordering::Release);
                tracing::info!(
                    generation = g,
                    shipped_state = found,
                    "acting as the detect role: sweeps, seals and alerts run here"
                );
                Ok(())
            }
            Some(_) => {
                if !self.ship()? {
                    tracing::warn!("the shipped state changed under this holder: another node acts; standing by");
                    self.ready.store(0, Ordering::Release);
                }
                Ok(())
            }
            None => {
                if self.ready.swap(0, Ordering::AcqRel) != 0 {
                    tracing::warn!("no longer the detect role: standing by");
                }
                self.read_in_if_new()
            }
        }
    }

    /// A standby's read: only when the shipped state's version moved.
    fn read_in_if_new(&self) -> Result<(), ClusterError> {
        let seen = self.lock().version.clone();
        let head = Remote::block(self.remote.version(STATE))?;
        if head.is_some() && head != seen {
            self.read_in()?;
        }
        Ok(())
    }
}

/// Renew (or try to take) the lease every third of its ttl until `stop`.
async fn renew(lease: Arc<Lease>, stop: tokio_util::sync::CancellationToken) {
    let every = lease.ttl() / 3;
    let mut standing_by = None;
    loop {
        let l = Arc::clone(&lease);
        match Remote::run(async move { l.tick().await }).await {
            Ok(Status::Standby { holder, .. }) => {
                if standing_by.as_ref() != Some(&holder) {
                    tracing::info!(
                        holder = %holder,
                        "standing by: another node holds the detect lease"
                    );
                    standing_by = Some(holder);
                }
            }
            Ok(Status::Held(_)) | Ok(Status::Unknown) => standing_by = None,
            Err(e) => {
                tracing::warn!(error = %e, "could not reach the shared store for the detect lease")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
    }
}

impl crate::alert::sender::Gate for Leader {
    fn may_send(&self) -> Option<i64> {
        Leader::may_send(self)
    }
}

impl Acting for Leader {
    fn acting(&self) -> Option<u64> {
        Leader::acting(self)
    }
}
