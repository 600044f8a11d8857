//! The sweep's part in remedies: the raw error names each signal's class
//! was logged under (from the error-names rollup, over the sweep's window),
//! handed to [`crate::signal::remedy`] so a remedy quotes what the logs say.

use std::collections::BTreeMap;

use polars::prelude::*;

use super::{data, SweepError};
use crate::model::day_to_string;
use crate::signal::SignalDraft;
use crate::store::Reader;

/// Per (tool, class), the raw names since `since`, most calls first.
fn raw_names(
    reader: &Reader,
    since: i32,
) -> Result<BTreeMap<(String, String), Vec<String>>, SweepError> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let Some(lf) = reader.tool_error_names()? else {
        return Ok(out);
    };
    let df = lf
        .map(|lf| {
            lf.filter(col("day").gt_eq(lit(day_to_string(since))))
                .group_by([col("tool_name"), col("error_class"), col("error_type")])
                .agg([col("calls").cast(DataType::UInt64).sum()])
                .sort(
                    ["calls", "error_type"],
                    SortMultipleOptions::default().with_order_descending_multi([true, false]),
                )
        })
        .collect()
        .map_err(data("reading the error names rollup"))?;
    let strs = |name: &str| -> Result<StringChunked, SweepError> {
        df.column(name)
            .and_then(|c| c.str().cloned())
            .map_err(data("reading the error names rollup"))
    };
    let (tool, class, name) = (
        strs("tool_name")?,
        strs("error_class")?,
        strs("error_type")?,
    );
    for i in 0..df.height() {
        if let (Some(t), Some(c), Some(n)) = (tool.get(i), class.get(i), name.get(i)) {
            out.entry((t.to_string(), c.to_string()))
                .or_default()
                .push(n.to_string());
        }
    }
    Ok(out)
}

/// Give every draft its remedy, quoting its class's raw names.
pub fn attach(reader: &Reader, since: i32, drafts: &mut [SignalDraft]) -> Result<(), SweepError> {
    let names = raw_names(reader, since)?;
    for d in drafts {
        let raw = names
            .get(&(d.tool.clone(), d.error_class.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        d.remedy = Some(crate::signal::remedy(d, raw));
    }
    Ok(())
}
