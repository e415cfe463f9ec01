//! Every lock a statement can take, with the application account: while it is held the
//! session keeps its backend, and gives its execution slot back after each statement (as the
//! admin console's SHOW CLIENTS and SHOW POOLS show, and the server proves: the lock is only where the holder is); after its
//! release the backend goes back and another session takes the lock; and a client that leaves
//! holding it never hands a backend with the lock to anyone (the server sees it free). The
//! instance-wide locks, which need RELOAD, are in `privileged.rs`.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::ProxyHandle;

use crate::admin::{admin, admin_config, cell, num, rows};
use crate::harness::*;

/// What the admin console says about one client and the pool.
#[derive(Debug)]
pub(crate) struct View {
    pub pinned: Option<String>,
    pub state: String,
    /// Execution slots in use (pool-wide).
    pub active: u64,
    /// Idle backends and all open ones: equal when no session keeps a backend.
    pub idle: u64,
    pub open: u64,
    /// Backends sessions keep only for their diagnostics after a warning or an error (until
    /// a statement that names a table replaces them), as SHOW POOLS `pinned_by` says.
    pub for_diagnostics: u64,
}

pub(crate) async fn view(a: &mut Conn, client: u32) -> View {
    let clients = rows(a, "SHOW CLIENTS").await;
    let me = clients
        .iter()
        .find(|r| num(r, "id") == u64::from(client))
        .unwrap_or_else(|| panic!("client {client} is not in SHOW CLIENTS: {clients:?}"));
    let pools = rows(a, "SHOW POOLS").await;
    View {
        pinned: cell(me, "pinned").map(str::to_string),
        state: cell(me, "state").unwrap_or_default().to_string(),
        active: num(&pools[0], "active"),
        idle: pools.iter().map(|p| num(p, "idle")).sum(),
        open: num(&pools[0], "open"),
        for_diagnostics: cell(&pools[0], "pinned_by")
            .unwrap_or_default()
            .split(',')
            .find_map(|h| h.strip_prefix("pending_warnings="))
            .map_or(0, |n| n.parse().unwrap_or(0)),
    }
}

/// Polls the console (up to 5 s: a session gives its backend back just after its answer)
/// until `want` holds for `client`; panics with the last view otherwise.
pub(crate) async fn until(a: &mut Conn, client: u32, what: &str, want: impl Fn(&View) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = view(a, client).await;
        if want(&v) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {v:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The lock keeps the session's backend, shown pinned for `reason`; between statements it
/// holds no execution slot.
pub(crate) async fn holds(a: &mut Conn, client: u32, reason: &str, what: &str) {
    until(a, client, what, |v| {
        v.pinned.as_deref() == Some(reason)
            && v.active == 0
            && v.idle + 1 + v.for_diagnostics == v.open
    })
    .await;
}

/// Nothing is held any more: no pin, no slot, every backend idle but those kept for the
/// diagnostics of a statement that failed (SHOW ERRORS finds the error there, as directly).
pub(crate) async fn released(a: &mut Conn, client: u32, what: &str) {
    until(a, client, what, |v| {
        v.pinned.is_none()
            && v.active == 0
            && v.idle + v.for_diagnostics == v.open
            && v.state == "idle"
    })
    .await;
}

/// A proxy (P=4, with the admin console) and a fresh database `db` with tables t and u.
async fn setup(db: &str) -> (ProxyHandle, Conn) {
    fresh_db(db).await;
    let mut d = direct(Some(db)).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("CREATE TABLE u (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 0)").await.unwrap();
    d.disconnect().await.unwrap();
    let proxy = start(admin_config(4)).await;
    let a = admin(&proxy).await;
    (proxy, a)
}

pub(crate) async fn one<T: mysql_async::prelude::FromValue>(c: &mut Conn, sql: &str) -> T {
    let row: Option<mysql_async::Row> = c
        .query_first(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    mysql_async::from_value(row.expect("a row").take(0).expect("a column"))
}

/// Three other sessions run statements, so that a session that did not keep its backend
/// would land on another one.
pub(crate) async fn stir(others: &mut [Conn]) {
    for o in others.iter_mut() {
        o.query_drop("DO 1").await.unwrap();
    }
}

pub(crate) async fn others(proxy: &ProxyHandle, db: &str, n: usize) -> Vec<Conn> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(connect(proxy, Some(db)).await);
    }
    v
}

/// The backend's own thread id (sluice sets no pseudo_thread_id for this account), to show
/// that a session stays on one backend.
async fn backend_of(c: &mut Conn) -> u64 {
    one(c, "SELECT @@pseudo_thread_id").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_locks_several_twice_not_held_and_all() {
    let db = "t_lk_named";
    let (proxy, mut a) = setup(db).await;
    let mut stirrers = others(&proxy, db, 2).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut o = connect(&proxy, Some(db)).await;
    let id = h.id();
    let got: (u8, u8) = h
        .query_first("SELECT GET_LOCK('a', 0), GET_LOCK('b', 0)")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, (1, 1));
    holds(&mut a, id, "named_lock", "two locks").await;
    let backend = backend_of(&mut h).await;
    for _ in 0..5 {
        stir(&mut stirrers).await;
        assert_eq!(backend_of(&mut h).await, backend, "the holder moved");
    }
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('a', 0)").await, 0);
    // Taken twice, released twice; a lock not held, or another case, releases nothing.
    assert_eq!(one::<u8>(&mut h, "SELECT GET_LOCK('a', 0)").await, 1);
    let none: Option<u8> = one(&mut h, "SELECT RELEASE_LOCK('nope')").await;
    assert_eq!(none, None);
    let none: Option<u8> = one(&mut h, "SELECT RELEASE_LOCK('A')").await;
    assert_eq!(none, None);
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_LOCK('b')").await, 1);
    holds(&mut a, id, "named_lock", "'a' is held twice").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('b', 0)").await, 1);
    assert_eq!(one::<u8>(&mut o, "SELECT RELEASE_LOCK('b')").await, 1);
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_LOCK('a')").await, 1);
    holds(&mut a, id, "named_lock", "'a' is held once more").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('a', 0)").await, 0);
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_LOCK('a')").await, 1);
    released(&mut a, id, "'a' released twice").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('a', 0)").await, 1);
    assert_eq!(one::<u8>(&mut o, "SELECT RELEASE_LOCK('a')").await, 1);

    // RELEASE_ALL_LOCKS() ends all of them, named or computed.
    h.query_drop("DO GET_LOCK('c', 0), GET_LOCK(CONCAT('d', ''), 0)")
        .await
        .unwrap();
    holds(&mut a, id, "named_lock", "c and d").await;
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_ALL_LOCKS()").await, 2);
    released(&mut a, id, "RELEASE_ALL_LOCKS").await;

    // A GET_LOCK that found the lock taken, or whose statement failed, leaves nothing held
    // (the server says so).
    let err = h
        .query_drop("SELECT GET_LOCK('f', 0) FROM no_such_table")
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1146), "{err}");
    released(&mut a, id, "a failed GET_LOCK statement").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('e', 0)").await, 1);
    assert_eq!(one::<u8>(&mut h, "SELECT GET_LOCK('e', 0)").await, 0);
    until(&mut a, id, "a GET_LOCK that timed out", |v| {
        // Only o holds a lock now: one backend, no slot (and h keeps one for the error it
        // can still read, as directly: GET_LOCK() names no table).
        v.pinned.is_none() && v.active == 0 && v.idle + 1 + v.for_diagnostics == v.open
    })
    .await;
    assert_eq!(one::<u8>(&mut o, "SELECT RELEASE_LOCK('e')").await, 1);

    // Over the binary protocol, where the name is a parameter.
    let got: u8 = h
        .exec_first("SELECT GET_LOCK(?, 0)", ("p",))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, 1);
    holds(&mut a, id, "named_lock", "a prepared GET_LOCK").await;
    stir(&mut stirrers).await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('p', 0)").await, 0);
    let got: u8 = h
        .exec_first("SELECT RELEASE_LOCK(?)", ("p",))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, 1);
    released(&mut a, id, "a prepared RELEASE_LOCK").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('p', 0)").await, 1);
    assert_eq!(one::<u8>(&mut o, "SELECT RELEASE_LOCK('p')").await, 1);

    for c in [h, o].into_iter().chain(stirrers) {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// A client that leaves holding locks: the server sees them free afterwards (so no backend
/// sluice keeps holds them), and the next client through sluice holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_holding_named_locks_leaves_them_free() {
    let db = "t_lk_named_gone";
    let (proxy, mut a) = setup(db).await;
    for disconnect in [true, false] {
        let mut h = connect(&proxy, Some(db)).await;
        h.query_drop("DO GET_LOCK('gone', 0), GET_LOCK(CONCAT('gone', '2'), 0)")
            .await
            .unwrap();
        h.exec_drop("DO GET_LOCK(?, 0)", ("gone3",)).await.unwrap();
        holds(&mut a, h.id(), "named_lock", "before leaving").await;
        if disconnect {
            h.disconnect().await.unwrap();
        } else {
            drop(h); // the socket closes without COM_QUIT
        }
        let mut next = connect(&proxy, Some(db)).await;
        let used: Option<u64> = one(&mut next, "SELECT IS_USED_LOCK('gone')").await;
        assert_eq!(used, None, "the next client sees the lock free");
        let mut d = direct(Some(db)).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let free: (u8, u8, u8) = d
                .query_first(
                    "SELECT IS_FREE_LOCK('gone'), IS_FREE_LOCK('gone2'), IS_FREE_LOCK('gone3')",
                )
                .await
                .unwrap()
                .unwrap();
            if free == (1, 1, 1) {
                break;
            }
            assert!(Instant::now() < deadline, "locks still held: {free:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        d.disconnect().await.unwrap();
        released(&mut a, next.id(), "after the holder left").await;
        next.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// `SET lock_wait_timeout = 1` and a write to t: Ok if t is not locked by someone else.
pub(crate) async fn can_write_t(o: &mut Conn) -> Result<(), u16> {
    o.query_drop("SET SESSION lock_wait_timeout = 1, innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    let r = o.query_drop("UPDATE t SET v = v + 1 WHERE id = 1").await;
    r.map_err(|e| code_of(&e).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_tables_until_unlock_a_transaction_or_the_client_leaves() {
    let db = "t_lk_tables";
    let (proxy, mut a) = setup(db).await;
    let mut stirrers = others(&proxy, db, 2).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut o = connect(&proxy, Some(db)).await;
    let id = h.id();

    h.query_drop("LOCK TABLES t WRITE").await.unwrap();
    holds(&mut a, id, "table_lock", "LOCK TABLES").await;
    for _ in 0..3 {
        stir(&mut stirrers).await;
        // Only the holder's backend is in LOCK TABLES mode: u is not locked there.
        let err = h.query_drop("SELECT * FROM u").await.unwrap_err();
        assert_eq!(code_of(&err), Some(1100), "{err}");
    }
    assert_eq!(can_write_t(&mut o).await, Err(1205));
    // A statement that commits implicitly is refused under LOCK TABLES and ends nothing.
    let err = h.query_drop("CREATE TABLE x (a INT)").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1100), "{err}");
    h.query_drop("UNLOCK TABLES").await.unwrap();
    released(&mut a, id, "UNLOCK TABLES").await;
    assert_eq!(can_write_t(&mut o).await, Ok(()));

    // Starting a transaction ends LOCK TABLES (the server's implicit UNLOCK TABLES); the
    // transaction then keeps the backend, and COMMIT gives everything back.
    for begin in ["START TRANSACTION", "BEGIN"] {
        h.query_drop("LOCK TABLES t READ").await.unwrap();
        holds(&mut a, id, "table_lock", "LOCK TABLES READ").await;
        h.query_drop(begin).await.unwrap();
        until(&mut a, id, begin, |v| {
            v.pinned.is_none()
                && v.state == "idle_in_transaction"
                && v.active == 0
                && v.idle + 1 + v.for_diagnostics == v.open
        })
        .await;
        assert_eq!(can_write_t(&mut o).await, Ok(()), "after {begin}");
        h.query_drop("SELECT * FROM u").await.unwrap();
        h.query_drop("COMMIT").await.unwrap();
        released(&mut a, id, "COMMIT").await;
    }

    // A LOCK TABLES that failed took nothing; one in a multi-statement that failed later did.
    let err = h.query_drop("LOCK TABLES nope READ").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1146), "{err}");
    released(&mut a, id, "a failed LOCK TABLES").await;
    let err = h
        .query_drop("LOCK TABLES t WRITE; SELEKT")
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1064), "{err}");
    holds(
        &mut a,
        id,
        "table_lock",
        "LOCK TABLES before a syntax error",
    )
    .await;
    assert_eq!(can_write_t(&mut o).await, Err(1205));
    let err = h.query_drop("UNLOCK TABLES t").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1064), "{err}");
    holds(&mut a, id, "table_lock", "a failed UNLOCK TABLES").await;
    h.query_drop("UNLOCK TABLES").await.unwrap();
    released(&mut a, id, "UNLOCK TABLES").await;

    // The holder leaves: t is free on the server, and nobody gets a backend in LOCK TABLES.
    h.query_drop("LOCK TABLES t WRITE").await.unwrap();
    holds(&mut a, id, "table_lock", "before leaving").await;
    h.disconnect().await.unwrap();
    let mut next = connect(&proxy, Some(db)).await;
    for _ in 0..4 {
        next.query_drop("SELECT * FROM u").await.unwrap();
        stir(&mut stirrers).await;
    }
    let mut d = direct(Some(db)).await;
    assert_eq!(can_write_t(&mut d).await, Ok(()));
    d.disconnect().await.unwrap();
    for c in [next, o].into_iter().chain(stirrers) {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// An XA transaction keeps its session's backend from XA START to XA COMMIT or
/// ROLLBACK (two-phase or one), and one left prepared by a client that leaves survives as it
/// does on the server directly: another session finds it in XA RECOVER and commits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xa_transactions_keep_their_backend_until_they_end() {
    let db = "t_lk_xa";
    let (proxy, mut a) = setup(db).await;
    let mut stirrers = others(&proxy, db, 2).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut o = connect(&proxy, Some(db)).await;
    let id = h.id();
    let in_xa = |v: &View| {
        v.state == "idle_in_transaction"
            && v.active == 0
            && v.idle + 1 + v.for_diagnostics == v.open
    };

    for (n, end) in [
        (2, &["XA END 'x2'", "XA PREPARE 'x2'", "XA COMMIT 'x2'"][..]),
        (3, &["XA END 'x3'", "XA COMMIT 'x3' ONE PHASE"][..]),
        (
            4,
            &["XA END 'x4'", "XA PREPARE 'x4'", "XA ROLLBACK 'x4'"][..],
        ),
    ] {
        h.query_drop(format!("XA START 'x{n}'")).await.unwrap();
        h.query_drop(format!("UPDATE t SET v = {n} WHERE id = 1"))
            .await
            .unwrap();
        until(&mut a, id, "XA START", in_xa).await;
        let backend = backend_of(&mut h).await;
        for step in end {
            stir(&mut stirrers).await;
            assert_eq!(can_write_t(&mut o).await, Err(1205), "before {step}");
            assert_eq!(backend_of(&mut h).await, backend, "the holder moved");
            if step.contains("COMMIT") || step.contains("ROLLBACK") {
                let recover: Vec<mysql_async::Row> = h.query("XA RECOVER").await.unwrap();
                let prepared = step.contains("ONE PHASE");
                assert_eq!(recover.is_empty(), prepared, "{step}: {recover:?}");
            }
            h.query_drop(*step).await.unwrap();
        }
        released(&mut a, id, end[end.len() - 1]).await;
        assert_eq!(can_write_t(&mut o).await, Ok(()));
    }
    let v: i64 = one(&mut o, "SELECT v FROM t WHERE id = 1").await;
    assert_eq!(
        v,
        3 + 2,
        "x3 set 3 after x2, x4 rolled back, o added one after each"
    );

    // Left active: rolled back. Left prepared: kept for XA RECOVER, as directly.
    h.query_drop("XA START 'x5'").await.unwrap();
    h.query_drop("INSERT INTO u VALUES (5)").await.unwrap();
    h.disconnect().await.unwrap();
    let mut h = connect(&proxy, Some(db)).await;
    for q in [
        "XA START 'x6'",
        "INSERT INTO u VALUES (6)",
        "XA END 'x6'",
        "XA PREPARE 'x6'",
    ] {
        h.query_drop(q).await.unwrap();
    }
    drop(h);
    let mut next = connect(&proxy, Some(db)).await;
    next.query_drop("XA START 'y'").await.unwrap();
    next.query_drop("XA END 'y'").await.unwrap();
    next.query_drop("XA ROLLBACK 'y'").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut d = direct(Some(db)).await;
    loop {
        let recover: Vec<(i64, i64, i64, Vec<u8>)> = d.query("XA RECOVER").await.unwrap();
        let xids: Vec<_> = recover.iter().map(|r| r.3.clone()).collect();
        if xids == [b"x6".to_vec()] {
            break;
        }
        assert!(Instant::now() < deadline, "XA RECOVER: {xids:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    next.query_drop("XA COMMIT 'x6'").await.unwrap();
    let ids: Vec<i64> = d.query("SELECT id FROM u ORDER BY id").await.unwrap();
    assert_eq!(ids, [6]);
    d.disconnect().await.unwrap();
    released(
        &mut a,
        next.id(),
        "after XA COMMIT of a recovered transaction",
    )
    .await;
    for c in [next, o].into_iter().chain(stirrers) {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// BACKUP LOCK needs no privilege: it keeps the session's backend through UNLOCK
/// TABLES and a transaction, until BACKUP UNLOCK (or the client leaves), and blocks DDL on
/// its table meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_lock_until_backup_unlock_or_the_client_leaves() {
    let db = "t_lk_backup";
    let (proxy, mut a) = setup(db).await;
    let mut o = direct(Some(db)).await;
    o.query_drop("SET SESSION lock_wait_timeout = 1")
        .await
        .unwrap();
    for leave in [false, true] {
        let mut h = connect(&proxy, Some(db)).await;
        let id = h.id();
        h.query_drop("BACKUP LOCK t").await.unwrap();
        holds(&mut a, id, "table_lock", "BACKUP LOCK").await;
        for not_by in ["UNLOCK TABLES", "BEGIN", "COMMIT"] {
            h.query_drop(not_by).await.unwrap();
            holds(&mut a, id, "table_lock", not_by).await;
        }
        let err = o.query_drop("ALTER TABLE t COMMENT 'x'").await.unwrap_err();
        assert_eq!(code_of(&err), Some(1205), "{err}");
        if leave {
            drop(h);
            let deadline = Instant::now() + Duration::from_secs(5);
            while let Err(e) = o.query_drop("ALTER TABLE t COMMENT 'y'").await {
                assert!(Instant::now() < deadline, "still locked: {e}");
            }
        } else {
            h.query_drop("BACKUP UNLOCK").await.unwrap();
            released(&mut a, id, "BACKUP UNLOCK").await;
            o.query_drop("ALTER TABLE t COMMENT 'y'").await.unwrap();
            h.disconnect().await.unwrap();
        }
    }
    o.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// MySQL's LOCK INSTANCE FOR BACKUP / UNLOCK INSTANCE do not exist on MariaDB 10.11 (its
/// BACKUP STAGE is in `privileged.rs`): the server's syntax error, and the session keeps
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_instance_is_a_syntax_error_on_mariadb_and_holds_nothing() {
    let db = "t_lk_instance";
    let (proxy, mut a) = setup(db).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut d = direct(Some(db)).await;
    for sql in ["LOCK INSTANCE FOR BACKUP", "UNLOCK INSTANCE"] {
        let direct_err = d.query_drop(sql).await.unwrap_err();
        let err = h.query_drop(sql).await.unwrap_err();
        assert_eq!(code_of(&err), Some(1064), "{err}");
        assert_eq!(code_of(&err), code_of(&direct_err));
        released(&mut a, h.id(), sql).await;
    }
    d.disconnect().await.unwrap();
    h.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Statements whose effects sluice did not act on before: a lock taken where sluice cannot
/// read (EXECUTE IMMEDIATE) stays with its session; COMMIT RELEASE ends the client's
/// connection as the server ends it, and its closed backend is never handed to anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unseen_sql_and_release_are_handled_as_the_server_does() {
    let db = "t_lk_effects";
    let (proxy, mut a) = setup(db).await;
    let mut stirrers = others(&proxy, db, 2).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut o = connect(&proxy, Some(db)).await;
    h.query_drop("EXECUTE IMMEDIATE 'DO GET_LOCK(''ei'', 0)'")
        .await
        .unwrap();
    stir(&mut stirrers).await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('ei', 0)").await, 0);
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_LOCK('ei')").await, 1);
    let pinned = view(&mut a, h.id()).await.pinned;
    assert_eq!(pinned.as_deref(), Some("untracked_state_change"));

    let mut d = direct(Some(db)).await;
    for c in [&mut d, &mut o] {
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("UPDATE t SET v = 7 WHERE id = 1")
            .await
            .unwrap();
        c.query_drop("COMMIT RELEASE").await.unwrap();
        let err = c.query_drop("SELECT 1").await.unwrap_err();
        assert!(code_of(&err).is_none(), "the connection is gone: {err}");
    }
    // Everyone else goes on; the released backend was closed, not pooled.
    for _ in 0..10 {
        stir(&mut stirrers).await;
    }
    let v: i64 = one(&mut stirrers[0], "SELECT v FROM t WHERE id = 1").await;
    assert_eq!(v, 7);
    let _ = d.disconnect().await;
    let _ = o.disconnect().await;
    for c in [h].into_iter().chain(stirrers) {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// Under sql_mode NO_BACKSLASH_ESCAPES `'a\'` is a whole string, so the GET_LOCK after it is
/// SQL the server runs: the session keeps the lock and its backend. (Lexed with escapes, the
/// call would read as part of a string, and the backend would go back holding the lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_after_a_backslash_is_seen_under_no_backslash_escapes() {
    let db = "t_lk_nbe";
    let (proxy, mut a) = setup(db).await;
    let mut h = connect(&proxy, Some(db)).await;
    let mut o = connect(&proxy, Some(db)).await;
    let id = h.id();
    h.query_drop("SET sql_mode = 'NO_BACKSLASH_ESCAPES'")
        .await
        .unwrap();
    let got: (String, u8) = h
        .query_first(r"SELECT 'a\', GET_LOCK('nbe', 0)")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, (r"a\".to_string(), 1));
    holds(&mut a, id, "named_lock", "GET_LOCK after 'a\\'").await;
    assert_eq!(one::<u8>(&mut o, "SELECT GET_LOCK('nbe', 0)").await, 0);
    assert_eq!(one::<u8>(&mut h, "SELECT RELEASE_LOCK('nbe')").await, 1);
    released(&mut a, id, "'nbe' released").await;

    // Back in the default mode the backslash escapes again: the call is inside the string,
    // and nothing pins.
    h.query_drop("SET sql_mode = DEFAULT").await.unwrap();
    let got: String = one(&mut h, r"SELECT 'a\', GET_LOCK(''nbe'', 0)'").await;
    assert_eq!(got, "a', GET_LOCK('nbe', 0)");
    released(&mut a, id, "no lock in a string").await;
}
