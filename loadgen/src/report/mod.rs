//! Everything written to the run folder: CSVs (rewritten after every level, so an
//! interrupted run keeps what it measured), `summary.txt`, `run_metadata.csv`, SVG plots.

pub mod headline;
pub mod plots;
pub mod summary;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::measure::calibration::Calibration;
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

/// The results of one run, and the folder they go to.
#[derive(Debug, Default)]
pub struct Report {
    /// `results/<UTC timestamp>-<label>/`.
    pub dir: PathBuf,
    /// Every measured level, in run order.
    pub rows: Vec<LevelResult>,
    /// Serial latency, when calibrated.
    pub calibration: Option<Calibration>,
    /// `run_metadata.csv` entries, in insertion order.
    pub meta: Vec<(String, String)>,
    /// Notes for the summary (seeding, warnings).
    pub notes: Vec<String>,
    /// Experiment E's samples.
    pub timeline: Vec<TimelineRow>,
    /// Findings of experiments E and F, ready to print (computed where they are measured).
    pub findings: Vec<String>,
}

impl Report {
    /// Creates the run folder.
    pub fn create(out: &Path, label: &str) -> Result<Report> {
        let dir = out.join(format!("{}-{label}", utc_stamp()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Report {
            dir,
            ..Report::default()
        })
    }

    /// Adds a metadata entry (replacing an earlier one with the same key).
    pub fn meta(&mut self, key: &str, value: impl ToString) {
        let value = value.to_string();
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.meta.push((key.to_string(), value)),
        }
    }

    /// Rows of one experiment.
    pub fn rows_of(&self, experiment: &str) -> Vec<&LevelResult> {
        self.rows
            .iter()
            .filter(|r| r.experiment == experiment)
            .collect()
    }

    /// Experiment E's best fixed-P row (highest QPS).
    pub fn best_fixed_e(&self) -> Option<&LevelResult> {
        self.rows
            .iter()
            .filter(|r| r.experiment == "E" && r.pool_mode.as_deref() == Some("fixed"))
            .max_by(|a, b| a.qps.total_cmp(&b.qps))
    }

    /// Records a level and rewrites its CSV.
    pub fn push(&mut self, row: LevelResult) -> Result<()> {
        let experiment = row.experiment.clone();
        self.rows.push(row);
        self.write_csv(&experiment)
    }

    fn write_csv(&self, experiment: &str) -> Result<()> {
        let Some((_, file)) = FILES.iter().find(|(e, _)| *e == experiment) else {
            return Ok(());
        };
        let path = self.dir.join(file);
        let mut w =
            csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
        for row in self.rows_of(experiment) {
            w.serialize(row)?;
        }
        w.flush()?;
        Ok(())
    }

    /// Rewrites `expE_timeline.csv`.
    pub fn write_timeline(&self) -> Result<()> {
        if self.timeline.is_empty() {
            return Ok(());
        }
        let mut w = csv::Writer::from_path(self.dir.join("expE_timeline.csv"))?;
        for row in &self.timeline {
            w.serialize(row)?;
        }
        w.flush()?;
        Ok(())
    }

    /// Writes `run_metadata.csv` (key,value).
    pub fn write_metadata(&self) -> Result<()> {
        let mut w = csv::Writer::from_path(self.dir.join("run_metadata.csv"))?;
        w.write_record(["key", "value"])?;
        for (k, v) in &self.meta {
            w.write_record([k, v])?;
        }
        w.flush()?;
        Ok(())
    }

    /// Writes summary, metadata and plots.
    pub fn finish(&self) -> Result<()> {
        std::fs::write(self.dir.join("summary.txt"), summary::render(self))?;
        self.write_metadata()?;
        plots::draw_all(self)?;
        Ok(())
    }
}

/// `YYYYMMDDTHHMMSSZ` for now, in UTC.
pub fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(utc_stamp().len(), 16);
    }
}
