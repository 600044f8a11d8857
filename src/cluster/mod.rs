//! The shared store on object storage (`--store s3://bucket/prefix`): where
//! ingest nodes ship the parts they flush, and where the detect role finds
//! every node's parts, seals days, and keeps its lease and its state.
//!
//! Layout under the prefix (every name written once, except the three small
//! documents written with a conditional put):
//!
//! ```text
//! spans/date=YYYY-MM-DD/part-<node>-<ns>-<rand>.parquet   a node's flush, never overwritten
//! spans/date=YYYY-MM-DD/part-<stamp>-<n>-s.parquet        a seal's output (the detect role)
//! spans/date=YYYY-MM-DD/_sealed.json                      which parts a seal replaced (If-Match)
//! lease.json                                              who detects, generation (If-None-Match / If-Match)
//! state/state.sqlite                                      the detect role's state (If-Match)
//! ```
//!
//! A day's live parts are its listing, less the parts its `_sealed.json`
//! names as replaced (its ledger, [`ledger`]). Nodes only add parts; only the lease
//! holder replaces or deletes anything.
//!
//! One file per piece, each a role of a node or a document of the store:
//!
//! - [`client`]: the object store client (the prefix, conditional puts,
//!   uploads, downloads, listings).
//! - [`keys`]: the names under the prefix (days, parts, node ids).
//! - [`ship`]: an ingest node's flushes shipped (the store's
//!   [`Shipper`](crate::store::hooks::Shipper)).
//! - [`mirror`]: the detect role's copy pulled (the store's
//!   [`Upstream`](crate::store::hooks::Upstream)).
//! - [`holder`]: what the lease holder writes there: seals published,
//!   replaced parts deleted after the grace, retention.
//! - [`ledger`]: a day's ledger (`_sealed.json`), and the day's live parts.
//! - [`lease`]: `lease.json`, who detects.
//! - [`leader`]: the detect role's state shipped and read in, and the gate
//!   its alert sender asks.
//! - [`fence`]: the check its sweeps make before they commit (the store's
//!   [`Fence`](crate::store::hooks::Fence)).
//!
//! Errors are one [`ClusterError`], with its source; the store's hooks
//! report it as a store error.
//!
//! The store knows none of this: it calls the hooks it defines
//! ([`crate::store::hooks`]), and this module implements them.

pub mod client;
mod error;
pub mod fence;
pub mod holder;
pub mod keys;
pub mod leader;
pub mod lease;
pub mod ledger;
pub mod mirror;
pub mod ship;
pub mod sync;

#[cfg(test)]
mod tests;

pub use client::Remote;
pub use error::ClusterError;
pub use keys::check_node_id;
