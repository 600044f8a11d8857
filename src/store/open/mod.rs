//! open

pub mod replay;
