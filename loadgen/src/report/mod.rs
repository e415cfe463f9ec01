//! Everything written to the run folder: the CSVs ([`csv`]), `summary.txt` ([`summary`]),
//! `run_metadata.csv` with its headline numbers ([`headline`]), and the SVG plots ([`plots`],
//! [`relay_plot`], [`sysbench_plot`], sharing [`chart`]), all from the run's [`results::Report`].

pub mod chart;
pub mod csv;
pub mod headline;
pub mod load;
pub mod plots;
pub mod relay_plot;
pub mod results;
pub mod summary;
pub mod sysbench_plot;

use std::path::Path;

use anyhow::{Context, Result};

pub use results::Report;

/// Writes summary, metadata and plots.
pub fn finish(report: &Report) -> Result<()> {
    std::fs::write(report.dir.join(SUMMARY), summary::render(report))?;
    csv::write_metadata(&report.dir, &report.meta, &report.notes)?;
    plots::draw_all(report)?;
    Ok(())
}

/// `summary.txt`.
pub const SUMMARY: &str = "summary.txt";

/// `loadgen report <dir>`: reads a run folder's CSVs and metadata back, then rewrites its
/// summary.txt and redraws its plots (the CSVs and metadata stay as they were). Returns the
/// summary and the plots drawn.
pub fn rewrite(dir: &Path) -> Result<(String, Vec<String>)> {
    let report = load::load(dir)?;
    if report.rows.is_empty()
        && report.timeline.is_empty()
        && report.soak.is_empty()
        && report.sysbench.is_empty()
    {
        anyhow::bail!(
            "{} has metadata but no experiment CSVs to report",
            dir.display()
        );
    }
    let text = summary::render(&report);
    let path = dir.join(SUMMARY);
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    let plots = plots::draw_all(&report)?;
    Ok((text, plots))
}
