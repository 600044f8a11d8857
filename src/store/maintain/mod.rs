//! The flusher thread and what it runs: flushes and the task loop
//! ([`flusher`]), merging small parts ([`compact`]), seal compaction
//! ([`seal`]) and when to run it ([`sealer`]), and the rollup refresh
//! ([`rollup`]).

pub mod compact;
pub mod flush;
pub mod flusher;
pub mod guard;
pub mod retention;
pub mod rollup;
pub mod seal;
pub mod sealer;
