//! The open loop's table, and what never finished above the peak.

use std::fmt::Write as _;

use super::table::table;
use crate::report::results::Report;

/// Writes the open loop's table and lines.
pub fn open_loop(out: &mut String, rep: &Report) {
    let o = rep.rows_of("O");
    if !o.is_empty() {
        let _ = writeln!(out, "\nOpen loop: Poisson arrivals at fractions of the measured peak; latency counts from the intended start");
        table(out, &o, "target@x", |r| {
            format!("{}@{:.2}", r.target, r.rate_fraction.unwrap_or(0.0))
        });
        for r in o.iter().filter(|r| r.rate_fraction.unwrap_or(0.0) > 1.0) {
            let _ = writeln!(
                out,
                "At {:.2}x the peak ({:.0} q/s offered), {} ({}): {} requests never finished by window close (oldest waited {:.0} ms).",
                r.rate_fraction.unwrap_or(0.0), r.offered_qps.unwrap_or(0.0), r.target,
                r.pool_size.map(|p| format!("P={p}")).unwrap_or_else(|| format!("{} connections", r.backend_conns)),
                r.inflight_at_close, r.oldest_inflight_ms
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, row};
    use super::*;

    #[test]
    fn rows_above_the_peak_say_what_never_finished() {
        let mut over = row("O", "direct", 512, 700.0, 900.0);
        over.arrival = "open".into();
        over.rate_fraction = Some(1.2);
        over.offered_qps = Some(1364.0);
        over.inflight_at_close = 992;
        over.oldest_inflight_ms = 8800.0;
        let mut under = over.clone();
        under.rate_fraction = Some(0.8);
        let mut out = String::new();
        open_loop(&mut out, &report(vec![under, over], &[]));
        assert!(
            out.contains("direct@0.80") && out.contains("direct@1.20"),
            "{out}"
        );
        assert!(out.contains("At 1.20x the peak (1364 q/s offered), direct (512 connections): 992 requests never finished"), "{out}");
        assert!(!out.contains("At 0.80x"), "{out}");
    }
}
