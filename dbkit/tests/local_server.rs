//! Real-server tests for dbkit: start, log in, restart, pause, re-pin, kill, drop, and the
//! parent-death guarantee.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dbkit::greeting::read_greeting;
use dbkit::{test_server, LocalServer, ServerOptions};
use mysql_async::prelude::Queryable;

fn small() -> ServerOptions {
    ServerOptions {
        buffer_pool_mb: 32,
        max_connections: 200,
        ..ServerOptions::default()
    }
}

fn process_alive(pid: u32) -> bool {
    // A zombie still has a /proc entry, so look at its state too.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn cpus_allowed(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Runs `sql` as the bench user and returns the first column of the first row.
fn query_one(url: &str, sql: &str) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let opts =
            mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(url).expect("url"))
                .prefer_socket(false);
        let mut conn = mysql_async::Conn::new(opts)
            .await
            .expect("connect as bench");
        let v: Option<String> = conn.query_first(sql).await.expect("query");
        conn.disconnect().await.expect("disconnect");
        v
    })
}

#[test]
fn starts_pinned_and_lets_bench_log_in() {
    let server = LocalServer::start(ServerOptions {
        cpus: Some(vec![0]),
        ..small()
    })
    .expect("start");
    assert!(server.url().starts_with("mysql://bench:bench@127.0.0.1:"));
    assert!(server.url().ends_with(&format!(":{}/bench", server.port())));
    assert!(
        server.version().contains('.'),
        "version {:?}",
        server.version()
    );
    assert_eq!(cpus_allowed(server.pid()), "0");
    assert!(server
        .settings()
        .iter()
        .any(|(k, v)| k == "max-connections" && v == "200"));
    assert!(server.error_log().exists());
    assert_eq!(
        query_one(&server.url(), "SELECT CURRENT_USER()").as_deref(),
        Some("bench@%")
    );
    assert_eq!(
        query_one(&server.url(), "SELECT @@performance_schema").as_deref(),
        Some("0")
    );
    assert_eq!(
        query_one(&server.url(), "SELECT DATABASE()").as_deref(),
        Some("bench")
    );
}

#[test]
fn restart_keeps_port_and_data_and_kill_and_drop_leave_nothing() {
    let mut server = LocalServer::start(small()).expect("start");
    let port = server.port();
    let dir: PathBuf = server.dir().expect("dir").to_path_buf();
    query_one(
        &server.url(),
        "CREATE TABLE bench.kept (id INT PRIMARY KEY)",
    );
    query_one(&server.url(), "INSERT INTO bench.kept VALUES (7)");

    let first_pid = server.pid();
    server.kill();
    assert!(!process_alive(first_pid), "SIGKILLed server still alive");
    assert!(read_greeting(server.addr(), Duration::from_millis(300)).is_err());

    server.restart().expect("restart after kill");
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), first_pid);
    assert_eq!(
        query_one(&server.url(), "SELECT id FROM bench.kept").as_deref(),
        Some("7")
    );

    // stop() is a graceful SIGTERM shutdown, not the SIGKILL fallback.
    server.stop();
    let log = std::fs::read_to_string(server.error_log()).unwrap_or_default();
    assert!(
        log.contains("Shutdown complete"),
        "no clean shutdown in log:\n{log}"
    );
    server.restart().expect("restart after stop");
    // A restart of a running server works too.
    server.restart().expect("restart while running");
    assert!(read_greeting(server.addr(), Duration::from_secs(5)).is_ok());

    let pid = server.pid();
    drop(server);
    assert!(!process_alive(pid), "server survived drop");
    assert!(!dir.exists(), "temp dir {} survived drop", dir.display());
}

#[test]
fn pause_freezes_and_resume_thaws_and_set_cpus_repins() {
    let server = LocalServer::start(small()).expect("start");
    server.pause();
    assert!(
        read_greeting(server.addr(), Duration::from_millis(500)).is_err(),
        "a SIGSTOPped server answered"
    );
    server.resume();
    assert!(read_greeting(server.addr(), Duration::from_secs(5)).is_ok());

    let cpus = dbkit::affinity::online_cpus();
    let target = vec![cpus - 1];
    server.set_cpus(&target).expect("set_cpus");
    let tasks = std::fs::read_dir(format!("/proc/{}/task", server.pid())).expect("tasks");
    let mut checked = 0;
    for task in tasks.flatten() {
        let tid: u32 = task.file_name().to_string_lossy().parse().expect("tid");
        let status = std::fs::read_to_string(format!("/proc/{}/task/{tid}/status", server.pid()))
            .unwrap_or_default();
        if let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            assert_eq!(list.trim(), (cpus - 1).to_string(), "thread {tid}");
            checked += 1;
        }
    }
    assert!(
        checked > 1,
        "expected several server threads, saw {checked}"
    );
}

#[test]
fn shared_test_server_answers() {
    let a = test_server();
    let b = test_server();
    assert_eq!(a, b);
    assert_eq!(
        query_one(&a.url, "SELECT @@max_connections").as_deref(),
        Some("4000")
    );
}

#[test]
fn missing_binary_is_a_clear_error() {
    let err = LocalServer::start(ServerOptions {
        binary: Some("/nonexistent/mariadbd".into()),
        ..small()
    })
    .expect_err("must fail");
    assert!(err.to_string().contains("--mysql-url"), "{err}");
}

/// Helper run in a child process by `server_dies_with_its_parent`.
#[test]
#[ignore]
fn helper_start_and_hang() {
    if std::env::var_os("DBKIT_HELPER").is_none() {
        return;
    }
    let server = LocalServer::start(small()).expect("start");
    println!(
        "READY {} {}",
        server.pid(),
        server.dir().expect("dir").display()
    );
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn server_dies_with_its_parent() {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "helper_start_and_hang",
            "--ignored",
            "--nocapture",
        ])
        .env("DBKIT_HELPER", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn helper");
    let stdout = child.stdout.take().expect("stdout");
    let mut ready = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(rest) = line.strip_prefix("READY ") {
            ready = Some(rest.to_string());
            break;
        }
    }
    let ready = ready.expect("helper never reported READY");
    let (pid, dir) = ready.split_once(' ').expect("pid dir");
    let pid: u32 = pid.parse().expect("pid");
    assert!(process_alive(pid));
    child.kill().expect("SIGKILL helper");
    child.wait().expect("wait helper");
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = process_alive(pid);
    assert!(!alive, "server {pid} outlived its SIGKILLed parent");
    // The helper could not clean up after SIGKILL; the next start sweeps its dir.
    assert!(std::path::Path::new(dir).exists());
    let next = LocalServer::start(small()).expect("start");
    let swept = !std::path::Path::new(dir).exists();
    drop(next);
    let _ = std::fs::remove_dir_all(dir);
    assert!(swept, "orphaned dir {dir} was not swept");
}
