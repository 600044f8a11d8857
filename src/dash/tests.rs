//! Charts are deterministic; hostile names stay text.

use super::chart;
use super::html::{esc, seg};

fn days() -> Vec<chart::Day> {
    (20_640..20_670)
        .map(|d| {
            (
                d,
                100.0 + (d % 7) as f64,
                if d == 20_663 { 53.0 } else { 2.0 },
            )
        })
        .collect()
}

#[test]
fn charts_are_the_same_bytes_for_the_same_input() {
    let a = chart::volume_svg(&days(), 800, 300);
    assert_eq!(a, chart::volume_svg(&days(), 800, 300));
    assert!(
        a.starts_with("<svg") && a.contains("#D62728")
            || a.contains("#d62728")
            || a.contains("rgb(214,39,40)")
            || a.contains("D62728"),
        "{}",
        &a[..200.min(a.len())]
    );
    let p = chart::volume_png(&days(), 400, 150);
    assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(p, chart::volume_png(&days(), 400, 150));
    assert_ne!(p, chart::volume_png(&days()[..20], 400, 150));
    let r = chart::rate_svg(&days(), 600, 200, "%");
    assert_eq!(r, chart::rate_svg(&days(), 600, 200, "%"));
    assert_eq!(
        chart::sparkline(&[1, 2, 3], &[0, 1, 0]),
        chart::sparkline(&[1, 2, 3], &[0, 1, 0])
    );
    // No data: an empty chart, not a panic.
    assert!(chart::volume_svg(&[], 300, 100).starts_with("<svg"));
    assert!(!chart::volume_png(&[], 300, 100).is_empty());
}

#[test]
fn escaping_leaves_nothing_active() {
    let hostile = r#""><img src=x onerror=alert(1)><script>alert(1)</script>'"#;
    let e = esc(hostile);
    assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
    let s = seg(hostile);
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"%-_.~".contains(&b)),
        "{s}"
    );
}
