//! maintain

pub mod compact;
pub mod flusher;
pub mod rollup;
pub mod seal;
pub mod sealer;
