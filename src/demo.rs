//! The bundled incident for `serve --demo`: the seed's `search_flights`
//! history with the July 29 storms, the fixed retry loop and the retry-gate
//! cases, compiled into the binary from `fixtures/`.

use crate::ingest::json;
use crate::store::{Store, StoreError};

/// The fixture files, by name.
pub const FILES: &[(&str, &[u8])] = &[
    (
        "search_flights_history.json",
        include_bytes!("../fixtures/search_flights_history.json"),
    ),
    (
        "fixed_loop.json",
        include_bytes!("../fixtures/fixed_loop.json"),
    ),
    (
        "retry_gate.json",
        include_bytes!("../fixtures/retry_gate.json"),
    ),
];

/// Load the bundled incident (idempotent: spans already stored are skipped)
/// and flush it, so it is readable at once. Returns the spans newly stored.
pub fn load(store: &Store) -> Result<usize, StoreError> {
    let mut stored = 0;
    for (name, bytes) in FILES {
        let request = json::decode(bytes)
            .map_err(|e| StoreError::data(format!("bundled fixture {name}"), e))?;
        let prepared = crate::ingest::prepare(&request);
        stored += store.submit(prepared)?.wait()?.stored;
    }
    store.flush()?;
    Ok(stored)
}

/// The sweep `serve --demo` runs after loading, so the dashboard opens on
/// the incident's signals: as of the morning after its last day.
/// The demo's "now": the morning after the incident's last day.
pub const NOW_NS: i64 = 1_786_600_800_000_000_000;

/// The config the demo sweeps with: the whole incident in the window,
/// whatever the configured one.
pub fn sweep_config(cfg: &crate::config::Config) -> crate::config::Config {
    let mut c = cfg.clone();
    c.sweep.since_days = c.sweep.since_days.max(40);
    c
}

pub fn sweep(
    store: &Store,
    cfg: &crate::config::Config,
) -> Result<usize, crate::sweep::SweepError> {
    let reader = store.reader();
    let mut state = crate::signal::StateDb::open(&reader.layout().state_db())?;
    let opts = crate::sweep::SweepOptions::from_config(&sweep_config(cfg), NOW_NS, None);
    Ok(crate::sweep::run(&reader, &mut state, &cfg.detect, &opts)?
        .signals
        .len())
}
