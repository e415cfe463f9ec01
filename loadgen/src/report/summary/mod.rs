//! `summary.txt`: tables like the original study's, the headline ratios, and plain words on
//! what a row means when fairness is poor. One section to a file; [`render`] puts them in order.

pub mod adaptive;
pub mod admission;
pub mod cost;
pub mod curve;
pub mod fairness;
pub mod header;
pub mod idle;
pub mod open_loop;
pub mod overhead;
pub mod pool;
pub mod proxy;
pub mod recommendation;
pub mod sessions;
pub mod sysbench;
pub mod table;

use crate::report::results::Report;

/// Renders the whole summary.
pub fn render(rep: &Report) -> String {
    let mut out = String::new();
    header::header(&mut out, rep);
    curve::curve(&mut out, rep);
    pool::pool(&mut out, rep);
    open_loop::open_loop(&mut out, rep);
    proxy::proxy(&mut out, rep);
    overhead::overhead(&mut out, rep);
    sysbench::sysbench(&mut out, rep);
    sessions::sessions(&mut out, rep);
    idle::idle(&mut out, rep);
    adaptive::adaptive(&mut out, rep);
    // A sysbench-only run has no loadgen clients to judge.
    if !rep.sysbench_only() {
        fairness::fairness(&mut out, &rep.rows);
        cost::cost(&mut out, &rep.rows);
    }
    recommendation::recommendation(&mut out, rep);
    out
}

/// Hand-made rows for the sections' tests.
#[cfg(test)]
pub mod fixtures {
    use crate::measure::level::LevelResult;
    use crate::report::results::Report;

    /// A closed-loop row where every client was served evenly.
    pub fn row(
        experiment: &str,
        target: &str,
        clients: usize,
        qps: f64,
        p99_ms: f64,
    ) -> LevelResult {
        LevelResult {
            experiment: experiment.into(),
            target: target.into(),
            arrival: "closed".into(),
            clients,
            backend_conns: clients,
            window_s: 8.0,
            queries: (qps * 8.0) as u64,
            qps,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            p99_with_inflight_ms: p99_ms,
            clients_served: clients,
            jain_index: 1.0,
            littles_ratio: 1.0,
            workload: "knee".into(),
            ..LevelResult::default()
        }
    }

    /// The same row with a pool size.
    pub fn pooled(experiment: &str, target: &str, p: usize, qps: f64, p99_ms: f64) -> LevelResult {
        LevelResult {
            pool_size: Some(p),
            backend_conns: p,
            ..row(experiment, target, 512, qps, p99_ms)
        }
    }

    /// A report of these rows and metadata.
    pub fn report(rows: Vec<LevelResult>, meta: &[(&str, &str)]) -> Report {
        Report {
            rows,
            meta: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Report::default()
        }
    }

    /// The original study's curve: a peak of 1137 QPS at C=4, 720 QPS at C=512.
    pub fn seed_curve() -> Vec<LevelResult> {
        [
            (1, 340.0, 5.2),
            (2, 720.0, 4.9),
            (4, 1137.0, 8.13),
            (8, 1087.0, 40.65),
            (512, 720.0, 1714.63),
        ]
        .into_iter()
        .map(|(c, q, p)| row("A", "direct", c, q, p))
        .collect()
    }
}
