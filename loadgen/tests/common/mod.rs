//! Helpers shared by loadgen's integration tests: run the real binary with a private
//! TMPDIR (so every server temp dir it creates is visible) and inspect processes.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The loadgen binary cargo built for these tests.
pub fn loadgen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
}

/// Flags for a tiny, fast run against a real local server.
pub const MINI: &[&str] = &[
    "--rows",
    "20000",
    "--scan-w",
    "2000",
    "--window-s",
    "0.8",
    "--warmup-s",
    "0.3",
    "--no-progress",
];

/// Live (not zombie) processes: pid, `/proc/<pid>` and the command line.
fn processes() -> Vec<(u32, PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        if !zombie {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            out.push((
                pid,
                e.path(),
                String::from_utf8_lossy(&cmd).replace('\0', " "),
            ));
        }
    }
    out
}

/// Pids of mariadbd/mysqld processes whose command line mentions `needle`.
pub fn servers_mentioning(needle: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, _, cmd)| {
            (cmd.contains("mariadbd") || cmd.contains("mysqld")) && cmd.contains(needle)
        })
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Entries left in a directory.
pub fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The single run folder under `out`.
pub fn run_dir(out: &Path) -> PathBuf {
    let dirs = leftovers(out);
    assert_eq!(
        dirs.len(),
        1,
        "expected one run folder in {}: {dirs:?}",
        out.display()
    );
    dirs[0].clone()
}

/// A test that cannot run on this machine (a tool is missing). Under `CI=true` that is a
/// failure: CI installs everything (scripts/install-test-deps.sh), so a skip there hides a
/// broken install. Elsewhere the test says why and passes. Returns whether to go on.
pub fn skip_or_fail(reason: &str) -> bool {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("cannot run: {reason}; CI=true, so this is a failure (scripts/install-test-deps.sh installs it)");
    }
    eprintln!("SKIPPED: {reason}");
    false
}

/// Whether `tool` runs (`tool args` exits 0).
pub fn runs(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Live processes whose environment holds `KEY=value` (children inherit loadgen's, so this
/// finds every relay, counter and server a run started, whatever their names).
pub fn processes_with_env(key: &str, value: &str) -> Vec<(u32, String)> {
    let needle = format!("{key}={value}");
    processes()
        .into_iter()
        .filter(|(_, dir, _)| {
            let environ = std::fs::read(dir.join("environ")).unwrap_or_default();
            environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
        })
        .map(|(pid, _, cmd)| (pid, cmd))
        .collect()
}

/// Sends `signal` to `child`, collects the rest of its stderr `lines` and waits (at most a
/// minute) for it to exit.
pub fn signal_and_wait(
    child: &mut std::process::Child,
    lines: impl Iterator<Item = std::io::Result<String>>,
    signal: libc::c_int,
) -> (std::process::ExitStatus, Vec<String>) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return (status, rest);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "loadgen did not exit after the signal; stderr: {rest:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A CSV's header and its rows as column -> value maps.
pub fn read_rows(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let headers: Vec<String> = r
        .headers()
        .expect("headers")
        .iter()
        .map(String::from)
        .collect();
    let rows = r
        .records()
        .map(|rec| {
            let rec = rec.expect("record");
            headers
                .iter()
                .cloned()
                .zip(rec.iter().map(String::from))
                .collect()
        })
        .collect();
    (headers, rows)
}

/// A column of a row read by [`read_rows`] as a number.
pub fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col}={:?} is not a number in {row:?}", row[col]))
}

/// Starts `cmd` with its stderr piped (stdout discarded) and returns it with the stderr lines.
pub fn spawn_with_stderr(
    mut cmd: Command,
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    use std::io::BufRead;
    let mut child = cmd
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn loadgen");
    let stderr = child.stderr.take().expect("stderr");
    (child, std::io::BufReader::new(stderr).lines())
}

/// Reads `lines` up to and including the first that starts with `prefix`; returns them all.
pub fn read_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    prefix: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        let done = line.starts_with(prefix);
        seen.push(line);
        if done {
            break;
        }
    }
    seen
}
