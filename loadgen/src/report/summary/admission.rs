//! Experiment F's findings: the peak, the goal for the admitted p99, each row against them,
//! and whether admission control met the goal.

use std::fmt::Write as _;

use crate::analysis::admission::{f_findings, shed_fraction};
use crate::report::results::Report;

/// F's findings, one line per point and row.
pub fn f_text(rep: &Report) -> Option<String> {
    let rows = rep.rows_of("F");
    let f = f_findings(&rows)?;
    let (peak, pool, service_ms) = (f.peak, f.pool, f.service_ms);
    let target_ms = f.target_ms.unwrap_or(0.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Experiment F: {} closed-loop clients + a Poisson stream at {:.1}x the peak ({:.0} QPS) on {} more \
         connections; sluice with pool_size = {pool}",
        rep.meta_value("client_threads").unwrap_or("?"),
        f.load,
        f.open_qps,
        f.open_clients
    );
    let _ = writeln!(
        out,
        "peak (the closed-loop clients alone, same P and pinning) {peak:.0} QPS; one service time at P={pool} = {service_ms:.1} ms; goal for admitted p99: <= \
         {target_ms:.0} + {service_ms:.1} = {:.0} ms; throughput >= 95% of peak.",
        target_ms + service_ms
    );
    for r in &rows {
        let name = match (r.target.as_str(), r.max_queue_wait_ms) {
            ("direct", _) => "direct".to_string(),
            (_, None) if r.open_clients.is_none() => "sluice, no overload (peak)".to_string(),
            (_, None) => "sluice, unbounded queue".to_string(),
            (_, Some(t)) => format!("sluice, max_queue_wait {t:.0} ms"),
        };
        let shed = shed_fraction(r);
        let _ = writeln!(
            out,
            "{name:<32} {:>6.0} QPS ({:.1}% of peak), admitted p99 {:.1} ms{}, \
             p99 incl. unfinished {:.1} ms, shed {:.1}% ({} of {}), errors {}, closed-loop clients served {}/{} (Jain {:.2})",
            r.qps,
            100.0 * r.qps / peak,
            r.p99_ms,
            match (r.p99_closed_ms, r.p99_open_ms) {
                (Some(c), Some(o)) => format!(" (closed {c:.1}, open {o:.1})"),
                _ => String::new(),
            },
            r.p99_with_inflight_ms,
            100.0 * shed,
            r.shed,
            r.attempts,
            r.errors,
            r.clients_served,
            r.clients - r.open_clients.unwrap_or(0),
            r.jain_index
        );
        if r.max_queue_wait_ms.is_some() {
            let _ = writeln!(
                out,
                "admission control {} the goal (p99 {:.1} <= {:.0} ms and QPS >= 95% of peak).",
                if f.meets(r) { "meets" } else { "misses" },
                r.p99_ms,
                target_ms + service_ms
            );
        }
    }
    Some(out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report};
    use super::*;

    #[test]
    fn each_row_is_read_against_the_peak_and_the_goal() {
        let peak = pooled("F", "proxy", 2, 111.0, 5000.0);
        let mut capped = pooled("F", "proxy", 2, 112.0, 212.0);
        (
            capped.open_clients,
            capped.offered_qps,
            capped.max_queue_wait_ms,
        ) = (Some(256), Some(166.5), Some(200.0));
        (capped.shed, capped.attempts, capped.clients) = (875, 1000, 768);
        let rep = report(vec![peak, capped], &[("client_threads", "512")]);
        let text = f_text(&rep).unwrap();
        assert!(text.starts_with("Experiment F: 512 closed-loop clients + a Poisson stream at 1.5x the peak (166 QPS) on 256 more"), "{text}");
        assert!(
            text.contains(
                "one service time at P=2 = 18.0 ms; goal for admitted p99: <= 200 + 18.0 = 218 ms"
            ),
            "{text}"
        );
        assert!(text.contains("sluice, max_queue_wait 200 ms"), "{text}");
        assert!(text.contains("shed 87.5% (875 of 1000)"), "{text}");
        assert!(
            text.ends_with(
                "admission control meets the goal (p99 212.0 <= 218 ms and QPS >= 95% of peak)."
            ),
            "{text}"
        );
        assert!(f_text(&report(vec![], &[])).is_none());
    }
}
