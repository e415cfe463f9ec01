//! A prepared statement runs with the parse its own session prepared it under: the same
//! text prepared by sessions with other sql_modes, character sets or default databases is
//! another statement, and one prepared again on another backend is prepared under the
//! state its client prepared it in, even after the session changed that state. Against
//! direct MariaDB with many sessions at once (`reference`).

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};

use crate::harness::*;
use crate::reference::*;

const DB: &str = "t_parses";

/// Parsed under PIPES_AS_CONCAT,ANSI_QUOTES: ('10', the `name` column); under '': ('1', 'name').
const QUOTED: &str = "SELECT CONCAT(1 || 0), CONCAT(\"name\") FROM p";
/// Typed by the connection's character set and collation.
const CHARSET: &str = "SELECT CHARSET('x'), COLLATION('x'), 'é' = 'e'";
/// Resolved in the session's default database.
const SCHEMA: &str = "SELECT v FROM t";

/// Database `db` with table p, one row.
async fn with_p(db: &str) -> Conn {
    fresh_db(db).await;
    let mut c = direct(Some(db)).await;
    c.query_drop("CREATE TABLE p (name VARCHAR(10))")
        .await
        .unwrap();
    c.query_drop("INSERT INTO p VALUES ('column')")
        .await
        .unwrap();
    c
}

async fn setup() {
    let mut c = with_p(DB).await;
    fresh_db("t_parses_a").await;
    fresh_db("t_parses_b").await;
    for (db, v) in [("t_parses_a", "in a"), ("t_parses_b", "in b")] {
        c.query_drop(format!("CREATE TABLE {db}.t (v VARCHAR(10))"))
            .await
            .unwrap();
        c.query_drop(format!("INSERT INTO {db}.t VALUES ('{v}')"))
            .await
            .unwrap();
    }
    c.disconnect().await.unwrap();
}

async fn exec_text(c: &mut Conn, stmt: &mysql_async::Statement) -> String {
    match c.exec::<Row, _, _>(stmt, ()).await {
        Ok(rows) => rows.iter().map(row_text).collect::<Vec<_>>().join(" / "),
        Err(e) => format!("ERR {:?}", code_of(&e)),
    }
}

/// Half the sessions under ANSI quotes, half not, each preparing the same texts and
/// executing them many times, then changing its state and executing again (the
/// statement keeps its parse; a new PREPARE takes the new state).
async fn parse_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    let ansi = i.is_multiple_of(2);
    let (mode, other) = if ansi {
        ("PIPES_AS_CONCAT,ANSI_QUOTES", "")
    } else {
        ("", "PIPES_AS_CONCAT,ANSI_QUOTES")
    };
    let names = if i.is_multiple_of(3) {
        "latin1"
    } else {
        "utf8mb4"
    };
    let db = if i % 4 < 2 {
        "t_parses_a"
    } else {
        "t_parses_b"
    };
    c.query_drop(format!("SET sql_mode = '{mode}'"))
        .await
        .unwrap();
    c.query_drop(format!("SET NAMES {names}")).await.unwrap();
    c.query_drop(format!("USE {db}")).await.unwrap();
    let quoted = c.prep(QUOTED.replace(" p", " t_parses.p")).await.unwrap();
    let charset = c.prep(CHARSET).await.unwrap();
    let schema = c.prep(SCHEMA).await.unwrap();
    let mut out = Vec::new();
    for round in 0..12 {
        for (what, s) in [
            ("quoted", &quoted),
            ("charset", &charset),
            ("schema", &schema),
        ] {
            out.push(format!("{round} {what}: {}", exec_text(c, s).await));
        }
        if round == 5 {
            // The statements keep the parse they were prepared with.
            c.query_drop(format!("SET sql_mode = '{other}'"))
                .await
                .unwrap();
            c.query_drop("SET NAMES utf8mb4 COLLATE utf8mb4_bin")
                .await
                .unwrap();
            c.query_drop("USE t_parses").await.unwrap();
        }
    }
    // A new PREPARE takes the state in force now (another text: a driver's statement cache,
    // direct mysql_async's, would hand back the first one).
    let again = c
        .prep(QUOTED.replace(" p", " t_parses.p /* again */"))
        .await
        .unwrap();
    out.push(format!("prepared again: {}", exec_text(c, &again).await));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_keep_their_own_parse() {
    setup().await;
    matches_direct("prepared parses", DB, &parse_script, equal).await;
}

/// A session prepares under ANSI quotes, then changes sql_mode and character set; every
/// backend it used is then held by other sessions' transactions, so its next executions
/// prepare the statement on new backends: under the parse the client prepared it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_prepared_again_elsewhere_keeps_its_parse() {
    const DB: &str = "t_parses_again";
    with_p(DB).await.disconnect().await.unwrap();
    let proxy = sluice_at(4, 1).await;
    let mut c = connect(&proxy, Some(DB)).await;
    c.query_drop("SET sql_mode = 'PIPES_AS_CONCAT,ANSI_QUOTES'")
        .await
        .unwrap();
    c.query_drop("SET NAMES latin1").await.unwrap();
    let quoted = c.prep(QUOTED).await.unwrap();
    let charset = c.prep(CHARSET).await.unwrap();
    let first = (
        exec_text(&mut c, &quoted).await,
        exec_text(&mut c, &charset).await,
    );
    c.query_drop("SET sql_mode = ''").await.unwrap();
    c.query_drop("SET NAMES utf8mb4").await.unwrap();
    let mut holders = Vec::new();
    for round in 0..3 {
        let mut h = connect(&proxy, Some(DB)).await;
        h.query_drop("BEGIN").await.unwrap();
        h.query_drop("SELECT 1 FROM p").await.unwrap();
        holders.push(h);
        let again = (
            exec_text(&mut c, &quoted).await,
            exec_text(&mut c, &charset).await,
        );
        assert_eq!(
            again, first,
            "round {round}: prepared again under another parse"
        );
    }
    assert_eq!(first.0, "10|column");
    // The session's own state is as it set it.
    let mode: String = c.query_first("SELECT @@sql_mode").await.unwrap().unwrap();
    assert_eq!(mode, "");
    let cs: String = c
        .query_first("SELECT @@character_set_client")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cs, "utf8mb4");
    for h in holders {
        h.disconnect().await.unwrap();
    }
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}
