//! CONNECTION_ID() and KILL with the application account, which may not set
//! `pseudo_thread_id`: sluice rewrites the calls in the statement's text. What a driver sees
//! (value, column name, type) must equal a direct session's; what the rewrite cannot reach
//! (stored routines, PROCESSLIST) is pinned down here exactly as the README
//! says. The privileged path is in `privileged.rs`.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Column, Conn};
use sluice::conn::identity::IdentityMode;

use crate::harness::*;

/// What a driver learns about a column: name, type, flags, length, decimals, character set.
fn shape(c: &Column) -> String {
    format!(
        "{} {:?} {:?} len={} dec={} cs={}",
        c.name_str(),
        c.column_type(),
        c.flags(),
        c.column_length(),
        c.decimals(),
        c.character_set()
    )
}

/// Column shapes of `sql` over the text protocol and (prepared) over the binary one.
async fn shapes(c: &mut Conn, sql: &str) -> (Vec<String>, Vec<String>) {
    let result = c.query_iter(sql).await.unwrap();
    let text = result.columns_ref().iter().map(shape).collect();
    result.drop_result().await.unwrap();
    let stmt = c.prep(sql).await.unwrap();
    let binary = stmt.columns().iter().map(shape).collect();
    c.close(stmt).await.unwrap();
    (text, binary)
}

const SHAPED: &[&str] = &[
    "SELECT CONNECTION_ID()",
    "select connection_id(), 1 AS one",
    "SELECT CONNECTION_ID( ) FROM DUAL",
    "SELECT (CONNECTION_ID()), CONNECTION_ID() + 1, CONNECTION_ID() AS id, CONNECTION_ID() id2",
    "SELECT * FROM (SELECT CONNECTION_ID()) d",
    "SELECT DISTINCT CONNECTION_ID() WHERE CONNECTION_ID() > 0",
    "SELECT IFNULL(NULL, CONNECTION_ID()), CONNECTION_ID() = 0",
    "SELECT CONNECTION_ID() IS NOT NULL, CONNECTION_ID() > 0 IS TRUE, CONNECTION_ID() DIV 1",
    "SELECT CASE WHEN CONNECTION_ID() > 0 THEN 'y' ELSE 'n' END, CONNECTION_ID() LIKE '%'",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_id_columns_look_the_same_as_direct() {
    let proxy = start(config(4)).await;
    let mut d = direct(None).await;
    let mut s = connect(&proxy, None).await;
    for sql in SHAPED {
        let direct_shapes = shapes(&mut d, sql).await;
        assert_eq!(shapes(&mut s, sql).await, direct_shapes, "{sql}");
    }
    // MariaDB types the function INT UNSIGNED, length 10, NOT NULL.
    let (text, _) = shapes(&mut d, "SELECT CONNECTION_ID()").await;
    assert!(
        text[0].contains("MYSQL_TYPE_LONG ") && text[0].contains("len=10 dec=0"),
        "{text:?}"
    );
    assert_eq!(
        proxy.context().identity.mode(APP_USER),
        Some(IdentityMode::Rewrite),
        "the application account may not set pseudo_thread_id"
    );
    d.disconnect().await.unwrap();
    s.disconnect().await.unwrap();
    proxy.shutdown().await;
}

async fn id_text(c: &mut Conn) -> u64 {
    c.query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap()
}

async fn id_binary(c: &mut Conn) -> u64 {
    c.exec_first("SELECT CONNECTION_ID()", ())
        .await
        .unwrap()
        .unwrap()
}

/// Every form the issue names: text and binary, expressions, WHERE, subqueries, after errors,
/// after COM_RESET_CONNECTION and COM_CHANGE_USER, on whichever backend runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn connection_id_is_the_clients_id_in_every_form() {
    fresh_db("t_id_forms").await;
    let proxy = start(config(4)).await;
    let mut busy = Vec::new();
    for _ in 0..3 {
        busy.push(connect(&proxy, Some("t_id_forms")).await);
    }
    let mut c = connect(&proxy, Some("t_id_forms")).await;
    let me = u64::from(c.id());
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, owner BIGINT UNSIGNED)")
        .await
        .unwrap();
    c.exec_drop("INSERT INTO t VALUES (1, CONNECTION_ID())", ())
        .await
        .unwrap();
    c.query_drop("INSERT INTO t VALUES (2, CONNECTION_ID() + 1)")
        .await
        .unwrap();
    for round in 0..20 {
        // Other clients keep backends busy so statements land on different ones.
        let o = &mut busy[round % 3];
        o.query_drop("DO 1").await.unwrap();
        assert_eq!(id_text(&mut c).await, me);
        assert_eq!(id_binary(&mut c).await, me);
        let row: (u64, u64, u64) = c
            .query_first(
                "SELECT CONNECTION_ID() * 2, (SELECT CONNECTION_ID()), \
                 (SELECT owner FROM t WHERE owner = CONNECTION_ID())",
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row, (me * 2, me, me));
        let n: u64 = c
            .exec_first(
                "SELECT COUNT(*) FROM t WHERE owner = CONNECTION_ID() + ?",
                (1,),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 1);
        // Errors of every kind leave the id alone.
        for bad in [
            "SELEKT 1",
            "SELECT * FROM no_such_table",
            "INSERT INTO t VALUES (1, 0)",
        ] {
            assert!(c.query_drop(bad).await.is_err());
        }
        assert_eq!(id_text(&mut c).await, me);
    }
    assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION was used");
    assert_eq!(id_text(&mut c).await, me, "after COM_RESET_CONNECTION");
    assert_eq!(id_binary(&mut c).await, me);
    let (user, password) = login_for(&proxy, "app", "secret");
    c.change_user(
        ChangeUserOpts::new()
            .with_user(Some(user.into()))
            .with_pass(Some(password.into())),
    )
    .await
    .unwrap();
    assert_eq!(id_text(&mut c).await, me, "after COM_CHANGE_USER");
    assert_eq!(id_binary(&mut c).await, me);
    // A string or comment that mentions the function is not touched.
    let s: String = c
        .query_first("SELECT 'CONNECTION_ID()' /* CONNECTION_ID() */")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s, "CONNECTION_ID()");
    for b in busy {
        b.disconnect().await.unwrap();
    }
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// The measurement: 1,000 connections through P=4, each its own id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_see_a_thousand_ids() {
    let proxy = start(config(4)).await;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(50));
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let opts = opts(&proxy, "app", "secret", None);
            let gate = gate.clone();
            tokio::spawn(async move {
                let _turn = gate.acquire_owned().await.unwrap();
                let mut c = Conn::new(opts).await.unwrap();
                let handshake = u64::from(c.id());
                let seen = id_text(&mut c).await;
                let again = id_binary(&mut c).await;
                c.disconnect().await.unwrap();
                (handshake, seen, again)
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        let (handshake, seen, again) = t.await.unwrap();
        assert_eq!((seen, again), (handshake, handshake));
        ids.insert(seen);
    }
    eprintln!(
        "1000 connections at P=4: {} distinct CONNECTION_ID() values",
        ids.len()
    );
    assert_eq!(ids.len(), 1000);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_takes_the_id_the_client_sees_and_only_for_its_own_user() {
    let mut cfg = config(2);
    let mut other = sluice::config::UserConfig::new("other", "other-pw");
    other.backend_user = Some(APP_USER.into());
    other.backend_password = Some(sluice::config::Secret::new(APP_PASSWORD.into()));
    cfg.users.push(other);
    let proxy = start(cfg).await;
    let mut victim = connect(&proxy, None).await;
    let id = id_text(&mut victim).await;
    let sleeper = tokio::spawn(async move {
        let r: Result<Option<i64>, _> = victim.query_first("SELECT SLEEP(20)").await;
        (victim, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another user: 1095, as MySQL answers for a thread it does not own; the sleep goes on.
    let mut stranger = Conn::new(opts(&proxy, "other", "other-pw", None))
        .await
        .unwrap();
    let err = stranger
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1095), "{err}");
    let err = stranger.query_drop("KILL QUERY 999999").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1094), "{err}");
    assert!(!sleeper.is_finished());
    let mut killer = connect(&proxy, None).await;
    let at = Instant::now();
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let (mut victim, result) = tokio::time::timeout(Duration::from_secs(10), sleeper)
        .await
        .expect("the killed SLEEP returns")
        .unwrap();
    eprintln!(
        "KILL QUERY {id}: the SLEEP returned {:?} later: {result:?}",
        at.elapsed()
    );
    match &result {
        Ok(v) => assert_eq!(*v, Some(1), "an interrupted SLEEP returns 1"),
        Err(e) => assert_eq!(code_of(e), Some(1317), "{e}"),
    }
    assert_eq!(id_text(&mut victim).await, id, "the session goes on");
    killer
        .query_drop(format!("KILL CONNECTION {id}"))
        .await
        .unwrap();
    assert!(
        victim.query_drop("DO 1").await.is_err(),
        "killed connection"
    );
    stranger.disconnect().await.unwrap();
    killer.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// At P=1 every statement shares one backend: kills aimed at a client that runs quick
/// statements must never interrupt the other client's SLEEP on that same backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_never_reaches_another_sessions_statement() {
    let proxy = start(config(1)).await;
    let mut quick = connect(&proxy, None).await;
    let quick_id = id_text(&mut quick).await;
    let mut sleeper = connect(&proxy, None).await;
    let mut killer = connect(&proxy, None).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let quick_task = tokio::spawn(async move {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            // Killed or not, the quick statements go on.
            let _ = quick.query_drop("SELECT SLEEP(0.001)").await;
        }
        quick
    });
    let kill_task = tokio::spawn(async move {
        let mut kills = 0;
        for _ in 0..200 {
            killer
                .query_drop(format!("KILL QUERY {quick_id}"))
                .await
                .unwrap();
            kills += 1;
        }
        (killer, kills)
    });
    let mut slept = 0;
    while !kill_task.is_finished() {
        let v: Option<i64> = sleeper.query_first("SELECT SLEEP(0.05)").await.unwrap();
        assert_eq!(v, Some(0), "the sleeper's statement was interrupted");
        slept += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (killer, kills) = kill_task.await.unwrap();
    let quick = quick_task.await.unwrap();
    eprintln!(
        "{kills} kills aimed at client {quick_id}, {slept} sleeps of another client untouched"
    );
    assert!(slept > 0);
    for c in [quick, sleeper, killer] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// What the text rewrite cannot reach, exactly as the README says: a stored routine's own
/// CONNECTION_ID() in a routine and PROCESSLIST give the id of the backend connection that
/// runs them (the server's PROCESSLIST id), not the client's; IS_USED_LOCK() gives the
/// holder's client id (`lock_owner.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routines_locks_and_processlist_show_the_backends_id() {
    fresh_db("t_id_limits").await;
    let proxy = start(config(2)).await;
    let mut c = connect(&proxy, Some("t_id_limits")).await;
    let me = u64::from(c.id());
    c.query_drop("CREATE PROCEDURE p() SELECT CONNECTION_ID()")
        .await
        .unwrap();
    // The lock pins the session, so every statement below runs on one backend.
    c.query_drop("SELECT GET_LOCK('t_id_limits_lock', 0)")
        .await
        .unwrap();
    let backend: u64 = c
        .query_first(
            "SELECT ID FROM information_schema.PROCESSLIST \
             WHERE INFO LIKE 'SELECT ID FROM information_schema.PROCESSLIST%'",
        )
        .await
        .unwrap()
        .unwrap();
    let in_call: u64 = c.query_first("CALL p()").await.unwrap().unwrap();
    assert_eq!(in_call, backend, "a routine sees its backend's id");
    let owner: u64 = c
        .query_first("SELECT IS_USED_LOCK('t_id_limits_lock')")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        owner, me,
        "IS_USED_LOCK() names the holder as its CONNECTION_ID() does, as directly"
    );
    assert_eq!(
        id_text(&mut c).await,
        me,
        "the statement's own call is the client's"
    );
    c.query_drop("DO RELEASE_LOCK('t_id_limits_lock')")
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_servers_says_how_each_backend_account_presents_the_id() {
    let mut cfg = config(2);
    cfg.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.admin_users = vec![sluice::config::UserConfig::new("admin", "s3cret")];
    let proxy = start(cfg).await;
    let mut c = connect(&proxy, None).await;
    c.query_drop("DO 1").await.unwrap();
    let admin_addr = proxy.admin_addr().expect("admin console");
    let mut admin = Conn::new(opts_at(admin_addr, "admin", "s3cret", None))
        .await
        .unwrap();
    let rows: Vec<mysql_async::Row> = admin.query("SHOW SERVERS").await.unwrap();
    let identity: Vec<(String, String)> = rows
        .iter()
        .filter(|r| r.get::<Option<String>, _>("state").flatten().as_deref() == Some("identity"))
        .map(|r| {
            (
                r.get::<Option<String>, _>("user")
                    .flatten()
                    .unwrap_or_default(),
                r.get::<Option<String>, _>("connection_id")
                    .flatten()
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(identity.len(), 1, "{identity:?}");
    assert_eq!(identity[0].0, APP_USER);
    assert!(
        identity[0]
            .1
            .starts_with("rewrite; to switch: GRANT BINLOG REPLAY ON *.* TO 'sluice_app'"),
        "{identity:?}"
    );
    c.disconnect().await.unwrap();
    admin.disconnect().await.unwrap();
    proxy.shutdown().await;
}
