//! Where everything goes: turns a [`ReliabilityChart`] into a [`Scene`].

use kenning_core::CalibrationStatus;

use crate::scene::{Anchor, Color, Scene, Shape, text_width};
use crate::{ReliabilityChart, Series};

/// Width of the picture in pixels.
pub const WIDTH: u32 = 1080;
/// Height of the picture in pixels.
pub const HEIGHT: u32 = 720;
/// Series beyond this many are left out of the picture (the legend says how many).
pub const MAX_SERIES: usize = 6;

const PLOT_LEFT: f64 = 110.0;
const PLOT_TOP: f64 = 112.0;
const PLOT_SIZE: f64 = 520.0;
const LEGEND_LEFT: f64 = 690.0;
const LEGEND_RIGHT: f64 = 1065.0;
const TEXT: u32 = 2;
const TITLE: u32 = 3;
const MIN_RADIUS: f64 = 4.0;
const MAX_RADIUS: f64 = 14.0;
/// The row of outcome counts sits this far above the plot, beyond the largest marker.
const COUNTS_ABOVE_PLOT: f64 = 22.0;
/// How far towards white the bars are tinted.
const BAR_TINT: f64 = 0.78;

/// Series colours in order: blue, orange, green, purple, red, teal.
const PALETTE: [Color; MAX_SERIES] = [
    Color(37, 99, 235),
    Color(234, 88, 12),
    Color(22, 163, 74),
    Color(147, 51, 234),
    Color(220, 38, 38),
    Color(8, 145, 178),
];

/// The pixel position of (stated confidence, observed success) on the plot.
pub fn plot_point(confidence: f64, success: f64) -> (f64, f64) {
    (PLOT_LEFT + PLOT_SIZE * confidence.clamp(0.0, 1.0), PLOT_TOP + PLOT_SIZE * (1.0 - success.clamp(0.0, 1.0)))
}

/// The colour of the series at `index` (markers, lines, legend; the first series' bars are a
/// tint of it), as RGB.
pub fn series_color(index: usize) -> [u8; 3] {
    let Color(r, g, b) = PALETTE[index % MAX_SERIES];
    [r, g, b]
}

pub(crate) fn layout(chart: &ReliabilityChart) -> Scene {
    let mut shapes = Vec::new();
    let series = &chart.series[..chart.series.len().min(MAX_SERIES)];
    title(&mut shapes, &chart.title);
    axes(&mut shapes);
    diagonal(&mut shapes);
    if let Some(first) = series.first() {
        bars(&mut shapes, first);
    }
    let largest = series.iter().flat_map(|s| s.bins.iter().map(|bin| bin.count)).max().unwrap_or(0);
    if largest == 0 {
        // Left of the diagonal, so that it does not cross the words.
        let (x, y) = plot_point(0.4, 0.75);
        shapes.push(text(x, y, "no outcomes yet", TEXT, Color::MUTED, Anchor::Middle));
    }
    for (index, series) in series.iter().enumerate().rev() {
        markers(&mut shapes, series, PALETTE[index], largest);
    }
    legend(&mut shapes, series, chart.series.len() - series.len());
    Scene { width: WIDTH, height: HEIGHT, shapes }
}

fn text(x: f64, y: f64, text: &str, scale: u32, color: Color, anchor: Anchor) -> Shape {
    Shape::Text { x, y, text: text.to_owned(), scale, color, anchor, vertical: false }
}

/// `text` cut with `...` so that it is at most `width` pixels wide at `scale`.
fn fit(text: &str, scale: u32, width: f64) -> String {
    if text_width(text, scale) <= width {
        return text.to_owned();
    }
    let mut kept: String = text.chars().collect();
    while !kept.is_empty() && text_width(&format!("{kept}..."), scale) > width {
        kept.pop();
    }
    format!("{kept}...")
}

fn title(shapes: &mut Vec<Shape>, title: &str) {
    let centre = f64::from(WIDTH) / 2.0;
    shapes.push(text(centre, 28.0, &fit(title, TITLE, f64::from(WIDTH) - 40.0), TITLE, Color::INK, Anchor::Middle));
    let subtitle = "observed success by stated confidence (on the diagonal = well calibrated)";
    shapes.push(text(centre, 58.0, subtitle, TEXT, Color::MUTED, Anchor::Middle));
}

/// A one-pixel line's coordinate on a pixel centre, so that it is drawn crisp.
fn crisp(coordinate: f64) -> f64 {
    coordinate.floor() + 0.5
}

fn axes(shapes: &mut Vec<Shape>) {
    let (left, top) = plot_point(0.0, 1.0);
    let (right, bottom) = plot_point(1.0, 0.0);
    shapes.push(Shape::Rect { x: left, y: top, width: PLOT_SIZE, height: PLOT_SIZE, fill: Color(249, 250, 251) });
    for tenth in 0..=10 {
        let value = f64::from(tenth) / 10.0;
        let (x, y) = plot_point(value, value);
        let (x, y) = (crisp(x), crisp(y));
        if tenth > 0 {
            shapes.push(grid_line((x, top), (x, bottom)));
            shapes.push(grid_line((left, y), (right, y)));
        }
        let tick = if tenth % 2 == 0 { 8.0 } else { 4.0 };
        shapes.push(Shape::Line { from: (x, bottom), to: (x, bottom + tick), width: 1.0, color: Color::INK, dash: None });
        shapes.push(Shape::Line { from: (left - tick, y), to: (left, y), width: 1.0, color: Color::INK, dash: None });
        if tenth % 2 == 0 {
            let label = format!("{}%", tenth * 10);
            shapes.push(text(x, bottom + 24.0, &label, TEXT, Color::INK, Anchor::Middle));
            shapes.push(text(left - 14.0, y, &label, TEXT, Color::INK, Anchor::End));
        }
    }
    let axis = |from, to| Shape::Line { from, to, width: 2.0, color: Color::INK, dash: None };
    shapes.push(axis((left, bottom), (right, bottom)));
    shapes.push(axis((left, top), (left, bottom)));
    shapes.push(text((left + right) / 2.0, bottom + 58.0, "stated confidence", TEXT, Color::INK, Anchor::Middle));
    shapes.push(Shape::Text {
        x: left - 80.0,
        y: (top + bottom) / 2.0,
        text: "observed success".to_owned(),
        scale: TEXT,
        color: Color::INK,
        anchor: Anchor::Middle,
        vertical: true,
    });
}

fn grid_line(from: (f64, f64), to: (f64, f64)) -> Shape {
    Shape::Line { from, to, width: 1.0, color: Color::GRID, dash: None }
}

fn diagonal(shapes: &mut Vec<Shape>) {
    shapes.push(Shape::Line {
        from: plot_point(0.0, 0.0),
        to: plot_point(1.0, 1.0),
        width: 2.0,
        color: Color::MUTED,
        dash: Some(8.0),
    });
}

/// The first series' observed success per bin as bars spanning the bin, and its outcome counts
/// in a row above the plot, clear of the markers.
fn bars(shapes: &mut Vec<Shape>, series: &Series) {
    let (left, top) = plot_point(0.0, 1.0);
    let counts_row = top - COUNTS_ABOVE_PLOT;
    shapes.push(text(left - 14.0, counts_row, "n", TEXT, PALETTE[0], Anchor::End));
    for bin in &series.bins {
        let Some(success) = bin.observed_success.filter(|_| bin.count > 0) else { continue };
        let (left, top) = plot_point(bin.lower, success);
        let (right, bottom) = plot_point(bin.upper, 0.0);
        shapes.push(Shape::Rect {
            x: left + 3.0,
            y: top,
            width: right - left - 6.0,
            height: bottom - top,
            fill: PALETTE[0].tint(BAR_TINT),
        });
        shapes.push(text((left + right) / 2.0, counts_row, &bin.count.to_string(), TEXT, PALETTE[0], Anchor::Middle));
    }
}

fn marker_radius(count: usize, largest: usize) -> f64 {
    MIN_RADIUS + (MAX_RADIUS - MIN_RADIUS) * (count as f64 / largest.max(1) as f64).sqrt()
}

fn markers(shapes: &mut Vec<Shape>, series: &Series, color: Color, largest: usize) {
    let points: Vec<((f64, f64), usize)> = series
        .bins
        .iter()
        .filter(|bin| bin.count > 0)
        .filter_map(|bin| Some((plot_point(bin.mean_confidence?, bin.observed_success?), bin.count)))
        .collect();
    for pair in points.windows(2) {
        shapes.push(Shape::Line { from: pair[0].0, to: pair[1].0, width: 2.0, color, dash: None });
    }
    for &(centre, count) in &points {
        shapes.push(Shape::Circle {
            centre,
            radius: marker_radius(count, largest),
            fill: color,
            outline: Some((Color::WHITE, 1.5)),
        });
    }
}

fn status_words(status: CalibrationStatus) -> &'static str {
    match status {
        CalibrationStatus::InsufficientData => "insufficient data",
        CalibrationStatus::WellCalibrated => "well calibrated",
        CalibrationStatus::Overconfident => "overconfident",
        CalibrationStatus::Underconfident => "underconfident",
        CalibrationStatus::Miscalibrated => "miscalibrated",
    }
}

fn legend(shapes: &mut Vec<Shape>, series: &[Series], left_out: usize) {
    let width = LEGEND_RIGHT - LEGEND_LEFT - 22.0;
    let mut y = PLOT_TOP + 8.0;
    for (index, series) in series.iter().enumerate() {
        let color = PALETTE[index];
        shapes.push(Shape::Circle { centre: (LEGEND_LEFT + 7.0, y), radius: 7.0, fill: color, outline: None });
        shapes.push(text(LEGEND_LEFT + 22.0, y, &fit(&series.name, TEXT, width), TEXT, Color::INK, Anchor::Start));
        let brier = series.brier_score.map_or("-".to_owned(), |brier| format!("{brier:.3}"));
        let counts = format!("n={}  Brier {brier}", series.sample_size);
        shapes.push(text(LEGEND_LEFT + 22.0, y + 22.0, &fit(&counts, TEXT, width), TEXT, Color::MUTED, Anchor::Start));
        let gap = series.confidence_gap.map_or("-".to_owned(), |gap| format!("{gap:+.2}"));
        let verdict = format!("gap {gap}  {}", status_words(series.status));
        shapes.push(text(LEGEND_LEFT + 22.0, y + 44.0, &fit(&verdict, TEXT, width), TEXT, Color::MUTED, Anchor::Start));
        y += 74.0;
    }
    if left_out > 0 {
        let note = format!("(+{left_out} more not drawn)");
        shapes.push(text(LEGEND_LEFT, y - 8.0, &note, TEXT, Color::MUTED, Anchor::Start));
        y += 22.0;
    }

    y += 6.0;
    shapes.push(Shape::Line {
        from: (LEGEND_LEFT, y),
        to: (LEGEND_LEFT + 16.0, y),
        width: 2.0,
        color: Color::MUTED,
        dash: Some(4.0),
    });
    shapes.push(text(LEGEND_LEFT + 22.0, y, "perfect calibration", TEXT, Color::INK, Anchor::Start));
    y += 24.0;
    if let Some(first) = series.first() {
        shapes.push(Shape::Rect { x: LEGEND_LEFT, y: y - 7.0, width: 16.0, height: 14.0, fill: PALETTE[0].tint(BAR_TINT) });
        let bars = format!("{}: success per bin", first.name);
        shapes.push(text(LEGEND_LEFT + 22.0, y, &fit(&bars, TEXT, width), TEXT, Color::INK, Anchor::Start));
        y += 24.0;
        shapes.push(text(LEGEND_LEFT + 7.0, y, "n", TEXT, PALETTE[0], Anchor::Middle));
        let counts = format!("{} outcomes per bin", first.name);
        shapes.push(text(LEGEND_LEFT + 22.0, y, &fit(&counts, TEXT, width), TEXT, Color::INK, Anchor::Start));
        y += 24.0;
        shapes.push(text(LEGEND_LEFT + 22.0, y, "marker area ~ outcomes", TEXT, Color::INK, Anchor::Start));
        shapes.push(Shape::Circle { centre: (LEGEND_LEFT + 8.0, y), radius: 5.0, fill: Color::MUTED, outline: None });
    }
}
