//! Bringing `state.sqlite` to [`VERSION`] by `PRAGMA user_version`: step
//! `i` of [`STEPS`] takes a file at version `i` to `i + 1`, all of them in
//! one IMMEDIATE transaction (two processes opening an old file at once:
//! the second waits, then finds it current). A file at [`VERSION`] is left
//! alone without taking the write lock; one at a higher version (written
//! by a newer build) too, as every step only adds.
//!
//! Version 0 is every file written before the version was kept (and a new,
//! empty one): its tables are whichever the stages that opened it created,
//! in the shape of the build that created them. Step 1 adopts it: the
//! tables it lacks created, `import_files` from the first build rebuilt,
//! the columns of [`schema::LEGACY_COLUMNS`] it lacks added. That step is
//! the only one that looks at columns; later steps are plain SQL.

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::schema;

type Step = fn(&Transaction<'_>) -> rusqlite::Result<()>;

/// The steps, in order: `STEPS[i]` takes version `i` to `i + 1`.
const STEPS: &[Step] = &[adopt_legacy];

/// The schema version this build writes.
pub const VERSION: i64 = STEPS.len() as i64;

fn user_version(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Bring the file `c` is open on to [`VERSION`]. The error carries the
/// version the file was at.
pub fn migrate(c: &Connection) -> Result<(), (i64, rusqlite::Error)> {
    let seen = user_version(c).map_err(|e| (0, e))?;
    if seen >= VERSION {
        return Ok(());
    }
    let tx =
        Transaction::new_unchecked(c, TransactionBehavior::Immediate).map_err(|e| (seen, e))?;
    // Read again under the write lock: another process may have done it.
    let from = user_version(&tx).map_err(|e| (seen, e))?;
    for step in STEPS.iter().skip(from.max(0) as usize) {
        step(&tx).map_err(|e| (from, e))?;
    }
    if from < VERSION {
        tx.pragma_update(None, "user_version", VERSION)
            .map_err(|e| (from, e))?;
    }
    tx.commit().map_err(|e| (from, e))
}

fn has_table(c: &Connection, table: &str) -> rusqlite::Result<bool> {
    c.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([table])
}

fn has_column(c: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    c.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists([table, column])
}

/// 0 → 1: a file from before `user_version` (or a new one) to the schema
/// of version 1.
fn adopt_legacy(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    if has_table(tx, "import_files")? && !has_column(tx, "import_files", "head_len")? {
        tx.execute_batch(schema::IMPORT_FILES_REBUILD)?;
    }
    tx.execute_batch(schema::V1)?;
    for (table, column, decl) in schema::LEGACY_COLUMNS {
        if !has_column(tx, table, column)? {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        }
    }
    Ok(())
}
