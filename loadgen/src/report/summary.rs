//! `summary.txt`: tables like the seed's, the headline ratios, and plain words on what a
//! row means when fairness is poor.

use std::fmt::Write as _;

use super::Report;
use crate::analysis::curve::{collapse_of, knee, Collapse};
use crate::analysis::pool::best_pool;
use crate::measure::level::LevelResult;
use crate::measure::stats::ratio;

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn table(
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

/// Renders the whole summary.
pub fn render(rep: &Report) -> String {
    let mut out = String::new();
    let meta = |k: &str| {
        rep.meta
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("?")
    };
    let _ = writeln!(
        out,
        "sluice loadgen run {}",
        rep.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "server: {} {} pinned to CPUs {}; loadgen on CPUs {} ({} runtime workers); host has {} cores ({})",
        meta("server_kind"), meta("server_version"), meta("server_cpus"), meta("loadgen_cpus"),
        meta("loadgen_worker_threads"), meta("host_cores"), meta("arch")
    );
    let _ = writeln!(
        out,
        "table: {} rows, SCAN_W {}; query: {}",
        meta("rows"),
        meta("scan_w"),
        meta("query")
    );
    let _ = writeln!(
        out,
        "host load average: {} at start, {} at end (other work on the host skews every number)",
        meta("host_loadavg_at_start"),
        meta("host_loadavg_at_end")
    );
    for note in &rep.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if let Some(c) = &rep.calibration {
        let _ = writeln!(
            out,
            "calibration: serial single connection p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms over {} queries ({} rows per answer)",
            c.p50_ms, c.p99_ms, c.mean_ms, c.queries, c.rows_returned
        );
    }
    let _ = writeln!(
        out,
        "\nColumns: served = clients that finished >= 1 query in the window; min/med/max = queries per client;\n\
         jain = Jain's fairness index (1 = even); inflt = requests unfinished when the window closed, oldest ms = the\n\
         oldest one's age then; p99+inflt = p99 counting those at their age; L/C = Little's law (QPS x mean latency)\n\
         over offered clients, ~1.0 in a closed loop when no time is lost; T_con/T_run = Threads_connected/running\n\
         sampled mid-window by a monitor connection (it counts itself)."
    );

    let a = rep.rows_of("A");
    if !a.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment A: the curve (one dedicated connection per client, {} arrival)",
            a[0].arrival
        );
        table(&mut out, &a, "C", |r| r.clients.to_string());
    }
    if let Some(Collapse {
        peak,
        worst,
        qps_ratio: q,
        p99_ratio: p,
    }) = collapse_of(&a)
    {
        let _ = writeln!(out, "\nExperiment B: the collapse");
        let _ = writeln!(
            out,
            "Peak: {:.0} QPS at C={} with a {:.2} ms p99. At C={}: {:.0} QPS and a {:.2} ms p99.",
            peak.qps, peak.clients, peak.p99_ms, worst.clients, worst.qps, worst.p99_ms
        );
        if worst.queries == 0 {
            let _ = writeln!(
                out,
                "No query of C={} finished inside the window, so its throughput and p99 ratios are undefined;\n\
                 the window is too short for this many clients on this server (use a longer WINDOW_S).",
                worst.clients
            );
        } else {
            let _ = writeln!(
                out,
                "The peak has {q:.2}x the throughput of C={}, and C={}'s p99 is {p:.1}x the peak's.",
                worst.clients, worst.clients
            );
        }
        if worst.p99_with_inflight_ms > worst.p99_ms * 1.05 {
            let _ = writeln!(
                out,
                "Counting the {} requests still unfinished at window close, C={}'s p99 is {:.2} ms.",
                worst.inflight_at_close, worst.clients, worst.p99_with_inflight_ms
            );
        }
    }
    let c = rep.rows_of("C");
    if !c.is_empty() {
        let _ = writeln!(out, "\nExperiment C: {} client tasks over an in-process fair FIFO pool of P connections (latency includes the wait to borrow)", c[0].clients);
        table(&mut out, &c, "P", |r| r.pool_size.unwrap_or(0).to_string());
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
    let o = rep.rows_of("O");
    if !o.is_empty() {
        let _ = writeln!(out, "\nOpen loop: Poisson arrivals at fractions of the measured peak; latency counts from the intended start");
        table(&mut out, &o, "target@x", |r| {
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
    let px = rep.rows_of("proxy");
    if !px.is_empty() {
        let _ = writeln!(out, "\nThrough sluice: {} clients connect to the proxy, which runs statements on P backend connections", px[0].clients);
        table(&mut out, &px, "P", |r| {
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
        table(&mut out, &ov, "target", |r| r.target.to_string());
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
            if let Some((_, v)) = rep.meta.iter().find(|(key, _)| key == k) {
                let _ = writeln!(out, "{k}: {v}");
            }
        }
    }

    let sx = rep.rows_of("S");
    if !sx.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment S: the knee query as SQL text and as prepared statements, directly over P \
             connections and through sluice; `+set` clients first set their own time zone and NAMES"
        );
        table(&mut out, &sx, "target", |r| r.target.clone());
        let meta = |k: String| {
            rep.meta
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
        };
        for r in sx.iter().filter(|r| r.target.starts_with("sluice")) {
            let get = |what: &str| meta(format!("sessions_{}_{what}", r.target));
            if let (Some(ratio), Some(replays), Some(pins), Some(opened)) = (
                get("replays_per_statement"),
                get("replays"),
                get("pins"),
                get("backends_opened"),
            ) {
                let _ = writeln!(
                    out,
                    "  {}: {replays} replays ({ratio} per statement), {pins} pins, {opened} backend connections opened",
                    r.target
                );
            }
        }
        let qps = |t: &str| sx.iter().find(|r| r.target == t).map(|r| r.qps);
        for (a, b) in [
            ("sluice-text", "direct-text"),
            ("sluice-prepared", "direct-prepared"),
            ("sluice-prepared", "sluice-text"),
            ("sluice-prepared+set", "sluice-prepared"),
        ] {
            if let (Some(x), Some(y)) = (qps(a), qps(b)) {
                let _ = writeln!(out, "  QPS {a} / {b}: {:.3}", ratio(x, y));
            }
        }
    }

    let d = rep.rows_of("D");
    if !d.is_empty() {
        let _ = writeln!(
            out,
            "\nExperiment D: {} active clients while N idle connections are held open",
            d[0].clients
        );
        table(&mut out, &d, "target/workload@idle", |r| {
            format!("{}/{}@{}", r.target, r.workload, r.idle_conns.unwrap_or(0))
        });
        for workload in ["knee", "point_select"] {
            for target in ["direct", "proxy"] {
                let rows: Vec<&&LevelResult> = d
                    .iter()
                    .filter(|r| r.target == target && r.workload == workload)
                    .collect();
                if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
                    let _ = writeln!(
                        out,
                        "{target}, {workload}: {:.0} QPS with {} idle, {:.0} QPS with {} idle ({:.0}% of it); p99 {:.2} -> {:.2} ms.",
                        first.qps, first.idle_conns.unwrap_or(0), last.qps, last.idle_conns.unwrap_or(0),
                        100.0 * ratio(last.qps, first.qps), first.p99_ms, last.p99_ms
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "The seed study saw a large drop with idle connections; read the direct ratio above to see whether it\n\
             reproduces on this server. Through sluice the idle clients hold no server connection at all."
        );
    }

    let e = rep.rows_of("E");
    if !e.is_empty() {
        let _ = writeln!(out);
        table(&mut out, &e, "sluice pool", |r| {
            match r.pool_mode.as_deref() {
                Some("auto") => "auto".into(),
                _ => format!("P={}", r.pool_size.unwrap_or(0)),
            }
        });
    }
    let f = rep.rows_of("F");
    if !f.is_empty() {
        let _ = writeln!(out);
        table(&mut out, &f, "admission", |r| {
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

    fairness_words(&mut out, &rep.rows);
    loadgen_cost(&mut out, &rep.rows);
    recommendation(&mut out, rep);
    out
}

/// The operator's takeaway: where the knee is, which pool size to run, and what to expect there.
fn recommendation(out: &mut String, rep: &Report) {
    let a = rep.rows_of("A");
    let Some(Collapse { peak, worst, .. }) = collapse_of(&a) else {
        return;
    };
    let peak = knee(&a).cloned().unwrap_or(peak);
    let px = rep.rows_of("proxy");
    let c = rep.rows_of("C");
    let (source, rows) = if px.is_empty() {
        ("the in-process pool", c)
    } else {
        ("sluice", px)
    };
    let Some(best) = best_pool(&rows) else { return };
    let p = best.pool_size.unwrap_or(0);
    let _ = writeln!(out, "\nRecommendation");
    let _ = writeln!(
        out,
        "The server's throughput knee is at about {} concurrent queries ({:.0} QPS, p99 {:.1} ms with one connection per client).\n\
         Run sluice with pool_size = {} in front of it: with {} clients through {} this run measured {:.0} QPS at a {:.1} ms p99,\n\
         {} of {} clients served, against {:.0} QPS at a {:.1} ms p99 for the same {} clients connecting directly.\n\
         Expect that QPS and tail while the query mix stays like this one; re-run `just bench` (or `loadgen bench --mysql-url ...`)\n\
         after hardware or workload changes, and keep max_backend_connections above pool_size by the sessions you expect to pin.",
        peak.clients, peak.qps, peak.p99_ms,
        p, best.clients, source, best.qps, best.p99_ms, best.clients_served, best.clients,
        worst.qps, worst.p99_ms, worst.clients
    );
}

fn fairness_words(out: &mut String, rows: &[LevelResult]) {
    let poor: Vec<&LevelResult> = rows
        .iter()
        // Open-loop counts follow the Poisson arrivals, so uneven counts there are expected.
        .filter(|r| r.arrival == "closed")
        .filter(|r| r.clients > 1 && (r.clients_served < r.clients || r.jain_index < 0.8))
        .collect();
    let _ = writeln!(out, "\nFairness");
    let _ = writeln!(
        out,
        "(Open-loop rows and F's closed+open rows are not judged here: Poisson arrivals and shed statements make\n\
         uneven counts expected; F's summary above gives its clients served.)"
    );
    if poor.is_empty() {
        let _ = writeln!(out, "Every client of every row finished queries in its window, and Jain's index stayed >= 0.8.");
        return;
    }
    let _ = writeln!(
        out,
        "A row's QPS and percentiles describe only the queries that finished. When some clients finished nothing\n\
         (served < clients) or the counts are lopsided (low Jain index), the percentiles are those of the lucky clients;\n\
         the starved clients' waits show up only in 'inflt', 'oldest ms' and 'p99+inflt'. Read those rows as\n\
         'this many users were served at this latency while the rest waited at least this long', not as everyone's experience."
    );
    for r in poor {
        let _ = writeln!(
            out,
            "  {} {} C={}{}: {} of {} clients served, queries per client {}..{} (median {}), Jain {:.2}; oldest unfinished {:.0} ms",
            r.experiment, r.target, r.clients,
            r.pool_size.map(|p| format!(" P={p}")).unwrap_or_default(),
            r.clients_served, r.clients, r.client_queries_min, r.client_queries_max, r.client_queries_median,
            r.jain_index, r.oldest_inflight_ms
        );
    }
}

fn loadgen_cost(out: &mut String, rows: &[LevelResult]) {
    let _ = writeln!(out, "\nLoad generator cost");
    let Some(biggest) = rows
        .iter()
        .filter(|r| r.experiment == "A" || r.experiment == "C")
        .max_by_key(|r| r.clients)
    else {
        return;
    };
    let _ =
        writeln!(
        out,
        "At {} clients ({} {}): {:.1} us loadgen CPU per query, {:.1}% of one core, RSS {:.1} MiB.",
        biggest.clients, biggest.experiment, biggest.target, biggest.loadgen_cpu_us_per_query,
        biggest.loadgen_cpu_pct, biggest.loadgen_rss_mib
    );
    for r in rows.iter().filter(|r| r.loadgen_cpu_pct > 30.0) {
        let _ = writeln!(
            out,
            "WARNING: {} {} C={}: loadgen used {:.0}% of a core (> 30%); it may have shaped this row.",
            r.experiment, r.target, r.clients, r.loadgen_cpu_pct
        );
    }
}
