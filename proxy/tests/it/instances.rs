//! Several sluice instances: `instance_id` keeps their client connection ids apart (and KILL
//! by id working within each), and `reuse_port` lets two `sluice` processes share one port.
//! Also the binary's own runtime: `worker_threads = 1` serves everyone on one thread.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;

/// The documented scheme: `instance_id * 2^24 + n`.
const COUNTER_BITS: u32 = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ids_carry_the_instance_id_and_kill_stays_within_its_instance() {
    let mut a_cfg = crate::admin::admin_config(2);
    a_cfg.instance_id = 1;
    let mut b_cfg = config(2);
    b_cfg.instance_id = 2;
    let a = start(a_cfg).await;
    let b = start(b_cfg).await;

    let mut a1 = connect(&a, None).await;
    let mut a2 = connect(&a, None).await;
    let mut b1 = connect(&b, None).await;
    for (conn, instance) in [(&mut a1, 1), (&mut a2, 1), (&mut b1, 2)] {
        let id = conn.id();
        assert_eq!(id >> COUNTER_BITS, instance, "id {id:#x}");
        assert_ne!(id & ((1 << COUNTER_BITS) - 1), 0, "id {id:#x}");
        // CONNECTION_ID() is the same id on the backend side.
        let seen: u32 = conn
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, id);
    }
    assert_ne!(a1.id(), b1.id());
    // The first client of each instance: n = 1 on both, the instance bits tell them apart.
    assert_eq!(a1.id(), (1 << COUNTER_BITS) + 1);
    assert_eq!(b1.id(), (2 << COUNTER_BITS) + 1);

    // Instance A does not own B's id: 1094, and B's client is unharmed.
    let err = a1
        .query_drop(format!("KILL CONNECTION {}", b1.id()))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1094), "{err:?}");
    b1.query_drop("SELECT 1")
        .await
        .expect("B's client survives");

    // KILL within A works with A's ids.
    let victim = a2.id();
    a1.query_drop(format!("KILL CONNECTION {victim}"))
        .await
        .expect("KILL of an id of the same instance");
    assert!(
        eventually(Duration::from_secs(5), || a
            .context()
            .registry
            .get(victim)
            .is_none())
        .await,
        "the killed session is gone from A's registry"
    );
    assert!(
        a2.query_drop("SELECT 1").await.is_err(),
        "the victim is disconnected"
    );
    a1.query_drop("SELECT 1").await.expect("the killer goes on");
    b1.query_drop("SELECT 1").await.expect("B is untouched");
    a.shutdown().await;
    b.shutdown().await;
}

/// A `sluice` process, killed when dropped.
struct SluiceProcess {
    child: Child,
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the `sluice` binary in front of the test server as the application account.
fn spawn_sluice(port: u16, instance_id: u32, reuse_port: bool) -> SluiceProcess {
    spawn_sluice_with(port, instance_id, reuse_port, &[])
}

/// `spawn_sluice` with more flags.
fn spawn_sluice_with(
    port: u16,
    instance_id: u32,
    reuse_port: bool,
    extra: &[&str],
) -> SluiceProcess {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--backend", &backend_addr()])
        .args(["--user", "app:secret"])
        .args([
            "--backend-user",
            APP_USER,
            "--backend-password",
            APP_PASSWORD,
        ])
        .args([
            "--pool-size",
            "2",
            "--instance-id",
            &instance_id.to_string(),
        ])
        .env_clear()
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if reuse_port {
        cmd.arg("--reuse-port");
    }
    cmd.args(extra);
    SluiceProcess {
        child: cmd.spawn().expect("the sluice binary starts"),
    }
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("local addr").port()
}

/// Connects to `addr` until it answers (the process is starting), then runs `SELECT 1`.
async fn connect_and_query(addr: SocketAddr, within: Duration) -> Conn {
    let deadline = Instant::now() + within;
    loop {
        match Conn::new(opts_at(addr, "app", "secret", None)).await {
            Ok(mut c) => {
                let one: u32 = c.query_first("SELECT 1").await.unwrap().unwrap();
                assert_eq!(one, 1);
                return c;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("sluice at {addr} does not answer: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sluice_processes_share_a_port_with_reuse_port() {
    server();
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let _first = spawn_sluice(port, 1, true);
    drop(connect_and_query(addr, Duration::from_secs(30)).await);
    let _second = spawn_sluice(port, 2, true);

    // The kernel spreads new connections over both listeners: connect until both instances
    // have answered (each id names its instance), every connection serving a query.
    let mut seen = [0u32; 3];
    let deadline = Instant::now() + Duration::from_secs(30);
    while (seen[1] == 0 || seen[2] == 0) && Instant::now() < deadline {
        let c = connect_and_query(addr, Duration::from_secs(10)).await;
        let instance = (c.id() >> COUNTER_BITS) as usize;
        assert!(instance == 1 || instance == 2, "id {:#x}", c.id());
        seen[instance] += 1;
        c.disconnect().await.expect("disconnect");
    }
    assert!(
        seen[1] > 0 && seen[2] > 0,
        "both processes serve the shared port: {seen:?}"
    );

    // Without reuse_port a third process cannot take the port, and says why.
    let third = spawn_sluice(port, 3, false);
    let out = tokio::task::spawn_blocking(move || {
        let mut third = third;
        let status = wait_exit(&mut third.child, Duration::from_secs(20));
        let mut stderr = String::new();
        if let Some(mut e) = third.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        (status, stderr)
    })
    .await
    .expect("wait task");
    let (status, stderr) = out;
    assert!(
        status.is_some_and(|s| !s.success()),
        "a second listener without reuse_port must fail to start: {status:?}"
    );
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && stderr.contains("reuse_port = true"),
        "stderr: {stderr}"
    );
    // The two sharing processes still serve.
    drop(connect_and_query(addr, Duration::from_secs(5)).await);
}

/// Waits for the child to exit; `None` if it is still running after `within`.
fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// The process's thread count, from /proc.
fn threads_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

/// `worker_threads = 1` runs the binary on tokio's current-thread scheduler: one thread
/// serves every client. A statement sleeping on the server holds up no other client, and
/// concurrent reads (pipelined on the other execution slot) each get their own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_thread_serves_every_client() {
    server();
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let p = spawn_sluice_with(port, 1, false, &["--worker-threads", "1"]);
    let first = connect_and_query(addr, Duration::from_secs(30)).await;
    assert_eq!(threads_of(p.child.id()), 1, "one thread serves clients");

    // One of the two execution slots is held by a sleeping statement.
    let mut sleeper = connect_and_query(addr, Duration::from_secs(5)).await;
    let slow = tokio::spawn(async move {
        let r: Option<u32> = sleeper.query_first("SELECT SLEEP(20)").await.unwrap();
        r
    });
    let mut readers = Vec::new();
    for client in 0..8u32 {
        readers.push(tokio::spawn(async move {
            let mut c = connect_and_query(addr, Duration::from_secs(5)).await;
            for i in 0..50u32 {
                let want = client * 1000 + i;
                let got: u32 = c.exec_first("SELECT ?", (want,)).await.unwrap().unwrap();
                assert_eq!(got, want, "client {client} got another's answer");
                let got: u32 = c
                    .query_first(format!("SELECT {want} + 0"))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(got, want, "client {client} got another's answer");
            }
            c.disconnect().await.expect("disconnect");
        }));
    }
    for r in readers {
        r.await.expect("a reader");
    }
    assert!(
        !slow.is_finished(),
        "800 reads finished while the sleeper still holds its slot"
    );
    slow.abort();
    drop(first);
}
