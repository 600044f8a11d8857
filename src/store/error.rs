//! The store's error: IO with what was being done, overload, and polars.

/// Everything the store can fail with. Cloneable, because one group commit's
/// failure is reported to every request in the group.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("{context}: {message}")]
    Io { context: String, message: String },
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
    pub fn io(context: impl Into<String>, e: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            context: context.into(),
            message: e.to_string(),
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
