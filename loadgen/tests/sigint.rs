//! Ctrl-C in the middle of a run tears the server down and leaves no temp dir.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{leftovers, loadgen, servers_mentioning};

fn interrupt_mid_run(signal: libc::c_int) {
    let tmp = tempfile::tempdir().expect("tmp");
    let server_tmp = tmp.path().join("server-tmp");
    std::fs::create_dir_all(&server_tmp).expect("server tmp");
    let mut child = loadgen()
        .arg("curve")
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
        .env("TMPDIR", &server_tmp)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn loadgen");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    // Wait until the load runs: calibration is logged right before experiment A starts.
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        seen.push(line.clone());
        if line.starts_with("calibration:") {
            break;
        }
    }
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

    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "loadgen did not exit after the signal"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
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
