//! The bounds of the MCP server over HTTP that are not settings (the size
//! of an `initialize`, calls in flight per session, a request id's length),
//! beside the ones that are (`[mcp]`, [`McpConfig`]: sessions live at once,
//! their idle time, calls in flight), so that what one outsider can make
//! the server hold is a product of them.

pub use crate::config::McpConfig;

/// Largest `initialize` request (bytes): a session keeps what it declares
/// (client info, capabilities) for its whole life. Clients send well under
/// 2 KiB.
pub const MAX_INITIALIZE_BYTES: usize = 64 << 10;

/// Largest request body on `/mcp` (bytes), as rmcp is told too.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Calls one session may have in flight at once.
pub const CALLS_PER_SESSION: usize = 16;

/// Longest request id (characters) a session keeps while the call runs.
pub const MAX_ID_CHARS: usize = 256;
