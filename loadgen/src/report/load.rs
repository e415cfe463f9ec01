//! Reading a run folder back (`loadgen report`): its CSVs, metadata, notes, calibration, E's
//! timeline, the overhead syscalls and the sysbench runs, into the [`Report`] the run held when it wrote them.

use std::path::Path;

use anyhow::{Context, Result};

use super::csv::{
    FILES, METADATA, NOTE_PREFIX, SOAK, SYSBENCH, SYSBENCH_INTERVALS, SYSCALLS, TIMELINE,
};
use super::results::Report;
use crate::analysis::soak::Verdict;
use crate::measure::calibration::Calibration;
use crate::measure::level::LevelResult;

/// Reads a run folder back: every experiment's rows (in run order), the metadata, the notes,
/// the calibration and E's timeline, as the run held them when it wrote them.
pub fn load(dir: &Path) -> Result<Report> {
    let meta_path = dir.join(METADATA);
    let mut r = csv::Reader::from_path(&meta_path).with_context(|| {
        format!(
            "{} is not a loadgen results folder (no readable {METADATA})",
            dir.display()
        )
    })?;
    let mut report = Report {
        dir: dir.to_path_buf(),
        ..Report::default()
    };
    for rec in r.records() {
        let rec = rec.with_context(|| format!("reading {}", meta_path.display()))?;
        let (k, v) = (rec.get(0).unwrap_or(""), rec.get(1).unwrap_or(""));
        if k.starts_with(NOTE_PREFIX) {
            report.notes.push(v.to_string());
        }
        report.meta(k, v);
    }
    // Folders written before the notes were kept in the metadata still say how the table
    // was prepared.
    let has_notes = !report.notes.is_empty();
    if !has_notes {
        if let Some(action) = report.meta_value("seed_action").map(str::to_string) {
            report.notes.push(action);
        }
    }
    for (_, file) in FILES {
        let path = dir.join(file);
        if path.exists() {
            report.rows.extend(read_all::<LevelResult>(&path)?);
        }
    }
    let timeline = dir.join(TIMELINE);
    if timeline.exists() {
        report.timeline = read_all(&timeline)?;
    }
    let syscalls = dir.join(SYSCALLS);
    if syscalls.exists() {
        report.syscalls = read_all(&syscalls)?;
    }
    let sysbench = dir.join(SYSBENCH);
    if sysbench.exists() {
        report.sysbench = read_all(&sysbench)?;
    }
    let intervals = dir.join(SYSBENCH_INTERVALS);
    if intervals.exists() {
        report.sysbench_intervals = read_all(&intervals)?;
    }
    let soak = dir.join(SOAK);
    if soak.exists() {
        report.soak = read_all(&soak)?;
        if !has_notes {
            // A soak's notes are its verdict; folders from before the notes were kept get it
            // again from the minutes (the idle clients' errors are what the minutes lack).
            let errors = report
                .meta_value("soak_errors")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let active = report.soak.last().map_or(0, |s| s.errors);
            let verdict = Verdict::of(&report.soak, errors);
            report
                .notes
                .extend(verdict.lines(errors.saturating_sub(active)));
        }
    }
    let num = |k: &str| report.meta_value(k).and_then(|v| v.parse::<f64>().ok());
    if let (Some(p50_ms), Some(p99_ms), Some(mean_ms)) = (
        num("calibration_p50_ms"),
        num("calibration_p99_ms"),
        num("calibration_mean_ms"),
    ) {
        report.calibration = Some(Calibration {
            queries: num("calibration_queries").unwrap_or(0.0) as u64,
            p50_ms,
            p99_ms,
            mean_ms,
            rows_returned: num("calibration_rows_returned").map(|n| n as usize),
        });
    }
    Ok(report)
}

fn read_all<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    r.deserialize()
        .collect::<Result<Vec<T>, _>>()
        .with_context(|| format!("reading {}", path.display()))
}
