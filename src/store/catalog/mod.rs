//! catalog

pub mod commit;
pub mod layout;
pub mod manifest;
pub mod retire;
pub mod rollup_set;
