//! `loadgen sysbench` against a real local MariaDB in a tiny plan (one round, oltp_point_select
//! at 16 threads, 1 s warm-up and 2 s runs, two 1000-row tables): sysbench itself drives the
//! load straight at the server, through HAProxy and through the sluice binary. Checks that the
//! results folder is complete and honest (every target's row holds sysbench's own numbers, the
//! CPU of each process, every thread served; the ratios are the rows' own; the metadata names
//! the versions, options and pinning and no password), that `loadgen report` redraws the same
//! section, and that no relay, sysbench or server is left running or in TMPDIR, after the run
//! and after Ctrl-C in the middle of one.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::{
    leftovers, loadgen, num, processes_with_env, read_rows, run_dir, runs, signal_and_wait,
    skip_or_fail, spawn_with_stderr,
};

/// Marks the processes a run starts (they inherit loadgen's environment).
const MARK: &str = "LOADGEN_SYSBENCH_TEST";

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

/// The sluice binary, when sysbench and HAProxy are here too; else skip (or, under CI, fail).
fn tools() -> Option<PathBuf> {
    if !runs("sysbench", &["--version"]) {
        skip_or_fail("sysbench is not installed");
        return None;
    }
    if !(runs("haproxy", &["-v"]) || Path::new("/usr/sbin/haproxy").is_file()) {
        skip_or_fail("haproxy is not installed");
        return None;
    }
    let bin = sluice_bin();
    if bin.is_none() {
        skip_or_fail("no sluice binary next to loadgen (cargo build -p sluice, or SLUICE_BIN)");
    }
    bin
}

fn section(text: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with("sysbench: "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sysbench_runs_every_target_and_the_folder_is_complete_and_honest() {
    let Some(sluice) = tools() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("out");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mark = format!("{}", std::process::id());
    let output = loadgen()
        .arg("sysbench")
        .args([
            "--sysbench-rounds",
            "1",
            "--sysbench-time",
            "2",
            "--sysbench-warmup",
            "1",
        ])
        .args([
            "--sysbench-workloads",
            "oltp_point_select",
            "--sysbench-threads",
            "16",
        ])
        .args([
            "--sysbench-tables",
            "2",
            "--sysbench-table-size",
            "1000",
            "--no-progress",
        ])
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
    let mut files: Vec<String> = leftovers(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "run_metadata.csv",
            "summary.txt",
            "sysbench.csv",
            "sysbench.svg",
            "sysbench_intervals.csv",
            "sysbench_ratios.csv"
        ],
        "no failed run's output, nothing else"
    );

    let (_, rows) = read_rows(&dir.join("sysbench.csv"));
    let targets: Vec<&str> = rows.iter().map(|r| r["target"].as_str()).collect();
    assert_eq!(
        targets,
        ["direct", "haproxy", "sluice"],
        "round 1 runs direct first"
    );
    for row in &rows {
        assert_eq!(row["status"], "ok", "{row:?}");
        assert_eq!(
            (row["round"].as_str(), row["threads"].as_str()),
            ("1", "16")
        );
        assert_eq!(row["workload"], "oltp_point_select");
        // sysbench's own numbers: one query per event, over its 2 s clock.
        assert!(num(row, "queries") > 0.0, "{row:?}");
        assert_eq!(row["queries"], row["transactions"], "{row:?}");
        let qps = num(row, "qps");
        let time = num(row, "time_s");
        assert!((1.9..10.0).contains(&time), "{row:?}");
        assert!(
            (qps - num(row, "queries") / time).abs() <= qps * 0.01 + 1.0,
            "{row:?}"
        );
        assert!(num(row, "p50_ms") <= num(row, "p95_ms"), "{row:?}");
        assert!(num(row, "p95_ms") <= num(row, "p99_ms") + 0.01, "{row:?}");
        for col in ["errors", "reconnects", "refused", "refused_1040"] {
            assert_eq!(num(row, col), 0.0, "{col}: {row:?}");
        }
        assert_eq!(row["threads_served"], "16", "{row:?}");
        assert!(num(row, "thread_events_min") > 0.0, "{row:?}");
        assert!(num(row, "server_cpu_us_per_query") > 0.0, "{row:?}");
        assert!(num(row, "sysbench_cpu_us_per_query") > 0.0, "{row:?}");
        assert!(num(row, "cpu_window_s") > 1.0, "{row:?}");
        assert!(row["failure"].is_empty(), "{row:?}");
        if row["target"] == "direct" {
            assert!(row["relay_cpu_us_per_query"].is_empty(), "{row:?}");
        } else {
            let cpu = num(row, "relay_cpu_us_per_query");
            assert!(cpu > 0.0 && cpu < 100_000.0, "{row:?}");
        }
    }
    let (_, seconds) = read_rows(&dir.join("sysbench_intervals.csv"));
    for target in ["direct", "haproxy", "sluice"] {
        let mine: Vec<_> = seconds.iter().filter(|r| r["target"] == target).collect();
        assert!(!mine.is_empty(), "no per-second line for {target}");
        // Threads stop as the clock runs out, so the last second may count fewer.
        assert_eq!(mine[0]["threads_running"], "16", "{mine:?}");
        assert!(mine
            .iter()
            .all(|r| num(r, "threads_running") <= 16.0 && num(r, "lat_pct") == 99.0));
    }
    // The ratios are the rows' own.
    let (_, ratios) = read_rows(&dir.join("sysbench_ratios.csv"));
    let by = |t: &str| rows.iter().find(|r| r["target"] == t).unwrap();
    for target in ["haproxy", "sluice"] {
        let want = num(by(target), "qps") / num(by("direct"), "qps");
        for round in ["1", "median"] {
            let r = ratios
                .iter()
                .find(|r| r["target"] == target && r["round"] == round)
                .unwrap_or_else(|| panic!("no {target} {round} ratio: {ratios:?}"));
            assert!((num(r, "qps_ratio") - want).abs() < 1e-9, "{r:?}");
        }
    }
    let cpu =
        num(by("sluice"), "relay_cpu_us_per_query") / num(by("haproxy"), "relay_cpu_us_per_query");
    let sluice_ratio = ratios.iter().find(|r| r["target"] == "sluice").unwrap();
    assert!((num(sluice_ratio, "cpu_ratio_vs_haproxy") - cpu).abs() < 1e-9);

    let (_, meta_rows) = read_rows(&dir.join("run_metadata.csv"));
    let meta: HashMap<String, String> = meta_rows
        .into_iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    assert!(
        meta["sysbench_version"].starts_with("sysbench 1.0"),
        "{meta:?}"
    );
    let options = &meta["sysbench_options"];
    for part in [
        "--percentile=99 --histogram=on",
        "--mysql-password=***",
        "--mysql-user=sbtest_app",
        "--tables=2 --table-size=1000",
    ] {
        assert!(options.contains(part), "{part} missing from {options}");
    }
    assert!(
        meta["sysbench_account"].contains("ALL on loadgen_sbtest.* only"),
        "{meta:?}"
    );
    assert_eq!(
        meta["sysbench_sluice_settings"],
        "its defaults, --pool-size auto"
    );
    assert!(
        meta["sysbench_sluice_args"].ends_with("--user sbtest_app:*** --pool-size auto"),
        "{meta:?}"
    );
    assert!(
        meta["sysbench_haproxy_version"].starts_with("HAProxy version"),
        "{meta:?}"
    );
    // The relays and sysbench ran on loadgen's CPUs, the server on its own.
    for key in [
        "sysbench_haproxy_cpus",
        "sysbench_sluice_cpus",
        "sysbench_load_cpus",
    ] {
        assert_eq!(meta[key], meta["loadgen_cpus"], "{key}: {meta:?}");
    }
    assert!(
        meta["sysbench_pinning"].starts_with("server on CPUs"),
        "{meta:?}"
    );
    assert!(
        num(&meta, "sysbench_server_max_connections") >= 1040.0,
        "{meta:?}"
    );
    assert!(num(&meta, "sysbench_data_mib") < num(&meta, "sysbench_buffer_pool_mib"));
    assert!(
        meta["sysbench_goal_no_errors"].starts_with("met: "),
        "{meta:?}"
    );
    assert!(
        meta["sysbench_goal_qps_at_1024"].starts_with("not measured"),
        "{meta:?}"
    );
    assert_eq!(
        meta["sysbench_direct_refusals"],
        "direct refused no connection"
    );
    assert_eq!(meta["completed"], "true");
    for file in ["run_metadata.csv", "summary.txt", "sysbench.csv"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(!text.contains("sbtest-app-pw"), "a password in {file}");
    }

    let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary");
    for part in [
        "sysbench: oltp_point_select at 16 threads; 1 round(s) of 2 s runs, each after a 1 s warm-up run",
        "sluice (its defaults, --pool-size auto)",
        "Goals, judged on the medians over 1 round (the goals ask for at least 3",
        "  QPS sluice / direct >= 1.00 at every thread count: ",
        "  CPU per query sluice / HAProxy <= 0.75 at 64 and 1024 threads: not measured",
        "  0 errors through sluice (ignored errors, reconnects, refused connections, failed runs): met",
    ] {
        assert!(summary.contains(part), "summary lacks {part:?}:\n{summary}");
    }
    let svg = std::fs::read_to_string(dir.join("sysbench.svg")).expect("sysbench.svg");
    assert!(svg.trim_start().starts_with("<svg") && svg.contains("oltp_point_select: QPS"));

    // `loadgen report` redraws the same section from the CSVs and the metadata.
    let ran = section(&summary);
    std::fs::remove_file(dir.join("summary.txt")).expect("rm summary");
    std::fs::remove_file(dir.join("sysbench.svg")).expect("rm svg");
    let report = loadgen().arg("report").arg(&dir).output().expect("report");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let redrawn = std::fs::read_to_string(dir.join("summary.txt")).expect("summary rewritten");
    assert_eq!(section(&redrawn), ran);
    assert!(dir.join("sysbench.svg").is_file(), "the plot is redrawn");

    assert_eq!(
        processes_with_env(MARK, &mark),
        vec![],
        "processes left behind"
    );
    assert!(
        leftovers(&server_tmp).is_empty(),
        "left in TMPDIR: {:?}",
        leftovers(&server_tmp)
    );
}

#[test]
fn ctrl_c_mid_sysbench_tears_everything_down() {
    let Some(sluice) = tools() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mark = format!("sigint-{}", std::process::id());
    let mut cmd = loadgen();
    cmd.arg("sysbench")
        .args([
            "--sysbench-rounds",
            "1",
            "--sysbench-time",
            "60",
            "--sysbench-warmup",
            "0",
        ])
        .args([
            "--sysbench-workloads",
            "oltp_point_select",
            "--sysbench-threads",
            "16",
        ])
        .args([
            "--sysbench-tables",
            "1",
            "--sysbench-table-size",
            "1000",
            "--no-progress",
        ])
        .arg("--sluice-bin")
        .arg(&sluice)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .env("TMPDIR", &server_tmp)
        .env(MARK, &mark);
    let (mut child, lines) = spawn_with_stderr(cmd);
    // Direct's run is the first: wait until sysbench runs, with the server.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let procs = processes_with_env(MARK, &mark);
        if procs
            .iter()
            .any(|(_, cmd)| cmd.contains("sysbench") && cmd.contains(" run"))
        {
            assert!(
                procs.len() >= 3,
                "loadgen, the server and sysbench: {procs:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sysbench never started: {procs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, rest) = signal_and_wait(&mut child, lines, libc::SIGINT);
    assert_eq!(
        status.code(),
        Some(130),
        "exit status; stderr tail: {rest:?}"
    );
    assert_eq!(
        processes_with_env(MARK, &mark),
        vec![],
        "processes left behind"
    );
    assert!(
        leftovers(&server_tmp).is_empty(),
        "left in TMPDIR: {:?}",
        leftovers(&server_tmp)
    );
}
