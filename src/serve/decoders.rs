//! The threads that decode and normalize export bodies (`otlp::store_body`,
//! both transports): a fixed set, one per core, instead of the runtime's
//! blocking pool.
//!
//! The blocking pool starts a thread whenever a task arrives and none is
//! idle at that instant, up to 512, and keeps each for 10 s; under the
//! overload test (twelve clients on two cores) it grew to about twenty
//! threads that all decoded, more with the CPU shared. Each thread that
//! allocates has its own mimalloc heap, which keeps pages of what it freed
//! for reuse, so the process held those pages once per thread: capping the
//! threads lowered that test's peak RSS by about 20-40 MiB (BENCHMARKS.md,
//! "Overload"). Decoding is CPU work only, so more threads than cores add
//! memory, not throughput.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed pool of decoding threads fed by one queue.
pub struct Decoders {
    jobs: Sender<Job>,
    threads: usize,
}

impl Decoders {
    /// Start `threads` threads (at least one). A thread the system refuses
    /// is done without; with none at all, [`Decoders::run`] falls back to
    /// the runtime's blocking pool.
    pub fn start(threads: usize) -> Decoders {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut started = 0;
        for i in 0..threads.max(1) {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("stormwatch-decode-{i}"))
                .spawn(move || work(&queue));
            match spawned {
                Ok(_) => started += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "could not start a decoding thread; decoding on fewer")
                }
            }
        }
        Decoders {
            jobs,
            threads: started,
        }
    }

    /// The process's pool: one thread per core the process may use.
    pub fn shared() -> &'static Decoders {
        static SHARED: OnceLock<Decoders> = OnceLock::new();
        SHARED.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            Decoders::start(cores)
        })
    }

    /// Threads running.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Run `f` on a decoding thread and wait for its result; `Err` with
    /// the panic's text when it panicked.
    pub async fn run<T, F>(&self, f: F) -> Result<T, DecoderError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        if self.threads == 0 {
            return Ok(tokio::task::spawn_blocking(f).await?);
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|p| DecoderError::Panicked(panic_text(p.as_ref())));
            // The caller may have gone (its client disconnected): the
            // result is dropped here, on this thread, like its input.
            let _ = tx.send(out);
        });
        self.jobs.send(job).map_err(|_| DecoderError::Stopped)?;
        rx.await.map_err(|_| DecoderError::Dropped)?
    }
}

/// A job that did not give its result.
#[derive(Debug, thiserror::Error)]
pub enum DecoderError {
    /// It panicked: the panic's text.
    #[error("{0}")]
    Panicked(String),
    /// It panicked on the blocking pool (no decoding threads).
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
    #[error("the decoding threads have stopped")]
    Stopped,
    #[error("the decoding thread dropped the job")]
    Dropped,
}

/// Run `f` on one of the process's decoding threads ([`Decoders::shared`]).
pub async fn run<T, F>(f: F) -> Result<T, DecoderError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    Decoders::shared().run(f).await
}

/// A decoding thread: take jobs until the pool is dropped.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_on_its_own_threads_and_survives_a_panic() {
        let pool = Decoders::start(2);
        assert_eq!(pool.threads(), 2);
        let name = pool
            .run(|| std::thread::current().name().map(str::to_string))
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("stormwatch-decode-"));
        let failed = pool.run(|| -> u32 { panic!("bad body") }).await;
        assert_eq!(
            failed.map_err(|e| e.to_string()),
            Err("bad body".to_string())
        );
        // Both threads are still there after the panic.
        let names: std::collections::BTreeSet<_> = futures::future::join_all((0..16).map(|_| {
            pool.run(|| {
                std::thread::sleep(std::time::Duration::from_millis(5));
                std::thread::current().name().map(str::to_string)
            })
        }))
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap())
        .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[tokio::test]
    async fn at_most_as_many_jobs_run_at_once_as_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pool = Decoders::start(3);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs = (0..24).map(|_| {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            pool.run(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
            })
        });
        for r in futures::future::join_all(jobs).await {
            r.unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 3);
    }
}
