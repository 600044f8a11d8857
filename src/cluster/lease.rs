//! The detect role's lease: `lease.json` on the shared store, taken with a
//! conditional create (`If-None-Match: *`) or over the lapsed holder's
//! version (`If-Match`), renewed the same way, so at most one detect role
//! acts at a time.
//!
//! No clocks are compared across machines. A holder counts its lease from
//! the moment it *sent* its last successful renewal, and stops acting
//! `margin` before `ttl` has passed from then. A standby counts from the
//! moment it first *saw* a version of the document, which is after that
//! renewal was sent, and takes over only once the same version has stood
//! for a whole `ttl`. So the old holder has stopped before anyone takes
//! over, whatever the two clocks say, as long as they run at about the
//! same rate. Each taking-over raises the generation. What a holder writes
//! checks, on this node, that its generation is still held just before it
//! writes (a sweep's commit, a seal's publish, a state shipment, an alert's
//! claim), and each write to the shared store is a conditional put over
//! the version it read, so a write that was late anyway (a put still
//! retrying when the lease lapsed) fails against the successor's.
//!
//! A holder that stops cleanly releases the lease (`released: true`), and
//! a standby takes a released lease at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::client::{Put, Remote, Version};
use super::error::ClusterError;

pub const FILE: &str = "lease.json";

/// The document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doc {
    pub holder: String,
    pub generation: u64,
    pub ttl_ms: u64,
    /// The holder's clock at the renewal, for people reading it only.
    pub renewed_unix_ms: u64,
    #[serde(default)]
    pub released: bool,
}

/// What this node knows of the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Held, at this generation.
    Held(u64),
    /// Someone else holds it (or held it within the ttl).
    Standby { holder: String, generation: u64 },
    /// No answer from the store: not held (past the ttl), or held still.
    Unknown,
}

struct Held {
    generation: u64,
    version: Version,
    /// When the last successful renewal was sent.
    sent: Instant,
}

struct Seen {
    version: Version,
    since: Instant,
    doc: Doc,
}

#[derive(Default)]
struct State {
    held: Option<Held>,
    seen: Option<Seen>,
}

/// This node's side of the lease.
pub struct Lease {
    remote: Remote,
    holder: String,
    ttl: Duration,
    margin: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("holder", &self.holder)
            .field("ttl", &self.ttl)
            .field("held", &self.held())
            .finish()
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Lease {
    /// `ttl`: how long a lease stands without renewal; renew every third of
    /// it. The holder stops acting a fifth of it early.
    pub fn new(remote: Remote, holder: &str, ttl: Duration) -> Lease {
        Lease {
            remote,
            holder: holder.to_string(),
            ttl,
            margin: ttl / 5,
            state: Mutex::new(State::default()),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generation this node holds now, if it does: renewed within
    /// `ttl - margin`.
    pub fn held(&self) -> Option<u64> {
        let s = self.lock();
        let h = s.held.as_ref()?;
        (h.sent.elapsed() + self.margin < self.ttl).then_some(h.generation)
    }

    fn doc(&self, generation: u64, released: bool) -> Bytes {
        let doc = Doc {
            holder: self.holder.clone(),
            generation,
            ttl_ms: self.ttl.as_millis() as u64,
            renewed_unix_ms: unix_ms(),
            released,
        };
        Bytes::from(serde_json::to_vec_pretty(&doc).expect("a lease document encodes"))
    }

    /// Renew the lease held, or try to take it; call every `ttl / 3`.
    pub async fn tick(&self) -> Result<Status, ClusterError> {
        let held = self
            .lock()
            .held
            .as_ref()
            .map(|h| (h.generation, h.version.clone()));
        if let Some((generation, version)) = held {
            return self.renew(generation, version).await;
        }
        self.try_take().await
    }

    async fn renew(&self, generation: u64, version: Version) -> Result<Status, ClusterError> {
        let sent = Instant::now();
        match self
            .remote
            .put_if(FILE, self.doc(generation, false), Some(version))
            .await
        {
            Ok(Put::Done(v)) => {
                self.lock().held = Some(Held {
                    generation,
                    version: v,
                    sent,
                });
                Ok(Status::Held(generation))
            }
            Ok(Put::Lost) => {
                self.lock().held = None;
                tracing::warn!(
                    generation,
                    "lost the detect lease (another node took it); no more seals, sweeps or alerts here"
                );
                Ok(Status::Unknown)
            }
            Err(e) => {
                // Still held until the margin says otherwise.
                if self.held().is_none() {
                    let mut s = self.lock();
                    if s.held.is_some() {
                        s.held = None;
                        tracing::warn!(generation, error = %e, "could not renew the detect lease in time; acting as a standby");
                    }
                }
                Err(e)
            }
        }
    }

    async fn try_take(&self) -> Result<Status, ClusterError> {
        let sent = Instant::now();
        let current = self.remote.get(FILE).await?;
        let (generation, over) = match current {
            None => (1, None),
            Some((bytes, version)) => {
                let doc: Doc = serde_json::from_slice(&bytes).map_err(|e| {
                    ClusterError::document(format!("reading {FILE} ({})", self.remote.url()), e)
                })?;
                let lapsed = {
                    let mut s = self.lock();
                    match &s.seen {
                        Some(seen) if seen.version == version => {
                            doc.released || seen.since.elapsed() >= self.ttl
                        }
                        _ => {
                            s.seen = Some(Seen {
                                version: version.clone(),
                                since: Instant::now(),
                                doc: doc.clone(),
                            });
                            doc.released
                        }
                    }
                };
                if !lapsed {
                    return Ok(Status::Standby {
                        holder: doc.holder,
                        generation: doc.generation,
                    });
                }
                (doc.generation + 1, Some(version))
            }
        };
        match self
            .remote
            .put_if(FILE, self.doc(generation, false), over)
            .await?
        {
            Put::Done(v) => {
                let mut s = self.lock();
                s.held = Some(Held {
                    generation,
                    version: v,
                    sent,
                });
                s.seen = None;
                tracing::info!(generation, holder = %self.holder, "took the detect lease");
                Ok(Status::Held(generation))
            }
            Put::Lost => Ok(Status::Unknown),
        }
    }

    /// Give the lease up (a clean stop), so a standby takes it at once.
    pub async fn release(&self) -> Result<(), ClusterError> {
        let held = self.lock().held.take();
        if let Some(h) = held {
            self.remote
                .put_if(FILE, self.doc(h.generation, true), Some(h.version))
                .await?;
            tracing::info!(generation = h.generation, "released the detect lease");
        }
        Ok(())
    }

    /// Who holds the lease as last seen (for `/readyz` and logs).
    pub fn last_seen(&self) -> Option<Doc> {
        self.lock().seen.as_ref().map(|s| s.doc.clone())
    }
}
