//! Experiments E and F: their tables, then what they found (auto against the best fixed P;
//! admission control against its goal, in [`super::admission`]), all read from the rows, the
//! timeline and the metadata, so `loadgen report` rewrites it the same way.

use std::fmt::Write as _;

use super::table::table;
use crate::analysis::adaptive::e_findings;
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
    for finding in [e_text(rep), super::admission::f_text(rep)]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "\n{finding}");
    }
}

/// E's findings, one line per point.
fn e_text(rep: &Report) -> Option<String> {
    let repin_s = rep.meta_value("e_repin_at_s").and_then(|v| v.parse().ok());
    let f = e_findings(
        &rep.rows_of("E"),
        &rep.rows_of("E2"),
        &rep.timeline,
        repin_s,
    )?;
    let (best_p, best_qps) = (f.best_p, f.best_qps);
    let fmt = |v: Option<f64>, unit: &str| match v {
        Some(v) => format!("{v:.1}{unit}"),
        None => "n/a".into(),
    };
    let pool_sizes: Vec<usize> = rep
        .meta_value("pool_sizes")
        .unwrap_or("")
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let cpus = 2.0;
    let mut lines = vec![format!(
        "Experiment E: {} clients through sluice, pool_size = auto against fixed P {pool_sizes:?}",
        rep.meta_value("client_threads").unwrap_or("?")
    )];
    let a = &f.auto;
    lines.push(format!(
        "best fixed P = {best_p} at {best_qps:.0} QPS; auto reached >= 95% of it (1 s rolling QPS) after {} \
         (goal: within 10 s).",
        fmt(a.reach_95_s, " s")
    ));
    if let Some(q) = a.steady_qps {
        lines.push(format!(
            "auto before the re-pin (steady part): {q:.0} QPS = {:.1}% of best fixed, mean limit {}, \
             mean Threads_running {} vs 2 x {cpus:.0} server CPUs = {:.0} (the monitor's own query counts as 1).",
            100.0 * q / best_qps,
            fmt(a.limit_before, ""),
            fmt(a.steady_threads_running, ""),
            2.0 * cpus
        ));
    }
    match repin_s {
        Some(r) => lines.push(format!(
            "server re-pinned from 2 CPUs to 1 at {r:.1} s: mean limit {} -> {} after; the limit got there {} \
             after the re-pin (goal: within 10 s).",
            fmt(a.limit_before, ""),
            fmt(a.limit_after, ""),
            fmt(a.follow_s, " s")
        )),
        None => lines.push("the server was not re-pinned (not a local process, or one CPU)".into()),
    }
    if let Some(r) = &f.rounds {
        let list = |v: &[f64]| {
            v.iter()
                .map(|q| format!("{q:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Both configurations of a round are measured after the same warm-up.
        let round_start = rep.rows_of("E2").first().map_or(0.0, |r| r.warmup_s);
        lines.push(format!(
            "paired rounds (fixed P={best_p} and a fresh auto alternating, both measured from {round_start:.0} s after start \
             over the same window): fixed {} QPS, auto {} QPS; auto / fixed = {:.1}% of the means (goal >= 95%).",
            list(&r.fixed),
            list(&r.auto),
            100.0 * r.ratio
        ));
        if let Some(fixed_mean) = f.fixed_mean {
            lines.push(format!(
                "re-measured in the rounds, P={best_p} averages {fixed_mean:.0} QPS; each round's fresh auto reached \
                 95% of that (1 s rolling QPS) after {} s: {} of {} within 10 s.",
                f.reach
                    .iter()
                    .map(|t| fmt(*t, ""))
                    .collect::<Vec<_>>()
                    .join(", "),
                f.reached_within_10s(),
                f.reach.len()
            ));
        }
    }
    let host_cores: usize = rep
        .meta_value("host_cores")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if host_cores <= 2 {
        lines.push(format!(
            "note: this host has {host_cores} CPUs, so with the server on 2 of them loadgen (512 clients) and sluice compete \
             with it for the same cores; the ratios above are side by side in one run."
        ));
    }
    Some(lines.join("\n"))
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
        let mut fixed = pooled("E", "proxy", 8, 227.0, 2900.0);
        fixed.pool_mode = Some("fixed".into());
        let rep = report(
            vec![fixed, auto, capped],
            &[
                ("client_threads", "512"),
                ("pool_sizes", "8"),
                ("host_cores", "2"),
            ],
        );
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
        assert!(
            out.contains(
                "Experiment E: 512 clients through sluice, pool_size = auto against fixed P [8]"
            ),
            "{out}"
        );
        assert!(out.contains("best fixed P = 8 at 227 QPS"), "{out}");
        assert!(out.contains("the server was not re-pinned"), "{out}");
        assert!(
            out.contains("side by side in one run.\n\nExperiment F: 512 closed-loop clients"),
            "{out}"
        );
    }
}
