//! Core pooling behaviour against a real MariaDB: correctness through the relay, pooling
//! limits, transactions, pinning, state replay, queueing and the lock-holder deadlock.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::stats::PinReason;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn many_clients_share_a_small_pool_and_get_correct_results() {
    fresh_db("t_many").await;
    let mut setup = direct(Some("t_many")).await;
    setup
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        .await
        .unwrap();
    setup
        .query_drop("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_100")
        .await
        .unwrap();
    let proxy = start(config(4)).await;
    let mut tasks = Vec::new();
    for c in 0..64u32 {
        let opts = opts(&proxy, "app", "secret", Some("t_many"));
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(opts).await.unwrap();
            for i in 0..10u32 {
                let id = (c * 10 + i) % 100 + 1;
                let v: Option<String> = conn
                    .exec_first("SELECT v FROM t WHERE id = ?", (id,))
                    .await
                    .unwrap();
                assert_eq!(v.as_deref(), Some(format!("v{id}").as_str()));
                let n: u64 = conn
                    .query_first("SELECT COUNT(*) FROM t")
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(n, 100);
            }
            conn.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let snap = proxy.context().pool.snapshot();
    assert!(
        snap.open <= 4 + 2,
        "backends stay near pool_size, got {}",
        snap.open
    );
    assert_eq!(snap.slots_in_use, 0);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn wrong_password_gets_1045_and_unknown_database_gets_1049() {
    let proxy = start(config(2)).await;
    let err = Conn::new(opts(&proxy, "app", "wrong", None))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("28000"));
    let err = Conn::new(opts(&proxy, "nobody", "secret", None))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    // A name the account's grants cover (`t_%`): for any other the server says 1044, as it
    // would directly, so that an account cannot probe which databases exist.
    let err = Conn::new(opts(&proxy, "app", "secret", Some("t_no_such_db_here")))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1049), "{err}");
    // The proxy still serves good clients.
    let mut c = connect(&proxy, None).await;
    assert_eq!(c.query_first::<u8, _>("SELECT 1").await.unwrap(), Some(1));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn a_transaction_keeps_its_backend_until_commit() {
    fresh_db("t_tx").await;
    direct(Some("t_tx"))
        .await
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let proxy = start(config(2)).await;
    let mut a = connect(&proxy, Some("t_tx")).await;
    let mut b = connect(&proxy, Some("t_tx")).await;
    // The server thread running a statement (CONNECTION_ID() is sluice's id, so ask the
    // process list which thread is running this very query).
    const WHO: &str =
        "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%which_backend_probe%'";
    a.query_drop("BEGIN").await.unwrap();
    let id1: u64 = a.query_first(WHO).await.unwrap().unwrap();
    a.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    // Another client runs in between; the transaction must not move.
    let _: Option<u8> = b.query_first("SELECT 1").await.unwrap();
    let id2: u64 = a.query_first(WHO).await.unwrap().unwrap();
    assert_eq!(id1, id2, "statements of one transaction run on one backend");
    // Uncommitted data is invisible to the other client.
    let n: u64 = b
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
    a.query_drop("ROLLBACK").await.unwrap();
    let n: u64 = a
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
    a.disconnect().await.unwrap();
    b.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn session_variables_are_replayed_not_pinned() {
    let proxy = start(config(2)).await;
    let mut conns = Vec::new();
    for i in 0..8 {
        let mut c = connect(&proxy, None).await;
        let mode = if i % 2 == 0 {
            "ANSI_QUOTES"
        } else {
            "NO_ZERO_DATE"
        };
        c.query_drop(format!("SET SESSION sql_mode = '{mode}'"))
            .await
            .unwrap();
        c.query_drop(format!("SET time_zone = '+0{}:00'", i))
            .await
            .unwrap();
        c.query_drop("SET NAMES utf8mb4").await.unwrap();
        conns.push((c, mode, format!("+0{i}:00")));
    }
    for _round in 0..5 {
        for (c, mode, tz) in conns.iter_mut() {
            let (m, z): (String, String) = c
                .query_first("SELECT @@sql_mode, @@time_zone")
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&m, mode);
            assert_eq!(&z, tz);
        }
    }
    let stats = proxy.context().stats.clone();
    for r in PinReason::ALL {
        assert_eq!(stats.pins_by(*r), 0, "no session pinned ({r})");
    }
    assert!(proxy.context().pool.snapshot().open <= 4);
    for (c, _, _) in conns {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// Character sets and collations move in pairs, and the server reports only the half a
/// statement names: `SET NAMES x COLLATE y` reports no collation, so a replay of what was
/// reported gave x's default collation (and after `SET NAMES latin1`, an older collation
/// turned the connection back to utf8mb4). On one backend shared by two sessions every
/// statement is replayed; each answer must equal the server's own, directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn character_sets_and_collations_replay_as_the_server_set_them() {
    let steps = [
        "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
        "SET collation_connection = 'utf8mb4_bin'",
        "SET NAMES latin1",
        "SET CHARACTER SET utf8mb4",
        "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'",
        "SET character_set_connection = latin1",
        "SET SESSION collation_server = 'utf8mb4_unicode_ci'",
        "SET SESSION character_set_server = latin1",
    ];
    let read = "SELECT @@character_set_connection, @@collation_connection, \
                @@character_set_client, @@collation_server, COLLATION('x')";
    let mut direct = direct(None).await;
    let mut expected = Vec::new();
    for step in steps {
        direct.query_drop(step).await.expect(step);
        let row: (String, String, String, String, String) =
            direct.query_first(read).await.unwrap().unwrap();
        expected.push(row);
    }
    let proxy = start(config(1)).await;
    let mut c = connect(&proxy, None).await;
    let mut other = connect(&proxy, None).await;
    for (step, want) in steps.iter().zip(&expected) {
        c.query_drop(*step).await.expect(step);
        // The other session takes the one backend in between, with a state of its own.
        other.query_drop("SET time_zone = '+01:00'").await.unwrap();
        other.query_drop("DO 1").await.unwrap();
        let got: (String, String, String, String, String) =
            c.query_first(read).await.unwrap().unwrap();
        assert_eq!(&got, want, "after {step}");
        let got: (String, String, String, String, String) =
            c.exec_first(read, ()).await.unwrap().unwrap();
        assert_eq!(&got, want, "after {step}, prepared");
    }
    assert_eq!(proxy.context().stats.pins_by(PinReason::UntrackedState), 0);
    assert!(
        proxy
            .context()
            .stats
            .replays
            .load(std::sync::atomic::Ordering::Relaxed)
            > 8
    );
    c.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Session variables of every shape, each case in a fresh session that shares the one
/// backend with another session (so every statement is replayed): the answers equal the
/// server's own, directly. Found this way: `SET character_set_results = NULL` is reported as
/// an empty value, whose replay failed the session's next statement with 1115.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_variables_of_every_shape_replay_as_the_server_set_them() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["SET NAMES DEFAULT"],
            "SELECT @@character_set_client, @@collation_connection",
        ),
        (
            &["SET NAMES utf8"],
            "SELECT @@character_set_client, @@collation_connection",
        ),
        (
            &["SET character_set_results = NULL"],
            "SELECT @@character_set_results",
        ),
        (
            &["SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"],
            "SELECT @@sql_mode",
        ),
        (
            &["SET time_zone = '+03:00'", "SET time_zone = DEFAULT"],
            "SELECT @@time_zone",
        ),
        (
            &[
                "SET sql_mode = 'NO_BACKSLASH_ESCAPES'",
                "SET lc_time_names = 'fr_FR'",
            ],
            "SELECT @@sql_mode, @@lc_time_names, DATE_FORMAT('2024-03-01', '%M'), 'a\\b'",
        ),
        (
            &["SET foreign_key_checks = 0", "SET unique_checks = 0"],
            "SELECT @@foreign_key_checks, @@unique_checks",
        ),
        (
            &["SET SESSION TRANSACTION READ ONLY"],
            "SELECT @@tx_read_only",
        ),
        (
            &["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"],
            "SELECT @@tx_isolation",
        ),
        (
            &["SET autocommit = 0", "SET autocommit = 1"],
            "SELECT @@autocommit",
        ),
        (&["USE information_schema"], "SELECT DATABASE()"),
        (
            &["SET SESSION group_concat_max_len = 5"],
            "SELECT GROUP_CONCAT('abcdefgh')",
        ),
        (
            &["SET SESSION sql_select_limit = 1"],
            "SELECT 1 UNION SELECT 2",
        ),
        (
            &["SET character_set_client = latin1, character_set_connection = latin1"],
            "SELECT @@character_set_client, @@collation_connection",
        ),
        (
            &[
                "SET NAMES latin1 COLLATE latin1_general_ci",
                "SET character_set_connection = utf8mb4",
            ],
            "SELECT @@character_set_connection, @@collation_connection",
        ),
        (
            &["SET max_statement_time = 0.5"],
            "SELECT @@max_statement_time",
        ),
        (
            &["SET @@session.sql_auto_is_null = 1"],
            "SELECT @@sql_auto_is_null",
        ),
        (
            &["SET SESSION default_storage_engine = MyISAM"],
            "SELECT @@default_storage_engine",
        ),
        (
            &["SET SESSION lc_messages = 'fr_FR'"],
            "SELECT @@lc_messages",
        ),
        (&["SET timestamp = 1000000000"], "SELECT UNIX_TIMESTAMP()"),
        (
            &["SET timestamp = 1000000000", "SET timestamp = DEFAULT"],
            "SELECT UNIX_TIMESTAMP() > 1500000000",
        ),
    ];
    async fn answer(c: &mut Conn, sql: &str) -> Vec<String> {
        let row: mysql_async::Row = c.query_first(sql).await.expect(sql).expect("a row");
        row.unwrap().iter().map(|v| format!("{v:?}")).collect()
    }
    let proxy = start(config(1)).await;
    let mut other = connect(&proxy, None).await;
    for (setup, check) in cases {
        let mut d = direct(None).await;
        for sql in *setup {
            d.query_drop(*sql).await.expect(sql);
        }
        let want = answer(&mut d, check).await;
        let mut c = connect(&proxy, None).await;
        for sql in *setup {
            c.query_drop(*sql).await.expect(sql);
            other.query_drop("SET time_zone = '+01:00'").await.unwrap();
            other.query_drop("DO 1").await.unwrap();
        }
        assert_eq!(answer(&mut c, check).await, want, "after {setup:?}");
        c.disconnect().await.unwrap();
        d.disconnect().await.unwrap();
    }
    for r in PinReason::ALL {
        assert_eq!(proxy.context().stats.pins_by(*r), 0, "pinned for {r}");
    }
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// ROW_COUNT() and FOUND_ROWS() read what the session's previous statement left, which ran
/// on whichever backend was free: before, they read another session's (ROW_COUNT() after an
/// UPDATE of 3 rows gave 0). Each case in a fresh session that shares the one backend with
/// another session; the answers and their column types equal the server's own, directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_count_and_found_rows_read_the_sessions_own_previous_statement() {
    fresh_db("t_outcome").await;
    let setup = [
        "CREATE TABLE t_outcome.t (id INT AUTO_INCREMENT PRIMARY KEY, v TINYINT)",
        "INSERT INTO t_outcome.t (v) VALUES (1), (2), (3), (4)",
    ];
    let cases: &[(&[&str], &str)] = &[
        (
            &["UPDATE t_outcome.t SET v = v + 1 WHERE id <= 3"],
            "SELECT ROW_COUNT()",
        ),
        (
            &["DELETE FROM t_outcome.t WHERE v > 100"],
            "SELECT ROW_COUNT(), 1",
        ),
        (
            &["INSERT INTO t_outcome.t (v) VALUES (7), (8)"],
            "SELECT ROW_COUNT() AS n",
        ),
        (
            &["SELECT * FROM t_outcome.t LIMIT 2"],
            "SELECT FOUND_ROWS(), ROW_COUNT()",
        ),
        (
            &["SELECT * FROM t_outcome.t", "DO 1"],
            "SELECT FOUND_ROWS() + 0",
        ),
        (
            &["SET @@session.time_zone = '+02:00'"],
            "SELECT ROW_COUNT()",
        ),
        (
            &["UPDATE t_outcome.t SET v = v WHERE id = 1"],
            "SELECT 1 FROM DUAL WHERE ROW_COUNT() = 0",
        ),
    ];
    async fn answer(c: &mut Conn, sql: &str) -> Vec<String> {
        let mut r = c.query_iter(sql).await.expect(sql);
        let cols: Vec<String> = r
            .columns_ref()
            .iter()
            .map(|col| {
                format!(
                    "{} {:?} {}",
                    col.name_str(),
                    col.column_type(),
                    col.column_length()
                )
            })
            .collect();
        let rows: Vec<mysql_async::Row> = r.collect().await.expect(sql);
        let values = rows
            .into_iter()
            .flat_map(|row| row.unwrap())
            .map(|v| format!("{v:?}"));
        cols.into_iter().chain(values).collect()
    }
    let proxy = start(config(1)).await;
    let mut other = connect(&proxy, None).await;
    for (steps, check) in cases {
        let mut d = direct(None).await;
        d.query_drop("DROP TABLE IF EXISTS t_outcome.t")
            .await
            .unwrap();
        for sql in setup.iter().chain(steps.iter()) {
            d.query_drop(*sql).await.expect(sql);
        }
        let want = answer(&mut d, check).await;
        d.query_drop("DROP TABLE t_outcome.t").await.unwrap();
        for sql in setup {
            d.query_drop(sql).await.unwrap();
        }
        let mut c = connect(&proxy, None).await;
        for sql in *steps {
            c.query_drop(*sql).await.expect(sql);
            // The other session's statements run on the one backend in between.
            other.query_drop("SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6").await.unwrap();
            other.query_drop("SET time_zone = '+01:00'").await.unwrap();
        }
        assert_eq!(answer(&mut c, check).await, want, "{check} after {steps:?}");
        c.disconnect().await.unwrap();
        d.disconnect().await.unwrap();
    }
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// `SET insert_id` (as in mysqlbinlog's output) and `SET rand_seed1/2` last for the next
/// statement only: replayed on every backend the session later runs on, they gave every
/// INSERT the same id (1062). Such a SET pins the session instead, and is never replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_statement_variables_apply_once() {
    fresh_db("t_insert_id").await;
    let create = "CREATE TABLE t_insert_id.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)";
    let script = [
        "SET insert_id = 100",
        "INSERT INTO t_insert_id.t (v) VALUES (1)",
        "INSERT INTO t_insert_id.t (v) VALUES (2)",
        "SET rand_seed1 = 1, rand_seed2 = 2",
        "INSERT INTO t_insert_id.t (v) VALUES (FLOOR(RAND() * 1000000))",
        "INSERT INTO t_insert_id.t (v) VALUES (3)",
    ];
    let read = "SELECT GROUP_CONCAT(id, ':', v ORDER BY id) FROM t_insert_id.t WHERE v <> 0";
    let mut d = direct(None).await;
    d.query_drop(create).await.unwrap();
    for sql in script {
        d.query_drop(sql).await.expect(sql);
    }
    let want: String = d.query_first(read).await.unwrap().unwrap();
    d.query_drop("DROP TABLE t_insert_id.t").await.unwrap();
    d.query_drop(create).await.unwrap();

    let proxy = start(config(1)).await;
    let mut c = connect(&proxy, None).await;
    let mut other = connect(&proxy, None).await;
    for sql in script {
        c.query_drop(sql).await.expect(sql);
        // The other session takes the one backend in between.
        other.query_drop("SET time_zone = '+01:00'").await.unwrap();
        other.query_drop("DO 1").await.unwrap();
    }
    let got: String = c.query_first(read).await.unwrap().unwrap();
    assert_eq!(got, want, "ids and values as directly");
    assert!(got.starts_with("100:1,101:2,"), "{got}");
    assert!(proxy.context().stats.pins_by(PinReason::UntrackedState) >= 1);
    c.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn user_variables_pin_and_never_leak() {
    let proxy = start(config(1)).await;
    let mut a = connect(&proxy, None).await;
    a.query_drop("SET @secret = 42").await.unwrap();
    let mut b = connect(&proxy, None).await;
    for _ in 0..5 {
        let v: Option<i64> = a.query_first("SELECT @secret").await.unwrap().unwrap();
        assert_eq!(v, Some(42));
        let w: Option<Option<i64>> = b.query_first("SELECT @secret").await.unwrap();
        assert_eq!(w, Some(None), "another client must not see @secret");
    }
    assert_eq!(proxy.context().stats.pins_by(PinReason::UserVariable), 1);
    a.disconnect().await.unwrap();
    // The pinned backend is reset before reuse: a new client sees nothing.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = connect(&proxy, None).await;
    let w: Option<Option<i64>> = c.query_first("SELECT @secret").await.unwrap();
    assert_eq!(w, Some(None));
    b.disconnect().await.unwrap();
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn session_state_does_not_leak_to_the_next_client() {
    fresh_db("t_leak").await;
    let proxy = start(config(1)).await;
    let mut a = connect(&proxy, Some("t_leak")).await;
    let default_mode: String = a.query_first("SELECT @@sql_mode").await.unwrap().unwrap();
    a.query_drop("SET SESSION sql_mode = 'ANSI'").await.unwrap();
    a.query_drop("CREATE TEMPORARY TABLE tmp_leak (x INT)")
        .await
        .unwrap();
    a.disconnect().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut b = connect(&proxy, Some("t_leak")).await;
    let mode: String = b.query_first("SELECT @@sql_mode").await.unwrap().unwrap();
    assert_eq!(mode, default_mode);
    let err = b.query_drop("SELECT * FROM tmp_leak").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1146), "{err}");
    b.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// P=2: one client holds a row lock inside a transaction, four clients block on it; the
/// holder's COMMIT must still get through at once (no slot comes back, so it runs beyond
/// pool_size).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_holder_commits_while_others_wait_on_its_lock() {
    fresh_db("t_lock").await;
    let mut d = direct(Some("t_lock")).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, n INT) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 0)").await.unwrap();
    let proxy = start(config(2)).await;
    let mut holder = connect(&proxy, Some("t_lock")).await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("UPDATE t SET n = n + 1 WHERE id = 1")
        .await
        .unwrap();
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let o = opts(&proxy, "app", "secret", Some("t_lock"));
        waiters.push(tokio::spawn(async move {
            let mut c = Conn::new(o).await.unwrap();
            c.query_drop("UPDATE t SET n = n + 1 WHERE id = 1")
                .await
                .unwrap();
            c.disconnect().await.unwrap();
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = Instant::now();
    holder.query_drop("COMMIT").await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "COMMIT waited {:?}",
        start.elapsed()
    );
    for w in waiters {
        w.await.unwrap();
    }
    let n: i64 = holder
        .query_first("SELECT n FROM t WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 5);
    holder.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_gives_9001_and_the_session_survives() {
    let mut cfg = config(1);
    cfg.queue_timeout = Duration::from_millis(300);
    let proxy = start(cfg).await;
    let mut a = connect(&proxy, None).await;
    let mut b = connect(&proxy, None).await;
    // A long statement holds the only slot.
    let ctx = proxy.context().clone();
    let long = tokio::spawn(async move {
        a.query_drop("DO SLEEP(1)").await.unwrap();
        a
    });
    assert!(
        eventually(Duration::from_secs(5), || ctx.pool.snapshot().slots_in_use
            == 1)
        .await
    );
    let err = b.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(code_of(&err), Some(9001), "{err}");
    assert!(err.to_string().contains("pool_size=1"), "{err}");
    let a = long.await.unwrap();
    assert_eq!(b.query_first::<u8, _>("SELECT 1").await.unwrap(), Some(1));
    a.disconnect().await.unwrap();
    b.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_client_connections_gives_1040() {
    let mut cfg = config(1);
    cfg.max_client_connections = 2;
    let proxy = start(cfg).await;
    let a = connect(&proxy, None).await;
    let b = connect(&proxy, None).await;
    let err = Conn::new(opts(&proxy, "app", "secret", None))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1040), "{err}");
    drop((a, b));
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn multi_statements_and_procedures_return_every_result_set() {
    fresh_db("t_multi").await;
    let mut d = direct(Some("t_multi")).await;
    d.query_drop("CREATE PROCEDURE two() BEGIN SELECT 1 AS a; SELECT 2 AS b, 3 AS c; END")
        .await
        .unwrap();
    let proxy = start(config(2)).await;
    let mut c = connect(&proxy, Some("t_multi")).await;
    let mut r = c.query_iter("SELECT 1; SELECT 2; DO 0").await.unwrap();
    let a: Vec<u8> = r.collect().await.unwrap();
    let b: Vec<u8> = r.collect().await.unwrap();
    r.drop_result().await.unwrap();
    assert_eq!((a, b), (vec![1], vec![2]));
    let mut r = c.query_iter("CALL two()").await.unwrap();
    let first: Vec<u8> = r.collect().await.unwrap();
    let second: Vec<(u8, u8)> = r.collect().await.unwrap();
    drop(r);
    assert_eq!(first, vec![1]);
    assert_eq!(second, vec![(2, 3)]);
    // The session is in sync afterwards.
    assert_eq!(c.query_first::<u8, _>("SELECT 7").await.unwrap(), Some(7));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_17_mib_query_round_trips() {
    let proxy = start(config(1)).await;
    let mut c = connect(&proxy, None).await;
    let big = "x".repeat(17 << 20);
    let len: u64 = c
        .exec_first("SELECT LENGTH(?)", (big.clone(),))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(len, 17 << 20);
    let back: String = c
        .query_first(format!("SELECT '{big}'"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.len(), 17 << 20);
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_cli_works_through_sluice() {
    let proxy = start(config(2)).await;
    let addr = proxy.local_addr();
    let out = tokio::process::Command::new("mariadb")
        .args([
            "-h",
            &addr.ip().to_string(),
            "-P",
            &addr.port().to_string(),
            "-uapp",
            "-psecret",
            "--batch",
        ])
        .args([
            "-e",
            "SELECT 1 AS one; SELECT DATABASE() AS db; SET @x=5; SELECT @x AS x",
        ])
        .output()
        .await
        .expect("mariadb CLI runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "one\n1\ndb\nNULL\nx\n5\n");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn connection_id_is_sluices_id_on_every_backend() {
    let proxy = start(config(3)).await;
    let mut a = connect(&proxy, None).await;
    let mut others = Vec::new();
    for _ in 0..3 {
        others.push(connect(&proxy, None).await);
    }
    let first: u64 = a
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first,
        u64::from(a.id()),
        "CONNECTION_ID() is the id from the handshake"
    );
    for i in 0..100 {
        // Keep the other clients busy so statements land on different backends.
        let o = &mut others[i % 3];
        let _: Option<u8> = o.query_first("SELECT 1").await.unwrap();
        let id: u64 = a
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id, first);
    }
    let stats = proxy.context().stats.clone();
    assert_eq!(stats.pins_by(PinReason::UntrackedState), 0);
    a.disconnect().await.unwrap();
    for o in others {
        o.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn prepared_statements_are_shared_without_pinning() {
    fresh_db("t_ps").await;
    direct(Some("t_ps"))
        .await
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    direct(Some("t_ps"))
        .await
        .query_drop("INSERT INTO t SELECT seq, seq * 10 FROM seq_1_to_50")
        .await
        .unwrap();
    let mut cfg = config(2);
    cfg.max_prepared_statements_per_backend = 4;
    let proxy = start(cfg).await;
    let mut tasks = Vec::new();
    for c in 0..32u32 {
        // The driver's own statement cache keeps statements open, as real apps do.
        let o: mysql_async::Opts =
            mysql_async::OptsBuilder::from_opts(opts(&proxy, "app", "secret", Some("t_ps")))
                .stmt_cache_size(16)
                .into();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(o).await.unwrap();
            for i in 0..20u32 {
                let id = (c + i) % 50 + 1;
                let v: Option<i32> = conn
                    .exec_first("SELECT v FROM t WHERE id = ?", (id,))
                    .await
                    .unwrap();
                assert_eq!(v, Some(id as i32 * 10));
                let n: Option<i64> = conn
                    .exec_first("SELECT COUNT(*) FROM t WHERE id <= ?", (id,))
                    .await
                    .unwrap();
                assert_eq!(n, Some(id as i64));
                let s: Option<String> = conn
                    .exec_first("SELECT CONCAT(?, '-', ?)", ("a", id))
                    .await
                    .unwrap();
                assert_eq!(s, Some(format!("a-{id}")));
                let _: Vec<(i32, i32)> = conn
                    .exec("SELECT id, v FROM t WHERE id BETWEEN ? AND ?", (id, id + 3))
                    .await
                    .unwrap();
                let _: Option<u8> = conn.exec_first("SELECT ? + 0", (i % 7,)).await.unwrap();
            }
            conn.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let stats = proxy.context().stats.clone();
    for r in PinReason::ALL {
        assert_eq!(stats.pins_by(*r), 0, "no session pinned ({r})");
    }
    let snap = proxy.context().pool.snapshot();
    assert!(snap.open <= 4, "backends {}", snap.open);
    // Every backend stays under the statement cap (counted on sluice's side: the server's
    // global Prepared_stmt_count also sees the other tests running against it).
    let mut per_backend = Vec::new();
    proxy
        .context()
        .pool
        .for_each_idle(|b| per_backend.push(b.stmts.len()));
    assert!(!per_backend.is_empty());
    assert!(
        per_backend.iter().all(|&n| (1..=4).contains(&n)),
        "statements per backend: {per_backend:?}"
    );
    proxy.shutdown().await;
}

/// A client that never closes its statements (a driver without a statement cache, preparing
/// for every execution) holds one id per PREPARE, as on the server: past
/// `max_prepared_statements_per_client` the next PREPARE gets the server's 1461 and the
/// session goes on; closing one makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_a_client_holds_open_are_capped_with_1461() {
    let mut cfg = config(2);
    cfg.max_prepared_statements_per_client = 8;
    let proxy = start(cfg).await;
    let mut conn = connect(&proxy, None).await; // stmt_cache_size(0): nothing is closed
    let mut held = Vec::new();
    for i in 0..8u32 {
        // The same text again and again (shared inside sluice) and other texts.
        let sql = if i % 2 == 0 {
            "SELECT ? + 1".to_string()
        } else {
            format!("SELECT ? + {i}")
        };
        held.push(conn.prep(sql).await.expect("prepared under the cap"));
    }
    let err = conn
        .prep("SELECT ? + 1")
        .await
        .expect_err("one more than the cap");
    assert_eq!(code_of(&err), Some(1461), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("42000"), "{err}");
    assert!(
        err.to_string()
            .contains("max_prepared_statements_per_client"),
        "{err}"
    );
    // The session goes on with what it holds.
    for (i, stmt) in held.iter().enumerate() {
        let add = if i % 2 == 0 { 1 } else { i as u64 };
        let got: Option<u64> = conn.exec_first(stmt, (41u64,)).await.expect("executes");
        assert_eq!(got, Some(41 + add));
    }
    conn.close(held.remove(0)).await.expect("closes");
    let again = conn.prep("SELECT ? + 1").await.expect("room after a close");
    let got: Option<u64> = conn.exec_first(&again, (1u64,)).await.expect("executes");
    assert_eq!(got, Some(2));
    conn.disconnect().await.expect("disconnects");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn warnings_and_last_insert_id_follow_the_session() {
    fresh_db("t_diag").await;
    direct(Some("t_diag"))
        .await
        .query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v TINYINT)")
        .await
        .unwrap();
    let proxy = start(config(3)).await;
    let mut a = connect(&proxy, Some("t_diag")).await;
    let mut others = Vec::new();
    for _ in 0..3 {
        others.push(connect(&proxy, Some("t_diag")).await);
    }
    for round in 0..20usize {
        a.query_drop("SET sql_mode = ''").await.unwrap();
        // A truncation warning, then other clients run, then SHOW WARNINGS.
        a.query_drop("INSERT INTO t (v) VALUES (1000)")
            .await
            .unwrap();
        let id = a.last_insert_id().unwrap();
        for o in others.iter_mut() {
            o.query_drop("INSERT INTO t (v) VALUES (1)").await.unwrap();
        }
        let warnings: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.unwrap();
        assert_eq!(warnings.len(), 1, "round {round}: {warnings:?}");
        assert_eq!(warnings[0].1, 1264, "out of range warning");
        let lid: u64 = a
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(lid, id, "round {round}");
        let _: Option<u8> = others[round % 3].query_first("SELECT 1").await.unwrap();
        let lid: u64 = a
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(lid, id, "round {round}, after others ran");
    }
    a.disconnect().await.unwrap();
    for o in others {
        o.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}
