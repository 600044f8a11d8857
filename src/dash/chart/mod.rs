//! Charts, drawn by plotters: the daily volume (ok and errors stacked,
//! errors red), bars against a line (a latency against its p95, a panel's
//! value against its reference), and sparklines; in [`threshold`], a
//! tool's error rate against the spike rule's own threshold; in [`tools`],
//! the overview's volume per tool. Pure functions of their numbers: the
//! same input gives the same bytes. Only dates and numbers are drawn as
//! text, never span data (legends naming tools are HTML, beside the SVG).
//! PNGs carry no text (plotters needs a font file to rasterise text; the SVG
//! leaves that to the browser).

pub mod threshold;
pub mod tools;

#[cfg(test)]
mod tests;

use std::fmt::Write;

use plotters::prelude::*;

use crate::model::day_to_string;

pub use threshold::{threshold_svg, RateDay};
pub use tools::{tools_svg, ToolVolume};

pub const OK: RGBColor = RGBColor(0x4e, 0x79, 0xa7);
pub const ERR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
pub const BASE: RGBColor = RGBColor(0x33, 0x33, 0x33);

/// One day of a chart: (day, total, errors) or (day, value, reference).
pub type Day = (i32, f64, f64);

fn short_day(d: f64) -> String {
    day_to_string(d.floor() as i32)
        .get(5..)
        .unwrap_or("")
        .to_string()
}

/// `#rrggbb`, for HTML legends beside a chart.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A legend's swatch of `c` (HTML): a small SVG, whose `fill` is an
/// attribute, not an inline style the CSP would refuse.
pub fn swatch(c: RGBColor) -> String {
    swatch_of("sw", c)
}

/// A swatch of `c` with its own classes (`sw line`: a thin line).
pub fn swatch_of(class: &str, c: RGBColor) -> String {
    format!(
        r#"<svg class="{class}" viewBox="0 0 10 10" preserveAspectRatio="none" aria-hidden="true"><rect width="10" height="10" fill="{}"/></svg>"#,
        hex(c)
    )
}

/// The first and last day of `days`.
fn span(days: &[Day]) -> Option<(i32, i32)> {
    Some((days.first()?.0, days.last()?.0))
}

/// `svg` with `attrs` (already escaped) on its root element and `extra`
/// (elements) before its end.
fn decorate(mut svg: String, attrs: &str, extra: &str) -> String {
    if let Some(end) = svg.rfind("</svg>") {
        svg.insert_str(end, extra);
    }
    if svg.starts_with("<svg") {
        svg.insert_str(4, attrs);
    }
    svg
}

type Axes<'a, DB> = ChartContext<
    'a,
    DB,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// The white area and the axes of a daily chart: the days `span` along x,
/// 0..`max` up y. With `y_label`, the mesh and labels are drawn (without,
/// bars only: the PNG). `None` when there are no days.
fn daily_axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    span: Option<(i32, i32)>,
    max: f64,
    y_label: Option<&dyn Fn(&f64) -> String>,
) -> Result<Option<Axes<'a, DB>>, DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&WHITE)?;
    let Some((from, to)) = span else {
        return Ok(None);
    };
    let mut b = ChartBuilder::on(area);
    b.margin(8);
    if y_label.is_some() {
        b.x_label_area_size(22).y_label_area_size(52);
    }
    let mut chart = b.build_cartesian_2d(from as f64..(to + 1) as f64, 0f64..max)?;
    if let Some(y_label) = y_label {
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(8)
            .y_labels(5)
            .x_label_formatter(&|d| short_day(*d))
            .y_label_formatter(y_label)
            .label_style(("sans-serif", 11))
            .draw()?;
    }
    Ok(Some(chart))
}

/// Stacked daily bars (ok below, errors red on top) into `area`.
fn volume<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    days: &[Day],
    text: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let max = days.iter().map(|d| d.1).fold(1.0, f64::max) * 1.08;
    let label = |v: &f64| format!("{v:.0}");
    let Some(mut chart) = daily_axes(
        area,
        span(days),
        max,
        text.then_some(&label as &dyn Fn(&f64) -> String),
    )?
    else {
        return Ok(());
    };
    chart.draw_series(days.iter().map(|(d, total, errs)| {
        let x = *d as f64;
        Rectangle::new([(x + 0.1, 0.0), (x + 0.9, total - errs)], OK.filled())
    }))?;
    chart.draw_series(days.iter().filter(|d| d.2 > 0.0).map(|(d, total, errs)| {
        let x = *d as f64;
        Rectangle::new([(x + 0.1, total - errs), (x + 0.9, *total)], ERR.filled())
    }))?;
    Ok(())
}

/// The daily volume chart as SVG.
pub fn volume_svg(days: &[Day], w: u32, h: u32) -> String {
    let mut out = String::new();
    {
        let area = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        let _ = volume(&area, days, true);
        let _ = area.present();
    }
    out
}

/// The daily volume chart as PNG (bars only).
pub fn volume_png(days: &[Day], w: u32, h: u32) -> Vec<u8> {
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let area = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        let _ = volume(&area, days, false);
        let _ = area.present();
    }
    let mut png = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        if let Ok(mut writer) = enc.write_header() {
            let _ = writer.write_image_data(&rgb);
        }
    }
    png
}

/// Daily bars (red) against a line: a latency (p50) against its p95, or a
/// panel's value against its reference.
pub fn rate_svg(days: &[Day], w: u32, h: u32, unit: &str) -> String {
    let mut out = String::new();
    {
        let area = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        let _ = (|| -> Result<(), DrawingAreaErrorKind<_>> {
            let max = days.iter().map(|d| d.1.max(d.2)).fold(1e-9, f64::max) * 1.1;
            let label = |v: &f64| format!("{v:.1}{unit}");
            let Some(mut chart) = daily_axes(&area, span(days), max, Some(&label))? else {
                return Ok(());
            };
            chart.draw_series(days.iter().map(|(d, v, _)| {
                let x = *d as f64;
                Rectangle::new([(x + 0.1, 0.0), (x + 0.9, *v)], ERR.mix(0.85).filled())
            }))?;
            chart.draw_series(LineSeries::new(
                days.iter().map(|(d, _, r)| (*d as f64 + 0.5, *r)),
                BASE.stroke_width(2),
            ))?;
            Ok(())
        })();
        let _ = area.present();
    }
    out
}

/// A tiny inline sparkline of daily calls, the failed part of each day red:
/// two paths of bars, a few hundred bytes.
pub fn sparkline(calls: &[u64], errors: &[u64]) -> String {
    let h = 18.0;
    let max = calls.iter().copied().max().unwrap_or(0).max(1) as f64;
    let bw = 90.0 / calls.len().max(1) as f64;
    let (mut ok, mut bad) = (String::new(), String::new());
    for (i, (c, e)) in calls.iter().zip(errors).enumerate() {
        let bh = (*c as f64 / max * h).max(if *c > 0 { 1.0 } else { 0.0 });
        let eh = (*e as f64 / max * h).min(bh);
        let x = i as f64 * bw;
        let w = (bw - 0.5).max(0.5);
        if bh - eh > 0.0 {
            let _ = write!(ok, "M{x:.1} {:.1}h{w:.1}v{:.1}h-{w:.1}z", h - bh, bh - eh);
        }
        if eh > 0.0 {
            let _ = write!(bad, "M{x:.1} {:.1}h{w:.1}v{eh:.1}h-{w:.1}z", h - eh);
        }
    }
    format!(
        r##"<svg class="spark" width="90" height="18" viewBox="0 0 90 18" xmlns="http://www.w3.org/2000/svg"><path d="{ok}" fill="#4e79a7"/><path d="{bad}" fill="#d62728"/></svg>"##
    )
}
