//! The picture as a list of shapes in pixel coordinates (origin top left, y down), which both
//! back ends draw: [`crate::svg`] writes them as SVG elements, [`crate::raster`] paints them.

/// An opaque colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Color(pub u8, pub u8, pub u8);

impl Color {
    pub const WHITE: Color = Color(255, 255, 255);
    pub const INK: Color = Color(31, 41, 55);
    pub const MUTED: Color = Color(107, 114, 128);
    pub const GRID: Color = Color(229, 231, 235);

    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    /// This colour mixed with white: `amount` 0 keeps it, 1 gives white.
    pub fn tint(self, amount: f64) -> Color {
        let mix = |channel: u8| (f64::from(channel) + (255.0 - f64::from(channel)) * amount).round() as u8;
        Color(mix(self.0), mix(self.1), mix(self.2))
    }
}

/// Where a text's `x` lies along it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// One element of the picture.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// An axis-aligned filled rectangle.
    Rect { x: f64, y: f64, width: f64, height: f64, fill: Color },
    /// A straight stroke; `dash` is the length of each dash and of each gap.
    Line { from: (f64, f64), to: (f64, f64), width: f64, color: Color, dash: Option<f64> },
    /// A filled disc with an optional outline of the given colour and width.
    Circle { centre: (f64, f64), radius: f64, fill: Color, outline: Option<(Color, f64)> },
    /// A line of text in the bitmap font at `scale` screen pixels per font pixel. `y` is the
    /// vertical middle of the capitals; `vertical` text runs bottom to top (rotated a quarter
    /// turn anticlockwise) and then `x` is the middle of the capitals and `y` lies along it.
    Text { x: f64, y: f64, text: String, scale: u32, color: Color, anchor: Anchor, vertical: bool },
}

/// A picture: its size in pixels and its shapes, painted in order over a white background.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    pub width: u32,
    pub height: u32,
    pub shapes: Vec<Shape>,
}

/// The drawn length of `text` at `scale`, in pixels (the trailing gap after the last character
/// not counted).
pub fn text_width(text: &str, scale: u32) -> f64 {
    let characters = text.chars().count();
    if characters == 0 {
        return 0.0;
    }
    let pixels = characters * crate::font::ADVANCE - (crate::font::ADVANCE - crate::font::GLYPH_WIDTH);
    (pixels * scale as usize) as f64
}
