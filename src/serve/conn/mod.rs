//! Connections on the three listeners (OTLP/HTTP, OTLP/gRPC, the
//! dashboard's HTTP): a cap on the connections open at once from one peer
//! IP address (`admission.max_connections_per_peer`, loopback included),
//! and the time limits neither axum's server nor tonic's sets:
//! - a request's headers must arrive within `admission.header_timeout_secs`
//!   of their first byte, and a new connection's first request within it of
//!   the connection's opening (on the gRPC port, whose HTTP/2 pings are
//!   bytes too, only the first request is timed so);
//! - a connection with no request in flight is closed after
//!   `admission.idle_timeout_secs`, and so is one whose peer stops reading
//!   an answer for that long.
//!
//! The limits live in the connection's IO ([`Guarded`]): a read past them
//! fails with `TimedOut`, and the server drops the connection. Requests are
//! seen by the [`track`] middleware, through the connection's [`Peer`] in
//! the request's extensions, until their answer's body is sent.

mod io;
mod refuse;
mod stats;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;

pub use io::Guarded;
pub use stats::{Connections, Reason};

/// The connection limits of every port.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    /// Connections open at once from one IP address; 0: no cap.
    pub max_per_peer: usize,
}

impl ConnLimits {
    pub fn from_config(c: &crate::config::AdmissionConfig) -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(c.header_timeout_secs),
            idle_timeout: Duration::from_secs(c.idle_timeout_secs),
            max_per_peer: c.max_connections_per_peer,
        }
    }
}

/// Which listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    OtlpHttp,
    OtlpGrpc,
    Http,
}

impl Port {
    pub const ALL: [Port; 3] = [Port::OtlpHttp, Port::OtlpGrpc, Port::Http];

    /// The `/metrics` label.
    pub fn name(self) -> &'static str {
        match self {
            Port::OtlpHttp => "otlp_http",
            Port::OtlpGrpc => "otlp_grpc",
            Port::Http => "http",
        }
    }
}

/// Connections open per peer address, on one port.
type Peers = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// Over-cap connections being answered at once, per port (past this they
/// are closed unanswered: refusing must not cost unbounded work).
const MAX_REFUSALS: usize = 32;

/// A TCP listener whose connections are [`Guarded`].
pub struct GuardedListener {
    inner: TcpListener,
    port: Port,
    limits: ConnLimits,
    peers: Peers,
    refusals: Arc<Semaphore>,
    stats: Arc<Connections>,
}

impl GuardedListener {
    pub fn new(
        inner: TcpListener,
        port: Port,
        limits: ConnLimits,
        stats: Arc<Connections>,
    ) -> GuardedListener {
        GuardedListener {
            inner,
            port,
            limits,
            peers: Peers::default(),
            refusals: Arc::new(Semaphore::new(MAX_REFUSALS)),
            stats,
        }
    }

    /// The next connection within its peer's cap; those past it are
    /// answered (with what limit they hit) and closed.
    pub async fn next(&mut self) -> Guarded {
        loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            match self.take_slot(addr.ip()) {
                Some(slot) => {
                    let activity = Activity::new(self.port, self.limits);
                    return Guarded::new(tcp, Peer { addr, activity }, slot);
                }
                None => self.refuse(tcp, addr),
            }
        }
    }

    /// The connections as a stream, for tonic's server.
    pub fn into_incoming(
        self,
    ) -> impl futures::Stream<Item = std::io::Result<Guarded>> + Send + 'static {
        futures::stream::unfold(self, |mut l| async move {
            let next = l.next().await;
            Some((Ok(next), l))
        })
    }

    fn take_slot(&self, ip: IpAddr) -> Option<Slot> {
        let ip = peer_key(ip);
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let open = peers.entry(ip).or_insert(0);
        if self.limits.max_per_peer > 0 && *open >= self.limits.max_per_peer {
            return None;
        }
        *open += 1;
        self.stats.opened(self.port);
        Some(Slot {
            peers: Arc::clone(&self.peers),
            ip,
            port: self.port,
            stats: Arc::clone(&self.stats),
        })
    }

    fn refuse(&self, tcp: TcpStream, addr: SocketAddr) {
        self.stats.closed(self.port, Reason::PeerCap);
        if self.stats.warn_due(self.port) {
            tracing::warn!(
                port = self.port.name(),
                peer = %addr.ip(),
                limit = self.limits.max_per_peer,
                "refused a connection: this address has as many open as admission.max_connections_per_peer allows (logged once a minute)"
            );
        }
        let Ok(permit) = Arc::clone(&self.refusals).try_acquire_owned() else {
            return;
        };
        let message = format!(
            "too many connections from {}: this port takes {} at once from one address \
             (admission.max_connections_per_peer); reuse or close idle ones, or retry later",
            addr.ip(),
            self.limits.max_per_peer
        );
        tokio::spawn(refuse::answer(tcp, self.port, message, permit));
    }
}

/// Accept errors: a connection that failed before it was accepted is
/// skipped; anything else (out of file descriptors) waits a moment.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind as K;
    if matches!(
        e.kind(),
        K::ConnectionAborted | K::ConnectionRefused | K::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

impl axum::serve::Listener for GuardedListener {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        let io = self.next().await;
        let addr = io.peer().addr;
        (io, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// One open connection's place in its peer's count.
struct Slot {
    peers: Peers,
    ip: IpAddr,
    port: Port,
    stats: Arc<Connections>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = peers.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                peers.remove(&self.ip);
            }
        }
        self.stats.dropped(self.port);
    }
}

/// A connection as requests see it (a request extension).
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    activity: Arc<Activity>,
}

impl Connected<IncomingStream<'_, GuardedListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Peer {
        stream.io().peer().clone()
    }
}

/// The address a connection counts against: every loopback address
/// (127.0.0.0/8, ::1, and those written as IPv4-mapped IPv6) is one peer,
/// since a local client may connect from any of them.
fn peer_key(ip: IpAddr) -> IpAddr {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if ip.is_loopback() {
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    } else {
        ip
    }
}

/// What a connection is doing, for its time limits.
#[derive(Debug)]
struct Activity {
    state: Mutex<State>,
    /// The connection's reader, woken when its last request ends (so its
    /// idle limit is armed even if nothing else wakes it).
    reader: futures::task::AtomicWaker,
    limits: ConnLimits,
    /// Time every request's headers (HTTP/1), or only the first's (gRPC).
    every_head: bool,
}

#[derive(Debug)]
struct State {
    /// Requests whose answer is not sent yet.
    inflight: usize,
    /// Since when none is.
    idle_since: Instant,
    /// When the headers of the next request began to arrive (for a new
    /// connection: when it opened).
    head_from: Option<Instant>,
    requests: u64,
    /// Answers (by id) handed over to be sent and not taken since: a
    /// body that produced a frame and was not polled again, or one not
    /// polled at all. HTTP/2 flow control (a peer that grants no window)
    /// stalls an answer here without ever blocking a socket write.
    unsent: HashMap<u64, Instant>,
    next_answer: u64,
}

impl Activity {
    fn new(port: Port, limits: ConnLimits) -> Arc<Activity> {
        let now = Instant::now();
        Arc::new(Activity {
            state: Mutex::new(State {
                inflight: 0,
                idle_since: now,
                head_from: Some(now),
                requests: 0,
                unsent: HashMap::new(),
                next_answer: 0,
            }),
            reader: futures::task::AtomicWaker::new(),
            limits,
            every_head: port != Port::OtlpGrpc,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes came in.
    fn read(&self, now: Instant) {
        let mut s = self.lock();
        if s.inflight == 0 && s.head_from.is_none() && (self.every_head || s.requests == 0) {
            s.head_from = Some(now);
        }
    }

    /// When the connection must be closed if nothing changes, and why;
    /// `None` while a request is in flight and no answer waits to be sent
    /// (judged again later). An answer the connection has not taken for the
    /// idle timeout closes it as a write stall.
    fn deadline(&self, now: Instant) -> (Instant, Option<Reason>) {
        let s = self.lock();
        if s.inflight > 0 {
            return match s.unsent.values().min() {
                Some(since) => (*since + self.limits.idle_timeout, Some(Reason::WriteStall)),
                None => (now + self.limits.idle_timeout, None),
            };
        }
        match s.head_from {
            Some(from) => (
                from + self.limits.header_timeout,
                Some(Reason::HeaderTimeout),
            ),
            None => (
                s.idle_since + self.limits.idle_timeout,
                Some(Reason::IdleTimeout),
            ),
        }
    }

    /// A new answer's id.
    fn answer_id(&self) -> u64 {
        let mut s = self.lock();
        s.next_answer += 1;
        s.next_answer
    }

    /// Answer `id` waits to be taken since `since`, or (`None`) was taken.
    /// The reader is woken when the first one starts waiting, so the
    /// deadline is armed.
    fn unsent(&self, id: u64, since: Option<Instant>) {
        let first = {
            let mut s = self.lock();
            match since {
                Some(at) => {
                    s.unsent.insert(id, at);
                    s.unsent.len() == 1
                }
                None => {
                    s.unsent.remove(&id);
                    false
                }
            }
        };
        if first {
            self.reader.wake();
        }
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        let mut s = self.lock();
        s.inflight += 1;
        s.requests += 1;
        s.head_from = None;
        InFlight(Arc::clone(self))
    }
}

/// One request in flight on its connection, until dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let idle = {
            let mut s = self.0.lock();
            s.inflight -= 1;
            if s.inflight == 0 {
                s.idle_since = Instant::now();
                s.head_from = None;
            }
            s.inflight == 0
        };
        if idle {
            self.0.reader.wake();
        }
    }
}

/// The middleware that marks a request in flight on its connection until
/// its answer's body is sent (axum's `ConnectInfo<Peer>`, or the `Peer`
/// tonic's server puts in the extensions). Without either (a test's
/// `oneshot`), it does nothing.
pub async fn track(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let ext = req.extensions();
    let activity = ext
        .get::<ConnectInfo<Peer>>()
        .map(|c| Arc::clone(&c.0.activity))
        .or_else(|| ext.get::<Peer>().map(|p| Arc::clone(&p.activity)));
    let Some(activity) = activity else {
        return next.run(req).await;
    };
    let busy = activity.begin();
    next.run(req)
        .await
        .map(|body| axum::body::Body::new(io::Tracked::new(body, busy)))
}

#[cfg(test)]
mod tests;
