//! Recovery on open: finish an interrupted commit, then replay the WAL into
//! the memtable with the writer's dedup. Only a torn final write of the
//! newest segment is cut ([`wal`]'s rules); damage anywhere else fails the
//! open with an error naming the file and byte, so the process does not
//! start. A long WAL is replayed in chunks:
//! whenever the memtable reaches a flush limit it is written to parts and
//! committed, so memory stays within the memtable's bounds. A chunk's
//! commit deletes only the segments read to their end; the segment being
//! read stays until a later commit covers it (a crash mid-replay replays it
//! again, and dedup against the committed parts drops what is already in).

use std::sync::atomic::Ordering;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::store::write::frozen::Frozen;
use crate::store::write::memtable::{Memtable, Seen};
use crate::store::write::wal::{self, Wal};
use crate::store::write::writer::{insert_batch, load_days, WriterState};
use crate::store::{maintain::compact, Recovery, Shared, StoreError};

/// Attempts a chunk's flush gets before the open fails.
const CHUNK_ATTEMPTS: u32 = 5;

/// Finish an interrupted commit and replay the WAL into a memtable.
pub fn recover(shared: &Shared) -> Result<(WriterState, Recovery), StoreError> {
    let layout = shared.layout();
    let mut report = Recovery {
        finished_commit: crate::store::catalog::commit::recover(&shared.catalog)?,
        ..Recovery::default()
    };
    let mut mem = Memtable::default();
    let mut seen = Seen::new(shared.opts.dedup_days);
    let wal_dir = layout.wal_dir();
    let seqs = wal::list(&wal_dir)?;
    for (i, &seq) in seqs.iter().enumerate() {
        let newest = i + 1 == seqs.len();
        let segment = wal::read_segment(&wal_dir, seq, newest)?;
        report.segments += 1;
        if let Some(torn) = &segment.torn {
            report.torn_tails += 1;
            tracing::warn!(
                segment = seq,
                offset = torn.at,
                cut_bytes = torn.bytes,
                found = %torn.what,
                "cut a torn record group off the end of the WAL (a write interrupted before it was acknowledged)"
            );
        }
        for record in &segment.records {
            report.records += 1;
            match ExportTraceServiceRequest::decode(record.as_slice()) {
                Ok(req) => {
                    let batch = crate::ingest::normalize_with(
                        &req,
                        &crate::ingest::Window::unbounded(),
                        &shared.opts.result_shapes,
                    )
                    .batch;
                    load_days(shared, &mut seen, &mem, None, &batch)?;
                    let (stored, _) = insert_batch(&mut mem, &mut seen, &batch);
                    report.spans += stored;
                    shared
                        .stats
                        .memtable_rows_peak
                        .fetch_max(mem.rows, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::error!(segment = seq, error = %e, "a WAL record passed its CRC but does not decode; skipped")
                }
            }
            // Segments before this one are wholly in parts or in `mem`.
            if let Some(upto) = seq.checked_sub(1).filter(|_| over_limit(shared, &mem)) {
                flush_chunk(shared, &mut mem, upto)?;
                report.flushes += 1;
            }
        }
    }
    let wal = Wal::create(&wal_dir, seqs.last().copied().unwrap_or(0))?;
    shared
        .stats
        .memtable_rows
        .store(mem.rows, Ordering::Relaxed);
    Ok((WriterState { wal, mem, seen }, report))
}

/// Whether the replayed memtable reached a limit a flush would have had.
fn over_limit(shared: &Shared, mem: &Memtable) -> bool {
    let o = &shared.opts;
    mem.rows >= o.flush_rows || mem.bytes >= o.flush_bytes.min(o.max_memory_bytes)
}

/// Write the memtable to parts and commit them with the WAL segments up to
/// `wal_upto`; retried with backoff a few times, then the open fails (the
/// WAL keeps everything).
fn flush_chunk(shared: &Shared, mem: &mut Memtable, wal_upto: u64) -> Result<(), StoreError> {
    let o = &shared.opts;
    let frozen = Frozen::new(
        mem.take(o.flush_bytes.min(o.max_memory_bytes) / 2),
        wal_upto,
    );
    let mut attempt = 0;
    loop {
        attempt += 1;
        match crate::store::maintain::flush::flush(shared, &frozen) {
            Ok(()) => break,
            Err(e) if attempt >= CHUNK_ATTEMPTS => {
                return Err(StoreError::io(
                    "flushing replayed WAL records",
                    format!("{e} (after {attempt} attempts; the WAL keeps the spans)"),
                ))
            }
            Err(e) => {
                let delay = crate::retry::full_jitter(
                    Duration::from_millis(200),
                    Duration::from_secs(5),
                    attempt,
                );
                tracing::warn!(error = %e, attempt, "flushing replayed WAL records failed; retrying");
                std::thread::sleep(delay);
            }
        }
    }
    shared.stats.flushes.fetch_add(1, Ordering::Relaxed);
    let days = frozen.days();
    compact::compact_days(shared, &days);
    Ok(())
}
