//! The summary's table: one line per level with throughput, latency, fairness, in-flight
//! requests, Little's law and the server's threads.

use std::fmt::Write as _;

use crate::measure::level::LevelResult;

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Writes a header and one line per row; the first column is `first_col`, filled by `first`.
pub fn table(
    out: &mut String,
    rows: &[&LevelResult],
    first_col: &str,
    first: impl Fn(&LevelResult) -> String,
) {
    let _ = writeln!(
        out,
        "{first_col:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>14} {:>5} {:>6} {:>9} {:>10} {:>5} {:>5} {:>5} {:>4}",
        "clients", "QPS", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "served", "min/med/max", "jain",
        "inflt", "oldest ms", "p99+inflt", "L/C", "T_con", "T_run", "err"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>10} {:>7} {:>8.0} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8} {:>14} {:>5.2} {:>6} {:>9.1} {:>10.2} {:>5.2} {:>5} {:>5} {:>4}",
            first(r),
            r.clients,
            r.qps,
            r.p50_ms,
            r.p99_ms,
            r.p999_ms,
            r.max_ms,
            // With an open stream, served counts the closed-loop clients (see LevelResult).
            format!("{}/{}", r.clients_served, r.clients - r.open_clients.unwrap_or(0)),
            format!("{}/{}/{}", r.client_queries_min, r.client_queries_median, r.client_queries_max),
            r.jain_index,
            r.inflight_at_close,
            r.oldest_inflight_ms,
            r.p99_with_inflight_ms,
            r.littles_ratio,
            opt(r.threads_connected),
            opt(r.threads_running),
            r.errors
        );
    }
}
