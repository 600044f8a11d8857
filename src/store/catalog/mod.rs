//! catalog

pub mod commit;
pub mod dirty;
pub mod layout;
pub mod manifest;
pub mod retire;
pub mod rollup_set;
pub mod ship;
pub mod stage;
