//! The sysbench experiment's arithmetic: the targets and the order a round measures them in
//! ([`order`]), every target's ratios to direct MariaDB in the same round (and sluice's CPU
//! to HAProxy's, [`ratios`]), their medians over the rounds ([`cells`]), and each target's
//! own medians ([`levels`]). The goals are judged from these in [`super::sysbench_goals`].
//! Pure functions over `sysbench.csv`'s rows.

use crate::analysis::relay_cost::median;
use crate::cli::SysbenchWorkload;
use crate::measure::sysbench::SysbenchRow;

/// The reference: sysbench straight at the server.
pub const DIRECT: &str = "direct";
/// HAProxy in TCP mode with one thread, the plain relay.
pub const HAPROXY: &str = "haproxy";
/// The sluice binary with its default settings.
pub const SLUICE: &str = "sluice";
/// Every target, in the order odd rounds measure them.
pub const TARGETS: [&str; 3] = [DIRECT, HAPROXY, SLUICE];

/// The targets in the order round `round` (from 1) measures them at each workload and thread
/// count: as given in odd rounds, reversed in even ones, so that over each pair of rounds
/// every target holds the same mean position and a drifting host favours none.
pub fn order<T: Copy>(round: usize, targets: &[T]) -> Vec<T> {
    let mut v = targets.to_vec();
    if round.is_multiple_of(2) {
        v.reverse();
    }
    v
}

/// Rounds present in the rows, in order.
pub fn rounds(rows: &[SysbenchRow]) -> Vec<usize> {
    let mut v: Vec<usize> = rows.iter().map(|r| r.round).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `(workload, threads)` pairs in the order they were first measured.
pub fn pairs(rows: &[SysbenchRow]) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = Vec::new();
    for r in rows {
        if !v.iter().any(|(w, t)| *w == r.workload && *t == r.threads) {
            v.push((r.workload.clone(), r.threads));
        }
    }
    // Workloads in their listed order, thread counts ascending.
    let all = SysbenchWorkload::ALL;
    let rank = |w: &str| {
        all.iter()
            .position(|x| x.script() == w)
            .unwrap_or(all.len())
    };
    v.sort_by(|a, b| (rank(&a.0), &a.0, a.1).cmp(&(rank(&b.0), &b.0, b.1)));
    v
}

/// Targets present in the rows, in [`TARGETS`] order (others after).
pub fn targets(rows: &[SysbenchRow]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if !v.contains(&r.target) {
            v.push(r.target.clone());
        }
    }
    let rank = |t: &str| {
        TARGETS
            .iter()
            .position(|x| *x == t)
            .unwrap_or(TARGETS.len())
    };
    v.sort_by_key(|t| rank(t));
    v
}

/// The row of one level.
pub fn find<'a>(
    rows: &'a [SysbenchRow],
    round: usize,
    workload: &str,
    threads: usize,
    target: &str,
) -> Option<&'a SysbenchRow> {
    rows.iter().find(|r| {
        r.round == round && r.workload == workload && r.threads == threads && r.target == target
    })
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// One target's ratios in one round at one workload and thread count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ratio {
    pub round: usize,
    pub workload: String,
    pub threads: usize,
    pub target: String,
    /// QPS over direct's: above 1 is faster.
    pub qps: Option<f64>,
    /// p95 and p99 over direct's: below 1 is better.
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    /// The server's CPU per query over its CPU per query under direct load.
    pub server_cpu: Option<f64>,
    /// sluice only: its CPU per query over HAProxy's.
    pub cpu_vs_haproxy: Option<f64>,
    /// Whether direct, this target, and HAProxy (when it ran) finished with statistics.
    pub direct_ok: bool,
    pub target_ok: bool,
    pub haproxy_ok: bool,
}

/// Every non-direct level's ratios, round by round.
pub fn ratios(rows: &[SysbenchRow]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.target != DIRECT) {
        let direct = find(rows, r.round, &r.workload, r.threads, DIRECT).filter(|d| d.ok());
        let haproxy_row = find(rows, r.round, &r.workload, r.threads, HAPROXY);
        let haproxy = haproxy_row.filter(|h| h.ok());
        let mine = Some(r).filter(|r| r.ok());
        let of = |f: fn(&SysbenchRow) -> Option<f64>| ratio(mine.and_then(f), direct.and_then(f));
        out.push(Ratio {
            round: r.round,
            workload: r.workload.clone(),
            threads: r.threads,
            target: r.target.clone(),
            qps: of(|x| Some(x.qps).filter(|q| *q > 0.0)),
            p95: of(|x| x.p95_ms),
            p99: of(|x| x.p99_ms),
            server_cpu: of(|x| x.server_cpu_us_per_query),
            cpu_vs_haproxy: match r.target == SLUICE {
                true => ratio(
                    mine.and_then(|x| x.relay_cpu_us_per_query),
                    haproxy.and_then(|x| x.relay_cpu_us_per_query),
                ),
                false => None,
            },
            direct_ok: direct.is_some(),
            target_ok: r.ok(),
            haproxy_ok: haproxy_row.is_none_or(|h| h.ok()),
        });
    }
    out
}

/// A value over the rounds: the median, and the range it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Rounds it was measured in.
    pub n: usize,
}

/// The median and range of `values`; `None` when empty.
pub fn stat(mut values: Vec<f64>) -> Option<Stat> {
    let n = values.len();
    let median = median(&mut values)?;
    Some(Stat {
        median,
        min: values[0],
        max: values[n - 1],
        n,
    })
}

/// One target's ratios at one workload and thread count, over the rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub workload: String,
    pub threads: usize,
    pub target: String,
    pub qps: Option<Stat>,
    pub p95: Option<Stat>,
    pub p99: Option<Stat>,
    pub server_cpu: Option<Stat>,
    pub cpu_vs_haproxy: Option<Stat>,
    /// Rounds in which direct, this target, or HAProxy failed (refused connections,
    /// aborted).
    pub direct_failed: usize,
    pub target_failed: usize,
    pub haproxy_failed: usize,
}

/// Every non-direct target's cell, by workload, thread count and target.
pub fn cells(rows: &[SysbenchRow]) -> Vec<Cell> {
    let all = ratios(rows);
    let mut out = Vec::new();
    for (workload, threads) in pairs(rows) {
        for target in targets(rows).into_iter().filter(|t| t != DIRECT) {
            let mine: Vec<&Ratio> = all
                .iter()
                .filter(|r| r.workload == workload && r.threads == threads && r.target == target)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let of =
                |f: fn(&Ratio) -> Option<f64>| stat(mine.iter().filter_map(|r| f(r)).collect());
            out.push(Cell {
                qps: of(|r| r.qps),
                p95: of(|r| r.p95),
                p99: of(|r| r.p99),
                server_cpu: of(|r| r.server_cpu),
                cpu_vs_haproxy: of(|r| r.cpu_vs_haproxy),
                direct_failed: mine.iter().filter(|r| !r.direct_ok).count(),
                target_failed: mine.iter().filter(|r| !r.target_ok).count(),
                haproxy_failed: mine.iter().filter(|r| !r.haproxy_ok).count(),
                workload: workload.clone(),
                threads,
                target,
            });
        }
    }
    out
}

/// One target's own numbers at one workload and thread count, over the rounds: medians of
/// the finished runs, sums of what went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub workload: String,
    pub threads: usize,
    pub target: String,
    /// Runs, and failed runs.
    pub runs: usize,
    pub failed: usize,
    pub qps: Option<f64>,
    pub tps: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub relay_cpu_us: Option<f64>,
    pub server_cpu_us: Option<f64>,
    pub sysbench_cpu_pct: Option<f64>,
    /// Over every run.
    pub errors: u64,
    pub reconnects: u64,
    pub refused: u64,
    pub refused_1040: u64,
    /// The fewest threads served in a finished run.
    pub served_min: Option<usize>,
}

/// Every target's [`Level`], by workload, thread count and target.
pub fn levels(rows: &[SysbenchRow]) -> Vec<Level> {
    let mut out = Vec::new();
    for (workload, threads) in pairs(rows) {
        for target in targets(rows) {
            let mine: Vec<&SysbenchRow> = rows
                .iter()
                .filter(|r| r.workload == workload && r.threads == threads && r.target == target)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let ok: Vec<&&SysbenchRow> = mine.iter().filter(|r| r.ok()).collect();
            let med = |f: fn(&SysbenchRow) -> Option<f64>| {
                median(&mut ok.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let sum = |f: fn(&SysbenchRow) -> u64| mine.iter().map(|r| f(r)).sum::<u64>();
            out.push(Level {
                runs: mine.len(),
                failed: mine.len() - ok.len(),
                qps: med(|r| Some(r.qps)),
                tps: med(|r| Some(r.tps)),
                p95_ms: med(|r| r.p95_ms),
                p99_ms: med(|r| r.p99_ms),
                relay_cpu_us: med(|r| r.relay_cpu_us_per_query),
                server_cpu_us: med(|r| r.server_cpu_us_per_query),
                sysbench_cpu_pct: med(|r| r.sysbench_cpu_pct),
                errors: sum(|r| r.errors),
                reconnects: sum(|r| r.reconnects),
                refused: sum(|r| r.refused),
                refused_1040: sum(|r| r.refused_1040),
                served_min: ok.iter().map(|r| r.threads_served).min(),
                workload: workload.clone(),
                threads,
                target,
            });
        }
    }
    out
}

/// A row of `sysbench_ratios.csv`: one target's ratios in one round, or (`round` =
/// `median`) their medians over the rounds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RatioRow {
    pub round: String,
    pub workload: String,
    pub threads: usize,
    pub target: String,
    pub qps_ratio: Option<f64>,
    pub p95_ratio: Option<f64>,
    pub p99_ratio: Option<f64>,
    pub server_cpu_ratio: Option<f64>,
    pub cpu_ratio_vs_haproxy: Option<f64>,
}

/// `sysbench_ratios.csv`: every round's ratios, then the medians.
pub fn ratio_rows(rows: &[SysbenchRow]) -> Vec<RatioRow> {
    let per_round = ratios(rows).into_iter().map(|r| RatioRow {
        round: r.round.to_string(),
        workload: r.workload,
        threads: r.threads,
        target: r.target,
        qps_ratio: r.qps,
        p95_ratio: r.p95,
        p99_ratio: r.p99,
        server_cpu_ratio: r.server_cpu,
        cpu_ratio_vs_haproxy: r.cpu_vs_haproxy,
    });
    let m = |s: Option<Stat>| s.map(|s| s.median);
    let medians = cells(rows).into_iter().map(|c| RatioRow {
        round: "median".into(),
        workload: c.workload,
        threads: c.threads,
        target: c.target,
        qps_ratio: m(c.qps),
        p95_ratio: m(c.p95),
        p99_ratio: m(c.p99),
        server_cpu_ratio: m(c.server_cpu),
        cpu_ratio_vs_haproxy: m(c.cpu_vs_haproxy),
    });
    per_round.chain(medians).collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A finished row.
    pub fn row(
        round: usize,
        workload: &str,
        threads: usize,
        target: &str,
        qps: f64,
        p99: f64,
    ) -> SysbenchRow {
        SysbenchRow {
            round,
            workload: workload.into(),
            threads,
            target: target.into(),
            status: "ok".into(),
            qps,
            tps: qps / 10.0,
            queries: (qps * 10.0) as u64,
            p95_ms: Some(p99 / 2.0),
            p99_ms: Some(p99),
            threads_served: threads,
            relay_cpu_us_per_query: (target != DIRECT).then_some(if target == SLUICE {
                40.0
            } else {
                60.0
            }),
            server_cpu_us_per_query: Some(50.0),
            ..SysbenchRow::default()
        }
    }

    /// A run that could not start: `refused` connections refused with 1040.
    pub fn refused(
        round: usize,
        workload: &str,
        threads: usize,
        target: &str,
        refused: u64,
    ) -> SysbenchRow {
        SysbenchRow {
            status: "failed".into(),
            qps: 0.0,
            p95_ms: None,
            p99_ms: None,
            refused,
            refused_1040: refused,
            threads_served: 0,
            failure: format!("{refused} of {threads} connections refused"),
            ..row(round, workload, threads, target, 0.0, 0.0)
        }
    }

    #[test]
    fn the_target_names_are_the_clis() {
        let keys: Vec<&str> = crate::cli::SysbenchTarget::ALL
            .iter()
            .map(|t| t.key())
            .collect();
        assert_eq!(keys, TARGETS);
    }

    #[test]
    fn even_rounds_measure_backwards() {
        assert_eq!(order(1, &TARGETS), [DIRECT, HAPROXY, SLUICE]);
        assert_eq!(order(2, &TARGETS), [SLUICE, HAPROXY, DIRECT]);
        assert_eq!(order(3, &TARGETS), TARGETS);
        assert_eq!(order(2, &[DIRECT, SLUICE]), [SLUICE, DIRECT]);
    }

    #[test]
    fn ratios_are_taken_within_a_round_then_the_median() {
        // A measured table at 64 threads, in round 1, and two more rounds around it.
        let w = "oltp_point_select";
        let rows = vec![
            row(1, w, 64, DIRECT, 8788.0, 22.7),
            row(1, w, 64, HAPROXY, 8031.0, 30.3),
            row(1, w, 64, SLUICE, 7192.0, 24.0),
            row(2, w, 64, SLUICE, 9000.0, 20.0),
            row(2, w, 64, HAPROXY, 8000.0, 30.0),
            row(2, w, 64, DIRECT, 8000.0, 25.0),
            row(3, w, 64, DIRECT, 10000.0, 20.0),
            row(3, w, 64, HAPROXY, 9000.0, 22.0),
            row(3, w, 64, SLUICE, 9500.0, 30.0),
        ];
        let r = ratios(&rows);
        assert_eq!(r.len(), 6);
        let first = &r[1];
        assert_eq!((first.round, first.target.as_str()), (1, SLUICE));
        assert!((first.qps.unwrap() - 7192.0 / 8788.0).abs() < 1e-12);
        assert!((first.p99.unwrap() - 24.0 / 22.7).abs() < 1e-12);
        assert_eq!(first.cpu_vs_haproxy, Some(40.0 / 60.0));
        assert_eq!(
            r[0].cpu_vs_haproxy, None,
            "HAProxy is not compared with itself"
        );
        let c = cells(&rows);
        assert_eq!(c.len(), 2);
        let sluice = c.iter().find(|c| c.target == SLUICE).unwrap();
        // Round ratios 0.818, 1.125, 0.95: the median is the middle one.
        let qps = sluice.qps.unwrap();
        assert_eq!(qps.n, 3);
        assert!((qps.median - 0.95).abs() < 1e-12, "{qps:?}");
        assert!((qps.min - 7192.0 / 8788.0).abs() < 1e-12);
        assert!((qps.max - 1.125).abs() < 1e-12);
        // p99 ratios 1.057, 0.8, 1.5.
        assert!((sluice.p99.unwrap().median - 24.0 / 22.7).abs() < 1e-12);
        assert_eq!((sluice.direct_failed, sluice.target_failed), (0, 0));
        let l = levels(&rows);
        let direct = l.iter().find(|l| l.target == DIRECT).unwrap();
        assert_eq!(direct.qps, Some(8788.0));
        assert_eq!(
            (direct.runs, direct.failed, direct.served_min),
            (3, 0, Some(64))
        );
        let csv = ratio_rows(&rows);
        assert_eq!(csv.len(), 6 + 2);
        assert_eq!(csv.last().unwrap().round, "median");
    }

    #[test]
    fn a_failed_direct_run_leaves_its_round_out_of_the_ratios() {
        let w = "oltp_read_only";
        let rows = vec![
            refused(1, w, 1024, DIRECT, 24),
            row(1, w, 1024, SLUICE, 7320.0, 1427.0),
            row(2, w, 1024, SLUICE, 7000.0, 1500.0),
            row(2, w, 1024, DIRECT, 5902.0, 2238.0),
        ];
        let c = cells(&rows);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].direct_failed, c[0].target_failed), (1, 0));
        assert_eq!(c[0].qps.unwrap().n, 1);
        assert!((c[0].qps.unwrap().median - 7000.0 / 5902.0).abs() < 1e-12);
        let l = levels(&rows);
        let direct = l.iter().find(|l| l.target == DIRECT).unwrap();
        assert_eq!((direct.failed, direct.refused_1040), (1, 24));
        assert_eq!(direct.qps, Some(5902.0));
    }

    #[test]
    fn pairs_follow_the_workload_list_and_ascending_threads() {
        let rows = vec![
            row(1, "oltp_read_write", 16, DIRECT, 1.0, 1.0),
            row(1, "oltp_point_select", 1024, DIRECT, 1.0, 1.0),
            row(1, "oltp_point_select", 16, SLUICE, 1.0, 1.0),
        ];
        let p = pairs(&rows);
        assert_eq!(
            p,
            [
                ("oltp_point_select".to_string(), 16),
                ("oltp_point_select".to_string(), 1024),
                ("oltp_read_write".to_string(), 16)
            ]
        );
        assert_eq!(targets(&rows), [DIRECT, SLUICE]);
        assert_eq!(rounds(&rows), [1]);
    }
}
