//! The results of one run as they are measured: every level's row, the metadata, notes, E's
//! timeline and the findings; and the run folder they go to.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::csv;
use crate::measure::calibration::Calibration;
use crate::measure::level::LevelResult;
use crate::measure::sysbench::{IntervalRow, SysbenchRow};
use crate::measure::syscalls::SyscallRow;
use crate::measure::timeline::{SoakSample, TimelineRow};

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
    /// The soak's minutes.
    pub soak: Vec<SoakSample>,
    /// The overhead experiment's syscalls, one by one.
    pub syscalls: Vec<SyscallRow>,
    /// The sysbench experiment's runs, and their per-second lines.
    pub sysbench: Vec<SysbenchRow>,
    pub sysbench_intervals: Vec<IntervalRow>,
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

    /// Whether the run measured only sysbench (no loadgen clients, no loadgen table).
    pub fn sysbench_only(&self) -> bool {
        self.rows.is_empty() && !self.sysbench.is_empty()
    }

    /// The value of a metadata entry.
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
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
        csv::write_rows(&self.dir, &experiment, &self.rows_of(&experiment))
    }

    /// Rewrites the CSV of `experiment` (after its rows were amended).
    pub fn rewrite(&self, experiment: &str) -> Result<()> {
        csv::write_rows(&self.dir, experiment, &self.rows_of(experiment))
    }

    /// Rewrites `overhead_syscalls.csv`.
    pub fn write_syscalls(&self) -> Result<()> {
        csv::write_all(&self.dir.join(csv::SYSCALLS), &self.syscalls)
    }

    /// Records a sysbench run and its per-second lines; rewrites their CSVs.
    pub fn push_sysbench(&mut self, row: SysbenchRow, intervals: Vec<IntervalRow>) -> Result<()> {
        self.sysbench.push(row);
        self.sysbench_intervals.extend(intervals);
        csv::write_all(&self.dir.join(csv::SYSBENCH), &self.sysbench)?;
        csv::write_all(
            &self.dir.join(csv::SYSBENCH_INTERVALS),
            &self.sysbench_intervals,
        )
    }

    /// Rewrites `expE_timeline.csv`.
    pub fn write_timeline(&self) -> Result<()> {
        csv::write_timeline(&self.dir, &self.timeline)
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
