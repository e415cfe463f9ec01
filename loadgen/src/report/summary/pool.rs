//! Experiment C: the in-process pool's table and the best pool against the same clients direct.

use std::fmt::Write as _;

use super::table::table;
use crate::analysis::curve::collapse_of;
use crate::analysis::pool::best_pool;
use crate::measure::stats::ratio;
use crate::report::results::Report;

/// Writes C's table and the best pool's line.
pub fn pool(out: &mut String, rep: &Report) {
    let a = rep.rows_of("A");
    let c = rep.rows_of("C");
    if !c.is_empty() {
        let _ = writeln!(out, "\nExperiment C: {} client tasks over an in-process fair FIFO pool of P connections (latency includes the wait to borrow)", c[0].clients);
        table(out, &c, "P", |r| r.pool_size.unwrap_or(0).to_string());
        let direct = a
            .iter()
            .find(|r| r.clients == c[0].clients && r.queries > 0);
        if let (Some(best), Some(direct)) = (best_pool(&c), direct) {
            let _ = writeln!(
                out,
                "Best pool: P={} does {:.0} QPS at a {:.2} ms p99 for the same {} clients that got {:.0} QPS at a {:.2} ms p99 direct:\n\
                 {:.2}x the throughput at {:.1}x lower p99 ({:.0}% of the peak).",
                best.pool_size.unwrap_or(0), best.qps, best.p99_ms, direct.clients, direct.qps, direct.p99_ms,
                ratio(best.qps, direct.qps), ratio(direct.p99_ms, best.p99_ms),
                collapse_of(&a).map(|c| 100.0 * ratio(best.qps, c.peak.qps)).unwrap_or(f64::NAN)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report, seed_curve};
    use super::*;

    #[test]
    fn the_best_pool_is_compared_with_direct_at_the_same_clients() {
        let mut rows = seed_curve();
        rows.extend([
            pooled("C", "pool", 8, 957.0, 42.06),
            pooled("C", "pool", 64, 712.0, 217.66),
        ]);
        let mut out = String::new();
        pool(&mut out, &report(rows, &[]));
        assert!(out.contains("Experiment C: 512 client tasks"), "{out}");
        assert!(out.contains("Best pool: P=8 does 957 QPS at a 42.06 ms p99 for the same 512 clients that got 720 QPS"), "{out}");
        assert!(
            out.contains("1.33x the throughput at 40.8x lower p99 (84% of the peak)"),
            "{out}"
        );
    }
}
