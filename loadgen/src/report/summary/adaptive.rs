//! Experiments E and F: their tables, then the findings measured with them (auto against the best fixed P, admission control against its goal).

use std::fmt::Write as _;

use super::table::table;
use crate::report::results::Report;

/// Writes E's and F's tables and findings.
pub fn adaptive(out: &mut String, rep: &Report) {
    let e = rep.rows_of("E");
    if !e.is_empty() {
        let _ = writeln!(out);
        table(out, &e, "sluice pool", |r| match r.pool_mode.as_deref() {
            Some("auto") => "auto".into(),
            _ => format!("P={}", r.pool_size.unwrap_or(0)),
        });
    }
    let f = rep.rows_of("F");
    if !f.is_empty() {
        let _ = writeln!(out);
        table(out, &f, "admission", |r| {
            match (r.target.as_str(), r.max_queue_wait_ms) {
                ("direct", _) => "direct".into(),
                (_, None) => "sluice unbounded".into(),
                (_, Some(t)) => format!("sluice {t:.0}ms"),
            }
        });
    }
    for finding in &rep.findings {
        let _ = writeln!(out, "\n{finding}");
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pooled, report};
    use super::*;

    #[test]
    fn tables_name_the_pool_and_findings_follow() {
        let mut auto = pooled("E", "proxy", 0, 205.0, 3000.0);
        (auto.pool_size, auto.pool_mode) = (None, Some("auto".into()));
        let mut capped = pooled("F", "proxy", 2, 112.0, 212.0);
        capped.max_queue_wait_ms = Some(200.0);
        let mut rep = report(
            vec![pooled("E", "proxy", 8, 227.0, 2900.0), auto, capped],
            &[],
        );
        rep.findings.push("Experiment E: finding".into());
        let mut out = String::new();
        adaptive(&mut out, &rep);
        assert!(out.contains("sluice pool"), "{out}");
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("P=8 ")),
            "{out}"
        );
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("auto ")),
            "{out}"
        );
        assert!(out.contains("sluice 200ms"), "{out}");
        assert!(out.trim_end().ends_with("Experiment E: finding"), "{out}");
    }
}
