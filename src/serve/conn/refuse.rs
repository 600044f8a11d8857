//! The answer to a connection past its peer's cap, written before any of
//! its request is read: on the HTTP ports a `429` with `Retry-After`, on
//! the gRPC port the server's HTTP/2 preface and a `GOAWAY`
//! (`REFUSED_STREAM`: nothing was processed, a retry is safe) whose debug
//! data says which limit was hit. Not `ENHANCE_YOUR_CALM`: gRPC clients
//! read that as "too many pings" and change their keepalive (grpcio 1.85
//! aborted on it). Then
//! the write side is closed and what the peer sends is read and dropped for
//! a moment, so the answer is not lost to a reset.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::Port;

/// How long a refused connection is given to read its answer.
const LINGER: Duration = Duration::from_secs(2);

pub(super) async fn answer(
    mut tcp: TcpStream,
    port: Port,
    message: String,
    _slot: OwnedSemaphorePermit,
) {
    let bytes = match port {
        Port::OtlpGrpc => goaway(&message),
        Port::OtlpHttp | Port::Http => too_many(&message),
    };
    let _ = tokio::time::timeout(LINGER, async {
        tcp.write_all(&bytes).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 << 10 {
            match tcp.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// An HTTP/1.1 `429 Too Many Requests` that closes the connection.
fn too_many(message: &str) -> Vec<u8> {
    let body = format!("{message}\n");
    format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// HTTP/2 frame types and the error code used.
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const REFUSED_STREAM: u32 = 0x7;

/// The server preface (an empty SETTINGS frame), then GOAWAY with no stream
/// processed and `message` as its debug data.
fn goaway(message: &str) -> Vec<u8> {
    let mut out = frame(SETTINGS, &[]);
    let mut payload = Vec::with_capacity(8 + message.len());
    payload.extend_from_slice(&0u32.to_be_bytes());
    payload.extend_from_slice(&REFUSED_STREAM.to_be_bytes());
    payload.extend_from_slice(message.as_bytes());
    out.extend(frame(GOAWAY, &payload));
    out
}

/// One frame on stream 0, no flags.
fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goaway_is_a_settings_frame_then_goaway_with_the_message() {
        let bytes = goaway("too many");
        assert_eq!(&bytes[..9], &[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);
        let g = &bytes[9..];
        assert_eq!(&g[..3], &[0, 0, 16]);
        assert_eq!(g[3], GOAWAY);
        assert_eq!(&g[9..13], &[0, 0, 0, 0]);
        assert_eq!(&g[13..17], &[0, 0, 0, 0x7]);
        assert_eq!(&g[17..], b"too many");
    }

    #[test]
    fn the_http_answer_is_a_429_that_closes() {
        let text = String::from_utf8(too_many("limit hit")).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{text}"
        );
        assert!(text.contains("connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nlimit hit\n"));
    }
}
