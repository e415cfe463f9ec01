//! Experiments A and B: the curve's table and the collapse from its peak to the largest C.

use std::fmt::Write as _;

use super::table::table;
use crate::analysis::curve::{collapse_of, Collapse};
use crate::report::results::Report;

/// Writes A's table and B's lines.
pub fn curve(out: &mut String, rep: &Report) {
    let a = rep.rows_of("A");
    if !a.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment A: the curve (one dedicated connection per client, {} arrival)",
            a[0].arrival
        );
        table(out, &a, "C", |r| r.clients.to_string());
    }
    if let Some(Collapse {
        peak,
        worst,
        qps_ratio: q,
        p99_ratio: p,
    }) = collapse_of(&a)
    {
        let _ = writeln!(out, "\nExperiment B: the collapse");
        let _ = writeln!(
            out,
            "Peak: {:.0} QPS at C={} with a {:.2} ms p99. At C={}: {:.0} QPS and a {:.2} ms p99.",
            peak.qps, peak.clients, peak.p99_ms, worst.clients, worst.qps, worst.p99_ms
        );
        if worst.queries == 0 {
            let _ = writeln!(
                out,
                "No query of C={} finished inside the window, so its throughput and p99 ratios are undefined;\n\
                 the window is too short for this many clients on this server (use a longer WINDOW_S).",
                worst.clients
            );
        } else {
            let _ = writeln!(
                out,
                "The peak has {q:.2}x the throughput of C={}, and C={}'s p99 is {p:.1}x the peak's.",
                worst.clients, worst.clients
            );
        }
        if worst.p99_with_inflight_ms > worst.p99_ms * 1.05 {
            let _ = writeln!(
                out,
                "Counting the {} requests still unfinished at window close, C={}'s p99 is {:.2} ms.",
                worst.inflight_at_close, worst.clients, worst.p99_with_inflight_ms
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, seed_curve};
    use super::*;

    #[test]
    fn the_collapse_compares_the_peak_with_the_largest_c() {
        let mut out = String::new();
        curve(&mut out, &report(seed_curve(), &[]));
        assert!(out.contains("Experiment A: the curve"), "{out}");
        assert!(
            out.contains(
                "Peak: 1137 QPS at C=4 with a 8.13 ms p99. At C=512: 720 QPS and a 1714.63 ms p99."
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "The peak has 1.58x the throughput of C=512, and C=512's p99 is 210.9x the peak's."
            ),
            "{out}"
        );
        assert_eq!(
            out.lines()
                .filter(|l| l.trim_start().starts_with("512 "))
                .count(),
            1
        );
    }

    #[test]
    fn nothing_finished_makes_the_ratios_undefined() {
        let mut rows = seed_curve();
        let last = rows.last_mut().unwrap();
        (last.queries, last.qps) = (0, 0.0);
        let mut out = String::new();
        curve(&mut out, &report(rows, &[]));
        assert!(
            out.contains("No query of C=512 finished inside the window"),
            "{out}"
        );
        let mut empty = String::new();
        curve(&mut empty, &report(vec![], &[]));
        assert!(empty.is_empty());
    }
}
