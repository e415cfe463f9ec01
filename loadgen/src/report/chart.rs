//! What every plot shares: the size, the colours, and how plotters' errors become ours.

use anyhow::anyhow;
use plotters::style::RGBColor;

/// A plot's size in pixels.
pub const SIZE: (u32, u32) = (900, 540);
/// Series colours, in order.
pub const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];

/// A plotters error as ours.
pub fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e:?}")
}
