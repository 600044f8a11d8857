//! The overview's daily volume, per tool: the busiest tools of the range
//! each a band of its own colour (Okabe–Ito, told apart with most colour
//! vision deficiencies), the rest summed into one grey "other" band; in
//! each band the failed calls on top in a darker shade of the same hue.
//! Bands are ordered busiest first (at the bottom); ties by name. The SVG
//! draws no names: the legend beside it (HTML, escaped) does.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::{daily_axes, decorate};

/// How many tools get a band of their own.
pub const TOP: usize = 6;

/// Each top tool's (calls, failed calls) colours, in band order.
pub const PALETTE: [(RGBColor, RGBColor); TOP] = [
    (RGBColor(0x00, 0x72, 0xb2), RGBColor(0x00, 0x33, 0x55)), // blue
    (RGBColor(0xe6, 0x9f, 0x00), RGBColor(0x7a, 0x4f, 0x00)), // orange
    (RGBColor(0x00, 0x9e, 0x73), RGBColor(0x00, 0x4a, 0x36)), // bluish green
    (RGBColor(0xcc, 0x79, 0xa7), RGBColor(0x6e, 0x2f, 0x52)), // reddish purple
    (RGBColor(0x56, 0xb4, 0xe9), RGBColor(0x1c, 0x55, 0x78)), // sky blue
    (RGBColor(0xd5, 0x5e, 0x00), RGBColor(0x6b, 0x2b, 0x00)), // vermillion
];
/// The "other" band's colours.
pub const OTHER: (RGBColor, RGBColor) = (RGBColor(0xbb, 0xbb, 0xbb), RGBColor(0x55, 0x55, 0x55));

/// One band: a tool (or the rest) and its calls and failed calls per day.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// The tool; `None` for the band of the other tools.
    pub tool: Option<String>,
    pub calls: Vec<u64>,
    pub errors: Vec<u64>,
}

impl Band {
    pub fn total_calls(&self) -> u64 {
        self.calls.iter().sum()
    }

    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// The bands of days `from..=to`, bottom first.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolVolume {
    pub from: i32,
    pub to: i32,
    pub bands: Vec<Band>,
    /// How many tools the "other" band sums (0: no such band).
    pub others: usize,
}

impl ToolVolume {
    /// From (day, tool, calls, errors) rows (a tool may have several rows a
    /// day: they add up; days outside `from..=to` are left out): the `top`
    /// busiest tools of the range, then the rest as one band.
    pub fn top(rows: &[(i32, String, u64, u64)], from: i32, to: i32, top: usize) -> ToolVolume {
        let n = (to - from + 1).max(0) as usize;
        let mut by_tool: BTreeMap<&str, Band> = BTreeMap::new();
        for (day, tool, calls, errors) in rows.iter().filter(|r| (from..=to).contains(&r.0)) {
            let b = by_tool.entry(tool).or_insert_with(|| Band {
                tool: Some(tool.clone()),
                calls: vec![0; n],
                errors: vec![0; n],
            });
            let i = (day - from) as usize;
            b.calls[i] += calls;
            b.errors[i] += errors.min(calls);
        }
        let mut bands: Vec<Band> = by_tool.into_values().collect();
        // BTreeMap order is by name, and the sort is stable: ties stay so.
        bands.sort_by_key(|b| std::cmp::Reverse(b.total_calls()));
        let rest = bands.split_off(top.min(bands.len()));
        let others = rest.len();
        if others > 0 {
            let mut other = Band {
                tool: None,
                calls: vec![0; n],
                errors: vec![0; n],
            };
            for b in &rest {
                for i in 0..n {
                    other.calls[i] += b.calls[i];
                    other.errors[i] += b.errors[i];
                }
            }
            bands.push(other);
        }
        ToolVolume {
            from,
            to,
            bands,
            others,
        }
    }

    /// The colours of band `i`: (calls, failed calls).
    pub fn colours(&self, i: usize) -> (RGBColor, RGBColor) {
        match self.bands.get(i) {
            Some(b) if b.tool.is_some() => PALETTE[i % TOP],
            _ => OTHER,
        }
    }
}

/// The per-tool volume chart as SVG.
pub fn tools_svg(v: &ToolVolume, w: u32, h: u32) -> String {
    let mut out = String::new();
    {
        let area = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        let _ = draw(&area, v);
        let _ = area.present();
    }
    decorate(
        out,
        &format!(
            " role=\"img\" aria-label=\"Daily tool calls by tool, {} bands; the legend names them\"",
            v.bands.len()
        ),
        "",
    )
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    v: &ToolVolume,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let n = (v.to - v.from + 1).max(0) as usize;
    let day_total = |i: usize| v.bands.iter().map(|b| b.calls[i]).sum::<u64>();
    let max = (0..n).map(day_total).max().unwrap_or(0).max(1) as f64 * 1.08;
    let label = |y: &f64| format!("{y:.0}");
    let span = (n > 0).then_some((v.from, v.to));
    let Some(mut chart) = daily_axes(area, span, max, Some(&label))? else {
        return Ok(());
    };
    let mut base = vec![0u64; n];
    for (k, b) in v.bands.iter().enumerate() {
        let (ok_colour, err_colour) = v.colours(k);
        let mut rects = Vec::new();
        for i in (0..n).filter(|i| b.calls[*i] > 0) {
            let x = (v.from + i as i32) as f64;
            let (y0, ok, all) = (
                base[i] as f64,
                (base[i] + b.calls[i] - b.errors[i]) as f64,
                (base[i] + b.calls[i]) as f64,
            );
            if ok > y0 {
                rects.push(Rectangle::new(
                    [(x + 0.1, y0), (x + 0.9, ok)],
                    ok_colour.filled(),
                ));
            }
            if all > ok {
                rects.push(Rectangle::new(
                    [(x + 0.1, ok), (x + 0.9, all)],
                    err_colour.filled(),
                ));
            }
            base[i] += b.calls[i];
        }
        chart.draw_series(rects)?;
    }
    Ok(())
}
