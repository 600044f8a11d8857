//! A request body read under admission ([`Intake`]): each chunk charged to
//! the in-flight budget as it arrives, a minimum receive rate judged over
//! every [`RATE_WINDOW`], a body timeout, and the reserve's loan called in
//! after [`LEND`](super::LEND).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::{Budget, Charge, Short, RATE_WINDOW};

/// The limits a body is read under.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Largest body (bytes); past it, `Cut::TooLarge`.
    pub max_bytes: usize,
    /// Bytes a second a body must arrive at, judged over every
    /// [`RATE_WINDOW`]; 0 turns the check off.
    pub min_rate: u64,
    /// A body must be whole within this.
    pub timeout: Duration,
}

/// Why a body was not taken whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// Past `max_bytes`.
    TooLarge { limit: usize },
    /// Past the whole in-flight budget (`total_kib`): never admitted.
    NeverFits { bytes: usize, total_kib: u32 },
    /// The budget is taken now (or the reserve's loan ran out).
    Busy,
    /// Fewer than `min_rate` bytes a second arrived over the last window.
    TooSlow { got: u64, min_rate: u64 },
    /// Not whole within the body timeout.
    Timeout { secs: u64 },
    /// The connection failed while reading.
    Read(String),
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cut::TooLarge { limit } => write!(
                f,
                "the request body is larger than this receiver's {limit}-byte limit (ingest.max_body_bytes); send smaller batches"
            ),
            Cut::NeverFits { bytes, total_kib } => write!(
                f,
                "a request of {bytes} bytes or more can never fit the in-flight budget of {total_kib} KiB \
                 (ingest.max_inflight_bytes); send smaller batches"
            ),
            Cut::Busy => f.write_str("too many request bytes in flight; retry later"),
            Cut::TooSlow { got, min_rate } => write!(
                f,
                "the request body arrived at {got} bytes/s over the last {} s, below this receiver's \
                 minimum of {min_rate} bytes/s (admission.min_body_rate_bytes)",
                RATE_WINDOW.as_secs()
            ),
            Cut::Timeout { secs } => write!(
                f,
                "the request body did not arrive whole within {secs} s (admission.body_timeout_secs)"
            ),
            Cut::Read(e) => write!(f, "could not read the request body: {e}"),
        }
    }
}

/// A request body read chunk by chunk under its limits, each chunk charged
/// to the budget as it arrives.
pub struct Intake<B> {
    body: B,
    charge: Charge,
    limits: BodyLimits,
    deadline: Instant,
    window_start: Instant,
    window_bytes: u64,
    total: usize,
}

impl<B> Intake<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    pub fn new(body: B, budget: &Arc<Budget>, limits: BodyLimits) -> Intake<B> {
        let now = Instant::now();
        Intake {
            body,
            charge: Charge::new(budget),
            limits,
            deadline: now + limits.timeout,
            window_start: now,
            window_bytes: 0,
            total: 0,
        }
    }

    /// Bytes read so far.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The next chunk of data, `None` at the end of the body.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Cut> {
        loop {
            let wake = self.next_check();
            // Data that is there is taken before a limit is judged.
            let frame = tokio::select! {
                biased;
                frame = self.body.frame() => Some(frame),
                () = tokio::time::sleep_until(wake) => None,
            };
            let Some(frame) = frame else {
                self.check(Instant::now())?;
                continue;
            };
            let data = match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(Cut::Read(e.to_string())),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    // Trailers carry nothing an export needs.
                    Err(_) => continue,
                },
            };
            self.total += data.len();
            if self.total > self.limits.max_bytes {
                return Err(Cut::TooLarge {
                    limit: self.limits.max_bytes,
                });
            }
            self.charge
                .hold_body(self.total)
                .map_err(|short| self.short(short))?;
            self.window_bytes += data.len() as u64;
            self.check(Instant::now())?;
            return Ok(Some(data));
        }
    }

    /// Every chunk to the end, as one buffer (the copy is charged too).
    pub async fn read_all(&mut self) -> Result<Bytes, Cut> {
        let mut chunks = Vec::new();
        while let Some(c) = self.chunk().await? {
            chunks.push(c);
        }
        self.join(chunks)
    }

    /// `chunks` as one buffer: a copy, charged while both are held.
    pub fn join(&mut self, mut chunks: Vec<Bytes>) -> Result<Bytes, Cut> {
        if chunks.len() <= 1 {
            return Ok(chunks.pop().unwrap_or_default());
        }
        let len: usize = chunks.iter().map(Bytes::len).sum();
        let held = self.charge.kib() as usize * 1024;
        self.charge.add_work(len).map_err(|s| self.short(s))?;
        let mut out = BytesMut::with_capacity(len);
        for c in chunks {
            out.extend_from_slice(&c);
        }
        self.charge.shrink_to(held.max(len));
        Ok(out.freeze())
    }

    fn short(&self, short: Short) -> Cut {
        match short {
            Short::Busy => Cut::Busy,
            Short::NeverFits => Cut::NeverFits {
                bytes: self.total,
                total_kib: self.charge.budget.total,
            },
        }
    }

    /// The next moment a limit must be judged.
    fn next_check(&self) -> Instant {
        let mut at = self.deadline;
        if self.limits.min_rate > 0 {
            at = at.min(self.window_start + RATE_WINDOW);
        }
        if let Some(lend) = self.charge.lend_deadline() {
            at = at.min(lend);
        }
        at
    }

    fn check(&mut self, now: Instant) -> Result<(), Cut> {
        if now >= self.deadline {
            return Err(Cut::Timeout {
                secs: self.limits.timeout.as_secs(),
            });
        }
        if self.limits.min_rate > 0 && now >= self.window_start + RATE_WINDOW {
            let secs = (now - self.window_start).as_secs_f64();
            let got = (self.window_bytes as f64 / secs) as u64;
            if got < self.limits.min_rate {
                return Err(Cut::TooSlow {
                    got,
                    min_rate: self.limits.min_rate,
                });
            }
            self.window_start = now;
            self.window_bytes = 0;
        }
        if self.charge.overdue(now) {
            return Err(Cut::Busy);
        }
        Ok(())
    }

    /// The body (to drain what is left) and the permits held.
    pub fn into_parts(self) -> (B, Charge) {
        (self.body, self.charge)
    }
}
