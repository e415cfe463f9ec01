//! Experiment E read from its rows and timeline: the paired rounds of the best fixed P
//! against auto, and what the auto run's timeline shows (time to 95 % of the best fixed P, the
//! steady state, how fast the limit followed the server losing a CPU). Pure functions.

use crate::measure::level::LevelResult;
use crate::measure::stats::mean;
use crate::measure::timeline::{TimelineRow, SAMPLE};

/// E's paired rounds: fixed-P and auto QPS of each round, and the ratio of their means.
#[derive(Debug, PartialEq)]
pub struct Rounds {
    pub fixed: Vec<f64>,
    pub auto: Vec<f64>,
    pub ratio: f64,
}

/// Pairs the `E2` rows by round (each round has one fixed and one auto row, in either order).
pub fn rounds(rows: &[(bool, f64)]) -> Option<Rounds> {
    let fixed: Vec<f64> = rows.iter().filter(|r| !r.0).map(|r| r.1).collect();
    let auto: Vec<f64> = rows.iter().filter(|r| r.0).map(|r| r.1).collect();
    let (f, a) = (mean(fixed.iter().copied())?, mean(auto.iter().copied())?);
    (f > 0.0).then(|| Rounds {
        ratio: a / f,
        fixed,
        auto,
    })
}

/// What E's auto run showed, from its timeline.
#[derive(Debug, Default, PartialEq)]
pub struct AutoFindings {
    /// First time the 1-second rolling QPS reached 95 % of the best fixed P.
    pub reach_95_s: Option<f64>,
    /// Mean QPS over the steady part before the re-pin.
    pub steady_qps: Option<f64>,
    /// Mean Threads_running over the same part.
    pub steady_threads_running: Option<f64>,
    /// Mean limit before the re-pin (steady part) and over the last quarter after it.
    pub limit_before: Option<f64>,
    pub limit_after: Option<f64>,
    /// Seconds from the re-pin until the limit first reached its post-re-pin level.
    pub follow_s: Option<f64>,
}

/// Reads the auto timeline. `repin_s` is when the server lost a CPU (if it did).
pub fn auto_findings(samples: &[TimelineRow], best_qps: f64, repin_s: Option<f64>) -> AutoFindings {
    let mut f = AutoFindings::default();
    let end = samples.last().map_or(0.0, |s| s.t_s);
    let window = (1.0 / SAMPLE.as_secs_f64()).round() as usize;
    f.reach_95_s = samples.windows(window.max(1)).find_map(|w| {
        let q = mean(w.iter().map(|s| s.qps))?;
        (q >= 0.95 * best_qps).then(|| w[w.len() - 1].t_s)
    });
    let cut = repin_s.unwrap_or(end);
    let steady_from = (cut / 2.0).min(10.0);
    let steady: Vec<&TimelineRow> = samples
        .iter()
        .filter(|s| s.t_s >= steady_from && s.t_s < cut)
        .collect();
    f.steady_qps = mean(steady.iter().map(|s| s.qps));
    f.steady_threads_running = mean(
        steady
            .iter()
            .filter_map(|s| s.threads_running.map(|t| t as f64)),
    );
    f.limit_before = mean(steady.iter().map(|s| f64::from(s.limit)));
    if let Some(r) = repin_s {
        let tail_from = end - (end - r) / 4.0;
        f.limit_after = mean(
            samples
                .iter()
                .filter(|s| s.t_s >= tail_from)
                .map(|s| f64::from(s.limit)),
        );
        if let (Some(before), Some(after)) = (f.limit_before, f.limit_after) {
            let target = after.ceil();
            // Followed once the limit stays at that level: the next 2 s average at most it.
            let after_repin: Vec<&TimelineRow> = samples.iter().filter(|s| s.t_s >= r).collect();
            let span = 2 * window.max(1);
            f.follow_s = if after < before - 0.5 {
                after_repin.windows(span).find_map(|w| {
                    let m = mean(w.iter().map(|s| f64::from(s.limit)))?;
                    (m <= target).then(|| w[0].t_s - r)
                })
            } else {
                Some(0.0)
            };
        }
    }
    f
}

/// Everything E's summary and metadata say, from its rows and timeline.
#[derive(Debug, PartialEq)]
pub struct EFindings {
    /// The sweep's best fixed P and its QPS.
    pub best_p: usize,
    pub best_qps: f64,
    /// The auto run's timeline read against that.
    pub auto: AutoFindings,
    /// When the server was re-pinned from 2 CPUs to 1, seconds into the auto run.
    pub repin_s: Option<f64>,
    /// The paired rounds.
    pub rounds: Option<Rounds>,
    /// The rounds' mean fixed-P QPS: the best P re-measured.
    pub fixed_mean: Option<f64>,
    /// Each round's fresh auto: seconds until its 1 s rolling QPS reached 95 % of that.
    pub reach: Vec<Option<f64>>,
}

impl EFindings {
    /// Rounds whose auto reached 95 % of the re-measured best within 10 s.
    pub fn reached_within_10s(&self) -> usize {
        self.reach.iter().flatten().filter(|t| **t <= 10.0).count()
    }
}

/// The sweep's best fixed P: the first with the most QPS, as the sweep found it.
pub fn best_fixed(e_rows: &[&LevelResult]) -> Option<(usize, f64)> {
    e_rows
        .iter()
        .filter(|r| r.pool_mode.as_deref() == Some("fixed"))
        .fold(None, |best: Option<(usize, f64)>, r| match best {
            Some((_, q)) if r.qps <= q => best,
            _ => Some((r.pool_size.unwrap_or(0), r.qps)),
        })
}

/// E's findings: `e_rows` (the sweep and auto), `e2_rows` (the rounds), the timeline of every
/// configuration, and when the re-pin happened. `None` without a fixed-P row.
pub fn e_findings(
    e_rows: &[&LevelResult],
    e2_rows: &[&LevelResult],
    timeline: &[TimelineRow],
    repin_s: Option<f64>,
) -> Option<EFindings> {
    let (best_p, best_qps) = best_fixed(e_rows)?;
    let samples_of = |config: &str| -> Vec<TimelineRow> {
        timeline
            .iter()
            .filter(|s| s.config == config)
            .cloned()
            .collect()
    };
    let auto = auto_findings(&samples_of("auto"), best_qps, repin_s);
    let paired: Vec<(bool, f64)> = e2_rows
        .iter()
        .map(|r| (r.pool_mode.as_deref() == Some("auto"), r.qps))
        .collect();
    let rounds = rounds(&paired);
    // The sweep's best is the maximum of several noisy windows, so it overstates that P's
    // QPS; the rounds re-measure it. Time-to-95 % against that, for every fresh auto.
    let fixed_mean = rounds.as_ref().and_then(|r| mean(r.fixed.iter().copied()));
    let reach = match (&rounds, fixed_mean) {
        (Some(r), Some(fixed_mean)) => (1..=r.auto.len())
            .map(|n| {
                auto_findings(&samples_of(&format!("round {n} auto")), fixed_mean, None).reach_95_s
            })
            .collect(),
        _ => Vec::new(),
    };
    Some(EFindings {
        best_p,
        best_qps,
        auto,
        repin_s,
        rounds,
        fixed_mean,
        reach,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, qps: f64, limit: u32) -> TimelineRow {
        TimelineRow {
            config: "auto".into(),
            t_s: t,
            qps,
            limit,
            threads_running: Some(3),
            server_cpus: Some(2),
            reason: String::new(),
        }
    }

    #[test]
    fn rounds_pair_fixed_and_auto_rows_in_either_order() {
        let r = rounds(&[(false, 200.0), (true, 190.0), (true, 210.0), (false, 220.0)]).unwrap();
        assert_eq!(r.fixed, vec![200.0, 220.0]);
        assert_eq!(r.auto, vec![190.0, 210.0]);
        assert!((r.ratio - 200.0 / 210.0).abs() < 1e-9);
        assert_eq!(rounds(&[(false, 200.0)]), None);
        assert_eq!(rounds(&[]), None);
    }

    #[test]
    fn findings_read_reach_time_steady_state_and_follow_time() {
        // Ramp to 100 QPS by 2 s at limit 4; re-pin at 10 s; limit reaches 2 at 12 s.
        let samples: Vec<TimelineRow> = (1..=80)
            .map(|i| {
                let t = i as f64 * 0.25;
                let qps = (t * 50.0).min(100.0);
                let limit = if t < 10.0 {
                    4
                } else if t < 12.0 {
                    3
                } else {
                    2
                };
                row(t, qps, limit)
            })
            .collect();
        let f = auto_findings(&samples, 100.0, Some(10.0));
        assert_eq!(f.reach_95_s, Some(2.5));
        assert_eq!(f.limit_before, Some(4.0));
        assert_eq!(f.limit_after, Some(2.0));
        assert_eq!(f.follow_s, Some(2.0));
        assert_eq!(f.steady_threads_running, Some(3.0));
        assert!(f.steady_qps.unwrap() > 99.0);
    }
}
