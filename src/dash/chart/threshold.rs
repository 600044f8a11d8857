//! A tool's daily error rate against the threshold the spike rule judged
//! each day by: bars of the failed share (red where the rule flagged the
//! day, light where it did not), a tick at the low end of the day's
//! interval (what the rule compares), the threshold as a line with a point
//! per day that had calls (broken where a day had none), and a marker
//! (with a `<title>`) over each flagged day. The numbers come in already
//! decided (see `dash::spike`); nothing is computed here but pixels.

use std::fmt::Write;

use plotters::prelude::*;

use super::{daily_axes, decorate, BASE, ERR};
use crate::model::day_to_string;

/// A day that was not flagged.
pub const CALM: RGBColor = RGBColor(0xf4, 0xa6, 0xa6);
/// The low end of the day's interval.
pub const TICK: RGBColor = RGBColor(0x11, 0x11, 0x11);
/// The marker over a flagged day.
pub const FLAG: RGBColor = RGBColor(0x11, 0x11, 0x11);

/// One judged day, in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct RateDay {
    pub day: i32,
    /// The failed share of the day's calls.
    pub rate: f64,
    /// The low end of its one-sided interval: what the rule compares.
    pub lower: f64,
    /// The threshold it had to beat, at most 100.
    pub threshold: f64,
    pub flagged: bool,
}

/// The chart of `days` over `from..=to` as SVG.
pub fn threshold_svg(days: &[RateDay], from: i32, to: i32, w: u32, h: u32) -> String {
    let mut out = String::new();
    let mut flags = String::new();
    {
        let area = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        let _ = draw(&area, days, from, to, &mut flags);
        let _ = area.present();
    }
    let flagged: Vec<String> = days
        .iter()
        .filter(|d| d.flagged)
        .map(|d| day_to_string(d.day))
        .collect();
    let label = format!(
        " role=\"img\" aria-label=\"Failed share of calls by day, {} to {}, against the spike rule's threshold; flagged: {}\"",
        day_to_string(from),
        day_to_string(to),
        if flagged.is_empty() {
            "none".to_string()
        } else {
            flagged.join(", ")
        }
    );
    decorate(out, &label, &format!("<g class=\"flags\">{flags}</g>"))
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    days: &[RateDay],
    from: i32,
    to: i32,
    flags: &mut String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let top = days
        .iter()
        .map(|d| d.rate.max(d.threshold))
        .fold(1.0, f64::max);
    // Room above the tallest bar for its marker.
    let max = top * 1.12;
    let label = |v: &f64| {
        if *v > 100.0 + 1e-9 {
            String::new()
        } else {
            format!("{v:.0}%")
        }
    };
    let Some(mut chart) = daily_axes(area, (from <= to).then_some((from, to)), max, Some(&label))?
    else {
        return Ok(());
    };
    chart.draw_series(days.iter().map(|d| {
        let x = d.day as f64;
        let colour = if d.flagged { ERR } else { CALM };
        Rectangle::new([(x + 0.1, 0.0), (x + 0.9, d.rate)], colour.filled())
    }))?;
    chart.draw_series(days.iter().filter(|d| d.lower > 0.0).map(|d| {
        let x = d.day as f64;
        PathElement::new(
            vec![(x + 0.1, d.lower), (x + 0.9, d.lower)],
            TICK.stroke_width(2),
        )
    }))?;
    // The line joins consecutive days only: a day without calls has no
    // threshold, and no point.
    let mut run: Vec<(f64, f64)> = Vec::new();
    let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
    for (i, d) in days.iter().enumerate() {
        if i > 0 && days[i - 1].day + 1 != d.day {
            runs.push(std::mem::take(&mut run));
        }
        run.push((d.day as f64 + 0.5, d.threshold));
    }
    runs.push(run);
    for r in runs.into_iter().filter(|r| r.len() > 1) {
        chart.draw_series(LineSeries::new(r, BASE.stroke_width(2)))?;
    }
    chart.draw_series(
        days.iter()
            .map(|d| Circle::new((d.day as f64 + 0.5, d.threshold), 3, BASE.filled())),
    )?;
    for d in days.iter().filter(|d| d.flagged) {
        let (x0, y) = chart.backend_coord(&(d.day as f64 + 0.1, d.rate));
        let (x1, _) = chart.backend_coord(&(d.day as f64 + 0.9, d.rate));
        let (cx, half) = ((x0 + x1) / 2, ((x1 - x0) / 2).clamp(4, 8));
        let _ = write!(
            flags,
            "<path class=\"flag\" data-day=\"{day}\" d=\"M{} {} L{} {} L{cx} {} Z\" fill=\"{}\"><title>{day} flagged: {:.1}% failed (low end {:.1}%), above the threshold {:.1}%</title></path>",
            cx - half,
            y - 4 - 2 * half,
            cx + half,
            y - 4 - 2 * half,
            y - 4,
            super::hex(FLAG),
            d.rate,
            d.lower,
            d.threshold,
            day = day_to_string(d.day),
        );
    }
    Ok(())
}
