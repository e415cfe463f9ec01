//! The sysbench section: what ran and how (from the metadata), every target's medians over
//! the rounds, sluice's and HAProxy's ratios to direct MariaDB in the same round (median and
//! range), the goals judged, and every failed run. Everything is computed from
//! `sysbench.csv` ([`crate::analysis::sysbench`]), so `loadgen report` redraws it.

use std::fmt::Write as _;

use crate::analysis::sysbench::{cells, levels, Cell, Level, Stat, SLUICE};
use crate::analysis::sysbench_goals::{basis, goals};
use crate::report::results::Report;

/// Writes the sysbench section.
pub fn sysbench(out: &mut String, rep: &Report) {
    let rows = &rep.sysbench;
    if rows.is_empty() {
        return;
    }
    header(out, rep);
    let _ = writeln!(
        out,
        "\nEvery target, medians over the rounds (QPS counts every statement, BEGIN and COMMIT \
         included; latency is per event, one transaction; CPU is the process's utime + stime \
         per query over the run)"
    );
    level_table(out, &levels(rows));
    let _ = writeln!(
        out,
        "\nRatios to direct in the same round, median (min-max) over the rounds; CPU: sluice's \
         relay CPU per query over HAProxy's"
    );
    ratio_table(out, &cells(rows));
    let _ = writeln!(out, "\nGoals, {}:", basis(rows));
    for g in goals(rows) {
        let _ = writeln!(out, "  {}: {} ({})", g.kind.text(), g.verdict(), g.detail);
    }
    for r in rows.iter().filter(|r| !r.ok()) {
        let _ = writeln!(
            out,
            "  failed: {} {} threads, {} round {}: {}",
            r.workload, r.threads, r.target, r.round, r.failure
        );
    }
    for note in rep.notes.iter().filter(|n| n.starts_with("sysbench:")) {
        let _ = writeln!(out, "{note}");
    }
}

fn meta<'a>(rep: &'a Report, key: &str) -> &'a str {
    rep.meta_value(key).unwrap_or("?")
}

fn header(out: &mut String, rep: &Report) {
    let _ = writeln!(
        out,
        "\nsysbench: {} at {} threads; {} round(s) of {} s runs, each after a {} s warm-up run on the same target",
        meta(rep, "sysbench_workloads"),
        meta(rep, "sysbench_threads"),
        meta(rep, "sysbench_rounds"),
        meta(rep, "sysbench_time_s"),
        meta(rep, "sysbench_warmup_s"),
    );
    let _ = writeln!(
        out,
        "  {}; {} tables x {} rows ({} MiB with indexes; buffer pool {} MiB), prepared once; as {}",
        meta(rep, "sysbench_version"),
        meta(rep, "sysbench_tables"),
        meta(rep, "sysbench_table_size"),
        meta(rep, "sysbench_data_mib"),
        meta(rep, "sysbench_buffer_pool_mib"),
        meta(rep, "sysbench_account"),
    );
    let _ = writeln!(
        out,
        "  targets: direct ({}, max_connections {}, max_prepared_stmt_count {}), HAProxy (mode tcp, 1 thread), sluice ({})",
        meta(rep, "server_version"),
        meta(rep, "sysbench_server_max_connections"),
        meta(rep, "sysbench_server_max_prepared_stmt_count"),
        meta(rep, "sysbench_sluice_settings"),
    );
    let _ = writeln!(
        out,
        "  {}; order: {}",
        meta(rep, "sysbench_pinning"),
        meta(rep, "sysbench_order"),
    );
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|v| format!("{v:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

fn level_table(out: &mut String, levels: &[Level]) {
    let _ = writeln!(
        out,
        "{:<18} {:>7} {:<8} {:>9} {:>8} {:>9} {:>9} {:>6} {:>6} {:>7} {:>11} {:>9} {:>10} {:>7} {:>4} {:>6}",
        "workload", "threads", "target", "QPS", "TPS", "p95 ms", "p99 ms", "errors", "reconn",
        "refused", "served", "relay us", "server us", "sb %cpu", "runs", "failed"
    );
    for l in levels {
        let served = match l.served_min {
            Some(n) => format!("{n}/{}", l.threads),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<18} {:>7} {:<8} {:>9} {:>8} {:>9} {:>9} {:>6} {:>6} {:>7} {:>11} {:>9} {:>10} {:>7} {:>4} {:>6}",
            l.workload,
            l.threads,
            l.target,
            opt(l.qps, 0),
            opt(l.tps, 0),
            opt(l.p95_ms, 2),
            opt(l.p99_ms, 2),
            l.errors,
            l.reconnects,
            l.refused,
            served,
            opt(l.relay_cpu_us, 1),
            opt(l.server_cpu_us, 1),
            opt(l.sysbench_cpu_pct, 0),
            l.runs,
            l.failed
        );
    }
}

/// `0.95 (0.82-1.13)`, or just the value from one round.
fn stat(s: Option<Stat>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 => format!("{:.2}", s.median),
        Some(s) => format!("{:.2} ({:.2}-{:.2})", s.median, s.min, s.max),
    }
}

fn ratio_table(out: &mut String, cells: &[Cell]) {
    let _ = writeln!(
        out,
        "{:<18} {:>7} {:<8} {:>17} {:>17} {:>17} {:>17} {:>17}",
        "workload", "threads", "target", "QPS", "p95", "p99", "CPU vs HAProxy", "server CPU"
    );
    for c in cells {
        let failed = match (c.direct_failed, c.target_failed) {
            (0, 0) => String::new(),
            (d, t) => format!("  ({d} rounds direct failed, {t} {} failed)", c.target),
        };
        let _ = writeln!(
            out,
            "{:<18} {:>7} {:<8} {:>17} {:>17} {:>17} {:>17} {:>17}{failed}",
            c.workload,
            c.threads,
            c.target,
            stat(c.qps),
            stat(c.p95),
            stat(c.p99),
            if c.target == SLUICE {
                stat(c.cpu_vs_haproxy)
            } else {
                String::new()
            },
            stat(c.server_cpu),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sysbench::tests::{refused, row};
    use crate::analysis::sysbench::{DIRECT, HAPROXY};
    use crate::measure::sysbench::SysbenchRow;

    fn report(rows: Vec<SysbenchRow>) -> Report {
        Report {
            sysbench: rows,
            meta: [
                ("sysbench_workloads", "oltp_point_select"),
                ("sysbench_threads", "64, 1024"),
                ("sysbench_rounds", "2"),
                ("sysbench_time_s", "10"),
                ("sysbench_warmup_s", "5"),
                ("sysbench_sluice_settings", "its defaults, --pool-size auto"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            notes: vec!["sysbench: prepared in 3.2 s".into(), "other: x".into()],
            ..Report::default()
        }
    }

    #[test]
    fn the_section_has_the_medians_the_ratios_and_the_goals() {
        let w = "oltp_point_select";
        let mut rows = Vec::new();
        for round in 1..=2 {
            rows.push(row(round, w, 64, DIRECT, 8788.0, 22.7));
            rows.push(row(round, w, 64, HAPROXY, 8031.0, 30.3));
            rows.push(row(
                round,
                w,
                64,
                SLUICE,
                7192.0 + round as f64 * 1000.0,
                24.0,
            ));
        }
        rows.push(refused(1, w, 1024, DIRECT, 24));
        rows.push(row(1, w, 1024, SLUICE, 8606.0, 97.6));
        let mut out = String::new();
        sysbench(&mut out, &report(rows));
        assert!(out.contains("\nsysbench: oltp_point_select at 64, 1024 threads; 2 round(s) of 10 s runs, each after a 5 s warm-up run"), "{out}");
        assert!(
            out.contains("sluice (its defaults, --pool-size auto)"),
            "{out}"
        );
        // Direct at 64: its median QPS; at 1024 its failed run.
        let direct = out
            .lines()
            .find(|l| l.starts_with("oltp_point_select       64 direct"))
            .expect("direct row");
        assert!(
            direct.contains(" 8788 ") && direct.contains("64/64"),
            "{direct}"
        );
        let refused = out
            .lines()
            .find(|l| l.starts_with("oltp_point_select     1024 direct"))
            .expect("refused row");
        assert!(
            refused.contains(" 24 ") && refused.trim_end().ends_with("    1      1"),
            "{refused}"
        );
        // sluice's QPS ratios 0.932 and 1.046 over two rounds: their mean and range.
        let ratio = out
            .lines()
            .find(|l| l.starts_with("oltp_point_select       64 sluice") && l.contains('('))
            .expect("ratio row");
        assert!(ratio.contains("0.99 (0.93-1.05)"), "{ratio}");
        assert!(
            ratio.contains("0.67 (0.67-0.67)"),
            "CPU vs HAProxy: {ratio}"
        );
        assert!(
            out.contains(
                "\nGoals, judged on the medians over 2 rounds (the goals ask for at least 3"
            ),
            "{out}"
        );
        assert!(out.contains("  QPS sluice / direct >= 1.00 at every thread count: NOT MET (0 of 1 met; missed: oltp_point_select 64 0.98x; not judged, direct failed there: oltp_point_select 1024)"), "{out}");
        assert!(out.contains("  failed: oltp_point_select 1024 threads, direct round 1: 24 of 1024 connections refused"), "{out}");
        assert!(
            out.contains("direct refused connections at oltp_point_select 1024"),
            "{out}"
        );
        assert!(
            out.contains("\nsysbench: prepared in 3.2 s") && !out.contains("other: x"),
            "{out}"
        );
        let mut empty = String::new();
        sysbench(&mut empty, &Report::default());
        assert!(empty.is_empty());
    }
}
