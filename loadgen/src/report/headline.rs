//! The headline numbers of `run_metadata.csv` (peak, collapse, best pool, loadgen's cost),
//! computed from whatever rows the run measured.

use super::results::Report;
use crate::analysis::curve::{collapse_of, Collapse};
use crate::analysis::pool::best_pool;

const UNDEFINED: &str = "undefined (no query finished in the window)";

fn ratio_text(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!("{:.3}", a / b)
    } else {
        UNDEFINED.into()
    }
}

/// Headline numbers for `run_metadata.csv`, from whatever rows exist.
pub fn headline_meta(report: &mut Report) {
    let a = report.rows_of("A");
    let collapse = collapse_of(&a);
    let c = report.rows_of("C");
    let best = best_pool(&c).cloned();
    let clients_c = c.first().map(|r| r.clients);
    let direct_same =
        clients_c.and_then(|n| a.iter().find(|r| r.clients == n).map(|r| (*r).clone()));
    let biggest = report
        .rows
        .iter()
        .filter(|r| r.experiment == "A" || r.experiment == "C")
        .max_by_key(|r| r.clients)
        .cloned();
    if let Some(Collapse {
        peak,
        worst,
        qps_ratio: q,
        p99_ratio: p,
    }) = collapse
    {
        report.meta("peak_c", peak.clients);
        report.meta("peak_qps", format!("{:.1}", peak.qps));
        report.meta("peak_p99_ms", format!("{:.2}", peak.p99_ms));
        report.meta("max_c", worst.clients);
        report.meta("max_c_qps", format!("{:.1}", worst.qps));
        report.meta("max_c_p99_ms", format!("{:.2}", worst.p99_ms));
        let defined = worst.queries > 0;
        report.meta(
            "collapse_qps_ratio_peak_over_max_c",
            if defined {
                format!("{q:.3}")
            } else {
                UNDEFINED.into()
            },
        );
        report.meta(
            "collapse_p99_ratio_max_c_over_peak",
            if defined {
                format!("{p:.2}")
            } else {
                UNDEFINED.into()
            },
        );
        report.meta(
            "collapse_p99_with_inflight_ratio_max_c_over_peak",
            ratio_text(worst.p99_with_inflight_ms, peak.p99_with_inflight_ms),
        );
    }
    if let Some(best) = best {
        report.meta("best_pool_size", best.pool_size.unwrap_or(0));
        report.meta("best_pool_qps", format!("{:.1}", best.qps));
        report.meta("best_pool_p99_ms", format!("{:.2}", best.p99_ms));
        if let Some(d) = direct_same {
            report.meta("best_pool_qps_ratio_vs_direct", ratio_text(best.qps, d.qps));
            report.meta(
                "best_pool_p99_ratio_direct_over_pool",
                ratio_text(d.p99_ms, best.p99_ms),
            );
            report.meta(
                "best_pool_p99_with_inflight_ratio_direct_over_pool",
                ratio_text(d.p99_with_inflight_ms, best.p99_with_inflight_ms),
            );
        }
    }
    if let Some(b) = biggest {
        report.meta("loadgen_clients_at_max", b.clients);
        report.meta(
            "loadgen_cpu_us_per_query_at_max",
            format!("{:.2}", b.loadgen_cpu_us_per_query),
        );
        report.meta(
            "loadgen_cpu_pct_at_max",
            format!("{:.1}", b.loadgen_cpu_pct),
        );
        report.meta(
            "loadgen_rss_mib_at_max",
            format!("{:.1}", b.loadgen_rss_mib),
        );
    }
}
