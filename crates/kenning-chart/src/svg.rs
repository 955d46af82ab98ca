//! Writes a [`Scene`] as an SVG document.

use std::fmt::Write;

use crate::font::CAP_HEIGHT;
use crate::scene::{Anchor, Scene, Shape};

/// Monospaced fonts whose advance (0.6 em) and capital height (about 0.7 em) match the bitmap
/// font at `font-size = 10 * scale`, so that the layout's text widths hold in both back ends.
const FONT_FAMILY: &str = "DejaVu Sans Mono, Menlo, Consolas, monospace";

pub(crate) fn render(scene: &Scene) -> String {
    let mut out = String::new();
    let (width, height) = (scene.width, scene.height);
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}" xml:space="preserve">"#
    )
    .unwrap();
    writeln!(out, r##"<rect width="{width}" height="{height}" fill="#ffffff"/>"##).unwrap();
    for shape in &scene.shapes {
        shape_element(&mut out, shape);
    }
    out.push_str("</svg>\n");
    out
}

fn shape_element(out: &mut String, shape: &Shape) {
    match shape {
        Shape::Rect { x, y, width, height, fill } => writeln!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
            number(*x),
            number(*y),
            number(*width),
            number(*height),
            fill.hex()
        ),
        Shape::Line { from, to, width, color, dash } => {
            let dash = dash.map_or(String::new(), |dash| format!(r#" stroke-dasharray="{}""#, number(dash)));
            writeln!(
                out,
                r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}"{dash}/>"#,
                number(from.0),
                number(from.1),
                number(to.0),
                number(to.1),
                color.hex(),
                number(*width)
            )
        }
        Shape::Circle { centre, radius, fill, outline } => {
            let outline = outline.map_or(String::new(), |(color, width)| {
                format!(r#" stroke="{}" stroke-width="{}""#, color.hex(), number(width))
            });
            writeln!(
                out,
                r#"<circle cx="{}" cy="{}" r="{}" fill="{}"{outline}/>"#,
                number(centre.0),
                number(centre.1),
                number(*radius),
                fill.hex()
            )
        }
        Shape::Text { x, y, text, scale, color, anchor, vertical } => {
            let anchor = match anchor {
                Anchor::Start => "start",
                Anchor::Middle => "middle",
                Anchor::End => "end",
            };
            let size = 10 * scale;
            // `y` is the middle of the capitals; SVG places the baseline, half the capital height
            // lower. Vertical text is laid out the same way and turned about (x, y), which takes
            // the baseline to the right of x.
            let drop = f64::from(CAP_HEIGHT as u32 * scale) / 2.0;
            let rotation = if *vertical {
                format!(r#" transform="rotate(-90 {} {})""#, number(*x), number(*y))
            } else {
                String::new()
            };
            writeln!(
                out,
                r#"<text x="{}" y="{}" font-size="{size}" fill="{}" text-anchor="{anchor}"{rotation}>{}</text>"#,
                number(*x),
                number(*y + drop),
                color.hex(),
                escape(text)
            )
        }
    }
    .unwrap();
}

/// A coordinate with at most two decimals and no trailing zeros.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".to_owned() } else { text.to_owned() }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
