//! Values a statement leaves for the session's next ones, against direct MariaDB with many
//! sessions at once (`reference`): LAST_INSERT_ID() (never inserted, generated and
//! explicit ids, the `LAST_INSERT_ID(expr)` form, transactions, prepared statements),
//! FOUND_ROWS() and ROW_COUNT() after failing statements, ROW_COUNT() in prepared statements
//! read through a cursor or sent long data.

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;
use crate::reference::*;

const DB: &str = "t_values";

async fn table(c: &mut Conn, name: &str) {
    c.query_drop(format!(
        "CREATE OR REPLACE TABLE {name} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ))
    .await
    .unwrap();
}

/// The LAST_INSERT_ID() of a session, in every way a client reads it.
async fn reads(c: &mut Conn, out: &mut Seen, step: &str) {
    out.push(seen_query(c, &format!("{step} text"), "SELECT LAST_INSERT_ID()").await);
    out.push(
        seen_query(
            c,
            &format!("{step} vars"),
            "SELECT @@last_insert_id, @@identity, LAST_INSERT_ID() + 1",
        )
        .await,
    );
    out.push(seen_exec(c, &format!("{step} prepared"), "SELECT LAST_INSERT_ID()").await);
}

/// A session that inserts (generated and explicit ids), sets the value with
/// LAST_INSERT_ID(expr) in each form, and reads it back after each step; every fourth
/// session never inserts and only reads.
async fn last_insert_id_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let t = format!("{prefix}_{i}");
    table(c, &t).await;
    let mut out = Vec::new();
    reads(c, &mut out, "fresh").await;
    if i.is_multiple_of(4) {
        for n in 0..6 {
            c.query_drop("SELECT 1").await.unwrap();
            reads(c, &mut out, &format!("reader {n}")).await;
        }
        return out;
    }
    let n = 1000 + i;
    out.push(seen_ok(c, "generated", &format!("INSERT INTO {t} (v) VALUES ({i})")).await);
    reads(c, &mut out, "after generated").await;
    out.push(
        seen_ok(
            c,
            "explicit",
            &format!("INSERT INTO {t} (id, v) VALUES ({n}, 0)"),
        )
        .await,
    );
    reads(c, &mut out, "after explicit").await;
    out.push(
        seen_query(
            c,
            "set form",
            &format!("SELECT LAST_INSERT_ID({})", 5000 + i),
        )
        .await,
    );
    c.query_drop("SELECT 1").await.unwrap();
    reads(c, &mut out, "after select form").await;
    out.push(seen_ok(c, "do form", &format!("DO LAST_INSERT_ID({})", 6000 + i)).await);
    reads(c, &mut out, "after do form").await;
    out.push(
        seen_ok(
            c,
            "update form",
            &format!("UPDATE {t} SET id = LAST_INSERT_ID(id) WHERE v = 0"),
        )
        .await,
    );
    reads(c, &mut out, "after update form").await;
    out.push(
        seen_ok(
            c,
            "multi row",
            &format!("INSERT INTO {t} (v) VALUES (1), (2)"),
        )
        .await,
    );
    reads(c, &mut out, "after multi row").await;
    out.push(
        seen_ok(
            c,
            "duplicate",
            &format!("INSERT INTO {t} (id, v) VALUES ({n}, 9)"),
        )
        .await,
    );
    reads(c, &mut out, "after duplicate").await;
    out.push(
        seen_ok(
            c,
            "ignored",
            &format!("INSERT IGNORE INTO {t} (id, v) VALUES ({n}, 9)"),
        )
        .await,
    );
    reads(c, &mut out, "after ignored").await;
    // In a transaction, then after it.
    c.query_drop("BEGIN").await.unwrap();
    out.push(
        seen_ok(
            c,
            "in transaction",
            &format!("INSERT INTO {t} (v) VALUES (3)"),
        )
        .await,
    );
    out.push(seen_query(c, "inside", "SELECT LAST_INSERT_ID()").await);
    c.query_drop("COMMIT").await.unwrap();
    reads(c, &mut out, "after commit").await;
    // A prepared insert, and a read of the value in the statement that inserts.
    c.exec_drop(format!("INSERT INTO {t} (v) VALUES (?)"), (7,))
        .await
        .unwrap();
    out.push(format!("prepared insert id={:?}", c.last_insert_id()));
    reads(c, &mut out, "after prepared insert").await;
    out.push(
        seen_ok(
            c,
            "reads in insert",
            &format!("INSERT INTO {t} (v) VALUES (LAST_INSERT_ID())"),
        )
        .await,
    );
    out.push(
        seen_query(
            c,
            "stored",
            &format!("SELECT v FROM {t} WHERE id = LAST_INSERT_ID()"),
        )
        .await,
    );
    reads(c, &mut out, "last").await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_insert_id_is_the_sessions_own() {
    fresh_db(DB).await;
    matches_direct("LAST_INSERT_ID()", DB, &last_insert_id_script, equal).await;
}

/// What a driver learns about LAST_INSERT_ID()'s column, through sluice as directly, on a
/// session whose value is not the backend's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_insert_id_columns_look_the_same_as_direct() {
    fresh_db("t_values_shape").await;
    let proxy = sluice_at(1, 1).await;
    let mut shapes = Vec::new();
    for target in [Target::Direct, Target::Sluice(&proxy)] {
        let mut other = target.connect(Some("t_values_shape")).await;
        let mut c = target.connect(Some("t_values_shape")).await;
        table(&mut other, &format!("{}_o", target.label())).await;
        other
            .query_drop(format!("INSERT INTO {}_o (v) VALUES (1)", target.label()))
            .await
            .unwrap();
        let mut seen = Vec::new();
        for sql in [
            "SELECT LAST_INSERT_ID()",
            "select last_insert_id() + 0, LAST_INSERT_ID() AS x",
            "SELECT @@last_insert_id",
        ] {
            let result = c.query_iter(sql).await.unwrap();
            let cols: Vec<String> = result
                .columns_ref()
                .iter()
                .map(|col| {
                    format!(
                        "{} {:?} {:?} len={}",
                        col.name_str(),
                        col.column_type(),
                        col.flags(),
                        col.column_length()
                    )
                })
                .collect();
            let rows: Vec<mysql_async::Row> = result.collect_and_drop().await.unwrap();
            seen.push(format!(
                "{sql}: {cols:?} = {:?}",
                rows.iter().map(row_text).collect::<Vec<_>>()
            ));
        }
        shapes.push(seen);
        other.disconnect().await.unwrap();
        c.disconnect().await.unwrap();
    }
    assert_eq!(shapes[1], shapes[0], "through sluice as directly");
    proxy.shutdown().await;
}

/// FOUND_ROWS() and ROW_COUNT() after failing statements of several kinds, and after the
/// diagnostics statements (which leave them, or one of them, as they were).
async fn outcome_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let t = format!("{prefix}_{i}");
    table(c, &t).await;
    c.query_drop(format!("INSERT INTO {t} (v) SELECT seq FROM seq_1_to_30"))
        .await
        .unwrap();
    let mut out = Vec::new();
    let limit = 10 + i % 13;
    let failing = [
        format!("SELECT * FROM no_such_{i}"),
        "SELEKT 1".to_string(),
        format!("INSERT INTO {t} (id, v) VALUES (1, 1)"),
    ];
    let bad = &failing[i % failing.len()];
    c.query_drop(format!("SELECT * FROM {t} LIMIT {limit}"))
        .await
        .unwrap();
    out.push(seen_ok(c, "failing", bad).await);
    // A statement without a result set leaves FOUND_ROWS() as it was.
    c.query_drop("DO 1").await.unwrap();
    out.push(seen_query(c, "after error", "SELECT FOUND_ROWS(), ROW_COUNT()").await);
    c.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id <= {limit}"))
        .await
        .unwrap();
    out.push(seen_ok(c, "failing again", bad).await);
    out.push(
        seen_query(
            c,
            "after update and error",
            "SELECT ROW_COUNT(), FOUND_ROWS()",
        )
        .await,
    );
    // COM_PING sets ROW_COUNT() to 0 on the server (sluice answers it itself).
    c.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id <= 2"))
        .await
        .unwrap();
    c.ping().await.unwrap();
    out.push(seen_query(c, "after ping", "SELECT ROW_COUNT(), FOUND_ROWS()").await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_and_row_count_after_errors_are_the_sessions_own() {
    fresh_db("t_outcome").await;
    matches_direct(
        "FOUND_ROWS()/ROW_COUNT()",
        "t_outcome",
        &outcome_script,
        equal,
    )
    .await;
}

/// The same, for a session that reads them right after its failing statement, without the
/// statement between (so its first read is the one that could land elsewhere), and after
/// SHOW WARNINGS and GET DIAGNOSTICS, which change neither value or only ROW_COUNT().
async fn outcome_after_diagnostics_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let t = format!("{prefix}_{i}");
    table(c, &t).await;
    c.query_drop(format!("INSERT INTO {t} (v) SELECT seq FROM seq_1_to_30"))
        .await
        .unwrap();
    let limit = 5 + i % 17;
    let mut out = Vec::new();
    c.query_drop(format!("SELECT * FROM {t} LIMIT {limit}"))
        .await
        .unwrap();
    match i % 3 {
        0 => out.push(seen_ok(c, "failing", &format!("SELECT * FROM no_such_{i}")).await),
        1 => out.push(seen_query(c, "warnings", "SHOW WARNINGS").await),
        _ => out.push(seen_ok(c, "update", &format!("UPDATE {t} SET v = 0 WHERE id < 4")).await),
    }
    out.push(seen_query(c, "then", "SELECT FOUND_ROWS(), ROW_COUNT()").await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_right_after_a_failing_statement_is_the_sessions_own() {
    fresh_db("t_outcome2").await;
    matches_direct(
        "FOUND_ROWS() right after",
        "t_outcome2",
        &outcome_after_diagnostics_script,
        equal,
    )
    .await;
}

/// The server's Questions counter (its own statement counts too: the caller subtracts it).
async fn questions(root: &mut Conn) -> u64 {
    let row: Option<(String, u64)> = root
        .query_first("SHOW GLOBAL STATUS LIKE 'Questions'")
        .await
        .unwrap();
    row.unwrap().1
}

/// What sluice makes a private server run per client statement, as the server counts it:
/// a plain SELECT costs it one statement (nothing added on the ordinary path); an autocommit
/// INSERT two (its LAST_INSERT_ID() read back, in the same write), and three while sessions
/// take turns on one backend (the session's value SET first, in the same write too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_runs_per_statement() {
    let server = private_server().await;
    let root_opts = opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    );
    let mut root = Conn::new(root_opts).await.unwrap();
    root.query_drop("CREATE DATABASE t_cost").await.unwrap();
    let mut cfg = config_for_local(&server, 1);
    cfg.pipeline_depth = 1;
    let proxy = start(cfg).await;
    let mut a = connect(&proxy, Some("t_cost")).await;
    let mut b = connect(&proxy, Some("t_cost")).await;
    table(&mut a, "t").await;
    const N: u64 = 100;
    let mut per = Vec::new();
    for phase in ["select", "insert", "insert, two sessions"] {
        let before = questions(&mut root).await;
        for i in 0..N {
            match phase {
                "select" => a.query_drop("SELECT 1").await.unwrap(),
                "insert" => a.query_drop("INSERT INTO t (v) VALUES (1)").await.unwrap(),
                _ => {
                    let c = if i % 2 == 0 { &mut a } else { &mut b };
                    c.query_drop("INSERT INTO t (v) VALUES (2)").await.unwrap()
                }
            }
        }
        let ran = questions(&mut root).await - before - 1;
        eprintln!("{phase}: the server ran {ran} statements for {N}");
        per.push(ran as f64 / N as f64);
    }
    assert_eq!(per[0], 1.0, "a plain SELECT costs the server one statement");
    assert!((per[1] - 2.0).abs() < 0.05, "INSERT, read back: {}", per[1]);
    assert!(
        (per[2] - 3.0).abs() < 0.05,
        "INSERT, SET and read back: {}",
        per[2]
    );
    // And the values are each session's own.
    let (ida, idb): (Option<u64>, Option<u64>) = (
        a.query_first("SELECT LAST_INSERT_ID()").await.unwrap(),
        b.query_first("SELECT LAST_INSERT_ID()").await.unwrap(),
    );
    assert_eq!((ida, idb), (Some(2 * N - 1), Some(2 * N)));
    for c in [a, b] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// Prepared statements reading ROW_COUNT(): with a cursor, and with long data
// ---------------------------------------------------------------------------------------

const RAW_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// A raw session for what mysql_async does not send: cursors, long data.
struct RawSession(crate::wire::Wire);

impl RawSession {
    async fn login(target: Target<'_>, db: &str) -> RawSession {
        let w = match target {
            Target::Direct => {
                let s = server();
                let addr = format!("{}:{}", s.host, s.port).parse().unwrap();
                crate::wire::Wire::login(addr, APP_USER, APP_PASSWORD).await
            }
            Target::Sluice(p) => {
                let (user, password) = login_for(p, "app", "secret");
                crate::wire::Wire::login(p.local_addr(), user, password).await
            }
        };
        let mut r = RawSession(w.expect("raw login"));
        assert_eq!(
            r.simple(0x03, format!("USE {db}").as_bytes()).await[0],
            0x00
        );
        r
    }

    async fn packet(&mut self) -> Vec<u8> {
        self.0.packet(RAW_WAIT).await.expect("a packet").1
    }

    /// A command answered by one packet (OK or ERR): that packet.
    async fn simple(&mut self, code: u8, body: &[u8]) -> Vec<u8> {
        self.0.command(code, body).await.unwrap();
        self.packet().await
    }

    /// COM_STMT_PREPARE: the statement id (definitions read and dropped).
    async fn prepare(&mut self, sql: &str) -> u32 {
        self.0.command(0x16, sql.as_bytes()).await.unwrap();
        let ok = self.packet().await;
        assert_eq!(ok[0], 0x00, "prepare {sql}: {ok:?}");
        let columns = u16::from_le_bytes([ok[5], ok[6]]);
        let params = u16::from_le_bytes([ok[7], ok[8]]);
        for n in [params, columns] {
            for _ in 0..(if n > 0 { n + 1 } else { 0 }) {
                self.packet().await;
            }
        }
        u32::from_le_bytes(ok[1..5].try_into().unwrap())
    }

    /// An answer with a result set or not, as text: the rows as their bytes in hex, or
    /// `cursor` when one was opened, or the first byte of an OK / ERR.
    async fn answer(&mut self) -> String {
        let first = self.packet().await;
        if first[0] == 0x00 || first[0] == 0xFF {
            return format!("{:02x}", first[0]);
        }
        for _ in 0..first[0] {
            self.packet().await;
        }
        let eof = self.packet().await;
        if u16::from_le_bytes([eof[3], eof[4]]) & 0x0040 != 0 {
            return "cursor".into();
        }
        self.rows().await
    }

    /// Rows up to an EOF (or an ERR), in hex.
    async fn rows(&mut self) -> String {
        let mut rows = Vec::new();
        loop {
            let p = self.packet().await;
            if p[0] == 0xFF || (p[0] == 0xFE && p.len() < 9) {
                rows.push(format!("end {:02x}", p[0]));
                return rows.join(" ");
            }
            rows.push(p.iter().map(|b| format!("{b:02x}")).collect());
        }
    }
}

/// A prepared `SELECT ROW_COUNT()` read through a cursor, and `SELECT ?, ROW_COUNT()` whose
/// parameter comes as long data, each after an INSERT of as many rows as the session's
/// number and the round say: what the session's own statement left.
async fn cursor_and_long_data_script(i: usize, prefix: &str, r: &mut RawSession) -> Seen {
    let t = format!("{prefix}_{i}");
    r.simple(
        0x03,
        format!("CREATE OR REPLACE TABLE {t} (a INT)").as_bytes(),
    )
    .await;
    let cursor = r.prepare("SELECT ROW_COUNT() AS rc").await;
    let fed = r.prepare("SELECT ?, ROW_COUNT()").await;
    let insert = |n: usize| {
        let values = vec!["(1)"; n].join(", ");
        format!("INSERT INTO {t} VALUES {values}")
    };
    let mut out = Vec::new();
    for round in 0..3 {
        r.simple(0x03, insert(1 + i + round).as_bytes()).await;
        // EXECUTE with CURSOR_TYPE_READ_ONLY, then FETCH.
        let mut exec = cursor.to_le_bytes().to_vec();
        exec.push(0x01);
        exec.extend_from_slice(&1u32.to_le_bytes());
        r.0.command(0x17, &exec).await.unwrap();
        out.push(format!("cursor {round}: {}", r.answer().await));
        let mut fetch = cursor.to_le_bytes().to_vec();
        fetch.extend_from_slice(&5u32.to_le_bytes());
        r.0.command(0x1C, &fetch).await.unwrap();
        out.push(format!("fetched {round}: {}", r.rows().await));
        r.simple(0x1A, &cursor.to_le_bytes()).await;
        r.simple(0x03, insert(2 + i + round).as_bytes()).await;
        // SEND_LONG_DATA for parameter 0 (no answer), then EXECUTE with its type bound.
        let mut long = fed.to_le_bytes().to_vec();
        long.extend_from_slice(&0u16.to_le_bytes());
        long.extend_from_slice(format!("long {i}").as_bytes());
        r.0.command(0x18, &long).await.unwrap();
        let mut exec = fed.to_le_bytes().to_vec();
        exec.push(0x00);
        exec.extend_from_slice(&1u32.to_le_bytes());
        exec.extend_from_slice(&[0x00, 0x01, 0xFE, 0x00]);
        r.0.command(0x17, &exec).await.unwrap();
        out.push(format!("long data {round}: {}", r.answer().await));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_row_count_through_a_cursor_or_with_long_data_is_the_sessions_own() {
    const SESSIONS: usize = 6;
    let db = "t_values_cursor";
    fresh_db(db).await;
    async fn run(target: Target<'_>, db: &str, prefix: &str) -> Vec<Seen> {
        let mut sessions = Vec::new();
        for _ in 0..SESSIONS {
            sessions.push(RawSession::login(target, db).await);
        }
        let runs = sessions
            .iter_mut()
            .enumerate()
            .map(|(i, r)| cursor_and_long_data_script(i, prefix, r));
        futures_util::future::join_all(runs).await
    }
    let reference = run(Target::Direct, db, "d").await;
    // Session 1's first cursor reads the 2 of its INSERT of two rows.
    assert_eq!(
        reference[1][1], "fetched 0: 00000200000000000000 end fe",
        "the direct reference"
    );
    let mut failed = Vec::new();
    for (n, (pool, depth)) in CELLS.iter().enumerate() {
        let proxy = sluice_at(*pool, *depth).await;
        let seen = run(Target::Sluice(&proxy), db, &format!("s{n}")).await;
        proxy.shutdown().await;
        let diff = differences(&reference, &seen, |a, b| a == b);
        if !diff.is_empty() {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}:\n{}",
                diff.join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
