//! The reliability diagram: an SVG snapshot of a fixed chart, and the PNG decoded and checked
//! pixel by pixel where the plotted points must land.

use chrono::{Duration, TimeZone, Utc};
use kenning_chart::{HEIGHT, ReliabilityChart, Series, WIDTH, plot_point, reliability_png, reliability_svg, series_color};
use kenning_core::{Evidence, calibrate};

/// Outcomes as (stated confidence, score), one per hour.
fn evidence(outcomes: &[(f64, f64)]) -> Vec<Evidence> {
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap();
    outcomes
        .iter()
        .enumerate()
        .map(|(hour, &(stated_confidence, score))| Evidence { stated_confidence, score, at: start + Duration::hours(hour as i64) })
        .collect()
}

fn database() -> Vec<(f64, f64)> {
    vec![
        (0.9, 1.0), (0.8, 0.0), (0.85, 1.0), (0.7, 0.5), (0.9, 0.0), (0.8, 1.0),
        (0.75, 1.0), (0.8, 1.0), (0.9, 0.5), (0.85, 1.0), (0.7, 1.0), (0.85, 1.0),
    ]
}

fn auth() -> Vec<(f64, f64)> {
    vec![(0.95, 0.0), (0.9, 1.0), (0.95, 0.0), (0.6, 1.0), (0.5, 0.0), (0.65, 1.0), (0.3, 0.0), (0.95, 0.5)]
}

fn chart() -> ReliabilityChart {
    let all: Vec<(f64, f64)> = database().into_iter().chain(auth()).collect();
    ReliabilityChart {
        title: "Calibration of kenning decisions".to_owned(),
        series: vec![
            Series::from_calibration("overall", &calibrate(&evidence(&all))),
            Series::from_calibration("database", &calibrate(&evidence(&database()))),
            Series::from_calibration("auth", &calibrate(&evidence(&auth()))),
        ],
    }
}

#[test]
fn svg_snapshot() {
    insta::assert_snapshot!(reliability_svg(&chart()));
}

fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    pixels.truncate(info.buffer_size());
    (info, pixels)
}

fn pixel(pixels: &[u8], (x, y): (f64, f64)) -> [u8; 3] {
    let offset = (y.floor() as usize * WIDTH as usize + x.floor() as usize) * 3;
    [pixels[offset], pixels[offset + 1], pixels[offset + 2]]
}

#[test]
fn png_points_land_where_the_data_put_them() {
    let chart = chart();
    let (info, pixels) = decode(&reliability_png(&chart));
    assert_eq!((info.width, info.height, info.color_type, info.bit_depth), (WIDTH, HEIGHT, png::ColorType::Rgb, png::BitDepth::Eight));

    // Markers are drawn last series first, so the overall series (index 0) is on top: the centre
    // of each of its markers has its colour exactly, and so has every other marker not under one
    // of an earlier series.
    let mut checked = 0;
    for (index, series) in chart.series.iter().enumerate() {
        for bin in series.bins.iter().filter(|bin| bin.count > 0) {
            let centre = plot_point(bin.mean_confidence.unwrap(), bin.observed_success.unwrap());
            let covered_by_earlier = chart.series[..index].iter().any(|earlier| {
                earlier.bins.iter().filter(|b| b.count > 0).any(|b| {
                    let other = plot_point(b.mean_confidence.unwrap(), b.observed_success.unwrap());
                    (other.0 - centre.0).hypot(other.1 - centre.1) < 16.0
                })
            });
            if !covered_by_earlier {
                assert_eq!(pixel(&pixels, centre), series_color(index), "{} bin {}", series.name, bin.lower);
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "only {checked} markers were clear of others");

    // The overall series in bin [0.9, 1.0]: database's three at 0.9 (scores 1, 0, 0.5) and auth's
    // 0.95, 0.9, 0.95, 0.95 (scores 0, 1, 0, 0.5): seven outcomes scoring 3 in all.
    let top_bin = &chart.series[0].bins[9];
    assert_eq!((top_bin.count, top_bin.observed_success), (7, Some(3.0 / 7.0)));
    // Its bar fills the bin up to 3/7 with a light tint of the series colour, and stops there.
    let bar = pixel(&pixels, plot_point(0.95, 0.15));
    let blue = series_color(0);
    assert!((0..3).all(|c| bar[c] > blue[c] && bar[c] < 255 && bar[c] > 200), "bar tint expected, got {bar:?}");
    assert_eq!(pixel(&pixels, plot_point(0.95, 0.65)), [249, 250, 251], "plot background above the bar");
    // No bar where the overall series has no outcomes (stated confidence 0.1 to 0.3).
    assert_eq!(pixel(&pixels, plot_point(0.15, 0.05)), [249, 250, 251]);

    // The diagonal of perfect calibration is dashed grey: along its stretch from 25% to 35% (where
    // no data lie) about half the samples are ink, all of it the blue-grey of the diagonal
    // (107, 114, 128), not a series colour.
    let samples: Vec<[u8; 3]> = (0..100).map(|i| 0.25 + 0.001 * f64::from(i)).map(|t| pixel(&pixels, plot_point(t, t))).collect();
    let ink: Vec<&[u8; 3]> = samples.iter().filter(|p| p[0] < 200).collect();
    assert!((30..=70).contains(&ink.len()), "dashes: {} of 100 samples inked", ink.len());
    assert!(ink.iter().all(|p| p[0] <= p[1] && p[1] <= p[2] && p[2] - p[0] <= 25), "grey expected: {ink:?}");

    // The margins are white.
    assert_eq!(pixel(&pixels, (5.0, f64::from(HEIGHT) - 5.0)), [255, 255, 255]);
    assert_eq!(pixel(&pixels, (f64::from(WIDTH) - 5.0, f64::from(HEIGHT) - 5.0)), [255, 255, 255]);
}

#[test]
fn a_chart_without_outcomes_still_has_its_axes() {
    let chart = ReliabilityChart { title: "nothing yet".to_owned(), series: vec![Series::from_calibration("overall", &calibrate(&[]))] };
    let (_, pixels) = decode(&reliability_png(&chart));
    let (_, bottom) = plot_point(0.5, 0.0);
    // The x axis is a two-pixel ink line along the bottom of the plot.
    assert_eq!(pixel(&pixels, (plot_point(0.55, 0.0).0, bottom)), [31, 41, 55]);
    assert!(reliability_svg(&chart).contains(">no outcomes yet</text>"));
}
