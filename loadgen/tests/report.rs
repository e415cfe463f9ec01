//! `loadgen report <dir>` on copies of committed results folders: it rewrites summary.txt and
//! redraws the plots from the CSVs and metadata alone, leaves those untouched, and says so
//! when a folder is not a results folder.

mod common;

use std::path::{Path, PathBuf};

use common::loadgen;

/// A copy of `results/<name>` in a temp dir, without its summary.txt and plots.
fn copy_without_outputs(name: &str, into: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(name);
    let to = into.join(name);
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("committed results folder") {
        let path = entry.expect("entry").path();
        let file = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if file.ends_with(".csv") {
            std::fs::copy(&path, to.join(&file)).expect("copy");
        }
    }
    to
}

fn committed(name: &str, file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(name)
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines from the one starting with `start` up to the next blank line.
fn block<'a>(text: &'a str, start: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| !l.is_empty())
        .collect()
}

fn csvs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read"))
        })
        .collect();
    files.sort();
    files
}

fn report(dir: &Path) -> (String, String) {
    let out = loadgen()
        .arg("report")
        .arg(dir)
        .output()
        .expect("run loadgen");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "loadgen report failed: {stderr}");
    (stdout, stderr)
}

fn assert_svg(dir: &Path, name: &str) {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        text.trim_start().starts_with("<svg"),
        "{name} is not an SVG"
    );
    assert!(text.trim_end().ends_with("</svg>"), "{name} is truncated");
    assert!(text.contains("<text"), "{name} has no labels");
}

#[test]
fn report_rewrites_a_bench_summary_and_its_plots_from_the_csvs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let name = "20261130T055010Z-bench";
    let dir = copy_without_outputs(name, tmp.path());
    let before = csvs(&dir);
    let (stdout, stderr) = report(&dir);
    let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary written");
    assert_eq!(
        stdout.trim_end(),
        summary.trim_end(),
        "stdout is the summary"
    );
    assert!(stderr.contains("rewrote"), "{stderr}");
    for part in [
        "Experiment A: the curve",
        "Experiment B: the collapse",
        "Experiment C:",
        "Open loop:",
        "Through sluice:",
        "Fairness",
        "Recommendation",
        "Noise:",
    ] {
        assert!(summary.contains(part), "summary lacks {part}:\n{summary}");
    }
    // Read back from the CSVs, the tables and the collapse are the run's own.
    let old = committed(name, "summary.txt");
    for start in [
        "Experiment A:",
        "Experiment B:",
        "Experiment C:",
        "Through sluice:",
    ] {
        assert_eq!(block(&summary, start), block(&old, start), "{start} block");
    }
    for svg in [
        "throughput_vs_connections.svg",
        "p99_vs_connections.svg",
        "pool_vs_direct_512.svg",
        "openloop_latency.svg",
    ] {
        assert_svg(&dir, svg);
    }
    assert_eq!(csvs(&dir), before, "the CSVs are left as they were");
}

#[test]
fn report_recomputes_experiment_e_from_its_rows_and_timeline() {
    let tmp = tempfile::tempdir().expect("tmp");
    let name = "20261130T123825Z-adaptive";
    let dir = copy_without_outputs(name, tmp.path());
    report(&dir);
    let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary written");
    // The findings (best fixed P, auto's reach and steady state, the re-pin, the paired
    // rounds) come out of the CSVs exactly as the run printed them.
    let e = block(&summary, "Experiment E:");
    assert!(e.len() >= 6, "{summary}");
    assert_eq!(e, block(&committed(name, "summary.txt"), "Experiment E:"));
    assert_svg(&dir, "expE_adaptive.svg");
}

/// The lines from the one starting with `start` up to the one starting with `end`.
fn section<'a>(text: &'a str, start: &str, end: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| !l.starts_with(end))
        .collect()
}

#[test]
fn report_rewrites_older_overhead_runs_without_serial_sluice_as_they_were() {
    let tmp = tempfile::tempdir().expect("tmp");
    // Before the serial (pipelining off) rows: HAProxy and sluice P=4/P=64; and before
    // HAProxy: an in-process sluice over TCP and over the Unix socket.
    for name in ["20261201T204155Z-overhead", "20261130T104750Z-overhead"] {
        let dir = copy_without_outputs(name, tmp.path());
        report(&dir);
        let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary written");
        let old = committed(name, "summary.txt");
        let ran = section(&old, "Overhead:", "Fairness");
        assert!(ran.len() > 10, "{name}: {old}");
        assert_eq!(section(&summary, "Overhead:", "Fairness"), ran, "{name}");
        assert!(!summary.contains("pipelining:"), "{name}: {summary}");
    }
    assert_svg(
        &tmp.path().join("20261201T204155Z-overhead"),
        "relay_cost.svg",
    );
}

#[test]
fn report_refuses_a_folder_without_metadata() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = loadgen()
        .arg("report")
        .arg(tmp.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is not a loadgen results folder"),
        "{stderr}"
    );
    assert!(!tmp.path().join("summary.txt").exists());
}

#[test]
fn report_rewrites_every_committed_sysbench_run_as_it_was() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut names: Vec<String> = std::fs::read_dir(&results)
        .expect("results")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        // loadgen sysbench's folders (not the hand-made ones from before it).
        .filter(|n| results.join(n).join("sysbench.csv").is_file())
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no committed loadgen sysbench run in results/"
    );
    for name in names {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = copy_without_outputs(&name, tmp.path());
        let before = csvs(&dir);
        report(&dir);
        let summary = std::fs::read_to_string(dir.join("summary.txt")).expect("summary written");
        // From sysbench.csv and the metadata alone, the whole summary comes back.
        assert_eq!(summary, committed(&name, "summary.txt"), "{name}");
        assert!(
            summary.contains("\nGoals, judged on the medians over"),
            "{name}"
        );
        assert_svg(&dir, "sysbench.svg");
        assert_eq!(csvs(&dir), before, "{name}: the CSVs are left as they were");
    }
}
