//! The rows through sluice (the proxy experiment).

use std::fmt::Write as _;

use super::table::table;
use crate::report::results::Report;

/// Writes the proxy table and sluice's CPU per relayed query.
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
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report, row};
    use super::*;

    #[test]
    fn proxy_rows_show_sluice_cpu() {
        let mut p1 = pooled("proxy", "proxy", 1, 206.0, 2638.0);
        p1.proxy_cpu_us_per_query = Some(150.0);
        let ov = row("overhead", "direct", 1, 20000.0, 0.1);
        let rep = report(vec![p1, ov], &[]);
        let mut out = String::new();
        proxy(&mut out, &rep);
        assert!(out.contains("Through sluice: 512 clients"), "{out}");
        assert!(
            out.contains("  P=1: sluice used 150.0 us CPU per relayed query"),
            "{out}"
        );
        assert!(!out.contains("Overhead"), "{out}");
    }
}
