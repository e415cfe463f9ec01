//! Ctrl-C in the middle of a run tears the server down and leaves no temp dir.

mod common;

use std::time::Duration;

use common::{
    leftovers, loadgen, read_until, servers_mentioning, signal_and_wait, spawn_with_stderr,
};

fn interrupt_mid_run(signal: libc::c_int) {
    let tmp = tempfile::tempdir().expect("tmp");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mut cmd = loadgen();
    cmd.arg("curve")
        .args([
            "--rows",
            "20000",
            "--scan-w",
            "2000",
            "--warmup-s",
            "0.3",
            "--no-progress",
        ])
        .args(["--conc-levels", "1,2,4,8,16", "--window-s", "30"])
        .arg("--out")
        .arg(tmp.path().join("out"))
        .env("TMPDIR", &server_tmp);
    let (mut child, mut lines) = spawn_with_stderr(cmd);
    // Wait until the load runs: calibration is logged right before experiment A starts.
    let seen = read_until(&mut lines, "calibration:");
    assert!(
        seen.iter().any(|l| l.starts_with("calibration:")),
        "never started: {seen:?}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let servers = servers_mentioning(&server_tmp.to_string_lossy());
    assert_eq!(
        servers.len(),
        1,
        "expected one running server, saw {servers:?}"
    );

    let (status, rest) = signal_and_wait(&mut child, lines, signal);
    assert_eq!(
        status.code(),
        Some(130),
        "exit status; stderr tail: {rest:?}"
    );
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{rest:?}");
    assert!(
        servers_mentioning(&server_tmp.to_string_lossy()).is_empty(),
        "server survived"
    );
    assert!(
        leftovers(&server_tmp).is_empty(),
        "temp dir left: {:?}",
        leftovers(&server_tmp)
    );
}

#[test]
fn sigint_mid_run_leaves_no_server() {
    interrupt_mid_run(libc::SIGINT);
}

#[test]
fn sigterm_mid_run_leaves_no_server() {
    interrupt_mid_run(libc::SIGTERM);
}
