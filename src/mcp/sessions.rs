//! The sessions of `/mcp` (2025-11-25 clients), bounded: rmcp's
//! [`LocalSessionManager`] keeps them, and [`Sessions`] holds it to
//! `mcp.max_sessions` live at once (a permit per session, taken before the
//! session is made and given back when its worker and its entry are gone),
//! closes one after `mcp.session_idle_secs` without a message (rmcp's
//! `keep_alive`), and refuses at once — as the JSON-RPC error of that
//! request, on its own stream — a call whose id is already in flight in the
//! session, a call past [`CALLS_PER_SESSION`] or past
//! `mcp.max_calls_in_flight` over all sessions, and an id longer than
//! [`MAX_ID_CHARS`]. A call leaves the flight when its answer has been
//! handed to the session's worker, or when the client cancels it.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::{Transport, WorkerTransport};
use rmcp::RoleServer;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::limits::{McpConfig, CALLS_PER_SESSION, MAX_ID_CHARS};

/// How long ending a session waits for its worker to let go of it.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// JSON-RPC code of a refusal for capacity (the server-defined range).
pub const AT_CAPACITY: ErrorCode = ErrorCode(-32000);

tokio::task_local! {
    /// The permit the admission check took for the `initialize` this task
    /// serves, for [`Sessions::create_session`] to keep.
    pub(super) static RESERVED: Cell<Option<OwnedSemaphorePermit>>;
}

/// Why a session could not be made or reached.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error("session limit reached: {limit} MCP sessions are live (mcp.max_sessions)")]
    Full { limit: usize },
}

/// The bounded session manager.
pub struct Sessions {
    inner: LocalSessionManager,
    slots: Mutex<HashMap<SessionId, Arc<Slot>>>,
    /// One permit per live session.
    permits: Arc<Semaphore>,
    /// One permit per call in flight, over every session.
    calls: Arc<Semaphore>,
    limits: McpConfig,
    /// `initialize` calls refused, and when (and at which count) that was
    /// last logged.
    refused: AtomicU64,
    last_warned: Mutex<Option<(Instant, u64)>>,
}

/// What one session holds beyond rmcp's own: its calls in flight, and its
/// place among `mcp.max_sessions`.
pub struct Slot {
    calls: Mutex<HashMap<RequestId, OwnedSemaphorePermit>>,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// Resolves when the session's transport (held by its worker) is gone.
    gone: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Slot {
    fn end(&self, id: &RequestId) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

impl Sessions {
    pub fn new(limits: &McpConfig) -> Sessions {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(limits.session_idle());
        // A cancelled call's stream is kept this long for a late resume;
        // rmcp's 60 s would let a client that cancels in a loop pile them up.
        config.completed_cache_ttl = Duration::from_secs(5);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        Sessions {
            inner,
            slots: Mutex::default(),
            permits: Arc::new(Semaphore::new(limits.max_sessions)),
            calls: Arc::new(Semaphore::new(limits.max_calls_in_flight)),
            limits: limits.clone(),
            refused: AtomicU64::new(0),
            last_warned: Mutex::new(None),
        }
    }

    pub fn limits(&self) -> &McpConfig {
        &self.limits
    }

    /// Sessions live now (or being made).
    pub fn live(&self) -> usize {
        self.limits.max_sessions - self.permits.available_permits()
    }

    /// A session's permit, unless every one is taken.
    pub fn reserve(&self) -> Result<OwnedSemaphorePermit, SessionsError> {
        Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| SessionsError::Full {
                limit: self.limits.max_sessions,
            })
    }

    fn slot(&self, id: &SessionId) -> Option<Arc<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Put call `id` in flight in `slot`, or say why not.
    fn begin(&self, slot: &Slot, id: &RequestId) -> Result<(), ErrorData> {
        if let RequestId::String(s) = id {
            if s.chars().count() > MAX_ID_CHARS {
                return Err(ErrorData::new(
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "request id too long: at most {MAX_ID_CHARS} characters, got {}",
                        s.chars().count()
                    ),
                    None,
                ));
            }
        }
        let mut calls = slot.calls.lock().unwrap_or_else(|e| e.into_inner());
        if calls.contains_key(id) {
            return Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "request id {id} is already in flight in this session: give each call in flight its own id (an id is free again once its call is answered)"
                ),
                Some(serde_json::json!({"id": id.clone().into_json_value()})),
            ));
        }
        if calls.len() >= CALLS_PER_SESSION {
            return Err(ErrorData::new(
                AT_CAPACITY,
                format!(
                    "too many calls in flight in this session: at most {CALLS_PER_SESSION} at once; wait for an answer before sending more"
                ),
                Some(serde_json::json!({"limit": CALLS_PER_SESSION, "in_flight": calls.len()})),
            ));
        }
        calls.insert(id.clone(), self.call_permit()?);
        Ok(())
    }

    /// A call's place among `mcp.max_calls_in_flight`, unless all are taken.
    pub fn call_permit(&self) -> Result<OwnedSemaphorePermit, ErrorData> {
        Arc::clone(&self.calls).try_acquire_owned().map_err(|_| {
            let limit = self.limits.max_calls_in_flight;
            ErrorData::new(
                AT_CAPACITY,
                format!(
                    "too many MCP calls in flight: {limit} at once (mcp.max_calls_in_flight); try again shortly"
                ),
                Some(serde_json::json!({"limit": limit})),
            )
        })
    }

    /// Note a refused `initialize`: logged at most every ten seconds, with
    /// how many were refused since.
    pub fn refused(&self) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last_warned.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|(at, _)| at.elapsed() >= Duration::from_secs(10)) {
            let since = n - last.map_or(0, |(_, n)| n);
            *last = Some((Instant::now(), n));
            drop(last);
            tracing::warn!(
                limit = self.limits.max_sessions,
                refused = since,
                refused_total = n,
                "MCP initialize refused: the session limit (mcp.max_sessions) is reached"
            );
        }
    }
}

/// The JSON-RPC error of request `id`, as the one event of its stream.
fn refusal(
    id: RequestId,
    error: ErrorData,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures::stream::iter([ServerSseMessage::from_message(ServerJsonRpcMessage::error(
        error,
        Some(id),
    ))])
}

/// A session's transport: rmcp's, ending a call's flight once its answer
/// has reached the session's worker (in order: a new call with the same id
/// cannot be routed before it).
pub struct Tracked {
    inner: WorkerTransport<LocalSessionWorker>,
    slot: Arc<Slot>,
    /// Dropped with the transport, which tells [`Slot::gone`].
    _alive: oneshot::Sender<()>,
}

impl Transport<RoleServer> for Tracked {
    type Error = <WorkerTransport<LocalSessionWorker> as Transport<RoleServer>>::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            ServerJsonRpcMessage::Response(r) => Some(r.id.clone()),
            ServerJsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let slot = Arc::clone(&self.slot);
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            if let Some(id) = answered {
                slot.end(&id);
            }
            sent
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = Tracked;

    async fn create_session(&self) -> Result<(SessionId, Tracked), SessionsError> {
        // The admission check reserved it; a session made any other way
        // takes its own.
        let permit = match RESERVED.try_with(Cell::take).ok().flatten() {
            Some(p) => p,
            None => self.reserve()?,
        };
        let (id, inner) = self.inner.create_session().await?;
        let (alive, gone) = oneshot::channel();
        let slot = Arc::new(Slot {
            calls: Mutex::default(),
            permit: Mutex::new(Some(permit)),
            gone: Mutex::new(Some(gone)),
        });
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), Arc::clone(&slot));
        Ok((
            id,
            Tracked {
                inner,
                slot,
                _alive: alive,
            },
        ))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionsError> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionsError> {
        Ok(self.inner.has_session(id).await?)
    }

    /// Ends a session (a client's DELETE, or its worker ending): the slot
    /// is given back once the worker has let go of the transport (at most
    /// [`CLOSE_WAIT`] later), before the answer, so a client that ended a
    /// session can open the next one at once.
    async fn close_session(&self, id: &SessionId) -> Result<(), SessionsError> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let closed = self.inner.close_session(id).await;
        if let Some(slot) = slot {
            let gone = slot.gone.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(gone) = gone {
                let _ = tokio::time::timeout(CLOSE_WAIT, gone).await;
            }
            drop(slot.permit.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        let call = match (&message, self.slot(id)) {
            (ClientJsonRpcMessage::Request(r), Some(slot)) => {
                if let Err(e) = self.begin(&slot, &r.id) {
                    return Ok(refusal(r.id.clone(), e).left_stream());
                }
                Some((slot, r.id.clone()))
            }
            _ => None,
        };
        match self.inner.create_stream(id, message).await {
            Ok(s) => Ok(s.right_stream()),
            Err(e) => {
                if let Some((slot, rid)) = call {
                    slot.end(&rid);
                }
                Err(e.into())
            }
        }
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionsError> {
        // A cancelled call is answered by no one: it leaves the flight here.
        let cancelled = match &message {
            ClientJsonRpcMessage::Notification(n) => match &n.notification {
                ClientNotification::CancelledNotification(c) => c.params.request_id.clone(),
                _ => None,
            },
            _ => None,
        };
        self.inner.accept_message(id, message).await?;
        if let (Some(rid), Some(slot)) = (cancelled, self.slot(id)) {
            slot.end(&rid);
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests;
