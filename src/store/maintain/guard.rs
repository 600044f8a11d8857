//! Maintenance tasks run guarded: a panic in one is logged, counted per
//! task ([`Task`]) and survived; the flusher carries on.

use std::sync::atomic::Ordering;

use crate::store::Shared;

/// The text of a caught panic.
pub(in crate::store) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The flusher's maintenance tasks, each guarded on its own.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Task {
    Compact = 0,
    Rollup = 1,
    Retention = 2,
}

impl Task {
    fn name(self) -> &'static str {
        crate::store::MAINTENANCE_TASKS[self as usize]
    }
}

/// Run a maintenance task; a panic in it is logged, counted, and survived
/// (the files stay as the last commit left them; the task runs again later).
pub(in crate::store) fn guarded(shared: &Shared, task: Task, f: impl FnOnce()) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        shared.stats.maintenance_panics[task as usize].fetch_add(1, Ordering::Relaxed);
        tracing::error!(task = task.name(), panic = %panic_text(p.as_ref()), "a store maintenance task panicked; skipped, the flusher carries on");
    }
}
