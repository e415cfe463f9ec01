//! The rows through sluice, and the overhead experiment (direct, bare relay, sluice).

use std::fmt::Write as _;

use super::table::table;
use crate::report::results::Report;

/// Writes the proxy and overhead tables and lines.
pub fn proxy(out: &mut String, rep: &Report) {
    let px = rep.rows_of("proxy");
    if !px.is_empty() {
        let _ = writeln!(out, "\nThrough sluice: {} clients connect to the proxy, which runs statements on P backend connections", px[0].clients);
        table(out, &px, "P", |r| {
            r.pool_size
                .map(|p| p.to_string())
                .unwrap_or_else(|| "ext".into())
        });
        for r in &px {
            if let Some(cpu) = r.proxy_cpu_us_per_query {
                let _ = writeln!(
                    out,
                    "  P={}: sluice used {:.1} us CPU per relayed query",
                    r.pool_size.unwrap_or(0),
                    cpu
                );
            }
        }
    }
    let ov = rep.rows_of("overhead");
    if !ov.is_empty() {
        let _ = writeln!(
            out,
            "\nOverhead: SELECT 1, direct vs a bare TCP relay (the floor any proxy pays on this host) vs sluice \
             (proxy: backend over TCP; proxy-unix: over the server's Unix socket)"
        );
        table(out, &ov, "target", |r| r.target.to_string());
        for k in [
            "overhead_added_p50_ms_1_client",
            "overhead_relay_added_p50_ms_1_client",
            "overhead_sluice_over_relay_p50_ms_1_client",
            "overhead_relay_cpu_us_per_query_64_clients",
            "overhead_sluice_cpu_us_per_query_64_clients",
            "overhead_sluice_over_relay_cpu_us_per_query_64_clients",
            "overhead_sluice_unix_added_p50_ms_1_client",
            "overhead_sluice_unix_cpu_us_per_query_64_clients",
        ] {
            if let Some(v) = rep.meta_value(k) {
                let _ = writeln!(out, "{k}: {v}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report, row};
    use super::*;

    #[test]
    fn proxy_rows_show_sluice_cpu_and_overhead_its_metadata() {
        let mut p1 = pooled("proxy", "proxy", 1, 206.0, 2638.0);
        p1.proxy_cpu_us_per_query = Some(150.0);
        let ov = row("overhead", "direct", 1, 20000.0, 0.1);
        let rep = report(
            vec![p1, ov],
            &[
                ("overhead_added_p50_ms_1_client", "0.0490"),
                ("unrelated", "x"),
            ],
        );
        let mut out = String::new();
        proxy(&mut out, &rep);
        assert!(out.contains("Through sluice: 512 clients"), "{out}");
        assert!(
            out.contains("  P=1: sluice used 150.0 us CPU per relayed query"),
            "{out}"
        );
        assert!(out.contains("Overhead: SELECT 1"), "{out}");
        assert!(
            out.contains("overhead_added_p50_ms_1_client: 0.0490"),
            "{out}"
        );
        assert!(!out.contains("unrelated"), "{out}");
    }
}
