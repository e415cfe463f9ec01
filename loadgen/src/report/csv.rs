//! The run folder's CSV files: one per experiment (rewritten after every level, so an
//! interrupted run keeps what it measured), E's timeline and `run_metadata.csv`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::measure::level::LevelResult;
use crate::measure::timeline::TimelineRow;

/// The CSV files, by experiment id.
pub const FILES: &[(&str, &str)] = &[
    ("A", "expA_curve.csv"),
    ("C", "expC_pool.csv"),
    ("O", "expO_openloop.csv"),
    ("proxy", "expC_proxy.csv"),
    ("overhead", "overhead.csv"),
    ("D", "expD_idle.csv"),
    ("E", "expE_adaptive.csv"),
    ("E2", "expE_rounds.csv"),
    ("F", "expF_admission.csv"),
    ("S", "expS_sessions.csv"),
];

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
    if timeline.is_empty() {
        return Ok(());
    }
    let mut w = csv::Writer::from_path(dir.join("expE_timeline.csv"))?;
    for row in timeline {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

/// Writes `run_metadata.csv` (key,value).
pub fn write_metadata(dir: &Path, meta: &[(String, String)]) -> Result<()> {
    let mut w = csv::Writer::from_path(dir.join("run_metadata.csv"))?;
    w.write_record(["key", "value"])?;
    for (k, v) in meta {
        w.write_record([k, v])?;
    }
    w.flush()?;
    Ok(())
}
