//! A login never waits for an execution slot: not one without a database, and not one that
//! names a default database either (checked on a control connection), while every slot is
//! held by a running statement; nor does choosing the database right after the login, with
//! COM_INIT_DB (what many drivers send) or `USE`. Direct MariaDB is the reference.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;
use crate::wire::Wire;

/// How long `Conn::new` takes against sluice, with and without a default database, while
/// `pool_size` statements of `SLEEP(4)` hold every slot (and one more queues behind them).
async fn logins_while_every_slot_is_busy(pool_size: u32, depth: u32) {
    let db: &'static str = if pool_size == 1 {
        "t_login_busy1"
    } else {
        "t_login_busy4"
    };
    fresh_db(db).await;
    let mut cfg = config(pool_size);
    cfg.pipeline_depth = depth;
    let proxy = start(cfg).await;
    // Warm: the control connection and one backend in the database exist before the test.
    let mut warm = connect(&proxy, Some(db)).await;
    warm.query_drop("DO 1").await.unwrap();
    warm.disconnect().await.unwrap();
    let mut sleepers = Vec::new();
    for _ in 0..=pool_size {
        let mut c = connect(&proxy, Some(db)).await;
        sleepers.push(tokio::spawn(async move {
            c.query_drop("DO SLEEP(4)").await.unwrap();
            c
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        proxy.context().pool.snapshot().slots_in_use,
        pool_size,
        "every slot is busy"
    );
    let timed = |db: Option<&'static str>| {
        let o = opts(&proxy, "app", "secret", db);
        async move {
            let at = Instant::now();
            let c = Conn::new(o).await.expect("login through sluice");
            (at.elapsed(), c)
        }
    };
    let (without_db, c1) = timed(None).await;
    let (with_db, c2) = timed(Some(db)).await;
    // A raw login, then COM_INIT_DB; and `USE` as a query; at the same time.
    let raw = async {
        let at = Instant::now();
        let mut w = Wire::login(proxy.local_addr(), "app", "secret")
            .await
            .expect("raw login");
        w.command(0x02, db.as_bytes()).await.unwrap();
        let (_, ok) = w
            .packet(Duration::from_secs(10))
            .await
            .expect("COM_INIT_DB answered");
        let took = at.elapsed();
        assert_eq!(<[u8]>::first(&ok), Some(&0), "COM_INIT_DB succeeds: {ok:?}");
        w.command(0x02, b"t_no_such_database").await.unwrap();
        let (_, refused) = w.packet(Duration::from_secs(10)).await.expect("answered");
        assert_eq!(
            <[u8]>::first(&refused),
            Some(&0xff),
            "an unknown database is refused"
        );
        (w, took)
    };
    let with_use = async {
        let at = Instant::now();
        let mut c = Conn::new(opts(&proxy, "app", "secret", None))
            .await
            .unwrap();
        c.query_drop(format!("USE {db}")).await.unwrap();
        (c, at.elapsed())
    };
    let ((mut w, init_db), (mut c3, use_db)) = tokio::join!(raw, with_use);
    // The same login directly, for the reference.
    let at = Instant::now();
    let d = direct(Some(db)).await;
    let direct_login = at.elapsed();
    eprintln!(
        "P={pool_size} depth={depth}, every slot busy: login {without_db:?} without a database, \
         {with_db:?} with one, {init_db:?} with COM_INIT_DB after it, {use_db:?} with USE; \
         directly {direct_login:?}"
    );
    assert!(
        init_db < Duration::from_secs(1),
        "COM_INIT_DB after a login waited for a slot: {init_db:?}"
    );
    assert!(
        use_db < Duration::from_secs(1),
        "USE after a login waited for a slot: {use_db:?}"
    );
    assert!(
        without_db < Duration::from_secs(1),
        "a login without a database waited: {without_db:?}"
    );
    assert!(
        with_db < Duration::from_secs(1),
        "a login with a database waited for a slot: {with_db:?}"
    );
    // Once the slots are free, each session runs in the database it chose.
    for s in sleepers {
        s.await.unwrap().disconnect().await.unwrap();
    }
    let mut c2 = c2;
    assert_eq!(current_db(&mut c2).await.as_deref(), Some(db));
    assert_eq!(current_db(&mut c3).await.as_deref(), Some(db));
    w.command(0x03, b"SELECT DATABASE()").await.unwrap();
    // Column count, definition, EOF, the row, EOF (a client without DEPRECATE_EOF).
    let mut answer = Vec::new();
    for _ in 0..5 {
        answer.push(
            w.packet(Duration::from_secs(10))
                .await
                .expect("the result")
                .1,
        );
    }
    assert!(
        answer
            .iter()
            .any(|p| p.windows(db.len()).any(|w| w == db.as_bytes())),
        "the raw session's database is the one COM_INIT_DB chose: {answer:?}"
    );
    for c in [c1, c2, c3, d] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

async fn current_db(c: &mut Conn) -> Option<String> {
    c.query_first("SELECT DATABASE()").await.unwrap().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_with_a_database_never_waits_for_a_slot_p1() {
    logins_while_every_slot_is_busy(1, 16).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_with_a_database_never_waits_for_a_slot_p4_unpipelined() {
    logins_while_every_slot_is_busy(4, 1).await;
}
