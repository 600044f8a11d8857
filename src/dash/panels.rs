//! The overview's panels, from `dashboards/overview.toml`: each a SQL file
//! run through polars SQL over the range's rows of the daily rollup (table
//! `tool_daily`), drawn as a chart kind. Users add panels without
//! recompiling; a panel whose query fails shows its error, the rest render.

use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped};
use polars::prelude::*;
use polars::sql::SQLContext;
use serde::Deserialize;

use super::chart::{self, swatch};
use crate::model::day_from_str;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    StackedDaily,
    ToolsDaily,
    BarsDaily,
    Table,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Panel {
    pub title: String,
    pub query: String,
    pub chart: Kind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    panel: Vec<Panel>,
}

/// The panels with their SQL.
#[derive(Debug, Clone)]
pub struct Panels {
    pub panels: Vec<(Panel, String)>,
    /// Where they came from (a file, or the built-in copy).
    pub origin: String,
}

const BUILTIN: &str = include_str!("../../dashboards/overview.toml");
const BUILTIN_SQL: [(&str, &str); 3] = [
    (
        "queries/panels/daily_calls_by_tool.sql",
        include_str!("../../queries/panels/daily_calls_by_tool.sql"),
    ),
    (
        "queries/panels/error_rate.sql",
        include_str!("../../queries/panels/error_rate.sql"),
    ),
    (
        "queries/panels/top_failing.sql",
        include_str!("../../queries/panels/top_failing.sql"),
    ),
];

/// Why the panels could not be read: each names the file.
#[derive(Debug, thiserror::Error)]
pub enum PanelsError {
    #[error("the built-in panels")]
    Builtin(#[source] toml::de::Error),
    #[error("{}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("{}: panel {title:?}: {}", path.display(), query.display())]
    Query {
        path: PathBuf,
        title: String,
        query: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `path` when it exists (its queries relative to its parent's parent, as
/// in the repository), else the built-in panels. Errors name the file.
pub fn load(path: &Path) -> Result<Panels, PanelsError> {
    if !path.exists() {
        let file: File = toml::from_str(BUILTIN).map_err(PanelsError::Builtin)?;
        let panels = file
            .panel
            .into_iter()
            .map(|p| {
                let sql = BUILTIN_SQL
                    .iter()
                    .find(|(q, _)| *q == p.query)
                    .map(|(_, s)| s.to_string())
                    .unwrap_or_default();
                (p, sql)
            })
            .collect();
        return Ok(Panels {
            panels,
            origin: "built in".into(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| PanelsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: File = toml::from_str(&text).map_err(|source| PanelsError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let base: PathBuf = path
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut panels = Vec::new();
    for p in file.panel {
        let q = base.join(&p.query);
        let sql = std::fs::read_to_string(&q).map_err(|source| PanelsError::Query {
            path: path.to_path_buf(),
            title: p.title.clone(),
            query: q.clone(),
            source,
        })?;
        panels.push((p, sql));
    }
    Ok(Panels {
        panels,
        origin: path.display().to_string(),
    })
}

fn run(sql: &str, rollup: &DataFrame) -> PolarsResult<DataFrame> {
    let mut ctx = SQLContext::new();
    ctx.register("tool_daily", rollup.clone().lazy());
    ctx.execute(sql)?.collect()
}

fn floats(df: &DataFrame, name: &str) -> PolarsResult<Vec<f64>> {
    let c = df.column(name)?.cast(&DataType::Float64)?;
    Ok(c.f64()?.iter().map(|v| v.unwrap_or(0.0)).collect())
}

/// Per day of `from..=to`: the result's (a, b) columns, zero where absent.
fn daily(
    df: &DataFrame,
    a: &str,
    b: Option<&str>,
    from: i32,
    to: i32,
) -> PolarsResult<Vec<chart::Day>> {
    let day = df.column("day")?.str()?;
    let av = floats(df, a)?;
    let bv = match b {
        Some(b) if df.schema().contains(b) => floats(df, b)?,
        _ => vec![0.0; df.height()],
    };
    let mut out: Vec<chart::Day> = (from..=to).map(|d| (d, 0.0, 0.0)).collect();
    for i in 0..df.height() {
        if let Some(d) = day
            .get(i)
            .and_then(day_from_str)
            .filter(|d| (from..=to).contains(d))
        {
            out[(d - from) as usize] = (d, av[i], bv[i]);
        }
    }
    Ok(out)
}

/// The result's (day, tool, total, errors) rows, as the per-tool chart
/// takes them.
fn tool_rows(df: &DataFrame) -> PolarsResult<Vec<(i32, String, u64, u64)>> {
    let day = df.column("day")?.str()?;
    let tool = df.column("tool")?.cast(&DataType::String)?;
    let tool = tool.str()?;
    let (total, errors) = (floats(df, "total")?, floats(df, "errors")?);
    Ok((0..df.height())
        .filter_map(|i| {
            Some((
                day.get(i).and_then(day_from_str)?,
                tool.get(i).unwrap_or("").to_string(),
                total[i].max(0.0) as u64,
                errors[i].max(0.0) as u64,
            ))
        })
        .collect())
}

/// The legend of the all-tools volume chart. (The swatches are our own SVG,
/// `chart::swatch`; the charts SVG plotters drew from numbers and names it
/// escaped.)
fn volume_legend() -> Markup {
    html! {
        p class="legend" {
            span { (PreEscaped(swatch(chart::OK))) "ok calls" }
            span { (PreEscaped(swatch(chart::ERR))) "failed calls" }
        }
    }
}

/// The per-tool chart with its legend: each band's two swatches (calls,
/// failed calls), the tool's name and its totals in the range.
fn tools_chart(v: &chart::ToolVolume) -> Markup {
    html! {
        (PreEscaped(chart::tools_svg(v, 1100, 300)))
        p class="legend tools" {
            @for (i, b) in v.bands.iter().enumerate() {
                @let (ok, err) = v.colours(i);
                span class="tool" {
                    (PreEscaped(swatch(ok))) (PreEscaped(swatch(err)))
                    @match &b.tool {
                        Some(t) => b { (t) },
                        None => {
                            b { "other" }
                            " (" (v.others) " tool" @if v.others != 1 { "s" } ")"
                        }
                    }
                    " " span class="muted" { (b.total_calls()) " calls, " (b.total_errors()) " failed" }
                }
            }
            @if v.bands.is_empty() {
                span class="muted" { "No tool calls in this range." }
            } @else {
                span class="muted" { "The darker top of each band is that tool's failed calls." }
            }
        }
    }
}

fn table(df: &DataFrame) -> Markup {
    html! {
        table {
            tr { @for name in df.get_column_names() { th { (name) } } }
            @for i in 0..df.height().min(200) {
                tr {
                    @for c in df.columns() {
                        @let v = c.get(i).map(|v| v.to_string()).unwrap_or_default();
                        td { (v.trim_matches('"')) }
                    }
                }
            }
        }
    }
}

/// Render every panel over `rollup` (the range's rows), `from..=to`: a
/// template's output, as text.
pub fn render(panels: &Panels, rollup: &DataFrame, from: i32, to: i32) -> String {
    html! {
        @for (i, (p, sql)) in panels.panels.iter().enumerate() {
            @let body = run(sql, rollup).and_then(|df| match p.chart {
                Kind::StackedDaily => daily(&df, "total", Some("errors"), from, to).map(|d| {
                    html! { (PreEscaped(chart::volume_svg(&d, 1100, 300))) (volume_legend()) }
                }),
                Kind::ToolsDaily => tool_rows(&df).map(|rows| {
                    tools_chart(&chart::ToolVolume::top(&rows, from, to, chart::tools::TOP))
                }),
                Kind::BarsDaily => daily(&df, "value", Some("reference"), from, to)
                    .map(|d| PreEscaped(chart::rate_svg(&d, 1100, 220, ""))),
                Kind::Table => Ok(table(&df)),
            });
            h2 { (p.title) }
            @match body {
                Ok(b) => div class="chart" id=[(i == 0).then_some("volume")] { (b) },
                Err(e) => p class="err" { "This panel's query (" (p.query) ") failed: " (e.to_string()) },
            }
        }
    }
    .into_string()
}
