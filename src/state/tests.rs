//! Every layout of `state.sqlite` the project shipped, built as those
//! builds left it (user_version 0, a row or two in each table), opened by
//! this build: the rows survive and the schema is a fresh file's.
//! The layouts are read from the history of the `CREATE TABLE`s and
//! `ALTER TABLE`s in `src/import/follow.rs`, `src/signal/state.rs`,
//! `src/alert/outbox.rs` and `src/incident/store.rs`.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::{migrate, open, VERSION};

/// What each shipped build added to a fresh file (its tables' `CREATE`s
/// and the `ALTER`s it ran when opening one), with a row or two for each
/// new table. A file created by build `k` and one upgraded through builds
/// 1..=k have the same columns in the same order, except `import_files`,
/// which an upgraded file keeps in build 1's shape (see [`upgraded_file`]).
const SHIPPED: &[(&str, &str)] = &[
    (
        "d088420 import --follow",
        "CREATE TABLE IF NOT EXISTS import_files (
             path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
             offset INTEGER NOT NULL, lines INTEGER NOT NULL, done INTEGER NOT NULL,
             updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));
         INSERT INTO import_files (path, size, mtime_ns, offset, lines, done) VALUES ('/in/a.jsonl', 10, 5, 10, 2, 1);",
    ),
    (
        "ee23b17 rewritten files",
        "DROP TABLE import_files;
         CREATE TABLE IF NOT EXISTS import_files (
             path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
             offset INTEGER NOT NULL, lines INTEGER NOT NULL, done INTEGER NOT NULL,
             head_len INTEGER NOT NULL DEFAULT 0, head_hash INTEGER NOT NULL DEFAULT 0,
             updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));
         INSERT INTO import_files (path, size, mtime_ns, offset, lines, done, head_len, head_hash)
             VALUES ('/in/a.jsonl', 10, 5, 10, 2, 1, 10, -77);",
    ),
    (
        "e02a57b signals",
        "CREATE TABLE IF NOT EXISTS signals (
             id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, state TEXT NOT NULL, draft TEXT NOT NULL,
             findings INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, clean_sweeps INTEGER NOT NULL DEFAULT 0,
             resolved_at_ns INTEGER, muted_until_ns INTEGER, mute_until_escalates INTEGER NOT NULL DEFAULT 0,
             mute_escalate_at INTEGER);
         CREATE TABLE IF NOT EXISTS signal_history (
             id TEXT NOT NULL, at_ns INTEGER NOT NULL, from_state TEXT, to_state TEXT NOT NULL, reason TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS sweeps (
             at_ns INTEGER NOT NULL, horizon_ns INTEGER NOT NULL, signals INTEGER NOT NULL, changes INTEGER NOT NULL);
         INSERT INTO signals (id, key, state, draft, findings, last_seen_ns) VALUES ('SW-BCDF', 'v1:k', 'new', '{}', 3, 7);
         INSERT INTO signals (id, key, state, draft, findings, last_seen_ns, muted_until_ns, mute_until_escalates)
             VALUES ('SW-GHJK', 'v1:m', 'muted', '{}', 1, 8, 99, 1);
         INSERT INTO signal_history VALUES ('SW-BCDF', 7, NULL, 'new', 'first finding');
         INSERT INTO sweeps VALUES (9, 7, 2, 1);",
    ),
    (
        "be3780c turn_days",
        "CREATE TABLE IF NOT EXISTS turn_days (
             day INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, findings TEXT NOT NULL,
             horizon_ns INTEGER NOT NULL, spans INTEGER NOT NULL);
         INSERT INTO turn_days VALUES (20000, 'fp', '[]', 5, 12);",
    ),
    (
        "578abd5 the outbox",
        "CREATE TABLE IF NOT EXISTS outbox (
             id INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT NOT NULL UNIQUE, target TEXT NOT NULL,
             signals TEXT NOT NULL, body TEXT NOT NULL, created_ns INTEGER NOT NULL,
             attempts INTEGER NOT NULL DEFAULT 0, next_at_ns INTEGER NOT NULL, status TEXT NOT NULL,
             last_error TEXT, done_ns INTEGER);
         CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (target, status, id);
         CREATE TABLE IF NOT EXISTS alert_told (
             signal_id TEXT PRIMARY KEY, last_ns INTEGER NOT NULL, last_fire_ns INTEGER NOT NULL,
             findings INTEGER NOT NULL, quiet INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS alert_targets (name TEXT PRIMARY KEY, disabled_reason TEXT, disabled_ns INTEGER);
         INSERT INTO outbox (webhook_id, target, signals, body, created_ns, next_at_ns, status)
             VALUES ('msg_1', 'slack', '[\"SW-BCDF\"]', '{}', 1, 2, 'pending');
         INSERT INTO alert_told VALUES ('SW-BCDF', 1, 1, 3, 0);
         INSERT INTO alert_targets VALUES ('slack', 'HTTP 410', 4);",
    ),
    (
        "bd640a5 outbox lease",
        "ALTER TABLE outbox ADD COLUMN lease_until_ns INTEGER;
         UPDATE outbox SET lease_until_ns = 3;",
    ),
    (
        "6c25093 retry outcomes",
        "CREATE TABLE IF NOT EXISTS retry_outcomes (
             day INTEGER NOT NULL, tool TEXT NOT NULL, retries INTEGER NOT NULL, rescued INTEGER NOT NULL,
             wasted INTEGER NOT NULL, after_success INTEGER NOT NULL, wasted_seconds REAL NOT NULL,
             wasted_cost_usd REAL NOT NULL, PRIMARY KEY (day, tool));
         ALTER TABLE turn_days ADD COLUMN outcomes TEXT;
         INSERT INTO retry_outcomes VALUES (20000, 'search', 4, 1, 3, 0, 2.5, 0.01);
         UPDATE turn_days SET outcomes = '[]';",
    ),
    (
        "2f4a14a worst turn",
        "ALTER TABLE turn_days ADD COLUMN worst TEXT;",
    ),
    (
        "7beab68 traffic",
        "ALTER TABLE turn_days ADD COLUMN traffic TEXT;
         ALTER TABLE turn_days ADD COLUMN read_through INTEGER;
         UPDATE turn_days SET traffic = '{}', read_through = 20001;",
    ),
    (
        "2a87823 provisional days",
        "ALTER TABLE turn_days ADD COLUMN computed_at_ns INTEGER;
         ALTER TABLE turn_days ADD COLUMN valid_until_ns INTEGER;
         INSERT INTO turn_days (day, fingerprint, findings, horizon_ns, spans, computed_at_ns, valid_until_ns)
             VALUES (20001, 'fp2', '[]', 6, 3, 10, 20);",
    ),
    (
        "3e6be66 incidents",
        "CREATE TABLE IF NOT EXISTS incidents (
             id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, state TEXT NOT NULL, cause TEXT NOT NULL,
             body TEXT NOT NULL, opened_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL, resolved_ns INTEGER);
         CREATE TABLE IF NOT EXISTS incident_members (
             signal_id TEXT PRIMARY KEY, incident_id TEXT NOT NULL, joined_ns INTEGER NOT NULL, reason TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS incident_members_by_incident ON incident_members (incident_id);
         CREATE TABLE IF NOT EXISTS incident_history (
             id TEXT NOT NULL, at_ns INTEGER NOT NULL, from_state TEXT, to_state TEXT NOT NULL, reason TEXT NOT NULL);
         INSERT INTO incidents VALUES ('INC-BCDF', 'inc1:tool:search', 'open', '{}', '{}', 1, 2, NULL);
         INSERT INTO incident_members VALUES ('SW-BCDF', 'INC-BCDF', 1, 'same tool');
         INSERT INTO incident_history VALUES ('INC-BCDF', 1, NULL, 'open', 'first member');",
    ),
    (
        "c09ed19 incident alerts",
        "CREATE TABLE IF NOT EXISTS alert_incident_told (
             incident_id TEXT PRIMARY KEY, last_ns INTEGER NOT NULL, last_fire_ns INTEGER NOT NULL,
             findings INTEGER NOT NULL, severity TEXT NOT NULL, state TEXT NOT NULL, quiet INTEGER NOT NULL);
         INSERT INTO alert_incident_told VALUES ('INC-BCDF', 1, 1, 3, 'high', 'open', 0);",
    ),
    (
        "6934945 silent tools",
        "ALTER TABLE turn_days ADD COLUMN turns TEXT;
         UPDATE turn_days SET turns = '[]' WHERE day = 20001;",
    ),
];

/// Every table's and index's shape: columns in order (name, type, not
/// null, default, primary key) and each index's columns.
fn shape(c: &Connection) -> BTreeMap<String, Vec<String>> {
    let names: Vec<(String, String)> = c
        .prepare(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    names
        .into_iter()
        .map(|(kind, name)| {
            let sql = if kind == "table" {
                "SELECT name || ' ' || type || ' ' || \"notnull\" || ' ' || coalesce(dflt_value, '-') || ' ' || pk \
                 FROM pragma_table_info(?1) ORDER BY cid"
            } else {
                "SELECT coalesce(name, '?') FROM pragma_index_info(?1) ORDER BY seqno"
            };
            let cols: Vec<String> = c
                .prepare(sql)
                .unwrap()
                .query_map([&name], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            (format!("{kind} {name}"), cols)
        })
        .collect()
}

/// Every row of every table, each value as text, by column name.
fn rows(c: &Connection) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut stmt = c.prepare(&format!("SELECT * FROM {t} ORDER BY 1")).unwrap();
        let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
        let list = stmt
            .query_map([], |r| {
                let mut row = BTreeMap::new();
                for (i, n) in names.iter().enumerate() {
                    let v: rusqlite::types::Value = r.get(i)?;
                    row.insert(n.clone(), format!("{v:?}"));
                }
                Ok(row)
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap();
        out.insert(t, list);
    }
    out
}

fn fresh_shape() -> BTreeMap<String, Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let c = open(&dir.path().join("state.sqlite"), std::time::Duration::ZERO).unwrap();
    shape(&c)
}

fn user_version(c: &Connection) -> i64 {
    c.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Open the file `build` made with this build; check what survived.
fn check_upgrade(path: &std::path::Path, label: &str) {
    let before = rows(&Connection::open(path).unwrap());
    let c = open(path, std::time::Duration::ZERO).unwrap();
    assert_eq!(user_version(&c), VERSION, "{label}");
    assert_eq!(
        shape(&c),
        fresh_shape(),
        "{label}: the schema is a fresh file's"
    );
    let after = rows(&c);
    for (table, list) in &before {
        let got = &after[table];
        assert_eq!(got.len(), list.len(), "{label}: rows of {table}");
        for (old, new) in list.iter().zip(got) {
            for (col, v) in old {
                assert_eq!(&new[col], v, "{label}: {table}.{col}");
            }
        }
    }
    // Opened again: nothing more to do, nothing changes.
    drop(c);
    let again = open(path, std::time::Duration::ZERO).unwrap();
    assert_eq!(
        rows(&again),
        after,
        "{label}: a second open changes nothing"
    );
}

#[test]
fn a_fresh_file_is_at_the_current_version() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(&dir.path().join("state.sqlite"), std::time::Duration::ZERO).unwrap();
    assert_eq!(user_version(&c), VERSION);
    assert_eq!(shape(&c), shape(&super::open_in_memory().unwrap()));
    assert_eq!(
        shape(&c).len(),
        15,
        "13 tables and 2 indexes: {:?}",
        shape(&c).keys()
    );
}

#[test]
fn every_shipped_layout_opens_with_its_rows_and_the_current_schema() {
    for k in 1..=SHIPPED.len() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        {
            // The file as build k leaves a fresh one: its rows added as
            // the builds up to it would.
            let c = Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
            for (_, sql) in &SHIPPED[..k] {
                c.execute_batch(sql).unwrap();
            }
            assert_eq!(user_version(&c), 0);
        }
        check_upgrade(&path, SHIPPED[k - 1].0);
    }
}

/// A file the first `import --follow` made, then opened by every later
/// build: `import_files` kept build 1's columns (later builds only
/// created it if missing), and gets `head_len` and `head_hash` now.
#[test]
fn an_upgraded_file_keeps_the_first_import_files_and_gets_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(SHIPPED[0].1).unwrap();
        for (_, sql) in &SHIPPED[2..] {
            c.execute_batch(sql).unwrap();
        }
    }
    check_upgrade(&path, "upgraded through every build");
    let c = Connection::open(&path).unwrap();
    let head: (i64, i64) = c
        .query_row("SELECT head_len, head_hash FROM import_files", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(head, (0, 0), "as build 2 read a row without them");
}

/// Each stage created only its own tables: a file only the sweep opened
/// (no outbox, no import_files) gets the rest.
#[test]
fn a_file_one_stage_made_gets_the_other_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        for i in [2, 3, 6, 7, 8, 9, 10, 12] {
            let sql = SHIPPED[i].1;
            if !sql.contains("outbox") {
                c.execute_batch(sql).unwrap();
            }
        }
    }
    check_upgrade(&path, "sweep only");
}

#[test]
fn a_file_from_a_newer_build_is_left_alone() {
    let c = Connection::open_in_memory().unwrap();
    c.pragma_update(None, "user_version", VERSION + 1).unwrap();
    migrate(&c).unwrap();
    assert_eq!(user_version(&c), VERSION + 1);
    let tables: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 0);
}
