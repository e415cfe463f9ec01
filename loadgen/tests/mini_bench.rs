//! A mini `loadgen bench` against a real local MariaDB: checks every CSV column, the
//! sanity of the figures, the SVGs, the metadata, and that teardown left nothing behind.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{leftovers, loadgen, num, read_rows, run_dir, servers_mentioning, MINI};

/// The documented columns (results/README.md), in order.
const COLUMNS: &[&str] = &[
    "experiment",
    "target",
    "arrival",
    "clients",
    "backend_conns",
    "pool_size",
    "rate_fraction",
    "offered_qps",
    "warmup_s",
    "window_s",
    "queries",
    "errors",
    "qps",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "mean_ms",
    "clients_served",
    "client_queries_min",
    "client_queries_median",
    "client_queries_max",
    "jain_index",
    "inflight_at_close",
    "oldest_inflight_ms",
    "p99_with_inflight_ms",
    "littles_l",
    "littles_ratio",
    "threads_connected",
    "threads_running",
    "loadgen_cpu_us_per_query",
    "loadgen_cpu_pct",
    "loadgen_rss_mib",
    "proxy_cpu_us_per_query",
    "idle_conns",
    "workload",
    "pool_mode",
    "open_clients",
    "shed",
    "attempts",
    "max_queue_wait_ms",
    "p99_closed_ms",
    "p99_open_ms",
    "threads_running_mean",
    "limit_mean",
    "qps_se",
    "cpu_us_per_query",
    "server_cpu_us_per_query",
    "syscalls_per_query",
    "syscall_window_qps",
    "instructions_per_query",
    "round",
];

/// Columns that may be empty, and when.
fn may_be_empty(col: &str, row: &HashMap<String, String>) -> bool {
    match col {
        "pool_size" => row["target"].starts_with("direct") || row["pool_mode"] == "auto",
        "rate_fraction" => row["arrival"] != "open",
        "proxy_cpu_us_per_query" | "pool_mode" => {
            row["target"] != "proxy" && !row["target"].starts_with("sluice")
        }
        "idle_conns" => row["experiment"] != "D",
        // F's peak row runs the closed-loop clients alone.
        "offered_qps" => row["arrival"] == "closed",
        "open_clients" | "p99_closed_ms" | "p99_open_ms" => {
            row["experiment"] != "F" || row["arrival"] == "closed"
        }
        // Only the admission-control row of F has a target.
        "max_queue_wait_ms" => true,
        "threads_running_mean" | "limit_mean" => row["experiment"] != "E",
        // The overhead experiment's relay processes (tests/overhead.rs checks them).
        "cpu_us_per_query"
        | "server_cpu_us_per_query"
        | "syscalls_per_query"
        | "syscall_window_qps"
        | "instructions_per_query"
        | "round" => row["experiment"] != "overhead",
        _ => false,
    }
}

fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let (headers, rows) = read_rows(path);
    assert_eq!(headers, COLUMNS, "columns of {}", path.display());
    rows
}

fn check_rows(file: &str, rows: &[HashMap<String, String>], expected: usize) {
    assert_eq!(rows.len(), expected, "{file} rows");
    for row in rows {
        for col in COLUMNS {
            let empty = row[*col].is_empty();
            assert!(
                !empty || may_be_empty(col, row),
                "{file}: {col} is empty in {row:?}"
            );
            if !empty
                && !matches!(
                    *col,
                    "experiment" | "target" | "arrival" | "workload" | "pool_mode"
                )
            {
                num(row, col);
            }
        }
        assert!(num(row, "qps") > 0.0, "{file}: qps in {row:?}");
        assert!(num(row, "queries") > 0.0, "{file}: queries in {row:?}");
        assert!(
            num(row, "p99_ms") >= num(row, "p50_ms"),
            "{file}: p99 < p50 in {row:?}"
        );
        assert!(num(row, "p999_ms") >= num(row, "p99_ms"));
        assert!(num(row, "max_ms") >= num(row, "p999_ms"));
        // Young in-flight requests can pull it slightly below the plain p99, never far.
        assert!(num(row, "p99_with_inflight_ms") > 0.0);
        assert!(num(row, "oldest_inflight_ms") >= 0.0);
        let jain = num(row, "jain_index");
        assert!(jain > 0.0 && jain <= 1.0 + 1e-9, "{file}: jain {jain}");
        assert!(num(row, "clients_served") <= num(row, "clients"));
        assert!(num(row, "client_queries_min") <= num(row, "client_queries_median"));
        assert!(num(row, "client_queries_median") <= num(row, "client_queries_max"));
        assert!(num(row, "loadgen_rss_mib") > 0.0);
        assert_eq!(num(row, "errors"), 0.0, "{file}: errors in {row:?}");
    }
}

#[test]
fn mini_bench_writes_complete_honest_results_and_cleans_up() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("out");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mut cmd = loadgen();
    // `--all`: every experiment, D with two idle levels only.
    cmd.arg("bench")
        .arg("--all")
        .args(["--idle-levels", "0,20"])
        .args(MINI)
        .args([
            "--conc-levels",
            "1,2,4",
            "--pool-sizes",
            "1,2",
            "--client-threads",
            "8",
        ])
        .args(["--open-fractions", "0.8,1.2", "--adaptive-s", "3"])
        // sysbench (tests/sysbench.rs checks it in full): one second of one workload.
        .args([
            "--sysbench-rounds",
            "1",
            "--sysbench-time",
            "1",
            "--sysbench-warmup",
            "0",
        ])
        .args([
            "--sysbench-threads",
            "4",
            "--sysbench-workloads",
            "oltp_point_select",
        ])
        .args(["--sysbench-tables", "1", "--sysbench-table-size", "100"])
        .arg("--out")
        .arg(&out)
        .env("TMPDIR", &server_tmp);
    let output = cmd.output().expect("run loadgen");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "loadgen failed: {stderr}");

    let dir = run_dir(&out);
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .ends_with("Z-bench"));

    let a = read_csv(&dir.join("expA_curve.csv"));
    check_rows("A", &a, 3);
    for (row, c) in a.iter().zip([1.0, 2.0, 4.0]) {
        assert_eq!(num(row, "clients"), c);
        assert_eq!(num(row, "backend_conns"), c);
        // Small C: every client's connection is open, plus the monitor.
        assert!(num(row, "threads_connected") >= c, "{row:?}");
        assert!(num(row, "threads_running") >= 1.0);
        assert_eq!(num(row, "clients_served"), c);
        // A closed loop keeps one request per client in the system.
        let ratio = num(row, "littles_ratio");
        assert!(
            (0.5..=1.5).contains(&ratio),
            "Little's law ratio {ratio} in {row:?}"
        );
    }
    let c = read_csv(&dir.join("expC_pool.csv"));
    check_rows("C", &c, 2);
    for row in &c {
        assert_eq!(num(row, "clients"), 8.0);
        assert_eq!(
            num(row, "clients_served"),
            8.0,
            "a fair pool serves everyone: {row:?}"
        );
        assert!(num(row, "backend_conns") <= 2.0);
        assert!(num(row, "inflight_at_close") <= 8.0);
    }
    let o = read_csv(&dir.join("expO_openloop.csv"));
    check_rows("O", &o, 4);
    assert!(o
        .iter()
        .all(|r| r["arrival"] == "open" && num(r, "offered_qps") > 0.0));
    if cfg!(feature = "proxy") {
        let p = read_csv(&dir.join("expC_proxy.csv"));
        check_rows("proxy", &p, 2);
        assert!(p.iter().all(|r| num(r, "proxy_cpu_us_per_query") >= 0.0));
    }

    let mut svgs = vec![
        "throughput_vs_connections.svg",
        "p99_vs_connections.svg",
        "pool_vs_direct_512.svg",
        "openloop_latency.svg",
    ];
    if cfg!(feature = "proxy") {
        // Experiment E: every fixed P, then auto.
        let e = read_csv(&dir.join("expE_adaptive.csv"));
        check_rows("E", &e, 3);
        let modes: Vec<&str> = e.iter().map(|r| r["pool_mode"].as_str()).collect();
        assert_eq!(modes, ["fixed", "fixed", "auto"]);
        for r in &e {
            assert_eq!(r["workload"], "knee");
            assert!(num(r, "limit_mean") >= 1.0, "{r:?}");
            assert!(num(r, "threads_running_mean") >= 1.0, "{r:?}");
            assert_eq!(num(r, "attempts"), num(r, "queries") + num(r, "shed"));
        }
        let limit_auto = num(&e[2], "limit_mean");
        assert!(
            (1.0..=2.0).contains(&limit_auto),
            "auto stays within 1..max P: {limit_auto}"
        );
        let timeline = csv::Reader::from_path(dir.join("expE_timeline.csv"))
            .expect("timeline")
            .into_records()
            .map(|r| r.expect("record"))
            .collect::<Vec<_>>();
        assert!(timeline.len() >= 8, "{} samples", timeline.len());
        assert!(timeline.iter().any(|r| &r[0] == "auto"));
        assert!(timeline.iter().any(|r| &r[0] == "P=1"));
        // The local server is ours: the auto run re-pins it from 2 CPUs to 1.
        let cpus: std::collections::HashSet<&str> = timeline
            .iter()
            .filter(|r| &r[0] == "auto")
            .map(|r| r.get(5).unwrap_or(""))
            .collect();
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            assert!(cpus.contains("2") && cpus.contains("1"), "{cpus:?}");
        }
        // Experiment F: the peak through sluice (closed loop only), then direct, unbounded
        // and max_queue_wait with the open stream.
        let f = read_csv(&dir.join("expF_admission.csv"));
        check_rows("F", &f, 4);
        assert_eq!(f[0]["target"], "proxy");
        assert_eq!(f[0]["arrival"], "closed");
        assert!(num(&f[0], "queries") > 0.0);
        assert_eq!(f[1]["target"], "direct");
        assert_eq!(f[3]["max_queue_wait_ms"], "200.0");
        for r in &f[1..] {
            assert_eq!(r["arrival"], "closed+open");
            assert!(num(r, "open_clients") >= 1.0 && num(r, "offered_qps") > 0.0);
            assert!(num(r, "attempts") >= num(r, "queries") + num(r, "shed"));
        }
        svgs.push("expE_adaptive.svg");
        // Experiment D: direct and through sluice, two workloads, two idle levels each.
        let d = read_csv(&dir.join("expD_idle.csv"));
        check_rows("D", &d, 8);
        svgs.push("idle_connections.svg");
        // Experiment S: text and prepared, direct and through sluice, with session state.
        let sx = read_csv(&dir.join("expS_sessions.csv"));
        check_rows("S", &sx, 6);
        let targets: Vec<&str> = sx.iter().map(|r| r["target"].as_str()).collect();
        assert_eq!(
            targets,
            [
                "direct-text",
                "direct-prepared",
                "sluice-text",
                "sluice-prepared",
                "sluice-text+set",
                "sluice-prepared+set"
            ]
        );
        for r in &sx {
            assert_eq!(num(r, "errors"), 0.0, "{r:?}");
            assert!(num(r, "queries") > 0.0, "{r:?}");
        }
        let meta = std::fs::read_to_string(dir.join("run_metadata.csv")).expect("metadata");
        for key in [
            "sessions_sluice-prepared+set_replays_per_statement",
            "sessions_sluice-prepared+set_pins",
        ] {
            assert!(meta.contains(key), "{key} missing from run_metadata.csv");
        }
        assert!(
            meta.lines()
                .any(|l| l.starts_with("sessions_sluice-prepared+set_pins,0")),
            "session variables and prepared statements must not pin"
        );
    }
    for svg in svgs {
        let text = std::fs::read_to_string(dir.join(svg)).unwrap_or_else(|e| panic!("{svg}: {e}"));
        assert!(text.trim_start().starts_with("<svg"), "{svg} is not an SVG");
        assert!(text.trim_end().ends_with("</svg>"), "{svg} is truncated");
        assert!(text.contains("<text"), "{svg} has no labels");
        assert!(
            text.contains("<polyline") || text.contains("<rect") || text.contains("<path"),
            "{svg} draws nothing"
        );
    }

    let meta: HashMap<String, String> = csv::Reader::from_path(dir.join("run_metadata.csv"))
        .expect("metadata")
        .records()
        .map(|r| {
            let r = r.expect("record");
            (r[0].to_string(), r[1].to_string())
        })
        .collect();
    for key in [
        "server_kind",
        "server_version",
        "server_binary",
        "server_settings",
        "arch",
        "host_cores",
        "server_cpus",
        "loadgen_cpus",
        "rows",
        "query",
        "scan_w",
        "calibration_p50_ms",
        "calibration_p99_ms",
        "window_s",
        "warmup_s",
        "conc_levels",
        "pool_sizes",
        "git_commit",
        "peak_qps",
        "collapse_qps_ratio_peak_over_max_c",
        "loadgen_cpu_us_per_query_at_max",
        "loadgen_rss_mib_at_max",
    ] {
        assert!(
            meta.get(key).is_some_and(|v| !v.is_empty()),
            "metadata {key} missing: {meta:?}"
        );
    }
    assert_eq!(meta["server_kind"], "local");
    assert_eq!(meta["rows"], "20000");
    assert_eq!(meta["completed"], "true");
    assert!(meta["server_settings"].contains("max-connections="));
    assert!(meta["server_settings"].contains("performance-schema=OFF"));
    let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary");
    for part in [
        "Experiment A",
        "Experiment B",
        "Experiment C",
        "Open loop",
        "Fairness",
        "calibration",
    ] {
        assert!(summary.contains(part), "summary lacks {part}:\n{summary}");
    }
    if cfg!(feature = "proxy") {
        for part in [
            "Experiment E",
            "auto reached",
            "re-pinned",
            "Experiment F",
            "admission control",
        ] {
            assert!(summary.contains(part), "summary lacks {part}:\n{summary}");
        }
    }

    // sysbench ran straight at the server (and through whatever relay is installed).
    if common::runs("sysbench", &["--version"]) {
        let (_, sb) = read_rows(&dir.join("sysbench.csv"));
        assert!(
            sb.iter()
                .any(|r| r["target"] == "direct" && r["status"] == "ok" && num(r, "qps") > 0.0),
            "{sb:?}"
        );
        assert!(
            summary.contains("\nsysbench: oltp_point_select at 4 threads"),
            "{summary}"
        );
    }

    // Teardown: no server left, no temp dir left.
    assert!(
        servers_mentioning(&server_tmp.to_string_lossy()).is_empty(),
        "a server survived"
    );
    assert!(
        leftovers(&server_tmp).is_empty(),
        "temp dirs left: {:?}",
        leftovers(&server_tmp)
    );
}

#[test]
fn bad_values_fail_before_anything_starts() {
    let tmp = tempfile::tempdir().expect("tmp");
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["bench"], &[("CONC_LEVELS", "abc")], "abc"),
        (&["bench", "--pool-sizes", "0,4"], &[], "0 is not allowed"),
        (&["bench"], &[("WINDOW_S", "0")], "more than 0"),
        (&["bench", "--server-cpus", "0-63"], &[], "--server-cpus"),
    ];
    for (args, envs, needle) in cases {
        let out = loadgen()
            .args(*args)
            .arg("--out")
            .arg(tmp.path())
            .envs(envs.iter().copied())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {envs:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert!(leftovers(tmp.path()).is_empty(), "a run folder was created");
}
