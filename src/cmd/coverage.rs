//! `stormwatch coverage`: what the store's newest days leave stormwatch
//! blind to, per service and instrumentation scope, and the fix.

use std::io::Write;
use std::path::Path;

use super::{Format, Status};

/// Print the report over the newest `days` days (JSON: the `/api/coverage`
/// document; Markdown as text).
pub fn run(
    data_dir: &Path,
    days: u32,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let reader = crate::store::Reader::open(data_dir)?;
    let report = crate::coverage::report(&reader, days, &Default::default())?;
    match format {
        Format::Json => writeln!(out, "{:#}", serde_json::to_value(&report)?)?,
        Format::Text | Format::Markdown => write!(out, "{}", crate::coverage::text(&report))?,
    }
    Ok(Status::Success)
}
