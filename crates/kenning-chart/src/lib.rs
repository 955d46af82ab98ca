//! Pictures of calibration for people: the reliability diagram that `kenning calibration`
//! writes, as SVG and as PNG. Pure: data in, bytes out, no I/O, no system fonts.
//!
//! - [`ReliabilityChart`] is what to draw: a title and one or more [`Series`] (overall and per
//!   module), each with its reliability bins from [`kenning_core::calibration`] and the summary
//!   figures its legend entry shows (outcomes, Brier score, confidence gap, status).
//! - [`reliability_svg`] and [`reliability_png`] draw it. Both paint the same scene (`layout`
//!   builds it once as a list of shapes): the dashed diagonal of perfect calibration, the first
//!   series as bars of observed success per confidence bin labelled with their outcome counts,
//!   every series as markers at (mean stated confidence, observed success) whose area grows with
//!   the count, joined by lines, gridded axes with ticks and labels, the title and a legend.
//! - The PNG is rasterised here (anti-aliased lines, discs and rectangles, text in an embedded
//!   5 x 9 bitmap font) and encoded with the `png` crate.

mod font;
mod layout;
mod raster;
mod scene;
mod svg;

use kenning_core::{Calibration, CalibrationStatus, ReliabilityBin};

pub use layout::{HEIGHT, MAX_SERIES, WIDTH, plot_point, series_color};

/// A reliability diagram: a title and the series to draw, the first of which (normally "overall")
/// is also drawn as bars. At most [`MAX_SERIES`] series are drawn; the legend counts the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct ReliabilityChart {
    pub title: String,
    pub series: Vec<Series>,
}

/// One set of outcomes on the diagram and its legend figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Shown in the legend, e.g. `overall` or a module name.
    pub name: String,
    /// The reliability table, as [`kenning_core::calibrate`] returns it.
    pub bins: Vec<ReliabilityBin>,
    pub sample_size: usize,
    pub brier_score: Option<f64>,
    pub confidence_gap: Option<f64>,
    pub status: CalibrationStatus,
}

impl Series {
    /// The series of a calibration, named `name`.
    pub fn from_calibration(name: impl Into<String>, calibration: &Calibration) -> Series {
        Series {
            name: name.into(),
            bins: calibration.reliability.clone(),
            sample_size: calibration.sample_size,
            brier_score: calibration.brier_score,
            confidence_gap: calibration.confidence_gap,
            status: calibration.status,
        }
    }
}

/// The diagram as a standalone SVG document, [`WIDTH`] x [`HEIGHT`] pixels.
pub fn reliability_svg(chart: &ReliabilityChart) -> String {
    svg::render(&layout::layout(chart))
}

/// The diagram as a PNG image (8-bit RGB), [`WIDTH`] x [`HEIGHT`] pixels.
pub fn reliability_png(chart: &ReliabilityChart) -> Vec<u8> {
    raster::encode_png(&raster::paint(&layout::layout(chart)))
}
