//! The report's pictures, drawn as SVG with `plotters`: every row's ratio
//! beside its target, and consume p50 against live grants per store.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::harness::{Row, Target};
use crate::scale_bench::ScaleCurve;

const MET: RGBColor = RGBColor(46, 125, 50);
const MISSED: RGBColor = RGBColor(198, 40, 40);
const NO_TARGET: RGBColor = RGBColor(120, 120, 120);

fn err(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
}

/// One horizontal bar per row: the measured ratio, green when it meets its
/// target, red when it misses; a black tick marks the target. Time rows
/// meet at or left of their tick, throughput rows at or right of it.
pub fn ratios(rows: &[Row], path: &Path) -> Result<(), String> {
    let height = 130 + 34 * rows.len() as u32;
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let most = rows
        .iter()
        .flat_map(|row| {
            let target = match row.target {
                Target::TimeRatioAtMost(x) | Target::ThroughputRatioAtLeast(x) => x,
            };
            [row.verdict().0, target]
        })
        .filter(|x| x.is_finite())
        .fold(1.0f64, f64::max);
    let x_end = (most * 1.1).ceil().min(20.0);
    let count = rows.len() as u32;
    // Row 0 at the top: segment `count - 1 - i` holds row `i`.
    let segment = |i: usize| count - 1 - i as u32;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "ratio against the same-run baseline; the black tick is the target",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(560)
        .build_cartesian_2d(0f64..x_end, (0u32..count).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.len().max(1))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .y_label_formatter(&|value| match value {
            SegmentValue::CenterOf(k) if *k < count => {
                let name = &rows[(count - 1 - k) as usize].name;
                if name.chars().count() > 80 {
                    format!("{}…", name.chars().take(79).collect::<String>())
                } else {
                    name.clone()
                }
            }
            _ => String::new(),
        })
        .x_desc("ratio to the baseline: time rows meet at or left of their tick, throughput rows at or right of it")
        .draw()
        .map_err(err)?;
    for (i, row) in rows.iter().enumerate() {
        let (ratio, met) = row.verdict();
        let k = segment(i);
        let colour = match met {
            Some(true) => MET,
            Some(false) => MISSED,
            None => NO_TARGET,
        };
        let shown = if ratio.is_finite() {
            ratio.clamp(0.0, x_end)
        } else {
            x_end
        };
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(k)),
                (shown, SegmentValue::Exact(k + 1)),
            ],
            colour.filled(),
        );
        bar.set_margin(4, 4, 0, 0);
        chart.draw_series(std::iter::once(bar)).map_err(err)?;
        let target = match row.target {
            Target::TimeRatioAtMost(x) | Target::ThroughputRatioAtLeast(x) => x,
        };
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (target, SegmentValue::Exact(k)),
                    (target, SegmentValue::Exact(k + 1)),
                ],
                BLACK.stroke_width(3),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{ratio:.2}"),
                (shown + x_end * 0.006, SegmentValue::CenterOf(k)),
                TextStyle::from(("sans-serif", 13).into_font())
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Consume p50 (µs, log scale) against live grants (log scale), one line
/// per store and path.
pub fn scale(curves: &[ScaleCurve], path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let points = curves.iter().flat_map(|c| c.points.iter());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (u64::MAX, 1u64, f64::MAX, 0f64);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if x_min == u64::MAX || y_max <= 0.0 {
        return Err("chart: no scale points".to_owned());
    }
    let x_range = (x_min as f64 / 2.0)..(x_max as f64 * 2.0);
    let y_range = (y_min.max(0.01) / 2.0)..(y_max * 2.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "consume p50 against live grants, per store",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range.log_scale(), y_range.log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("live grants")
        .y_desc("consume p50 (µs)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(err)?;
    const PALETTE: [RGBColor; 5] = [
        RGBColor(21, 101, 192),
        RGBColor(198, 40, 40),
        RGBColor(239, 108, 0),
        RGBColor(46, 125, 50),
        RGBColor(106, 27, 154),
    ];
    for (curve, &colour) in curves.iter().zip(PALETTE.iter().cycle()) {
        let line: Vec<(f64, f64)> = curve.points.iter().map(|&(x, y)| (x as f64, y)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))
            .map_err(err)?
            .label(curve.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, 4, colour.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
