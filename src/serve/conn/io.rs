//! A connection's IO under its time limits, and the answer body that keeps
//! its request in flight until sent.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::{InFlight, Peer, Reason, Slot};

/// A TCP connection whose reads fail with `TimedOut` once its header or
/// idle limit passes, and whose writes fail so once they have been blocked
/// (the peer not reading) for the idle timeout.
pub struct Guarded {
    io: TcpStream,
    peer: Peer,
    slot: Slot,
    read_timer: Pin<Box<Sleep>>,
    write_timer: Pin<Box<Sleep>>,
    write_blocked: Option<Instant>,
    closed: bool,
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("peer", &self.peer.addr)
            .finish()
    }
}

impl Guarded {
    pub(super) fn new(io: TcpStream, peer: Peer, slot: Slot) -> Guarded {
        let now = Instant::now();
        Guarded {
            io,
            peer,
            slot,
            read_timer: Box::pin(tokio::time::sleep_until(now)),
            write_timer: Box::pin(tokio::time::sleep_until(now)),
            write_blocked: None,
            closed: false,
        }
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Close for `reason`: counted once, then every call fails.
    fn expire(&mut self, reason: Reason) -> io::Error {
        if !self.closed {
            self.closed = true;
            self.slot.stats.closed(self.slot.port, reason);
            tracing::debug!(port = self.slot.port.name(), peer = %self.peer.addr, reason = reason.name(), "closed a connection past its time limit");
        }
        io::Error::new(io::ErrorKind::TimedOut, reason.name())
    }

    /// Pending until the read limit passes; then the error that closes.
    fn poll_read_limit(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.peer.activity.reader.register(cx.waker());
        loop {
            let now = Instant::now();
            let (at, reason) = self.peer.activity.deadline(now);
            if let Some(reason) = reason.filter(|_| at <= now) {
                return Poll::Ready(self.expire(reason));
            }
            // While a request is in flight a pending check is left as it
            // is (judged again when it fires).
            let keep = reason.is_none() && self.read_timer.deadline() > now;
            if !keep && self.read_timer.deadline() != at {
                self.read_timer.as_mut().reset(at);
            }
            ready!(self.read_timer.as_mut().poll(cx));
        }
    }

    /// Pending until a write blocked since `write_blocked` passes the idle
    /// timeout; then the error that closes.
    fn poll_write_limit(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let now = Instant::now();
        let at = *self.write_blocked.get_or_insert(now) + self.peer.activity.limits.idle_timeout;
        if at <= now {
            return Poll::Ready(self.expire(Reason::WriteStall));
        }
        if self.write_timer.deadline() != at {
            self.write_timer.as_mut().reset(at);
        }
        ready!(self.write_timer.as_mut().poll(cx));
        Poll::Ready(self.expire(Reason::WriteStall))
    }

    fn wrote<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => match self.poll_write_limit(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
            ready => {
                self.write_blocked = None;
                ready
            }
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.peer.activity.read(Instant::now());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_read_limit(cx).map(Err),
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.wrote(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Guarded {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

/// An answer's body, holding its request in flight until it is sent (or
/// dropped), and waiting to be taken from when it is made and after each
/// frame until polled again (the connection's write-stall deadline).
pub(super) struct Tracked<B> {
    inner: B,
    id: u64,
    busy: InFlight,
}

impl<B> Tracked<B> {
    pub(super) fn new(inner: B, busy: InFlight) -> Tracked<B> {
        let id = busy.0.answer_id();
        busy.0.unsent(id, Some(Instant::now()));
        Tracked { inner, id, busy }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.busy.0.unsent(self.id, None);
    }
}

impl<B> http_body::Body for Tracked<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        // Polled: the connection is taking the answer. Waiting on the body
        // itself (an event stream between events) is no stall.
        this.busy.0.unsent(this.id, None);
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(Some(Ok(_)))) && !this.inner.is_end_stream() {
            this.busy.0.unsent(this.id, Some(Instant::now()));
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
