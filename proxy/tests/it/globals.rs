//! `SET GLOBAL` is seen as directly: a connection opened after it takes the new value as its
//! session's, one opened before keeps the old (until COM_RESET_CONNECTION). Through sluice a
//! session's "connection" is its login, whatever backends its statements run on. A change
//! made on the server directly takes effect for new logins after the admin console's
//! `RECONNECT`, or once sluice's periodic read of the globals sees it
//! (`globals_check_interval`). A private server: the test changes its globals.

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use sluice::config::UserConfig;
use sluice::ProxyHandle;

use crate::harness::*;

async fn session_value(c: &mut Conn, var: &str) -> String {
    c.query_first(format!("SELECT @@SESSION.{var}"))
        .await
        .unwrap()
        .unwrap()
}

async fn admin(proxy: &ProxyHandle) -> Conn {
    let addr = proxy.admin_addr().expect("admin console is on");
    Conn::new(
        OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some("admin"))
            .pass(Some("s3cret"))
            .prefer_socket(false)
            .max_allowed_packet(Some(64 << 20))
            .wait_timeout(Some(28800)),
    )
    .await
    .expect("admin login")
}

/// Each session's view of `sql_mode` and `max_allowed_packet` after a SET GLOBAL through
/// sluice: directly (the reference) and through sluice at `pool_size`.
/// `watch`: a change made on the server directly is found by the periodic read (1 s) instead
/// of the console's RECONNECT (the read is off then).
async fn set_global_is_seen_by_later_logins_only(pool_size: u32, depth: u32, watch: bool) {
    let server = private_server().await;
    let root_opts = || {
        opts_at(
            server.addr(),
            dbkit::server::BENCH_USER,
            dbkit::server::BENCH_PASSWORD,
            None,
        )
    };
    // SET GLOBAL needs a privileged backend account.
    let mut cfg = config_for(
        server.addr().to_string(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        pool_size,
    );
    cfg.pipeline_depth = depth;
    cfg.globals_check_interval = if watch {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    };
    cfg.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.admin_users = vec![UserConfig::new("admin", "s3cret")];
    let proxy = start(cfg).await;
    let mut root = Conn::new(root_opts()).await.unwrap();
    let before: String = root
        .query_first("SELECT @@GLOBAL.sql_mode")
        .await
        .unwrap()
        .unwrap();
    // Sessions that logged in before the change, each having run statements (so the pool
    // holds backends opened before it).
    let mut old_direct = Conn::new(root_opts()).await.unwrap();
    let mut olds = Vec::new();
    for _ in 0..pool_size + 1 {
        let mut c = connect(&proxy, None).await;
        assert_eq!(session_value(&mut c, "sql_mode").await, before);
        olds.push(c);
    }
    let mut setter = connect(&proxy, None).await;
    setter
        .query_drop("SET GLOBAL sql_mode = 'ANSI_QUOTES,ONLY_FULL_GROUP_BY'")
        .await
        .unwrap();
    setter
        .query_drop("SET GLOBAL max_allowed_packet = 33554432")
        .await
        .unwrap();
    // Directly: a new connection sees the change, an old one does not.
    let mut new_direct = Conn::new(root_opts()).await.unwrap();
    let new_mode = session_value(&mut new_direct, "sql_mode").await;
    assert!(new_mode.contains("ANSI_QUOTES"), "{new_mode}");
    assert_eq!(session_value(&mut old_direct, "sql_mode").await, before);
    // Through sluice, the same.
    for round in 0..3 {
        let mut fresh = connect(&proxy, None).await;
        assert_eq!(
            session_value(&mut fresh, "sql_mode").await,
            new_mode,
            "round {round}: a login after SET GLOBAL sees the new value"
        );
        assert_eq!(
            session_value(&mut fresh, "max_allowed_packet").await,
            "33554432"
        );
        fresh.disconnect().await.unwrap();
        for (i, old) in olds.iter_mut().enumerate() {
            assert_eq!(
                session_value(old, "sql_mode").await,
                before,
                "round {round}: session {i}, logged in before SET GLOBAL, keeps what it saw"
            );
        }
    }
    // The setter itself logged in before its SET GLOBAL: as directly, its session keeps
    // the old value.
    assert_eq!(session_value(&mut setter, "sql_mode").await, before);
    // COM_RESET_CONNECTION gives a session the server's current globals, as directly.
    old_direct.reset().await.unwrap();
    assert_eq!(session_value(&mut old_direct, "sql_mode").await, new_mode);
    let mut reset = olds.pop().unwrap();
    reset.reset().await.unwrap();
    assert_eq!(session_value(&mut reset, "sql_mode").await, new_mode);
    // A change made on the server directly: seen by logins after the console's RECONNECT,
    // or once the periodic read sees it.
    root.query_drop("SET GLOBAL sql_mode = 'PIPES_AS_CONCAT'")
        .await
        .unwrap();
    let mut a = admin(&proxy).await;
    if !watch {
        a.query_drop("RECONNECT").await.unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let fresh = loop {
        let mut fresh = connect(&proxy, None).await;
        if session_value(&mut fresh, "sql_mode").await == "PIPES_AS_CONCAT" {
            break fresh;
        }
        assert!(
            watch && std::time::Instant::now() < deadline,
            "a login after a direct SET GLOBAL (watch: {watch}) never saw it"
        );
        fresh.disconnect().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for old in olds.iter_mut() {
        assert_eq!(session_value(old, "sql_mode").await, before);
    }
    root.query_drop(format!("SET GLOBAL sql_mode = '{before}'"))
        .await
        .unwrap();
    for c in olds
        .into_iter()
        .chain([setter, reset, fresh, old_direct, new_direct, root, a])
    {
        c.disconnect().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_global_is_seen_by_later_logins_only_p1_reconnect() {
    set_global_is_seen_by_later_logins_only(1, 16, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_global_is_seen_by_later_logins_only_p4_unpipelined_watched() {
    set_global_is_seen_by_later_logins_only(4, 1, true).await;
}
