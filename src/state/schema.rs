//! The schema of `state.sqlite`: every table and index, whoever reads and
//! writes its rows. [`V1`] is version 1, the current one; a later version
//! adds a step in `migrate.rs` (and its SQL here) rather than editing it,
//! since a fresh file runs every step from version 0.

/// Every table and index of version 1.
pub const V1: &str = "
CREATE TABLE IF NOT EXISTS import_files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    done INTEGER NOT NULL,
    head_len INTEGER NOT NULL DEFAULT 0,
    head_hash INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
CREATE TABLE IF NOT EXISTS signals (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    draft TEXT NOT NULL,
    findings INTEGER NOT NULL,
    last_seen_ns INTEGER NOT NULL,
    clean_sweeps INTEGER NOT NULL DEFAULT 0,
    resolved_at_ns INTEGER,
    muted_until_ns INTEGER,
    mute_until_escalates INTEGER NOT NULL DEFAULT 0,
    mute_escalate_at INTEGER
);
CREATE TABLE IF NOT EXISTS signal_history (
    id TEXT NOT NULL,
    at_ns INTEGER NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    at_ns INTEGER NOT NULL,
    horizon_ns INTEGER NOT NULL,
    signals INTEGER NOT NULL,
    changes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS turn_days (
    day INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    findings TEXT NOT NULL,
    horizon_ns INTEGER NOT NULL,
    spans INTEGER NOT NULL,
    outcomes TEXT,
    worst TEXT,
    traffic TEXT,
    read_through INTEGER,
    computed_at_ns INTEGER,
    valid_until_ns INTEGER,
    turns TEXT
);
CREATE TABLE IF NOT EXISTS retry_outcomes (
    day INTEGER NOT NULL,
    tool TEXT NOT NULL,
    retries INTEGER NOT NULL,
    rescued INTEGER NOT NULL,
    wasted INTEGER NOT NULL,
    after_success INTEGER NOT NULL,
    wasted_seconds REAL NOT NULL,
    wasted_cost_usd REAL NOT NULL,
    PRIMARY KEY (day, tool)
);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id TEXT NOT NULL UNIQUE,
    target TEXT NOT NULL,
    signals TEXT NOT NULL,
    body TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    last_error TEXT,
    done_ns INTEGER,
    lease_until_ns INTEGER
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (target, status, id);
CREATE TABLE IF NOT EXISTS alert_told (
    signal_id TEXT PRIMARY KEY,
    last_ns INTEGER NOT NULL,
    last_fire_ns INTEGER NOT NULL,
    findings INTEGER NOT NULL,
    quiet INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS alert_incident_told (
    incident_id TEXT PRIMARY KEY,
    last_ns INTEGER NOT NULL,
    last_fire_ns INTEGER NOT NULL,
    findings INTEGER NOT NULL,
    severity TEXT NOT NULL,
    state TEXT NOT NULL,
    quiet INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS alert_targets (
    name TEXT PRIMARY KEY,
    disabled_reason TEXT,
    disabled_ns INTEGER
);
CREATE TABLE IF NOT EXISTS incidents (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    cause TEXT NOT NULL,
    body TEXT NOT NULL,
    opened_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    resolved_ns INTEGER
);
CREATE TABLE IF NOT EXISTS incident_members (
    signal_id TEXT PRIMARY KEY,
    incident_id TEXT NOT NULL,
    joined_ns INTEGER NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS incident_members_by_incident ON incident_members (incident_id);
CREATE TABLE IF NOT EXISTS incident_history (
    id TEXT NOT NULL,
    at_ns INTEGER NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    reason TEXT NOT NULL
);
";

/// Columns that files written before `user_version` was kept (version 0)
/// may lack, because they were added to their table after it first
/// shipped: (table, column, declaration), in the order they were added.
/// Read from the history of the `CREATE TABLE`s and `ALTER TABLE`s.
pub const LEGACY_COLUMNS: &[(&str, &str, &str)] = &[
    ("outbox", "lease_until_ns", "INTEGER"),
    ("turn_days", "outcomes", "TEXT"),
    ("turn_days", "worst", "TEXT"),
    ("turn_days", "traffic", "TEXT"),
    ("turn_days", "read_through", "INTEGER"),
    ("turn_days", "computed_at_ns", "INTEGER"),
    ("turn_days", "valid_until_ns", "INTEGER"),
    ("turn_days", "turns", "TEXT"),
];

/// `import_files` as the first `import --follow` made it (before
/// `head_len` and `head_hash`, which sit before `updated_at`): rebuilt
/// rather than altered, so its columns end in the current order.
pub const IMPORT_FILES_REBUILD: &str = "
ALTER TABLE import_files RENAME TO import_files_v0;
CREATE TABLE import_files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    done INTEGER NOT NULL,
    head_len INTEGER NOT NULL DEFAULT 0,
    head_hash INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
INSERT INTO import_files (path, size, mtime_ns, offset, lines, done, updated_at)
    SELECT path, size, mtime_ns, offset, lines, done, updated_at FROM import_files_v0;
DROP TABLE import_files_v0;
";
