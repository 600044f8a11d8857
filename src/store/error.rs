//! The store's error: IO with what was being done (the `std::io::Error`
//! kept as the source), overload, and polars.

use std::sync::Arc;

/// Everything the store can fail with. Cloneable, because one group commit's
/// failure is reported to every request in the group.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path: "reading /data/…".
        context: String,
        /// The failure, typed (shared: the error is cloned to every request
        /// of a failed group commit).
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error(
        "the write path is full ({pending_bytes} bytes waiting); retry after {retry_after_secs} s"
    )]
    Overloaded {
        pending_bytes: usize,
        retry_after_secs: u64,
    },
    #[error("the store is shutting down")]
    Closed,
    #[error("the store refuses writes: {reason}; restart stormwatch (acknowledged spans are safe in the WAL)")]
    Unavailable { reason: String },
    #[error("data directory {dir} is in use by another stormwatch process (lock file {lock})")]
    Locked { dir: String, lock: String },
    #[error("{context}: {message}")]
    Data { context: String, message: String },
}

impl StoreError {
    /// An IO failure while doing `context`. An `std::io::Error` is kept as
    /// it is (its kind included); any other cause (a thread's, an object
    /// store's, a plain message) becomes the source of an
    /// `io::ErrorKind::Other` error.
    pub fn io(
        context: impl Into<String>,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        let source = match e.into().downcast::<std::io::Error>() {
            Ok(io) => *io,
            Err(other) => std::io::Error::other(other),
        };
        StoreError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    pub fn data(context: impl Into<String>, e: impl std::fmt::Display) -> StoreError {
        StoreError::Data {
            context: context.into(),
            message: e.to_string(),
        }
    }

    /// Whether a client should retry the same request later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Io { .. }
                | StoreError::Overloaded { .. }
                | StoreError::Closed
                | StoreError::Unavailable { .. }
        )
    }
}
