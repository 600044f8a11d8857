//! `stormwatch coverage`: what the store's newest days leave stormwatch
//! blind to, per service and instrumentation scope, and the fix.

use std::io::Write;
use std::path::Path;

use super::{Format, Status};

/// Print the report over `span`: text, JSON (the `/api/coverage`
/// document) or Markdown.
pub fn run(
    data_dir: &Path,
    span: crate::coverage::Span,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let reader = crate::store::Reader::open(data_dir)?;
    let report = crate::coverage::report(&reader, span, &Default::default())?;
    match format {
        Format::Json => writeln!(out, "{:#}", serde_json::to_value(&report)?)?,
        Format::Text => write!(out, "{}", crate::coverage::text(&report))?,
        Format::Markdown => write!(out, "{}", crate::coverage::markdown(&report))?,
    }
    Ok(Status::Success)
}
