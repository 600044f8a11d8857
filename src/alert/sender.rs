//! The sender: works the outbox, one task per target so a slow or throttled
//! target never holds up the others. Messages of a target go out in order,
//! at most one per `pace`; an attempt's answer is classified first
//! ([`policy::classify`]), then retried with full-jitter backoff, never
//! sooner than `Retry-After`, within a budget of attempts and age, or
//! dead-lettered, or the target disabled. Every give-up is one log line
//! with what was waited.
//!
//! No SQLite call runs on an async thread: every outbox read and write goes
//! through [`Sender::with_db`], which runs it on tokio's blocking pool
//! (`spawn_blocking`). A call may wait out the 10 s busy timeout there
//! (another process holding `state.sqlite`'s write lock, a sweep's
//! IMMEDIATE transaction) without taking a worker from OTLP ingest or the
//! dashboard; the connection's `Mutex` is only ever held on that pool.
//! A target's answer is read to [`BODY_CAP`] bytes at most (`answer`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rusqlite::Connection;
use tokio::time::Instant;

pub use super::answer::{Answer, BODY_CAP};

use super::answer;
use super::config::AlertConfig;
use super::outbox::{self, Row};
use super::policy::{self, Budget, Verdict};
use super::stats::Stats;
use super::target::{Target, TargetKind};

/// The sender's wall clock: the system clock, or (for tests on a paused
/// tokio clock) a start time plus tokio's virtual elapsed time.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    System,
    Virtual { wall: SystemTime, at: Instant },
}

impl Clock {
    /// A clock that follows tokio's (paused) time.
    pub fn virtual_start() -> Clock {
        Clock::Virtual {
            wall: SystemTime::now(),
            at: Instant::now(),
        }
    }

    pub fn now(&self) -> SystemTime {
        match self {
            Clock::System => SystemTime::now(),
            Clock::Virtual { wall, at } => *wall + at.elapsed(),
        }
    }

    pub fn now_ns(&self) -> i64 {
        self.now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }
}

/// How long a sender keeps going.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Until the outbox of the target is empty or only holds messages not
    /// due within `wait` (`alerts flush`).
    Drain { wait: Duration },
    /// For as long as the process runs (`serve`), looking for new rows every
    /// `poll`.
    Forever { poll: Duration },
}

/// Why a sender stopped working a queue.
#[derive(Debug, thiserror::Error)]
pub enum SenderError {
    #[error("state file: {0}")]
    Db(#[from] rusqlite::Error),
    /// A SQLite call's blocking task panicked or was cancelled (the runtime
    /// shutting down).
    #[error("state file: the database call failed: {0}")]
    Thread(#[from] tokio::task::JoinError),
}

/// What may be sent now, for a sender that is not alone: the detect role
/// over a shared store sends only while it holds the lease, and only rows
/// its shipped state holds.
pub trait Gate: Send + Sync {
    /// The highest outbox row that may go out now; `None`: none may.
    fn may_send(&self) -> Option<i64>;
}

/// What a sender needs; cheap to clone into each target's task.
#[derive(Clone)]
pub struct Sender {
    pub db: Arc<Mutex<Connection>>,
    pub cfg: AlertConfig,
    pub client: reqwest::Client,
    pub clock: Clock,
    pub stats: Arc<Stats>,
    /// `None`: every pending row may go.
    pub gate: Option<Arc<dyn Gate>>,
    /// Where it may post: `[alert] allow_hosts` / `deny_hosts`, and not
    /// this process's own listeners (checked before every attempt).
    pub hosts: Arc<super::hosts::Guard>,
}

/// The HTTP client the sender uses: no redirects, a per-request timeout,
/// a DNS resolver that drops the addresses `deny_hosts` refuses.
pub fn client(cfg: &AlertConfig) -> reqwest::Client {
    let policy = Arc::new(cfg.host_policy());
    reqwest::Client::builder()
        .dns_resolver(Arc::new(super::hosts::Resolver(policy)))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("stormwatch/", env!("CARGO_PKG_VERSION")))
        .timeout(Duration::from_secs(cfg.request_timeout_secs))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

impl Sender {
    fn budget(&self) -> Budget {
        Budget {
            max_attempts: self.cfg.max_attempts,
            max_age: Duration::from_secs(self.cfg.max_age_secs),
            base: Duration::from_millis(self.cfg.backoff_base_ms),
            cap: Duration::from_secs(self.cfg.backoff_cap_secs),
        }
    }

    /// Run `f` on the connection, on tokio's blocking pool: it may wait on
    /// `state.sqlite`'s lock for the busy timeout, which must not take an
    /// async worker (OTLP acknowledgements and the dashboard run there).
    pub async fn with_db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, SenderError> {
        let db = Arc::clone(&self.db);
        let r = tokio::task::spawn_blocking(move || {
            let c = db.lock().unwrap_or_else(|e| e.into_inner());
            f(&c)
        })
        .await?;
        Ok(r?)
    }

    /// POST one message body to a target once (not at all to a host it
    /// may not post to: that attempt is a retry, its reason saying why). A
    /// PagerDuty event gets its `routing_key` here, from the resolved
    /// target, and only here: it is never stored, and a reason that would
    /// quote it shows `<routing key>` instead.
    pub async fn attempt(&self, target: &Target, webhook_id: &str, body: &str) -> Answer {
        if target.kind != TargetKind::PagerDuty {
            return self.post(target, webhook_id, body).await;
        }
        let dead = |reason: String| Answer {
            verdict: Verdict::Dead { reason },
            status: None,
        };
        let Some(key) = target.routing_key.as_deref() else {
            return dead("not sent: the target's routing key is not resolved".into());
        };
        let sent = match super::pagerduty::with_routing_key(body, key) {
            Ok(b) => b,
            Err(e) => return dead(format!("not sent: {e}")),
        };
        let mut answer = self.post(target, webhook_id, &sent).await;
        answer.verdict.redact(key, "<routing key>");
        answer
    }

    async fn post(&self, target: &Target, webhook_id: &str, body: &str) -> Answer {
        if let Err(why) = self.hosts.check(&target.url).await {
            return Answer {
                verdict: Verdict::Retry {
                    after: None,
                    reason: format!("not sent: {why}"),
                    throttled: false,
                },
                status: None,
            };
        }
        let mut req = self
            .client
            .post(&target.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        if target.kind == TargetKind::Webhook {
            let ts = self.clock.now_ns() / 1_000_000_000;
            req = req
                .header("webhook-id", webhook_id)
                .header("webhook-timestamp", ts.to_string());
            if let Some(secret) = &target.secret {
                match super::sign::signature(secret, webhook_id, ts, body.as_bytes()) {
                    Ok(sig) => req = req.header("webhook-signature", sig),
                    Err(e) => {
                        return Answer {
                            verdict: Verdict::Dead {
                                reason: format!("cannot sign: {e}"),
                            },
                            status: None,
                        }
                    }
                }
            }
        }
        if let Some(status) = crate::faults::status("webhook") {
            // An injected answer: the request is not sent.
            return Answer {
                verdict: policy::classify(target.kind, status, None, "", self.clock.now()),
                status: Some(status),
            };
        }
        match req.send().await {
            Ok(resp) => answer::read(target.kind, resp, self.clock.now()).await,
            Err(e) => answer::transport(e),
        }
    }

    /// Work `target`'s queue in `mode`. In `Forever` mode a state-file
    /// error (a lock held too long, a full disk) is logged and retried with
    /// backoff; the sender never stops for it.
    pub async fn run(&self, target: Target, mode: Mode) -> Result<(), SenderError> {
        let mut failures = 0u32;
        loop {
            match self.work(&target, mode).await {
                Ok(()) => return Ok(()),
                Err(e) => match mode {
                    Mode::Drain { .. } => return Err(e),
                    Mode::Forever { poll } => {
                        failures += 1;
                        let wait =
                            crate::retry::full_jitter(poll, Duration::from_secs(300), failures)
                                .max(poll);
                        tracing::warn!(target = %target.name, error = %e, attempt = failures, wait_s = wait.as_secs(), "alert sender: state file error; retrying");
                        tokio::time::sleep(wait).await;
                    }
                },
            }
        }
    }

    async fn work(&self, target: &Target, mode: Mode) -> Result<(), SenderError> {
        let pace = Duration::from_millis(self.cfg.pace_ms);
        let started = Instant::now();
        let mut last_send: Option<Instant> = None;
        loop {
            let name = target.name.clone();
            if let Some(reason) = self.with_db(move |c| outbox::disabled(c, &name)).await? {
                tracing::debug!(target = %target.name, %reason, "alert target disabled");
                match mode {
                    Mode::Drain { .. } => return Ok(()),
                    Mode::Forever { poll } => {
                        tokio::time::sleep(poll).await;
                        continue;
                    }
                }
            }
            let upto = match &self.gate {
                None => i64::MAX,
                Some(g) => match g.may_send() {
                    Some(upto) => upto,
                    None => {
                        // Not this node's to send (a standby), or not yet.
                        match mode {
                            Mode::Drain { .. } => return Ok(()),
                            Mode::Forever { poll } => {
                                tokio::time::sleep(poll.min(Duration::from_secs(1))).await;
                                continue;
                            }
                        }
                    }
                },
            };
            let name = target.name.clone();
            let Some(row) = self
                .with_db(move |c| outbox::next_pending(c, &name, upto))
                .await?
            else {
                match mode {
                    Mode::Drain { .. } => return Ok(()),
                    Mode::Forever { poll } => {
                        tokio::time::sleep(poll).await;
                        continue;
                    }
                }
            };
            // Not before the row is due, nor sooner than the pace allows.
            let due_in = Duration::from_nanos((row.next_at_ns - self.clock.now_ns()).max(0) as u64);
            let paced_in = last_send.map_or(Duration::ZERO, |l| {
                (l + pace).saturating_duration_since(Instant::now())
            });
            let wait = due_in.max(paced_in);
            if let Mode::Drain { wait: limit } = mode {
                if started.elapsed() + wait > limit {
                    tracing::info!(target = %target.name, webhook_id = %row.webhook_id, in_s = wait.as_secs(), "alert left in the outbox for a later flush");
                    return Ok(());
                }
            }
            if !wait.is_zero() {
                let poll = match mode {
                    Mode::Forever { poll } => wait.min(poll),
                    Mode::Drain { .. } => wait,
                };
                tokio::time::sleep(poll).await;
                if poll < wait {
                    continue;
                }
            }
            // The gate again, after the wait: a lease lost while the row
            // waited sends nothing.
            if self
                .gate
                .as_ref()
                .is_some_and(|g| g.may_send().is_none_or(|u| row.id > u))
            {
                continue;
            }
            // Claim the row, so a `serve` and an `alerts flush` on the same
            // state never send it at once; a claim lapses if its holder dies.
            let lease = Duration::from_secs(self.cfg.request_timeout_secs + 5);
            let now_ns = self.clock.now_ns();
            let (id, until_ns) = (row.id, now_ns + lease.as_nanos() as i64);
            if !self
                .with_db(move |c| outbox::claim(c, id, now_ns, until_ns))
                .await?
            {
                tokio::time::sleep(Duration::from_millis(200).min(lease)).await;
                if let Mode::Drain { .. } = mode {
                    if started.elapsed() > Duration::from_secs(1) + lease {
                        return Ok(());
                    }
                }
                continue;
            }
            crate::faults::kill_point("alert_kill_before_send");
            last_send = Some(Instant::now());
            let answer = self.attempt(target, &row.webhook_id, &row.body).await;
            crate::faults::kill_point("alert_kill_after_send");
            self.settle(target, &row, answer).await?;
        }
    }

    /// Record one attempt's outcome.
    async fn settle(&self, target: &Target, row: &Row, answer: Answer) -> Result<(), SenderError> {
        let attempts = row.attempts + 1;
        let id = row.id;
        let now_ns = self.clock.now_ns();
        let age = Duration::from_nanos((now_ns - row.created_ns).max(0) as u64);
        let name = target.name.as_str();
        match answer.verdict {
            Verdict::Delivered => {
                self.stats.count(name, "delivered");
                self.with_db(move |c| outbox::finish(c, id, attempts, "delivered", None, now_ns))
                    .await?;
                tracing::info!(target = name, webhook_id = %row.webhook_id, attempts, "alert delivered");
            }
            Verdict::Retry {
                after,
                reason,
                throttled,
            } => {
                let jitter =
                    crate::retry::full_jitter(self.budget().base, self.budget().cap, attempts);
                match policy::next_wait(&self.budget(), attempts, age, jitter, after) {
                    Some(wait) => {
                        self.stats
                            .count(name, if throttled { "throttled" } else { "retried" });
                        let next = now_ns + wait.as_nanos() as i64;
                        let why = reason.clone();
                        self.with_db(move |c| outbox::retry_later(c, id, attempts, next, &why))
                            .await?;
                        tracing::info!(target = name, webhook_id = %row.webhook_id, attempts, wait_ms = wait.as_millis() as u64, %reason, "alert will be retried");
                    }
                    None => {
                        self.stats.count(name, "gave_up");
                        let why = format!("gave up: {reason}");
                        self.with_db(move |c| {
                            outbox::finish(c, id, attempts, "dead", Some(&why), now_ns)
                        })
                        .await?;
                        tracing::warn!("alert target={name} webhook_id={} waited={}s attempts={attempts} gave_up reason={reason:?}", row.webhook_id, age.as_secs());
                    }
                }
            }
            Verdict::Dead { reason } => {
                self.stats.count(name, "dead");
                let why = reason.clone();
                self.with_db(move |c| outbox::finish(c, id, attempts, "dead", Some(&why), now_ns))
                    .await?;
                tracing::warn!("alert target={name} webhook_id={} waited={}s attempts={attempts} gave_up reason={reason:?} (not retryable)", row.webhook_id, age.as_secs());
            }
            Verdict::Disable { reason } => {
                self.stats.count(name, "disabled");
                let (why, next_at_ns, owned) = (reason.clone(), row.next_at_ns, name.to_string());
                self.with_db(move |c| {
                    outbox::retry_later(c, id, attempts, next_at_ns, &why)?;
                    outbox::disable(c, &owned, &why, now_ns)
                })
                .await?;
                tracing::error!("alert target={name} disabled: {reason}; its messages wait in the outbox until `stormwatch alerts enable {name}`");
            }
        }
        let _ = answer.status;
        Ok(())
    }
}
