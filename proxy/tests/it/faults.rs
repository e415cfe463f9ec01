//! Faults: a backend thread killed mid-statement, the whole server SIGKILLed under load and
//! restarted, graceful shutdown, and caching_sha2_password across a sluice -> sluice chain.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::config::{AuthPluginName, Secret, UserConfig};

use crate::harness::*;

/// A direct connection to a private server (its `bench` account).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_backend_thread_gives_2013_and_the_next_statement_a_fresh_backend() {
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
        (client, r, Instant::now())
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
    let (mut client, result, answered_at) = tokio::time::timeout(Duration::from_secs(3), sleeper)
        .await
        .expect("the client got an answer quickly")
        .unwrap();
    let err = result.expect_err("a killed statement fails");
    assert!(
        answered_at - killed_at < Duration::from_secs(2),
        "answer took {:?}",
        answered_at - killed_at
    );
    // MariaDB may say 1927 (connection killed) itself before closing; sluice says 2013.
    assert!(matches!(code_of(&err), Some(2013) | Some(1927)), "{err}");
    // The next statement runs, on another backend thread.
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

/// What one load client saw, with times.
#[derive(Default)]
struct Timeline {
    errors: Vec<(Instant, String)>,
    successes: Vec<Instant>,
    hung: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_restart_of_the_server_under_16_clients() {
    let mut server = private_server().await;
    let mut cfg = config_for_local(&server, 4);
    cfg.connect_timeout = Duration::from_secs(1);
    let proxy = start(cfg).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let lines: Vec<Arc<Mutex<Timeline>>> = (0..16).map(|_| Arc::default()).collect();
    for (c, line) in lines.iter().enumerate() {
        let opts = opts_at(proxy.local_addr(), "app", "secret", None);
        let (stop, line) = (stop.clone(), line.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(opts).await.expect("load client connects");
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let sql = format!("SELECT {c} * 1000000 + {i} FROM (SELECT SLEEP(0.02)) s");
                match tokio::time::timeout(Duration::from_secs(2), conn.query_first::<u64, _>(sql))
                    .await
                {
                    Err(_) => {
                        line.lock().unwrap().hung = true;
                        return;
                    }
                    Ok(Ok(v)) => {
                        assert_eq!(
                            v,
                            Some(c as u64 * 1_000_000 + i),
                            "client {c} got a wrong answer"
                        );
                        line.lock().unwrap().successes.push(Instant::now());
                    }
                    Ok(Err(e)) => {
                        line.lock()
                            .unwrap()
                            .errors
                            .push((Instant::now(), e.to_string()));
                        if !matches!(e, mysql_async::Error::Server(_)) {
                            // The client's own connection broke: reconnect, as an app would.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            if let Ok(c2) = Conn::new(conn.opts().clone()).await {
                                conn = c2;
                            }
                        } else {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed_at = Instant::now();
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
    for (c, line) in lines.iter().enumerate() {
        let line = line.lock().unwrap();
        assert!(!line.hung, "client {c} waited more than 2 s for an answer");
        assert!(
            line.successes.iter().any(|t| *t < killed_at),
            "client {c} never worked before the kill"
        );
        let errors_after_kill = line.errors.iter().filter(|(t, _)| *t >= killed_at).count();
        assert!(
            errors_after_kill > 0,
            "client {c} saw no error while the server was dead"
        );
        let first_ok = line.successes.iter().find(|t| **t >= ready_at).copied();
        let first_ok = first_ok
            .unwrap_or_else(|| panic!("client {c} never recovered: {:?}", line.errors.last()));
        assert!(
            first_ok - ready_at <= Duration::from_secs(2),
            "client {c} recovered {:?} after the server was back (errors: {:?})",
            first_ok - ready_at,
            line.errors
                .iter()
                .filter(|(t, _)| *t >= ready_at)
                .map(|(_, e)| e)
                .collect::<Vec<_>>()
        );
    }
    let snap = proxy.context().pool.snapshot();
    assert_eq!(snap.slots_in_use, 0);
    proxy.shutdown().await;
    server.stop();
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
    let s = server();
    let mut inner_cfg = config(4);
    let mut inner_user = UserConfig::new("inner", "inner-pw");
    inner_user.auth_plugin = Some(AuthPluginName::CachingSha2);
    inner_user.backend_user = Some(s.user.clone());
    inner_user.backend_password = Some(Secret::new(s.password.clone()));
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
