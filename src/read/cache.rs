//! What the reads keep in memory between requests, each dropped when what
//! it was made from changed: the signals and the incidents (each on one
//! SQLite connection kept open, read again only when another connection
//! committed), and the tools table of a
//! range (made again only when the rollup or the signals were read again),
//! served a page at a time.
//! The JSON API and the MCP server share them, so a busy agent does not
//! open SQLite or add up a thousand tools on every call. Every method that
//! touches SQLite is called from blocking threads only (`invalidate` too:
//! it drops the kept connection).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::data::{Rollup, ToolSummary};
use crate::incident::Incident;
use crate::signal::{Signal, StateDb, StateError};

/// A value read from `state.sqlite` (the signals, the incidents), read
/// again only when another connection committed (SQLite's `data_version`,
/// on one connection kept open) or the file was replaced.
struct StateCache<T: Send + Sync + 'static> {
    path: PathBuf,
    inner: Mutex<Option<Kept<T>>>,
    /// The answer while no state file exists: one value, so what was made
    /// from it (the tools table) stays cached.
    none: Arc<T>,
}

/// The kept connection and what it read.
struct Kept<T> {
    db: StateDb,
    /// The file the connection is on (a file moved aside and made anew is another).
    file: (u64, u64),
    version: i64,
    value: Arc<T>,
}

fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

impl<T: Default + Send + Sync + 'static> StateCache<T> {
    fn new(path: PathBuf) -> StateCache<T> {
        StateCache {
            path,
            inner: Mutex::new(None),
            none: Arc::default(),
        }
    }

    /// The value `read` makes, as the state now stands.
    fn get<E: From<StateError>>(
        &self,
        read: impl Fn(&StateDb) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(file) = file_id(&self.path) else {
            // No sweep has written state yet.
            *guard = None;
            return Ok(Arc::clone(&self.none));
        };
        if let Some(k) = guard.as_mut().filter(|k| k.file == file) {
            // The version read before the rows: a commit in between makes
            // the next call read again.
            let version = k.db.data_version()?;
            if version != k.version {
                k.value = Arc::new(read(&k.db)?);
                k.version = version;
            }
            return Ok(Arc::clone(&k.value));
        }
        let db = StateDb::open(&self.path)?;
        let version = db.data_version()?;
        let value = Arc::new(read(&db)?);
        *guard = Some(Kept {
            db,
            file,
            version,
            value: Arc::clone(&value),
        });
        Ok(value)
    }

    fn invalidate(&self) {
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl<T: Send + Sync + 'static> Drop for StateCache<T> {
    /// Closing the kept connection is a SQLite call (the last connection
    /// checkpoints the WAL): inside a runtime it goes to the blocking pool.
    fn drop(&mut self) {
        let kept = self
            .inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let (Some(k), Ok(rt)) = (kept, tokio::runtime::Handle::try_current()) {
            rt.spawn_blocking(move || drop(k));
        }
    }
}

/// The signals of `state.sqlite`, read again only when another connection
/// committed or the file was replaced.
pub struct SignalCache(StateCache<Vec<Signal>>);

impl SignalCache {
    pub fn new(path: PathBuf) -> SignalCache {
        SignalCache(StateCache::new(path))
    }

    /// Every signal, as the state now stands.
    pub fn signals(&self) -> Result<Arc<Vec<Signal>>, StateError> {
        self.0.get(StateDb::list)
    }

    /// Forget what was read. (Changes this process makes through another
    /// connection are seen anyway; this is for a caller that must not rely
    /// on it.)
    pub fn invalidate(&self) {
        self.0.invalidate()
    }
}

/// Why the incidents could not be read: the state file, or the incidents'
/// tables in it.
#[derive(Debug, thiserror::Error)]
pub enum IncidentsError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Incident(#[from] crate::incident::IncidentError),
}

/// The incidents of `state.sqlite` (open ones first, then newest first, as
/// [`crate::incident::store::list`] orders them), read again like the
/// signals: when another connection committed (a sweep) or the file was
/// replaced.
pub struct IncidentCache(StateCache<Vec<Incident>>);

impl IncidentCache {
    pub fn new(path: PathBuf) -> IncidentCache {
        IncidentCache(StateCache::new(path))
    }

    /// Every incident, as the last sweep left it.
    pub fn incidents(&self) -> Result<Arc<Vec<Incident>>, IncidentsError> {
        self.0
            .get(|db| Ok(crate::incident::store::list(db.conn())?))
    }

    /// The incident `id` (as given, or upper-cased), if there is one.
    pub fn incident(&self, id: &str) -> Result<Option<Incident>, IncidentsError> {
        let upper = id.to_ascii_uppercase();
        Ok(self
            .incidents()?
            .iter()
            .find(|i| i.id == id || i.id == upper)
            .cloned())
    }
}

/// What the tools table of a range was made from.
struct Made {
    rollup: Arc<Rollup>,
    signals: Arc<Vec<Signal>>,
    tools: Arc<Vec<ToolSummary>>,
}

/// The tools table per range, made again when the rollup or the signals
/// it was made from were read again.
#[derive(Default)]
pub struct ToolsCache {
    inner: Mutex<HashMap<(i32, i32), Made>>,
}

/// Ranges kept at most (one per days/from/to a client asks for).
const RANGES: usize = 64;

impl ToolsCache {
    fn made<'a>(
        map: &'a mut HashMap<(i32, i32), Made>,
        range: (i32, i32),
        rollup: &Arc<Rollup>,
        signals: &Arc<Vec<Signal>>,
    ) -> &'a mut Made {
        let fresh = map
            .get(&range)
            .is_some_and(|m| Arc::ptr_eq(&m.rollup, rollup) && Arc::ptr_eq(&m.signals, signals));
        if !fresh {
            if map.len() >= RANGES {
                map.clear();
            }
            let open = open_by_tool(signals);
            map.insert(
                range,
                Made {
                    rollup: Arc::clone(rollup),
                    signals: Arc::clone(signals),
                    tools: Arc::new(rollup.summaries(range.0, range.1, &open)),
                },
            );
        }
        map.get_mut(&range).expect("inserted above")
    }

    /// The tools table of `from..=to`, busiest first.
    pub fn tools(
        &self,
        from: i32,
        to: i32,
        rollup: &Arc<Rollup>,
        signals: &Arc<Vec<Signal>>,
    ) -> Arc<Vec<ToolSummary>> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&Self::made(&mut map, (from, to), rollup, signals).tools)
    }

    /// Page `page` (from 1) of `size` tools of the table, as `/api/tools`
    /// answers it: only that page is serialized, whatever the table holds.
    /// `Err(pages)` when the table has fewer pages (an empty table has one).
    pub fn page_json(
        &self,
        from: i32,
        to: i32,
        page: usize,
        size: usize,
        rollup: &Arc<Rollup>,
        signals: &Arc<Vec<Signal>>,
    ) -> Result<bytes::Bytes, usize> {
        let tools = self.tools(from, to, rollup, signals);
        let pages = tools.len().div_ceil(size).max(1);
        if page == 0 || page > pages {
            return Err(pages);
        }
        let slice = &tools[((page - 1) * size).min(tools.len())..(page * size).min(tools.len())];
        let body = serde_json::to_vec(&serde_json::json!({
            "from": crate::model::day_to_string(from),
            "to": crate::model::day_to_string(to),
            "page": page,
            "page_size": size,
            "pages": pages,
            "total_tools": tools.len(),
            "tools": slice,
        }))
        .unwrap_or_default();
        Ok(bytes::Bytes::from(body))
    }
}

/// Open signals per tool.
pub fn open_by_tool(signals: &[Signal]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for s in signals.iter().filter(|s| s.state.is_open()) {
        *m.entry(s.draft.tool.clone()).or_insert(0) += 1;
    }
    m
}

/// The caches the dashboard, its API and the MCP server share.
pub struct Reads {
    pub reader: crate::store::Reader,
    pub rollup: super::data::RollupCache,
    pub signals: SignalCache,
    /// The incidents (`/`, `/incidents`, `/api/incidents`, MCP
    /// `list_incidents` and `get_incident`).
    pub incidents: IncidentCache,
    pub tools: ToolsCache,
    /// The coverage report's counts per day (`/coverage`, `/api/coverage`,
    /// MCP `get_coverage`).
    pub coverage: crate::coverage::Cache,
    /// Whether a signal's state may be changed by hand here (mute, unmute,
    /// resolve, from the dashboard or MCP): a detect standby's state is the
    /// holder's, read in again and again, so it refuses, naming why.
    pub by_hand: Option<ByHand>,
}

/// Why the state may not be changed by hand here: this node is a standby
/// of the detect role, whose state is the lease holder's.
#[derive(Debug, thiserror::Error)]
#[error("this node is a standby of the detect role (the lease is held by {holder}); change signals there")]
pub struct Refused {
    /// The holder of the lease, as last seen.
    pub holder: String,
}

/// The check a change by hand makes first.
pub type ByHand = Arc<dyn Fn() -> Result<(), Refused> + Send + Sync>;

impl Reads {
    pub fn new(reader: crate::store::Reader) -> Reads {
        let state = reader.layout().state_db();
        Reads {
            reader,
            rollup: Default::default(),
            signals: SignalCache::new(state.clone()),
            incidents: IncidentCache::new(state),
            tools: Default::default(),
            coverage: Default::default(),
            by_hand: None,
        }
    }

    /// `Err` with the reason when the state may not be changed by hand here.
    pub fn may_change_by_hand(&self) -> Result<(), Refused> {
        self.by_hand.as_ref().map_or(Ok(()), |check| check())
    }

    pub fn rollup(&self) -> Result<Arc<Rollup>, crate::store::StoreError> {
        self.rollup.get(&self.reader)
    }
}
