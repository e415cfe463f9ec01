//! The run folder's CSV files: one per experiment (rewritten after every level, so an
//! interrupted run keeps what it measured), E's timeline, the overhead experiment's syscalls,
//! the sysbench experiment's runs and `run_metadata.csv`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::measure::level::LevelResult;
use crate::measure::timeline::TimelineRow;

/// The CSV files, by experiment id, in the order `bench --all` runs them (a folder read back
/// lists its rows in this order).
pub const FILES: &[(&str, &str)] = &[
    ("A", "expA_curve.csv"),
    ("C", "expC_pool.csv"),
    ("O", "expO_openloop.csv"),
    ("proxy", "expC_proxy.csv"),
    ("S", "expS_sessions.csv"),
    ("D", "expD_idle.csv"),
    ("E", "expE_adaptive.csv"),
    ("E2", "expE_rounds.csv"),
    ("F", "expF_admission.csv"),
    ("overhead", "overhead.csv"),
];

/// `run_metadata.csv`.
pub const METADATA: &str = "run_metadata.csv";
/// E's timeline.
pub const TIMELINE: &str = "expE_timeline.csv";
/// The soak's minutes.
pub const SOAK: &str = "soak.csv";
/// The overhead experiment's syscalls, one by one.
pub const SYSCALLS: &str = "overhead_syscalls.csv";
/// The sysbench experiment's runs, their per-second lines, and their ratios to direct.
pub const SYSBENCH: &str = "sysbench.csv";
pub const SYSBENCH_INTERVALS: &str = "sysbench_intervals.csv";
pub const SYSBENCH_RATIOS: &str = "sysbench_ratios.csv";
/// Metadata keys holding the summary's notes: `note_1`, `note_2`, ...
pub const NOTE_PREFIX: &str = "note_";

/// Rewrites the CSV of `experiment` with `rows` (nothing for an experiment without a file).
pub fn write_rows(dir: &Path, experiment: &str, rows: &[&LevelResult]) -> Result<()> {
    let Some((_, file)) = FILES.iter().find(|(e, _)| *e == experiment) else {
        return Ok(());
    };
    let path = dir.join(file);
    let mut w =
        csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

/// Rewrites `expE_timeline.csv` (nothing when there are no samples).
pub fn write_timeline(dir: &Path, timeline: &[TimelineRow]) -> Result<()> {
    write_all(&dir.join(TIMELINE), timeline)
}

/// Rewrites `path` with `rows` (nothing when there are none).
pub fn write_all<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("writing {}", path.display()))?;
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

/// Writes `run_metadata.csv` (key,value), the notes last as `note_<n>`.
pub fn write_metadata(dir: &Path, meta: &[(String, String)], notes: &[String]) -> Result<()> {
    let mut w = csv::Writer::from_path(dir.join(METADATA))?;
    w.write_record(["key", "value"])?;
    for (k, v) in meta.iter().filter(|(k, _)| !k.starts_with(NOTE_PREFIX)) {
        w.write_record([k, v])?;
    }
    for (i, note) in notes.iter().enumerate() {
        w.write_record([format!("{NOTE_PREFIX}{}", i + 1).as_str(), note])?;
    }
    w.flush()?;
    Ok(())
}
