//! Tests of admission: the in-flight budget, its reserve, and bodies too slow or too large.

use std::convert::Infallible;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::StreamExt;
use http_body_util::StreamBody;

use super::*;

type Chunks = StreamBody<
    futures::stream::Map<
        mpsc::UnboundedReceiver<Bytes>,
        fn(Bytes) -> Result<http_body::Frame<Bytes>, Infallible>,
    >,
>;

/// A body fed by the test, and its sender.
fn fed() -> (mpsc::UnboundedSender<Bytes>, Chunks) {
    let (tx, rx) = mpsc::unbounded();
    let frame: fn(Bytes) -> Result<http_body::Frame<Bytes>, Infallible> =
        |b| Ok(http_body::Frame::data(b));
    (tx, StreamBody::new(rx.map(frame)))
}

fn limits(min_rate: u64) -> BodyLimits {
    BodyLimits {
        max_bytes: 1 << 20,
        min_rate,
        timeout: Duration::from_secs(30),
    }
}

fn kib_of(n: usize) -> Bytes {
    Bytes::from(vec![7u8; n * 1024])
}

#[test]
fn the_reserve_never_keeps_the_general_part_from_holding_one_body() {
    let b = Budget::new(256 << 20, 0.25, 64 << 20);
    assert_eq!(b.reserve_kib(), 64 << 10);
    assert_eq!(b.available_kib(), 256 << 10);
    let b = Budget::new(1 << 20, 0.25, 1 << 20);
    assert_eq!(b.reserve_kib(), 0);
    let b = Budget::new(1 << 20, 0.25, 900 << 10);
    assert_eq!(b.reserve_kib(), 124);
}

#[tokio::test(start_paused = true)]
async fn a_body_is_charged_for_what_arrived_not_what_it_declares() {
    let budget = Arc::new(Budget::new(100 << 10, 0.0, 64 << 10));
    let (tx, body) = fed();
    let mut intake = Intake::new(body, &budget, limits(0));
    tx.unbounded_send(kib_of(10)).unwrap();
    assert_eq!(intake.chunk().await.unwrap().unwrap().len(), 10 << 10);
    assert_eq!(budget.available_kib(), 90);
    tx.unbounded_send(kib_of(5)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    assert_eq!(budget.available_kib(), 85);
    drop(tx);
    assert_eq!(intake.chunk().await.unwrap(), None);
    drop(intake);
    assert_eq!(budget.available_kib(), 100);
}

#[tokio::test(start_paused = true)]
async fn the_reserve_lends_for_two_seconds_then_the_body_is_refused_busy() {
    let budget = Arc::new(Budget::new(100 << 10, 0.25, 10 << 10));
    assert_eq!(budget.reserve_kib(), 25);
    // The general part is taken.
    let general = budget.try_hold(75).unwrap();
    let (tx, body) = fed();
    let mut intake = Intake::new(body, &budget, limits(0));
    tx.unbounded_send(kib_of(5)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    assert_eq!(budget.available_kib(), 20);
    let begun = Instant::now();
    assert_eq!(intake.chunk().await.unwrap_err(), Cut::Busy);
    assert_eq!(Instant::now() - begun, LEND);
    drop(intake);
    drop(general);
    assert_eq!(budget.available_kib(), 100);
}

#[tokio::test(start_paused = true)]
async fn a_loan_is_repaid_once_the_general_part_has_room() {
    let budget = Arc::new(Budget::new(100 << 10, 0.25, 10 << 10));
    let general = budget.try_hold(75).unwrap();
    let (tx, body) = fed();
    let mut intake = Intake::new(body, &budget, limits(0));
    tx.unbounded_send(kib_of(5)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    drop(general);
    tokio::time::sleep(Duration::from_secs(1)).await;
    tx.unbounded_send(kib_of(1)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    // Past the loan's two seconds the body is still welcome: it holds
    // general permits only now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    tx.unbounded_send(kib_of(1)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    drop(tx);
    assert_eq!(intake.chunk().await.unwrap(), None);
    let (_, charge) = intake.into_parts();
    assert_eq!(charge.kib(), 7);
    assert!(charge.reserve.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_body_below_the_minimum_rate_is_cut_after_one_window() {
    let budget = Arc::new(Budget::new(100 << 10, 0.0, 64 << 10));
    let (tx, body) = fed();
    let mut intake = Intake::new(body, &budget, limits(1000));
    let begun = Instant::now();
    // 6 KB in the first window: 1200 bytes/s, enough; 100 bytes in the
    // second, a second into it: 20 bytes/s, too slow.
    tx.unbounded_send(Bytes::from(vec![1u8; 6000])).unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(6)).await;
        tx.unbounded_send(Bytes::from(vec![1u8; 100])).unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(tx);
    });
    intake.chunk().await.unwrap().unwrap();
    assert_eq!(intake.chunk().await.unwrap().unwrap().len(), 100);
    assert_eq!(Instant::now() - begun, Duration::from_secs(6));
    let cut = intake.chunk().await.unwrap_err();
    assert_eq!(
        cut,
        Cut::TooSlow {
            got: 20,
            min_rate: 1000
        }
    );
    assert_eq!(Instant::now() - begun, RATE_WINDOW * 2);
    assert!(
        cut.to_string().contains("admission.min_body_rate_bytes"),
        "{cut}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_not_whole_within_the_timeout_is_cut() {
    let budget = Arc::new(Budget::new(100 << 10, 0.0, 64 << 10));
    let (tx, body) = fed();
    let mut intake = Intake::new(
        body,
        &budget,
        BodyLimits {
            timeout: Duration::from_secs(7),
            ..limits(0)
        },
    );
    tx.unbounded_send(kib_of(1)).unwrap();
    intake.chunk().await.unwrap().unwrap();
    assert_eq!(intake.chunk().await.unwrap_err(), Cut::Timeout { secs: 7 });
}

#[tokio::test(start_paused = true)]
async fn bodies_past_the_cap_or_the_whole_budget_are_refused_for_good() {
    let budget = Arc::new(Budget::new(8 << 10, 0.0, 4 << 10));
    let (tx, body) = fed();
    let mut intake = Intake::new(
        body,
        &budget,
        BodyLimits {
            max_bytes: 4 << 10,
            ..limits(0)
        },
    );
    tx.unbounded_send(kib_of(5)).unwrap();
    assert_eq!(
        intake.chunk().await.unwrap_err(),
        Cut::TooLarge { limit: 4 << 10 }
    );
    let (tx, body) = fed();
    let mut intake = Intake::new(
        body,
        &budget,
        BodyLimits {
            max_bytes: 64 << 10,
            ..limits(0)
        },
    );
    tx.unbounded_send(kib_of(9)).unwrap();
    assert_eq!(
        intake.chunk().await.unwrap_err(),
        Cut::NeverFits {
            bytes: 9 << 10,
            total_kib: 8
        }
    );
}

#[tokio::test(start_paused = true)]
async fn joining_chunks_charges_the_copy_while_both_are_held() {
    let budget = Arc::new(Budget::new(20 << 10, 0.0, 10 << 10));
    let (tx, body) = fed();
    let mut intake = Intake::new(body, &budget, limits(0));
    for _ in 0..3 {
        tx.unbounded_send(kib_of(2)).unwrap();
    }
    drop(tx);
    let joined = intake.read_all().await.unwrap();
    assert_eq!(joined.len(), 6 << 10);
    // The copy's charge is given back once the chunks are gone.
    assert_eq!(budget.available_kib(), 14);
    // Six more KiB for the copy of six can never fit a budget of ten.
    let (tx, body) = fed();
    let budget = Arc::new(Budget::new(10 << 10, 0.0, 10 << 10));
    let mut intake = Intake::new(body, &budget, limits(0));
    for _ in 0..3 {
        tx.unbounded_send(kib_of(2)).unwrap();
    }
    drop(tx);
    let mut chunks = Vec::new();
    while let Some(c) = intake.chunk().await.unwrap() {
        chunks.push(c);
    }
    assert_eq!(
        intake.join(chunks).unwrap_err(),
        Cut::NeverFits {
            bytes: 6 << 10,
            total_kib: 10
        }
    );
}
