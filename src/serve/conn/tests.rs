//! Tests of the connection limits, on real TCP connections.

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// An HTTP server on a guarded loopback listener: `/` answers at once,
/// `/slow` after 1.5 s.
async fn serve(limits: ConnLimits) -> (SocketAddr, Arc<Connections>) {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let stats = Arc::new(Connections::default());
    let listener = GuardedListener::new(tcp, Port::Http, limits, Arc::clone(&stats));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "slow"
            }),
        )
        .layer(axum::middleware::from_fn(track));
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<Peer>())
            .await
            .unwrap();
    });
    (addr, stats)
}

fn limits() -> ConnLimits {
    ConnLimits {
        header_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(800),
        max_per_peer: 3,
    }
}

/// Read until the server closes; what came, and when it closed.
async fn until_closed(s: &mut TcpStream) -> (String, std::time::Instant) {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => {
                return (
                    String::from_utf8_lossy(&all).into_owned(),
                    std::time::Instant::now(),
                )
            }
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// Read one whole answer (it ends with "ok" or "slow").
async fn answer(s: &mut TcpStream, ends: &str) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&all).ends_with(ends) {
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the answer: {}",
            String::from_utf8_lossy(&all)
        );
        all.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(all).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_header_is_closed_at_the_header_timeout() {
    let (addr, stats) = serve(limits()).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let begun = std::time::Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let (got, at) = until_closed(&mut s).await;
    let took = at - begun;
    assert!(got.is_empty(), "{got}");
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(1000),
        "{took:?}"
    );
    assert_eq!(stats.closed_for(Port::Http, Reason::HeaderTimeout), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_closed_once_idle_and_a_slow_answer_is_not_cut() {
    let (addr, stats) = serve(limits()).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    // Longer in flight than the idle timeout: answered.
    s.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(answer(&mut s, "slow").await.starts_with("HTTP/1.1 200"));
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    answer(&mut s, "ok").await;
    let answered = std::time::Instant::now();
    let (_, at) = until_closed(&mut s).await;
    let idle = at - answered;
    assert!(
        idle >= Duration::from_millis(700) && idle < Duration::from_millis(1500),
        "{idle:?}"
    );
    assert_eq!(stats.closed_for(Port::Http, Reason::IdleTimeout), 1);
    assert_eq!(stats.closed_for(Port::Http, Reason::HeaderTimeout), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_past_its_cap_is_answered_429_and_closed() {
    let (addr, stats) = serve(ConnLimits {
        header_timeout: Duration::from_secs(5),
        ..limits()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        answer(&mut s, "ok").await;
        held.push(s);
    }
    let mut fourth = TcpStream::connect(addr).await.unwrap();
    let (got, _) = until_closed(&mut fourth).await;
    assert!(got.starts_with("HTTP/1.1 429 Too Many Requests"), "{got}");
    assert!(got.contains("too many connections from 127.0.0.1"), "{got}");
    assert!(got.contains("admission.max_connections_per_peer"), "{got}");
    assert_eq!(stats.closed_for(Port::Http, Reason::PeerCap), 1);
    assert_eq!(stats.open(Port::Http), 3);
    // One closes: a new one is let in.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    again
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(answer(&mut again, "ok").await.starts_with("HTTP/1.1 200"));
}
