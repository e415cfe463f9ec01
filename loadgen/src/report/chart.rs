//! What every plot shares: the size, the colours, and how plotters' errors become ours.

use anyhow::{anyhow, Result};
use plotters::chart::{ChartContext, SeriesLabelPosition};
use plotters::coord::CoordTranslate;
use plotters::prelude::{DrawingBackend, BLACK, WHITE};
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

/// Draws the chart's legend in a white box with a black border at `position`.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)
}
