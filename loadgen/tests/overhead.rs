//! `loadgen overhead` against a real local MariaDB in a very short mode: direct, the bare
//! tokio relay, HAProxy and the sluice binary at P=4 and P=64 (each with pipelining off, then
//! on), at 1 and 64 clients, plus HAProxy busy-polling and sluice P=4 with busy polling off
//! at 1 client, with the syscall counts and (`--cost-counts`) callgrind's instruction counts
//! (not for the two busy-polling rows). Checks that every target produced its rows with sane
//! values, that the relay-cost goal's ratios reach the metadata and the summary, that
//! `loadgen report` redraws the same section from the CSVs, and that neither a finished run
//! nor Ctrl-C mid-run leaves a relay, counter or server behind.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    leftovers, loadgen, num, processes_with_env, read_rows, read_until, run_dir, runs,
    signal_and_wait, skip_or_fail, spawn_with_stderr, MINI,
};

/// Marks the processes a run starts (they inherit loadgen's environment).
const MARK: &str = "LOADGEN_OVERHEAD_TEST";

/// The sluice binary: SLUICE_BIN, else the one cargo built next to loadgen (`cargo test
/// --workspace` builds it), else a release build.
fn sluice_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SLUICE_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_loadgen"));
    let dir = exe.parent()?;
    [dir.join("sluice"), dir.join("../release/sluice")]
        .into_iter()
        .find(|p| p.is_file())
}

/// The sluice binary, when every tool the experiment needs is here; else skip (or, under
/// CI, fail).
fn tools() -> Option<PathBuf> {
    let haproxy = runs("haproxy", &["-v"]) || Path::new("/usr/sbin/haproxy").is_file();
    let counter = runs("strace", &["-V"]) || runs("perf", &["--version"]);
    let missing = [
        (!haproxy, "haproxy"),
        (!counter, "strace (or perf)"),
        (!runs("valgrind", &["--version"]), "valgrind"),
    ];
    for (gone, what) in missing {
        if gone {
            skip_or_fail(&format!("{what} is not installed"));
            return None;
        }
    }
    match sluice_bin() {
        Some(bin) => Some(bin),
        None => {
            skip_or_fail("no sluice binary next to loadgen (cargo build -p sluice, or SLUICE_BIN)");
            None
        }
    }
}

fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    read_rows(path).1
}

/// No process the run started is left, nor anything in its TMPDIR.
fn assert_nothing_left(mark: &str, tmpdir: &Path) {
    assert_eq!(
        processes_with_env(MARK, mark),
        vec![],
        "processes left behind"
    );
    assert!(
        leftovers(tmpdir).is_empty(),
        "left in TMPDIR: {:?}",
        leftovers(tmpdir)
    );
}

/// `0-2,5` as a sorted list.
fn cpu_set(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus.sort_unstable();
    cpus
}

/// The lines from the one starting with `start` up to the one starting with `end`.
fn section(text: &str, start: &str, end: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| !l.starts_with(end))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn overhead_measures_every_relay_side_by_side_with_sane_counts() {
    let Some(sluice) = tools() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("out");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mark = format!("{}", std::process::id());
    let output = loadgen()
        .arg("overhead")
        .args(MINI)
        .args(["--cost-counts", "--cost-queries", "300"])
        .arg("--sluice-bin")
        .arg(&sluice)
        .arg("--out")
        .arg(&out)
        .env("TMPDIR", &server_tmp)
        .env(MARK, &mark)
        .output()
        .expect("run loadgen");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "loadgen failed: {stderr}");
    let dir = run_dir(&out);

    let rows = read_csv(&dir.join("overhead.csv"));
    let targets = [
        ("direct", ""),
        ("relay", ""),
        ("haproxy", ""),
        ("sluice_serial", "4"),
        ("sluice", "4"),
        ("sluice_serial", "64"),
        ("sluice", "64"),
    ];
    // At 1 client only.
    let busy_polling = [("haproxy_busy", ""), ("sluice_sleep", "4")];
    // At 64 clients only.
    let undigested = [("sluice_undigested", "4")];
    assert_eq!(
        rows.len(),
        targets.len() * 2 + busy_polling.len() + undigested.len(),
        "{rows:?}"
    );
    for clients in ["1", "64"] {
        let extra = busy_polling.iter().filter(|_| clients == "1");
        let many = undigested.iter().filter(|_| clients == "64");
        for &(target, pool) in targets.iter().chain(extra).chain(many) {
            let row = rows
                .iter()
                .find(|r| {
                    r["target"] == target && r["pool_size"] == pool && r["clients"] == clients
                })
                .unwrap_or_else(|| panic!("no {target} {pool} row at {clients} clients: {rows:?}"));
            assert!(num(row, "queries") > 0.0, "{row:?}");
            assert_eq!(num(row, "errors"), 0.0, "{row:?}");
            assert_eq!(row["clients_served"], clients, "{row:?}");
            assert_eq!(row["round"], "1");
            // The local server's CPU is measured for every row.
            assert!(num(row, "server_cpu_us_per_query") > 0.0, "{row:?}");
            if target == "direct" {
                for col in [
                    "cpu_us_per_query",
                    "syscalls_per_query",
                    "instructions_per_query",
                ] {
                    assert!(row[col].is_empty(), "direct has {col}: {row:?}");
                }
                continue;
            }
            let cpu = num(row, "cpu_us_per_query");
            assert!(
                cpu > 0.0 && cpu < 100_000.0,
                "CPU per query {cpu} in {row:?}"
            );
            let syscalls = num(row, "syscalls_per_query");
            // HAProxy busy-polling never sleeps: an epoll_wait with a null timeout after
            // another while it waits for each reply.
            let most = if target == "haproxy_busy" {
                1e6
            } else {
                1000.0
            };
            assert!(
                (1.0..=most).contains(&syscalls),
                "syscalls per query {syscalls} in {row:?}"
            );
            assert!(num(row, "syscall_window_qps") > 0.0, "{row:?}");
            if busy_polling.contains(&(target, pool)) {
                assert!(
                    row["instructions_per_query"].is_empty(),
                    "callgrind leaves out the busy-polling rows: {row:?}"
                );
                continue;
            }
            let instructions = num(row, "instructions_per_query");
            assert!(
                (500.0..=5_000_000.0).contains(&instructions),
                "instructions per query {instructions} in {row:?}"
            );
            assert!(
                row["proxy_cpu_us_per_query"].is_empty(),
                "no in-process proxy: {row:?}"
            );
        }
    }

    // The syscall breakdown adds up to the rows' totals.
    let calls = read_csv(&dir.join("overhead_syscalls.csv"));
    for row in rows.iter().filter(|r| r["target"] != "direct") {
        let total = calls
            .iter()
            .find(|c| {
                c["syscall"] == "total"
                    && c["target"] == row["target"]
                    && c["pool_size"] == row["pool_size"]
                    && c["clients"] == row["clients"]
            })
            .unwrap_or_else(|| panic!("no syscall total for {row:?}"));
        assert!((num(total, "per_query") - num(row, "syscalls_per_query")).abs() < 1e-6);
        let named: f64 = calls
            .iter()
            .filter(|c| {
                c["syscall"] != "total"
                    && c["target"] == row["target"]
                    && c["pool_size"] == row["pool_size"]
                    && c["clients"] == row["clients"]
            })
            .map(|c| num(c, "calls"))
            .sum();
        // perf enables its events one after the other, so the per-name counters and the
        // total can see a few different syscalls at the window's edges (seen: HAProxy at one
        // client, while perf started up). A bookkeeping error (a name counted twice or
        // missed) is at least one call per query, several percent of the total.
        let edge = (num(total, "calls") * 0.02).max(2.0);
        assert!(
            (named - num(total, "calls")).abs() <= edge,
            "the syscalls add up: {total:?}, named {named}"
        );
    }

    let meta: HashMap<String, String> = read_csv(&dir.join("run_metadata.csv"))
        .into_iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    for key in [
        "overhead_cpu_ratio_sluice_p4_over_haproxy_64_clients",
        "overhead_cpu_ratio_sluice_p64_over_haproxy_64_clients",
        "overhead_qps_ratio_sluice_p4_over_haproxy_64_clients",
        "overhead_qps_ratio_sluice_p64_over_haproxy_64_clients",
        "overhead_haproxy_syscalls_per_query_64_clients",
        "overhead_sluice_p64_instructions_per_query_1_clients",
        "overhead_sluice_serial_p4_instructions_per_query_64_clients",
        "overhead_sluice_serial_p64_syscalls_per_query_64_clients",
        "overhead_cpu_ratio_sluice_p4_over_serial_64_clients",
        "overhead_cpu_ratio_sluice_p64_over_serial_64_clients",
    ] {
        let v: f64 = meta
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("metadata {key} missing or not a number: {meta:?}"));
        assert!(v > 0.0, "{key} = {v}");
    }
    for key in [
        "overhead_added_p50_ms_sluice_p4_minus_haproxy_1_client",
        "overhead_added_p50_ms_sluice_p4_minus_sluice_sleep_p4_1_client",
        "overhead_added_p50_ms_sluice_p4_minus_haproxy_busy_1_client",
    ] {
        assert!(
            meta.get(key).and_then(|v| v.parse::<f64>().ok()).is_some(),
            "metadata {key} missing or not a number: {meta:?}"
        );
    }
    assert_eq!(meta["overhead_sluice_sleep_args"], "--backend-busy-poll 0");
    assert!(
        meta["overhead_haproxy_busy_config"].contains("; busy-polling; "),
        "{meta:?}"
    );
    assert!(
        meta["overhead_haproxy_version"].starts_with("HAProxy version"),
        "{meta:?}"
    );
    assert!(!meta["overhead_syscall_counter"].is_empty());
    // Every relay ran where loadgen runs, the server elsewhere.
    assert_eq!(meta["overhead_sluice_serial_args"], "--pipeline-depth 1");
    // sluice is told the CPU count of the server loadgen pinned (MySQL Community would not
    // say it), and the processes started with it.
    assert_eq!(
        meta["sluice_server_cpus"],
        cpu_set(&meta["server_cpus"]).len().to_string(),
        "{meta:?}"
    );
    for relay in [
        "relay",
        "haproxy",
        "haproxy_busy",
        "sluice_serial_p4",
        "sluice_p4",
        "sluice_sleep_p4",
        "sluice_serial_p64",
        "sluice_p64",
        "sluice_undigested_p4",
    ] {
        assert_eq!(
            cpu_set(&meta[&format!("overhead_{relay}_cpus")]),
            cpu_set(&meta["loadgen_cpus"]),
            "{relay} pinning"
        );
    }

    let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary");
    for part in [
        "HAProxy (mode tcp, 1 thread)",
        "CPU per query at 64 clients, sluice / HAProxy (goal <= 0.80): P=4 ",
        "QPS at 64 clients, sluice / HAProxy (goal >= 1.00): P=4 ",
        "added p50 over direct at 1 client (goal: no worse than HAProxy's",
        "  busy polling at 1 client: added p50, sluice P=4 polling minus busy polling off: ",
        "  against HAProxy busy-polling (the same trade, always on): sluice P=4 added p50 minus HAProxy busy-polling's: ",
        "  pipelining: CPU per query at 64 clients, pipelined / serial: P=4 ",
        "  digests: CPU per query at 64 clients, digests on / off: P=4 ",
        "Syscalls per query (",
        "Instructions per query (callgrind",
    ] {
        assert!(summary.contains(part), "summary lacks {part:?}:\n{summary}");
    }
    let svg = std::fs::read_to_string(dir.join("relay_cost.svg")).expect("relay_cost.svg");
    assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains("goal: 0.8 x HAProxy"),
        "the goal line is drawn"
    );

    // `loadgen report` redraws the same section from the CSVs and the metadata.
    let ran = section(&summary, "Overhead:", "Fairness");
    std::fs::remove_file(dir.join("summary.txt")).expect("rm summary");
    std::fs::remove_file(dir.join("relay_cost.svg")).expect("rm svg");
    let report = loadgen().arg("report").arg(&dir).output().expect("report");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let redrawn = std::fs::read_to_string(dir.join("summary.txt")).expect("summary rewritten");
    assert_eq!(section(&redrawn, "Overhead:", "Fairness"), ran);
    assert!(dir.join("relay_cost.svg").is_file(), "the plot is redrawn");

    assert_nothing_left(&mark, &server_tmp);
}

#[test]
fn ctrl_c_mid_overhead_tears_every_relay_down() {
    let Some(sluice) = tools() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mark = format!("sigint-{}", std::process::id());
    let mut cmd = loadgen();
    cmd.arg("overhead")
        .args(["--window-s", "2", "--warmup-s", "0.3", "--no-progress"])
        .arg("--sluice-bin")
        .arg(&sluice)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .env("TMPDIR", &server_tmp)
        .env(MARK, &mark);
    let (mut child, mut lines) = spawn_with_stderr(cmd);
    // The bare relay's level is done once its line is logged; HAProxy's starts next.
    let seen = read_until(&mut lines, "SELECT 1: 1 clients, bare tokio relay");
    let deadline = Instant::now() + Duration::from_secs(20);
    let haproxy = loop {
        let procs = processes_with_env(MARK, &mark);
        if procs
            .iter()
            .any(|(_, cmd)| cmd.contains("haproxy") && cmd.contains(" -f "))
        {
            break procs;
        }
        assert!(
            Instant::now() < deadline,
            "HAProxy never started: {seen:?} {procs:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        haproxy.len() >= 2,
        "the server and HAProxy run: {haproxy:?}"
    );

    let (status, rest) = signal_and_wait(&mut child, lines, libc::SIGINT);
    assert_eq!(
        status.code(),
        Some(130),
        "exit status; stderr tail: {rest:?}"
    );
    assert_nothing_left(&mark, &server_tmp);
}
