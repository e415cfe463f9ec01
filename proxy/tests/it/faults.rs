//! Faults: a backend thread killed mid-statement, the whole server SIGKILLed under load and
//! restarted, graceful shutdown, and caching_sha2_password across a sluice -> sluice chain.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::config::{AuthPluginName, Secret, UserConfig};

use crate::harness::*;

/// A privileged direct connection to a private server (its `bench` account), to kill
/// backend threads and restart it.
async fn direct_to(server: &dbkit::LocalServer) -> Conn {
    let o = opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    );
    Conn::new(o)
        .await
        .expect("direct connection to the private server")
}

/// KILL of the backend thread running a client's statement: the client loses its
/// connection, as it would directly (`disconnects.rs` compares the two), at once; a new
/// connection (what the driver's reconnect does) works, on another backend thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_backend_thread_loses_the_connection_and_a_reconnect_works() {
    let server = private_server().await;
    let proxy = start(config_for_local(&server, 2)).await;
    let mut client = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    let before: u64 = client
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    let sleeper = tokio::spawn(async move {
        let r = client.query_drop("SELECT SLEEP(5)").await;
        (r, Instant::now())
    });
    let mut d = direct_to(&server).await;
    let find = "SELECT id FROM information_schema.processlist WHERE info = 'SELECT SLEEP(5)'";
    let deadline = Instant::now() + Duration::from_secs(5);
    let thread = loop {
        if let Some(id) = d.query_first::<u64, _>(find).await.unwrap() {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the SLEEP never showed up in the processlist"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let killed_at = Instant::now();
    d.query_drop(format!("KILL {thread}")).await.unwrap();
    let (result, answered_at) = tokio::time::timeout(Duration::from_secs(3), sleeper)
        .await
        .expect("the client got an answer quickly")
        .unwrap();
    let err = result.expect_err("a killed statement fails");
    assert!(
        answered_at - killed_at < Duration::from_secs(2),
        "answer took {:?}",
        answered_at - killed_at
    );
    // Directly the connection is lost (MariaDB sends nothing first): the same here.
    assert!(
        !matches!(err, mysql_async::Error::Server(_)),
        "a lost connection, not an error on a live one: {err}"
    );
    let mut client = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    let after: u64 = client
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(after, thread);
    assert!(before > 0);
    for i in 0..5u32 {
        assert_eq!(
            client
                .query_first::<u32, _>(format!("SELECT {i}"))
                .await
                .unwrap(),
            Some(i)
        );
    }
    client.disconnect().await.unwrap();
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// One statement a load client ran: when it was sent, when its answer came, and the error.
struct Shot {
    sent: Instant,
    done: Instant,
    error: Option<String>,
}

#[derive(Default)]
struct Timeline {
    shots: Vec<Shot>,
    hung: bool,
    /// Statements whose connection was lost (their backend died under them).
    lost: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_restart_of_the_server_under_64_clients() {
    const CLIENTS: usize = 64;
    let mut server = private_server().await;
    let mut cfg = config_for_local(&server, 4);
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.queue_timeout = Duration::from_secs(20);
    cfg.backend_down_wait = Duration::from_secs(15);
    // More than pool_size: warm-up, not the load, must open the last two again after the outage.
    cfg.min_idle = 6;
    let proxy = start(cfg).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let lines: Vec<Arc<Mutex<Timeline>>> = (0..CLIENTS).map(|_| Arc::default()).collect();
    for (c, line) in lines.iter().enumerate() {
        let opts = opts_at(proxy.local_addr(), "app", "secret", None);
        let (stop, line) = (stop.clone(), line.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(opts.clone()).await.expect("load client connects");
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let sql = format!("SELECT {c} * 1000000 + {i} FROM (SELECT SLEEP(0.02)) s");
                let sent = Instant::now();
                let r =
                    tokio::time::timeout(Duration::from_secs(20), conn.query_first::<u64, _>(sql))
                        .await;
                let done = Instant::now();
                let error = match r {
                    Err(_) => {
                        line.lock().unwrap().hung = true;
                        return;
                    }
                    Ok(Ok(v)) => {
                        assert_eq!(
                            v,
                            Some(c as u64 * 1_000_000 + i),
                            "client {c}: wrong answer"
                        );
                        None
                    }
                    Ok(Err(mysql_async::Error::Server(e))) => Some(e.to_string()),
                    Ok(Err(e)) => {
                        // Its statement ran on the dying server: the client lost its
                        // connection, as directly, and reconnects, as a driver does.
                        line.lock().unwrap().lost += 1;
                        conn = loop {
                            match Conn::new(opts.clone()).await {
                                Ok(c) => break c,
                                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                            }
                        };
                        Some(format!("Lost connection: {e}"))
                    }
                };
                line.lock().unwrap().shots.push(Shot { sent, done, error });
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed_at = Instant::now();
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let outage = proxy.context().pool.outage();
    assert!(!outage.up, "sluice noticed the outage");
    let last = outage.last_error.expect("the last connect error is kept");
    assert!(last.message.contains("refused"), "{}", last.message);
    let servers = sluice::admin::show::servers(proxy.context());
    assert!(
        servers
            .rows
            .iter()
            .any(|r| r.get(3) == Some(&sluice::admin::show::Cell::Text("backend_down".into()))),
        "SHOW SERVERS shows the outage: {servers:?}"
    );
    let mut server = tokio::task::spawn_blocking(move || {
        server.restart().expect("the server restarts on its port");
        server
    })
    .await
    .unwrap();
    let ready_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a load client panicked");
    }
    assert!(proxy.context().pool.backend_up());
    let pool = proxy.context().pool.clone();
    let warm = eventually(Duration::from_secs(5), || pool.snapshot().idle >= 6).await;
    assert!(
        warm,
        "min_idle restored after the outage: {:?}",
        pool.snapshot()
    );
    let mut waited_out = 0;
    let mut failed_fast = 0;
    let mut worst_resume = Duration::ZERO;
    for (c, line) in lines.iter().enumerate() {
        let line = line.lock().unwrap();
        assert!(!line.hung, "client {c} never got an answer");
        assert!(
            line.shots
                .iter()
                .any(|s| s.done < killed_at && s.error.is_none()),
            "client {c} never worked before the kill"
        );
        for s in &line.shots {
            if s.sent < ready_at && s.done > ready_at && s.error.is_none() {
                waited_out += 1;
                worst_resume = worst_resume.max(s.done - ready_at);
            }
            if s.error.is_some() {
                failed_fast += 1;
            }
            let running_at_kill = s.sent <= killed_at && s.done >= killed_at;
            if running_at_kill {
                // Running on the backend: it fails fast. Queued for a slot: it waits the
                // outage out like a statement issued during it.
                match &s.error {
                    Some(e) => {
                        assert!(
                            s.done - killed_at < Duration::from_secs(2),
                            "client {c}: the running statement took {:?} to fail",
                            s.done - killed_at
                        );
                        assert!(e.contains("Lost connection"), "{e}");
                    }
                    None => assert!(
                        s.done < killed_at + Duration::from_secs(2)
                            || s.done <= ready_at + Duration::from_secs(2),
                        "client {c}: a queued statement ran {:?} after the server was back",
                        s.done - ready_at
                    ),
                }
            } else if s.sent > killed_at + Duration::from_millis(200) {
                // Issued while the server was down: it waited and then ran.
                assert!(
                    s.error.is_none(),
                    "client {c}: a statement issued during the outage failed: {:?}",
                    s.error
                );
                if s.sent < ready_at {
                    assert!(
                        s.done - ready_at <= Duration::from_secs(2),
                        "client {c}: it ran {:?} after the server was back",
                        s.done - ready_at
                    );
                }
            }
        }
    }
    // Most clients had a statement queued or issued during the outage, and it waited;
    // only the few running on the backend (pool_size 4) failed.
    assert!(
        waited_out >= CLIENTS / 2,
        "only {waited_out} statements waited the outage out"
    );
    eprintln!(
        "outage: {failed_fast} statements failed fast, {waited_out} waited it out and all \
         ran within {worst_resume:?} of the restart; the restart took {:?}",
        ready_at - killed_at
    );
    // The 4 running on the backend fail, plus those that took an idle connection while the
    // dying server was still closing its sockets (0-2 on a quiet host, 5 once on a loaded
    // CI host); a quarter of the clients failing would mean the waiting does not work.
    assert!(
        failed_fast <= CLIENTS / 4,
        "{failed_fast} statements failed"
    );
    let stats = &proxy.context().stats;
    assert!(stats.connect_failures_by(sluice::stats::ConnectFailure::Refused) >= 1);
    let snap = proxy.context().pool.snapshot();
    assert_eq!(snap.slots_in_use, 0);
    proxy.shutdown().await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_backend_gives_a_clear_error_after_backend_down_wait() {
    // A port nobody listens on (bound, then closed).
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cfg = config_for(addr.to_string(), "nobody", "pw", 2);
    cfg.backend_down_wait = Duration::from_millis(600);
    let proxy = start(cfg).await;
    let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .expect("sluice accepts the login without a backend");
    for round in 0..2 {
        let t = Instant::now();
        let err = c.query_drop("SELECT 1").await.unwrap_err();
        let took = t.elapsed();
        assert_eq!(code_of(&err), Some(9003), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&addr.to_string()), "names the backend: {msg}");
        assert!(
            msg.contains("refused"),
            "gives the last connect error: {msg}"
        );
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(2),
            "round {round}: waited {took:?}, not backend_down_wait"
        );
    }
    // The `mariadb` CLI (MariaDB Connector/C) shows the message too: it reports a server-sent
    // code in its own range 2000-2999 as "2027 Received malformed packet".
    let local = proxy.local_addr();
    let out = tokio::process::Command::new("mariadb")
        .args([
            "--protocol=TCP".to_string(),
            format!("--host={}", local.ip()),
            format!("--port={}", local.port()),
            "--user=app".into(),
            "--password=secret".into(),
            "-e".into(),
            "SELECT 1".into(),
        ])
        .output()
        .await
        .expect("the mariadb CLI runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ERROR 9003") && stderr.contains("cannot reach"),
        "{stderr}"
    );
    use sluice::admin::show::{servers, Cell};
    assert!(!proxy.context().pool.backend_up());
    let table = servers(proxy.context());
    let col = |name: &str| table.columns.iter().position(|(c, _)| c == name).unwrap();
    let row = &table.rows[0];
    assert_eq!(row[col("state")], Cell::Text("backend_down".into()));
    assert_eq!(row[col("backend")], Cell::Text(addr.to_string()));
    assert!(
        matches!(&row[col("last_error")], Cell::Text(e) if e.contains("refused")),
        "{row:?}"
    );
    assert!(matches!(row[col("down_s")], Cell::Int(_)), "{row:?}");
    // One reconnect loop, not one per statement: a few attempts per second at most.
    let failures = proxy
        .context()
        .stats
        .connect_failures_by(sluice::stats::ConnectFailure::Refused);
    assert!((1..=12).contains(&failures), "{failures} connect attempts");
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_backend_password_is_a_clear_error_at_once() {
    let mut cfg = config_for(backend_addr(), APP_USER, "not-the-password", 2);
    cfg.backend_down_wait = Duration::from_secs(10);
    let proxy = start(cfg).await;
    let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let err = c.query_drop("SELECT 1").await.unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "took {:?}",
            t.elapsed()
        );
        assert_eq!(code_of(&err), Some(1045), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&backend_addr()) && msg.contains("backend"),
            "names the backend: {msg}"
        );
    }
    // The server answered: it is not down.
    assert!(proxy.context().pool.backend_up());
    let stats = &proxy.context().stats;
    assert!(stats.connect_failures_by(sluice::stats::ConnectFailure::AccessDenied) >= 3);
    let show = sluice::admin::show::stats(proxy.context(), Instant::now());
    let row = show
        .rows
        .iter()
        .find(|r| {
            r[0] == sluice::admin::show::Cell::Text("backend_connect_failures.access_denied".into())
        })
        .expect("SHOW STATS counts connect failures by kind");
    assert!(
        matches!(row[1], sluice::admin::show::Cell::Int(n) if n >= 3),
        "{row:?}"
    );
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_idle_is_opened_at_start_and_kept_after_idle_timeouts() {
    let mut cfg = config(6);
    cfg.min_idle = 3;
    cfg.server_idle_timeout = Duration::from_secs(1);
    let proxy = start(cfg).await;
    let pool = proxy.context().pool.clone();
    assert!(
        eventually(Duration::from_secs(5), || pool.snapshot().idle == 3).await,
        "min_idle connections opened at start: {:?}",
        pool.snapshot()
    );
    // Six transactions at once need six backends; afterwards idle ones time out down to 3.
    let mut clients = Vec::new();
    for _ in 0..6 {
        let mut c = connect(&proxy, None).await;
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("SELECT 1").await.unwrap();
        clients.push(c);
    }
    assert!(pool.snapshot().open >= 6);
    for mut c in clients {
        c.query_drop("COMMIT").await.unwrap();
        c.disconnect().await.unwrap();
    }
    let trimmed = eventually(Duration::from_secs(8), || {
        let s = pool.snapshot();
        s.open == 3 && s.idle == 3
    })
    .await;
    assert!(
        trimmed,
        "idle backends trimmed to min_idle: {:?}",
        pool.snapshot()
    );
    // Killing the idle ones on the server: the health check or the next checkout drops
    // them, and warm-up opens replacements.
    let before: Vec<u32> = {
        let mut v = Vec::new();
        pool.for_each_idle(|b| v.push(b.thread_id));
        v
    };
    let mut d = direct(None).await;
    for id in &before {
        d.query_drop(format!("KILL {id}")).await.unwrap();
    }
    let mut c = connect(&proxy, None).await;
    assert_eq!(c.query_first::<u8, _>("SELECT 7").await.unwrap(), Some(7));
    c.disconnect().await.unwrap();
    let replaced = eventually(Duration::from_secs(8), || {
        let mut fresh = 0;
        pool.for_each_idle(|b| fresh += usize::from(!before.contains(&b.thread_id)));
        fresh >= 3
    })
    .await;
    assert!(replaced, "warm-up replaced the killed connections");
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_running_statements_and_tells_idle_clients() {
    let mut cfg = config(2);
    cfg.shutdown_timeout = Duration::from_secs(5);
    let proxy = start(cfg).await;
    let mut busy = connect(&proxy, None).await;
    // A raw client, to see exactly what sluice sends an idle session.
    let mut idle = crate::bad_input::Raw::login(&proxy).await;
    let running = tokio::spawn(async move {
        let r: Result<Option<u8>, _> = busy.query_first("SELECT SLEEP(1) + 7").await;
        (busy, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let addr = proxy.local_addr();
    let shutdown = tokio::spawn(proxy.shutdown());
    let (_busy, r) = running.await.unwrap();
    assert_eq!(r.expect("the running statement finishes"), Some(7));
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("shutdown completes")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "drain took {:?}",
        started.elapsed()
    );
    // Unsolicited (sequence id 0): there is no command to answer. mysql_async reports it as
    // "packets out of sync" on its next command; the raw bytes say what happened.
    let (seq, err) = idle.expect_err().await;
    assert_eq!((seq, err.code), (0, 1053), "{err:?}");
    idle.expect_closed_within(Duration::from_secs(1)).await;
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_chain_does_caching_sha2_full_auth_then_the_fast_path() {
    // Inner: in front of MariaDB; its user `inner` must use caching_sha2_password.
    let mut inner_cfg = config(4);
    let mut inner_user = UserConfig::new("inner", "inner-pw");
    inner_user.auth_plugin = Some(AuthPluginName::CachingSha2);
    inner_user.backend_user = Some(APP_USER.to_string());
    inner_user.backend_password = Some(Secret::new(APP_PASSWORD.to_string()));
    inner_cfg.users = vec![inner_user];
    let inner = start(inner_cfg).await;
    // Outer: in front of the inner sluice, logging in as `inner`.
    let outer_cfg = config_for(inner.local_addr().to_string(), "inner", "inner-pw", 4);
    let outer = start(outer_cfg).await;
    let mut a = Conn::new(opts_at(outer.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    let v: String = a
        .query_first("SELECT CONCAT('through ', 'two sluices')")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v, "through two sluices");
    let hs = &inner.context().handshake;
    assert!(
        hs.rsa.get().is_some(),
        "the first login used full authentication (RSA)"
    );
    assert!(
        hs.sha2_cache.lock().unwrap().contains("inner"),
        "full auth fills the cache"
    );
    // More backends: the outer sluice opens new connections to the inner one (fast path now).
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut c = Conn::new(opts_at(outer.local_addr(), "app", "secret", None))
            .await
            .unwrap();
        c.query_drop("BEGIN").await.unwrap();
        clients.push(c);
    }
    assert!(
        outer
            .context()
            .stats
            .backend_connects
            .load(Ordering::Relaxed)
            >= 3
    );
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(
            c.query_first::<usize, _>(format!("SELECT {i}"))
                .await
                .unwrap(),
            Some(i)
        );
        c.query_drop("COMMIT").await.unwrap();
    }
    assert_eq!(
        outer
            .context()
            .stats
            .backend_connect_errors
            .load(Ordering::Relaxed),
        0
    );
    // A wrong password in the chain's outer user list still gets 1045.
    let err = Conn::new(opts_at(outer.local_addr(), "app", "nope", None))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1045));
    for c in clients {
        c.disconnect().await.unwrap();
    }
    a.disconnect().await.unwrap();
    outer.shutdown().await;
    inner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_logs_in_with_caching_sha2_full_and_fast() {
    let mut cfg = config(2);
    cfg.default_auth_plugin = AuthPluginName::CachingSha2;
    let proxy = start(cfg).await;
    for round in 0..3 {
        let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
            .await
            .unwrap_or_else(|e| panic!("login {round}: {e}"));
        assert_eq!(
            c.query_first::<u32, _>(format!("SELECT {round}"))
                .await
                .unwrap(),
            Some(round)
        );
        c.disconnect().await.unwrap();
    }
    assert!(proxy
        .context()
        .handshake
        .sha2_cache
        .lock()
        .unwrap()
        .contains("app"));
    let err = Conn::new(opts_at(proxy.local_addr(), "app", "wrong", None))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    proxy.shutdown().await;
}
