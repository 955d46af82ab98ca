//! Paints a [`Scene`] into RGB pixels, with anti-aliased edges, and encodes them as PNG.
//!
//! Every shape is drawn by coverage: for each pixel near the shape, the fraction of it the shape
//! covers (estimated from the distance between the pixel's centre and the shape's edge) blends the
//! shape's colour over what is there. Text is the bitmap font scaled by whole pixels, so it is
//! drawn without blending.

use crate::font::{ADVANCE, CAP_HEIGHT, GLYPH_WIDTH, glyph};
use crate::scene::{Anchor, Color, Scene, Shape, text_width};

/// An RGB image, row by row from the top.
pub(crate) struct Canvas {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: u32, height: u32) -> Canvas {
        Canvas { width, height, pixels: vec![255; width as usize * height as usize * 3] }
    }

    /// Blends `color` over the pixel at (x, y) with opacity `coverage`; outside the canvas does nothing.
    fn blend(&mut self, x: i64, y: i64, color: Color, coverage: f64) {
        if coverage <= 0.0 || x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return;
        }
        let coverage = coverage.min(1.0);
        let offset = (y as usize * self.width as usize + x as usize) * 3;
        for (channel, value) in self.pixels[offset..offset + 3].iter_mut().zip([color.0, color.1, color.2]) {
            *channel = (f64::from(*channel) * (1.0 - coverage) + f64::from(value) * coverage).round() as u8;
        }
    }

    /// Calls `coverage` for every pixel centre in the box and blends by its answer.
    fn cover(&mut self, (x0, y0, x1, y1): (f64, f64, f64, f64), color: Color, coverage: impl Fn(f64, f64) -> f64) {
        for y in (y0.floor() as i64).max(0)..=(y1.ceil() as i64).min(i64::from(self.height) - 1) {
            for x in (x0.floor() as i64).max(0)..=(x1.ceil() as i64).min(i64::from(self.width) - 1) {
                self.blend(x, y, color, coverage(x as f64 + 0.5, y as f64 + 0.5));
            }
        }
    }
}

pub(crate) fn paint(scene: &Scene) -> Canvas {
    let mut canvas = Canvas::new(scene.width, scene.height);
    for shape in &scene.shapes {
        match shape {
            Shape::Rect { x, y, width, height, fill } => rect(&mut canvas, *x, *y, *width, *height, *fill),
            Shape::Line { from, to, width, color, dash } => match dash {
                None => line(&mut canvas, *from, *to, *width, *color),
                Some(dash) => dashed_line(&mut canvas, *from, *to, *width, *color, *dash),
            },
            Shape::Circle { centre, radius, fill, outline } => {
                let reach = radius + outline.map_or(0.0, |(_, width)| width) + 1.0;
                let bounds = (centre.0 - reach, centre.1 - reach, centre.0 + reach, centre.1 + reach);
                let distance = |x: f64, y: f64| (x - centre.0).hypot(y - centre.1);
                canvas.cover(bounds, *fill, |x, y| radius + 0.5 - distance(x, y));
                if let Some((color, width)) = outline {
                    canvas.cover(bounds, *color, |x, y| width / 2.0 + 0.5 - (distance(x, y) - radius).abs());
                }
            }
            Shape::Text { x, y, text, scale, color, anchor, vertical } => {
                draw_text(&mut canvas, (*x, *y), text, *scale, *color, *anchor, *vertical)
            }
        }
    }
    canvas
}

/// Coverage is the overlap of the pixel's square with the rectangle.
fn rect(canvas: &mut Canvas, x: f64, y: f64, width: f64, height: f64, fill: Color) {
    let overlap = |centre: f64, low: f64, high: f64| ((centre + 0.5).min(high) - (centre - 0.5).max(low)).max(0.0);
    canvas.cover((x, y, x + width, y + height), fill, |px, py| overlap(px, x, x + width) * overlap(py, y, y + height));
}

fn line(canvas: &mut Canvas, from: (f64, f64), to: (f64, f64), width: f64, color: Color) {
    let reach = width / 2.0 + 1.0;
    let bounds = (from.0.min(to.0) - reach, from.1.min(to.1) - reach, from.0.max(to.0) + reach, from.1.max(to.1) + reach);
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let length_squared = dx * dx + dy * dy;
    canvas.cover(bounds, color, |x, y| {
        // Distance from the pixel centre to the segment (projecting onto it, clamped to its ends).
        let t = if length_squared == 0.0 { 0.0 } else { (((x - from.0) * dx + (y - from.1) * dy) / length_squared).clamp(0.0, 1.0) };
        let distance = (x - (from.0 + t * dx)).hypot(y - (from.1 + t * dy));
        width / 2.0 + 0.5 - distance
    });
}

fn dashed_line(canvas: &mut Canvas, from: (f64, f64), to: (f64, f64), width: f64, color: Color, dash: f64) {
    let length = (to.0 - from.0).hypot(to.1 - from.1);
    let at = |distance: f64| {
        let t = distance / length;
        (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t)
    };
    let mut start = 0.0;
    while start < length {
        line(canvas, at(start), at((start + dash).min(length)), width, color);
        start += 2.0 * dash;
    }
}

fn draw_text(canvas: &mut Canvas, (x, y): (f64, f64), text: &str, scale: u32, color: Color, anchor: Anchor, vertical: bool) {
    let scale = i64::from(scale);
    let length = text_width(text, scale as u32);
    let shift = match anchor {
        Anchor::Start => 0.0,
        Anchor::Middle => length / 2.0,
        Anchor::End => length,
    };
    // Along the text and across it (down the glyph), in whole pixels so that glyphs stay crisp.
    let start = if vertical { (y + shift).round() as i64 } else { (x - shift).round() as i64 };
    let across = if vertical { x } else { y };
    let cap_top = (across - (CAP_HEIGHT as i64 * scale) as f64 / 2.0).round() as i64;
    for (index, character) in text.chars().enumerate() {
        let rows = glyph(character);
        let offset = (index * ADVANCE) as i64 * scale;
        for (row, bits) in rows.iter().enumerate() {
            for column in 0..GLYPH_WIDTH {
                if bits & (1 << (GLYPH_WIDTH - 1 - column)) == 0 {
                    continue;
                }
                let along = offset + column as i64 * scale;
                let down = cap_top + row as i64 * scale;
                for dy in 0..scale {
                    for dx in 0..scale {
                        if vertical {
                            // A quarter turn anticlockwise: along the text is up, down the glyph is right.
                            canvas.blend(down + dy, start - along - dx - 1, color, 1.0);
                        } else {
                            canvas.blend(start + along + dx, down + dy, color, 1.0);
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn encode_png(canvas: &Canvas) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, canvas.width, canvas.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    // Writing into a Vec cannot fail, and the header matches the pixel buffer by construction.
    let mut writer = encoder.write_header().expect("PNG header for an in-memory buffer");
    writer.write_image_data(&canvas.pixels).expect("PNG data matching the canvas size");
    writer.finish().expect("PNG end for an in-memory buffer");
    bytes
}
