//! The operator's takeaway: where the knee is, which pool size to run, and what to expect there.

use std::fmt::Write as _;

use crate::analysis::curve::{collapse_of, knee, Collapse};
use crate::analysis::pool::best_pool;
use crate::report::results::Report;

/// Writes the recommendation.
pub fn recommendation(out: &mut String, rep: &Report) {
    let a = rep.rows_of("A");
    let Some(Collapse { peak, worst, .. }) = collapse_of(&a) else {
        return;
    };
    let peak = knee(&a).cloned().unwrap_or(peak);
    let px = rep.rows_of("proxy");
    let c = rep.rows_of("C");
    let (source, rows) = if px.is_empty() {
        ("the in-process pool", c)
    } else {
        ("sluice", px)
    };
    let Some(best) = best_pool(&rows) else { return };
    let p = best.pool_size.unwrap_or(0);
    let _ = writeln!(out, "\nRecommendation");
    let _ = writeln!(
        out,
        "The server's throughput knee is at about {} concurrent queries ({:.0} QPS, p99 {:.1} ms with one connection per client).\n\
         Run sluice with pool_size = {} in front of it: with {} clients through {} this run measured {:.0} QPS at a {:.1} ms p99,\n\
         {} of {} clients served, against {:.0} QPS at a {:.1} ms p99 for the same {} clients connecting directly.\n\
         Expect that QPS and tail while the query mix stays like this one; re-run `just bench` (or `loadgen bench --mysql-url ...`)\n\
         after hardware or workload changes, and keep max_backend_connections above pool_size by the sessions you expect to pin.",
        peak.clients, peak.qps, peak.p99_ms,
        p, best.clients, source, best.qps, best.p99_ms, best.clients_served, best.clients,
        worst.qps, worst.p99_ms, worst.clients
    );
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report, seed_curve};
    use super::*;

    #[test]
    fn sluice_rows_are_preferred_over_the_in_process_pool() {
        let mut rows = seed_curve();
        rows.extend([
            pooled("C", "pool", 8, 957.0, 42.06),
            pooled("proxy", "proxy", 4, 990.0, 30.0),
        ]);
        let mut out = String::new();
        recommendation(&mut out, &report(rows, &[]));
        assert!(
            out.contains("knee is at about 4 concurrent queries (1137 QPS"),
            "{out}"
        );
        assert!(
            out.contains("pool_size = 4 in front of it: with 512 clients through sluice"),
            "{out}"
        );
        let mut none = String::new();
        recommendation(&mut none, &report(vec![], &[]));
        assert!(none.is_empty());
    }
}
