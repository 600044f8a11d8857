//! Running a built [`Server`]: its tasks (the three servers, the sweep
//! schedule, the lease and state keeper, one alert sender per target) on
//! task sets, until a cancellation token fires; then the shutdown, in
//! order: the senders stop (undelivered alerts stay in the outbox), the
//! servers finish their in-flight requests, a running sweep finishes, the
//! keeper ships the state a last time, and the stores close (final flush),
//! all within the shutdown timeout (the flush gets at least a second).

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio_util::sync::CancellationToken;

use super::build::{Senders, Server};
use super::{conn, grpc};
use crate::store::Store;

impl Server {
    /// Serve until `stop` is cancelled, then shut down (see the module doc).
    pub async fn run(self, stop: CancellationToken) -> anyhow::Result<()> {
        // Every connection is guarded: a cap per peer, header and idle time
        // limits (`conn`); the apps see each request in flight.
        let guarded = |l, port| {
            conn::GuardedListener::new(l, port, self.conn_limits, Arc::clone(&self.connections))
        };
        let tracked = |app: Router| {
            app.layer(axum::middleware::from_fn(conn::track))
                .into_make_service_with_connect_info::<conn::Peer>()
        };
        let mut serving = Tasks::default();
        if let Some((l, app)) = self.otlp {
            serving.spawn(
                axum::serve(guarded(l, conn::Port::OtlpHttp), tracked(app))
                    .with_graceful_shutdown(stop.clone().cancelled_owned())
                    .into_future(),
            );
        }
        if let Some((l, service)) = self.grpc {
            let server = grpc::server()
                .add_routes(grpc::routes(service))
                .serve_with_incoming_shutdown(
                    guarded(l, conn::Port::OtlpGrpc).into_incoming(),
                    stop.clone().cancelled_owned(),
                );
            serving.spawn(async move {
                if let Err(e) = server.await {
                    tracing::error!(error = %e, "the OTLP/gRPC server stopped with an error");
                }
            });
        }
        let (l, app) = self.http;
        serving.spawn(
            axum::serve(guarded(l, conn::Port::Http), tracked(app))
                .with_graceful_shutdown(stop.clone().cancelled_owned())
                .into_future(),
        );
        if let Some(every) = self.sweep_interval {
            tracing::info!(every_s = every.as_secs(), "sweeps scheduled");
            serving.spawn(Arc::clone(&self.sweeper).run_schedule(every, stop.clone()));
        }
        let mut keeper = Tasks::default();
        if let Some(l) = &self.leader {
            keeper.spawn(Arc::clone(l).run(self.state_sync, stop.clone()));
        }
        // The senders' connection, kept here so that it is closed on a
        // blocking thread once they stopped (closing may checkpoint the WAL).
        let mut senders = Tasks::default();
        let outbox_db = self.senders.map(|s| {
            let db = Arc::clone(&s.sender.db);
            spawn_senders(&mut senders, s, &stop);
            db
        });
        stop.cancelled().await;
        // Undelivered alerts stay in the outbox for the next start.
        senders.wait().await;
        if let Some(db) = outbox_db {
            let _ = tokio::task::spawn_blocking(move || drop(db)).await;
        }
        tracing::info!("shutting down: finishing in-flight requests and flushing");
        // One deadline for all of it: requests, a running sweep, the final flush.
        let deadline = tokio::time::Instant::now() + self.shutdown_timeout;
        let drained = tokio::time::timeout_at(deadline, async {
            serving.wait().await;
            // A sweep in progress finishes (its state commit is one transaction).
            self.sweeper.wait_idle().await;
            // The holder ships its state a last time and releases the lease.
            keeper.wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(timeout_s = self.shutdown_timeout.as_secs(), "in-flight requests did not finish in time; closing anyway (unacknowledged requests are retried by exporters)");
        }
        close_stores(self.ingest, self.detect, deadline).await;
        Ok(())
    }
}

/// One sender per target, each stopped where it is when `stop` fires.
fn spawn_senders(tracker: &mut Tasks, s: Senders, stop: &CancellationToken) {
    let n = s.targets.len();
    for t in s.targets {
        let sender = s.sender.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            let name = t.name.clone();
            let mode = crate::alert::Mode::Forever {
                poll: Duration::from_secs(5),
            };
            tokio::select! {
                r = sender.run(t, mode) => if let Err(e) = r {
                    tracing::error!(target = %name, error = %e, "alert sender stopped");
                },
                () = stop.cancelled() => {}
            }
        });
    }
    tracing::info!(targets = n, "alert sender running");
}

/// Tasks started together and awaited together, on tokio's `JoinSet`: one
/// still running when the set is dropped (the shutdown's deadline passed)
/// is left to finish on its own, not aborted.
#[derive(Default)]
struct Tasks(tokio::task::JoinSet<()>);

impl Tasks {
    /// Start `task`; its output is not kept.
    fn spawn<F>(&mut self, task: F)
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send,
    {
        self.0.spawn(async move {
            let _ = task.await;
        });
    }

    /// Until every task has ended.
    async fn wait(&mut self) {
        while self.0.join_next().await.is_some() {}
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.detach_all();
    }
}

/// Close both stores (an `all` node over a shared store has two) on a
/// blocking thread, by `deadline` or at least a second from now; the first
/// error is the one reported.
async fn close_stores(
    ingest: Option<Arc<Store>>,
    detect: Option<Arc<Store>>,
    deadline: tokio::time::Instant,
) {
    let closing = tokio::task::spawn_blocking(move || {
        let a = ingest.map_or(Ok(()), |s| s.close());
        let b = detect.map_or(Ok(()), |s| s.close());
        a.and(b)
    });
    // The flush gets what is left, and at least a second to try.
    let flush_by = deadline.max(tokio::time::Instant::now() + Duration::from_secs(1));
    match tokio::time::timeout_at(flush_by, closing).await {
        Ok(Ok(Ok(()))) => tracing::info!("store flushed and closed"),
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "final flush failed; the spans stay in the WAL and are recovered on the next start"),
        Ok(Err(e)) => tracing::error!(error = %e, "closing the store panicked"),
        Err(_) => tracing::error!("final flush did not finish in time; the spans stay in the WAL and are recovered on the next start"),
    }
}
