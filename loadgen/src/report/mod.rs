//! Everything written to the run folder: the CSVs ([`csv`]), `summary.txt` ([`summary`]),
//! `run_metadata.csv` with its headline numbers ([`headline`]), and the SVG plots ([`plots`]),
//! all from the run's [`results::Report`].

pub mod csv;
pub mod headline;
pub mod plots;
pub mod results;
pub mod summary;

use anyhow::Result;

pub use results::Report;

/// Writes summary, metadata and plots.
pub fn finish(report: &Report) -> Result<()> {
    std::fs::write(report.dir.join("summary.txt"), summary::render(report))?;
    csv::write_metadata(&report.dir, &report.meta)?;
    plots::draw_all(report)?;
    Ok(())
}
