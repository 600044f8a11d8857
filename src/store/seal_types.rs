//! What a seal compaction ([`super::maintain::seal`]) is told and what it
//! reports: types the store's options and the cluster's hooks name too.

/// How seal compaction sizes its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealOptions {
    /// Rows of one sub-range, sorted in memory (a trace is never split, so
    /// a sub-range holding one larger trace is as large as that trace).
    pub range_rows: usize,
    /// Rows of an output row group: each holds from half this to this,
    /// but the only group of a smaller file.
    pub row_group_rows: usize,
}

impl Default for SealOptions {
    fn default() -> Self {
        SealOptions {
            range_rows: 150_000,
            row_group_rows: 128 * 1024,
        }
    }
}

/// What became of the day's summary manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestUpdate {
    /// There is none.
    Absent,
    /// It named exactly the sources and no row was dropped: it now names the outputs.
    Carried,
    /// Left as it was (built from other parts, or duplicates were dropped):
    /// the summary is stale and is rebuilt by its owner.
    Stale,
}

/// What one seal compaction did; paths relative to the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealReport {
    pub sources: Vec<String>,
    pub outputs: Vec<String>,
    /// Rows written.
    pub rows: usize,
    /// Rows dropped as repeats of a (trace_id, span_id) seen before.
    pub duplicates: usize,
    pub sub_ranges: usize,
    pub manifest: ManifestUpdate,
}
