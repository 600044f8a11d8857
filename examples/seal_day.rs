//! Seal-compact one day of a data directory that no server holds, and say
//! what it took: `cargo run --release --example seal_day -- DATA_DIR
//! YYYY-MM-DD [RANGE_ROWS]` (run it under `/usr/bin/time -v` for the peak RSS). Rewrites
//! the day in place: point it at a copy.

use std::time::Instant;

use stormwatch::store::{seal_compact, SealOptions};
use stormwatch::store::{Catalog, Layout};

/// As the server allocates.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(day)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: seal_day DATA_DIR YYYY-MM-DD");
    };
    let day = stormwatch::model::day_from_str(&day)
        .ok_or_else(|| anyhow::anyhow!("expected a day like 2026-07-20, got {day:?}"))?;
    let catalog = Catalog::new(Layout::new(&dir));
    let started = Instant::now();
    let mut opts = SealOptions::default();
    if let Some(rows) = args.next() {
        opts.range_rows = rows.parse()?;
    }
    let report = seal_compact(&catalog, day, &opts)?;
    let took = started.elapsed();
    match report {
        Some(r) => println!(
            "sealed in {:.2} s: {} sources -> {} outputs, {} rows, {} duplicates, {} sub-ranges",
            took.as_secs_f64(),
            r.sources.len(),
            r.outputs.len(),
            r.rows,
            r.duplicates,
            r.sub_ranges
        ),
        None => println!("nothing to seal"),
    }
    Ok(())
}
