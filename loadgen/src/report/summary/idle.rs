//! Experiment D: active throughput while idle connections are held, direct and through sluice.

use std::fmt::Write as _;

use super::table::table;
use crate::measure::level::LevelResult;
use crate::measure::stats::ratio;
use crate::report::results::Report;

/// Writes D's table and lines.
pub fn idle(out: &mut String, rep: &Report) {
    let d = rep.rows_of("D");
    if !d.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment D: {} active clients while N idle connections are held open",
            d[0].clients
        );
        table(out, &d, "target/workload@idle", |r| {
            format!("{}/{}@{}", r.target, r.workload, r.idle_conns.unwrap_or(0))
        });
        for workload in ["knee", "point_select"] {
            for target in ["direct", "proxy"] {
                let rows: Vec<&&LevelResult> = d
                    .iter()
                    .filter(|r| r.target == target && r.workload == workload)
                    .collect();
                if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
                    let _ = writeln!(
                        out,
                        "{target}, {workload}: {:.0} QPS with {} idle, {:.0} QPS with {} idle ({:.0}% of it); p99 {:.2} -> {:.2} ms.",
                        first.qps, first.idle_conns.unwrap_or(0), last.qps, last.idle_conns.unwrap_or(0),
                        100.0 * ratio(last.qps, first.qps), first.p99_ms, last.p99_ms
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "The original study saw a large drop with idle connections; read the direct ratio above to see whether it\n\
             reproduces on this server. Through sluice the idle clients hold no server connection at all."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, row};
    use super::*;

    #[test]
    fn first_and_last_idle_levels_are_compared_per_target_and_workload() {
        let at = |target: &str, idle: usize, qps: f64| LevelResult {
            idle_conns: Some(idle),
            ..row("D", target, 4, qps, 20.0)
        };
        let rep = report(
            vec![
                at("direct", 0, 107.0),
                at("direct", 1500, 144.0),
                at("proxy", 0, 121.0),
            ],
            &[],
        );
        let mut out = String::new();
        idle(&mut out, &rep);
        assert!(out.contains("Experiment D: 4 active clients"), "{out}");
        assert!(
            out.contains("direct, knee: 107 QPS with 0 idle, 144 QPS with 1500 idle (135% of it)"),
            "{out}"
        );
        assert!(
            out.contains("proxy, knee: 121 QPS with 0 idle, 121 QPS with 0 idle"),
            "{out}"
        );
        assert!(!out.contains("point_select:"), "{out}");
    }
}
