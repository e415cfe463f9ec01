//! Helpers shared by loadgen's integration tests: run the real binary with a private
//! TMPDIR (so every server temp dir it creates is visible) and inspect processes.

#![allow(dead_code)]

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

/// Pids of mariadbd/mysqld processes whose command line mentions `needle`.
pub fn servers_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        if !zombie && (cmd.contains("mariadbd") || cmd.contains("mysqld")) && cmd.contains(needle) {
            pids.push(pid);
        }
    }
    pids
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
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let has = environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes());
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        if has && !zombie {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    found
}
