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
