//! Which files are live, and how that changes: the directory layout
//! ([`layout`]), each day's part manifest ([`manifest`]), intents and
//! their commit ([`commit`]), the rollups' generations ([`rollup_set`])
//! and stale days ([`dirty`]), staging new parts ([`stage`]), retiring
//! replaced files behind readers' pins ([`retire`]), and the hook a commit
//! ships parts through ([`ship`]); the day summaries a sweep hands over
//! ([`summary`]); the [`handle::Catalog`] holding the layout, the commit
//! lock and the retire state of one open directory.

pub mod commit;
pub mod dirty;
pub mod handle;
pub mod layout;
pub mod manifest;
pub mod retire;
pub mod rollup_set;
pub mod ship;
pub mod stage;
pub mod summary;
