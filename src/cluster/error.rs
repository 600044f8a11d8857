//! The one error of the shared store and its roles: what was being done,
//! and the error underneath as its source.
//!
//! Each message reads as it did when these were store errors (the cause's
//! text is part of it, on one line, as logs show it); the cause is also the
//! error's `source()`. Where a hook of the store reports it, it becomes the
//! store's error (`From<ClusterError> for StoreError`) with the same text
//! and the same transience; the CLI prints it as text.

use crate::store::StoreError;

/// Everything the shared store and the roles over it can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A request to the object store failed (after its own retries).
    #[error("{context}: {}", one_line(source))]
    Request {
        context: String,
        #[source]
        source: object_store::Error,
    },
    /// The object store client could not be built from `--store` and the
    /// environment.
    #[error("{context}: {source}")]
    Client {
        context: String,
        #[source]
        source: object_store::Error,
    },
    /// `--store` is no shared store address.
    #[error("{context}: {message}")]
    Address { context: String, message: String },
    /// The shared store cannot be read at start: what to check, and why.
    #[error("{context}: {hint} ({source})")]
    Unreachable {
        context: String,
        hint: String,
        #[source]
        source: Box<ClusterError>,
    },
    /// A local file (read, written, uploaded or downloaded).
    #[error("{context}: {source}")]
    File {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// An upload that failed part-way (the object store's words inside).
    #[error("{context}: {}", one_line(source))]
    Upload {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A document on the shared store that does not read (or encode).
    #[error("{context}: {source}")]
    Document {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// The detect role's state database.
    #[error("{context}: {source}")]
    State {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A seal dropped: the lease was lost, or the day changed on the
    /// shared store while it was sealed.
    #[error("{context}: {reason}")]
    Dropped {
        context: String,
        reason: &'static str,
    },
    /// A node id that cannot go into part names.
    #[error("{0}")]
    NodeId(String),
    /// The local copy under a role failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClusterError {
    pub(crate) fn file(context: impl Into<String>, source: std::io::Error) -> ClusterError {
        ClusterError::File {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn document(context: impl Into<String>, source: serde_json::Error) -> ClusterError {
        ClusterError::Document {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn state(context: impl Into<String>, source: rusqlite::Error) -> ClusterError {
        ClusterError::State {
            context: context.into(),
            source,
        }
    }
}

/// A cluster error as the store reports it: the same text; IO (a retry may
/// do) or data (it will not) as before.
impl From<ClusterError> for StoreError {
    fn from(e: ClusterError) -> StoreError {
        use ClusterError as C;
        match e {
            C::Request { context, source } => StoreError::io(context, one_line(&source)),
            C::Upload { context, source } => StoreError::io(context, one_line(&source)),
            C::File { context, source } => StoreError::io(context, source),
            C::State { context, source } => StoreError::io(context, source),
            C::Unreachable {
                context,
                hint,
                source,
            } => StoreError::io(context, format!("{hint} ({source})")),
            C::Client { context, source } => StoreError::data(context, source),
            C::Address { context, message } => StoreError::data(context, message),
            C::Document { context, source } => StoreError::data(context, source),
            C::Dropped { context, reason } => StoreError::data(context, reason),
            C::NodeId(message) => StoreError::data("--node-id", message),
            C::Store(e) => e,
        }
    }
}

/// An error as one log line: the S3 answers object_store quotes are XML
/// over several lines.
pub(crate) fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
