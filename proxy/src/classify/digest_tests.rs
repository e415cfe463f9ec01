//! The normaliser, table by table: one row per statement shape (input, normalised text).

use super::*;

fn text(sql: &str) -> String {
    String::from_utf8(digest(sql.as_bytes(), Quoting::Backslash).text().to_vec()).unwrap()
}

fn id(sql: &str) -> DigestId {
    digest(sql.as_bytes(), Quoting::Backslash).id
}

/// sysbench oltp_read_write's statements, with the texts they normalise to.
const SYSBENCH: &[(&str, &str)] = &[
    ("SELECT c FROM sbtest1 WHERE id=5012", "SELECT c FROM sbtest1 WHERE id = ?"),
    (
        "SELECT c FROM sbtest1 WHERE id BETWEEN 4990 AND 5089",
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
    ),
    (
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 4990 AND 5089",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
    ),
    (
        "SELECT c FROM sbtest1 WHERE id BETWEEN 4990 AND 5089 ORDER BY c",
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
    ),
    (
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 4990 AND 5089 ORDER BY c",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
    ),
    (
        "UPDATE sbtest1 SET k=k+1 WHERE id=5013",
        "UPDATE sbtest1 SET k = k + ? WHERE id = ?",
    ),
    (
        "UPDATE sbtest1 SET c='68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574-28203206787-41238978918-19503783441' WHERE id=5014",
        "UPDATE sbtest1 SET c = ? WHERE id = ?",
    ),
    ("DELETE FROM sbtest1 WHERE id=5015", "DELETE FROM sbtest1 WHERE id = ?"),
    (
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5015, 4993, '22195207048-70116052123-74140395089-76317954521-98694025897-82258296654-54981766549-02541442722-40102283217-81349716339', '63649541316-44591290829-97584154185-80919587604-54224446830')",
        "INSERT INTO sbtest1(id, k, c, pad) VALUES (?+)",
    ),
    ("BEGIN", "BEGIN"),
    ("COMMIT", "COMMIT"),
];

#[test]
fn sysbench_statements() {
    for (sql, want) in SYSBENCH {
        assert_eq!(text(sql), *want, "{sql}");
    }
}

#[test]
fn literals_become_placeholders() {
    for (sql, want) in [
        (
            "SELECT * FROM t WHERE id = -5",
            "SELECT * FROM t WHERE id = - ?",
        ),
        (
            "SELECT 1.5e3, .5, 0x1F, 0b01, 1e-3, 12.",
            "SELECT ?, ?, ?, ?, ?, ?",
        ),
        (
            "SELECT N'abc', b'0101', X'41', _utf8mb4'x', _binary 'y', DATE '2020-01-01'",
            "SELECT ?, ?, ?, ?, ?, DATE ?",
        ),
        (
            "SELECT @a, @@session.sql_mode, NULL, TRUE FROM t WHERE c IS NULL AND d IS NOT NULL",
            "SELECT @a, @@session.sql_mode, ?, TRUE FROM t WHERE c IS NULL AND d IS NOT NULL",
        ),
        (
            "SELECT c FROM t WHERE c LIKE 'a%' LIMIT 10, 20",
            "SELECT c FROM t WHERE c LIKE ? LIMIT ?, ?",
        ),
        (
            "SELECT * FROM t LIMIT 5 OFFSET 10",
            "SELECT * FROM t LIMIT ? OFFSET ?",
        ),
        ("SELECT 'a' 'b'", "SELECT ? ?"),
        ("SELECT \"dq\" FROM t", "SELECT ? FROM t"),
        ("SELECT a-1, a - -1 FROM t", "SELECT a - ?, a - - ? FROM t"),
        ("SELECT 1abc, t1.c2 FROM t1", "SELECT 1abc, t1.c2 FROM t1"),
        ("SET @x := 5", "SET @x := ?"),
        ("CALL p(1, 'x')", "CALL p(?, ?)"),
        (
            "SELECT IF(k>1, 'a', 'b') FROM t",
            "SELECT IF(k > ?, ?, ?) FROM t",
        ),
        (
            "SELECT c FROM t WHERE id >= 5 AND id <> 7 AND id != 8 AND k <=> NULL",
            "SELECT c FROM t WHERE id >= ? AND id <> ? AND id != ? AND k <=> ?",
        ),
        ("SELECT a->>'$.b' FROM t", "SELECT a ->> ? FROM t"),
        (
            "CREATE USER 'u'@'localhost' IDENTIFIED BY 'pw'",
            "CREATE USER ?@'localhost' IDENTIFIED BY ?",
        ),
    ] {
        assert_eq!(text(sql), want, "{sql}");
    }
}

#[test]
fn in_lists_and_rows_fold() {
    for (sql, want) in [
        (
            "SELECT * FROM t WHERE id IN (1)",
            "SELECT * FROM t WHERE id IN (?+)",
        ),
        (
            "SELECT * FROM t WHERE id IN (1,2,3)",
            "SELECT * FROM t WHERE id IN (?+)",
        ),
        (
            "SELECT * FROM t WHERE id NOT IN (-1, +2) AND k IN ('a')",
            "SELECT * FROM t WHERE id NOT IN (?+) AND k IN (?+)",
        ),
        (
            "SELECT * FROM t WHERE a IN (1, b)",
            "SELECT * FROM t WHERE a IN (?, b)",
        ),
        (
            "SELECT * FROM t WHERE id IN (SELECT id FROM t WHERE k=1)",
            "SELECT * FROM t WHERE id IN (SELECT id FROM t WHERE k = ?)",
        ),
        (
            "SELECT * FROM t WHERE (id, k) IN ((1,2),(3,4),(5,6))",
            "SELECT * FROM t WHERE (id, k) IN ((?+) /* , ... */)",
        ),
        (
            "SELECT * FROM t WHERE id IN ()",
            "SELECT * FROM t WHERE id IN ()",
        ),
        (
            "INSERT INTO t (id, k) VALUES (10,1),(11,2),(12,3)",
            "INSERT INTO t(id, k) VALUES (?+) /* , ... */",
        ),
        (
            "INSERT INTO t VALUES (?, ?), (?, ?)",
            "INSERT INTO t VALUES (?+) /* , ... */",
        ),
        ("INSERT INTO t VALUE (1)", "INSERT INTO t VALUE (?+)"),
        (
            "INSERT INTO t (a, b) VALUES (1, NOW()), (2, NOW()), (3, NOW())",
            "INSERT INTO t(a, b) VALUES (?, NOW()) /* , ... */",
        ),
        (
            "INSERT INTO t (a, b) VALUES (1, NOW()), (2, 3)",
            "INSERT INTO t(a, b) VALUES (?, NOW()), (?+)",
        ),
        (
            "INSERT INTO t VALUES (1),(2) ON DUPLICATE KEY UPDATE k=VALUES(k)",
            "INSERT INTO t VALUES (?+) /* , ... */ ON DUPLICATE KEY UPDATE k = VALUES (k)",
        ),
        // Not a list context: a call's arguments keep their number.
        (
            "SELECT f(1, 2), (1, 2) FROM t",
            "SELECT f(?, ?), (?, ?) FROM t",
        ),
    ] {
        assert_eq!(text(sql), want, "{sql}");
    }
    // Any length: one digest, and nothing of a long list is kept.
    let long: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    let sql = format!("SELECT * FROM t WHERE id IN ({})", long.join(","));
    let d = digest(sql.as_bytes(), Quoting::Backslash);
    assert_eq!(d.id, id("SELECT * FROM t WHERE id IN (7)"));
    assert_eq!(d.text(), b"SELECT * FROM t WHERE id IN (?+)");
    let rows: Vec<String> = (0..5_000).map(|i| format!("({i}, 'r{i}')")).collect();
    let sql = format!("INSERT INTO t VALUES {}", rows.join(", "));
    assert_eq!(
        text(&sql),
        "INSERT INTO t VALUES (?+) /* , ... */",
        "5000 rows"
    );
    assert_eq!(id(&sql), id("INSERT INTO t VALUES (1,'a'),(2,'b')"));
}

#[test]
fn comments_and_whitespace_are_dropped_and_case_is_kept() {
    let base = id("SELECT c FROM t WHERE id = 1");
    for sql in [
        "SELECT c FROM t WHERE id=1",
        "  SELECT\n\tc   FROM t\r\nWHERE id =\n 99  ",
        "SELECT /* hi */ c FROM t WHERE id = 1 -- trailing\n",
        "SELECT c FROM t WHERE id = 1 # hash comment",
        "SELECT c FROM t WHERE id = 1;",
        "/* sluice:min_gtid=0-1-5 */ SELECT c FROM t WHERE id = 1",
    ] {
        assert_eq!(id(sql), base, "{sql}");
    }
    assert_ne!(id("select c from t where id = 1"), base, "case is kept");
    assert_ne!(
        id("SELECT `c` FROM t WHERE id = 1"),
        base,
        "quoting is kept"
    );
    assert_eq!(
        text("SELECT /*!40001 SQL_NO_CACHE */ c FROM t"),
        "SELECT SQL_NO_CACHE c FROM t",
        "an executable comment's SQL stays"
    );
    assert_eq!(
        text("SELECT '/* not a comment */' FROM t"),
        "SELECT ? FROM t"
    );
    assert_eq!(text("SELECT 1; SELECT 2;"), "SELECT ?; SELECT ?");
    assert_eq!(text("SELECT COUNT(*) FROM t"), "SELECT COUNT(*) FROM t");
    assert_eq!(
        text("SELECT f.c FROM d.t AS f WHERE f.id=1"),
        "SELECT f.c FROM d.t AS f WHERE f.id = ?"
    );
    assert_eq!(
        text("SELECT `c` FROM `t` WHERE `id`=1"),
        "SELECT `c` FROM `t` WHERE `id` = ?"
    );
    assert_eq!(text(""), "");
    assert_eq!(text(" ;; "), "");
}

#[test]
fn prepared_statement_text_shares_the_query_digest() {
    assert_eq!(
        id("SELECT c FROM sbtest1 WHERE id=?"),
        id("SELECT c FROM sbtest1 WHERE id=5012")
    );
    assert_eq!(
        id("INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)"),
        id(SYSBENCH[8].0)
    );
    assert_eq!(
        id("SELECT * FROM t WHERE id IN (?, ?, ?)"),
        id("SELECT * FROM t WHERE id IN (1)")
    );
}

#[test]
fn strings_follow_the_sessions_quoting_rule() {
    // With backslash escapes, 'a\' , id FROM t' is one unterminated string.
    let sql = b"SELECT 'a\\' , id FROM t";
    assert_eq!(digest(sql, Quoting::Backslash).text(), b"SELECT ?");
    assert_eq!(
        digest(sql, Quoting::QuotesOnly).text(),
        b"SELECT ?, id FROM t"
    );
    for sql in [
        "SELECT c FROM t WHERE c = 'it''s'",
        "SELECT c FROM t WHERE c = 'it\\'s'",
        "SELECT c FROM t WHERE c = \"say \\\"x\\\"\"",
        "SELECT c FROM t WHERE c = 'a;b -- c /* d'",
    ] {
        assert_eq!(text(sql), "SELECT c FROM t WHERE c = ?", "{sql}");
    }
}

#[test]
fn ids_are_xxh3_of_the_text_and_read_back() {
    let d = digest(b"SELECT 1", Quoting::Backslash);
    assert_eq!(d.id.0, twox_hash::XxHash3_64::oneshot(b"SELECT ?"));
    let shown = d.id.to_string();
    assert!(shown.starts_with("0x") && shown.len() == 18, "{shown}");
    let parse = crate::config::parse_digest_id;
    assert_eq!(parse(&shown).map(DigestId), Ok(d.id));
    assert_eq!(parse(&shown.to_uppercase()[2..]).map(DigestId), Ok(d.id));
}

#[test]
fn a_huge_statement_keeps_a_bounded_text_and_a_whole_id() {
    let body: Vec<String> = (0..20_000).map(|i| format!("c{i} = {i}")).collect();
    let sql = format!("SELECT * FROM t WHERE {}", body.join(" OR "));
    let d = digest(sql.as_bytes(), Quoting::Backslash);
    assert!(d.is_truncated());
    assert!(d.text().len() <= TEXT_CAP + 64, "{}", d.text().len());
    assert!(d
        .text()
        .starts_with(b"SELECT * FROM t WHERE c0 = ? OR c1 = ?"));
    // The id covers the whole text: streaming equals one-shot XXH3 of the full text.
    let full: Vec<String> = (0..20_000).map(|i| format!("c{i} = ?")).collect();
    let full = format!("SELECT * FROM t WHERE {}", full.join(" OR "));
    assert_eq!(d.id.0, twox_hash::XxHash3_64::oneshot(full.as_bytes()));
    let other = sql.replace("c19999 = 19999", "c19999 = 1 AND x = 2");
    assert_ne!(digest(other.as_bytes(), Quoting::Backslash).id, d.id);
}

#[test]
fn the_classifier_feeds_the_same_digest_in_its_own_pass() {
    let mut statements: Vec<String> = SYSBENCH.iter().map(|(s, _)| s.to_string()).collect();
    statements.extend(
        [
            "SELECT * FROM t WHERE (id, k) IN ((1,2),(3,4))",
            "INSERT INTO t VALUES (1,'a'),(2,'b') ON DUPLICATE KEY UPDATE k=VALUES(k)",
            "SET @x := 5; SELECT @x, 'a;b' FROM t -- c\n",
            "SET STATEMENT max_statement_time=1 FOR SELECT SLEEP(2)",
            "SELECT GET_LOCK('a', 1), CONNECTION_ID(), ROW_COUNT()",
            "/*!40101 SET NAMES utf8mb4 */",
            "SELECT 'a\\' , id FROM t",
            "USE `shop`",
        ]
        .map(String::from),
    );
    for sql in &statements {
        for quoting in [Quoting::Backslash, Quoting::QuotesOnly] {
            let (class, d) = super::super::classify_digested(sql.as_bytes(), quoting);
            assert_eq!(d, digest(sql.as_bytes(), quoting), "{sql}");
            assert_eq!(
                class,
                super::super::classify_in(sql.as_bytes(), quoting),
                "{sql}"
            );
        }
    }
}

#[test]
fn hostile_input_is_bounded() {
    let deep = "(".repeat(100_000) + &")".repeat(100_000);
    let d = digest(format!("SELECT {deep}").as_bytes(), Quoting::Backslash);
    assert!(d.text().len() <= TEXT_CAP + 64);
    for sql in [
        "))))",
        "IN (((",
        "VALUES (1),",
        "SELECT 'open",
        "x'",
        "(,,,",
        "- + - +",
    ] {
        let _ = digest(sql.as_bytes(), Quoting::Backslash);
    }
}

/// The normaliser's cost per statement, printed (`cargo test --release -p sluice --lib
/// digest_cost -- --nocapture`); a benchmark, so it asserts only that it ran.
#[test]
fn digest_cost() {
    let rounds = if cfg!(debug_assertions) {
        2_000
    } else {
        200_000
    };
    let mut total = std::time::Duration::ZERO;
    for (sql, _) in SYSBENCH {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(digest(
                std::hint::black_box(sql.as_bytes()),
                Quoting::Backslash,
            ));
        }
        let per = start.elapsed() / rounds;
        total += per;
        let classify_start = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(super::super::classify(std::hint::black_box(sql.as_bytes())));
        }
        let classify_per = classify_start.elapsed() / rounds;
        let lex_start = std::time::Instant::now();
        for _ in 0..rounds {
            let tokens = Lexer::new(std::hint::black_box(sql.as_bytes()), Quoting::Backslash);
            std::hint::black_box(tokens.count());
        }
        let lex_per = lex_start.elapsed() / rounds;
        let both_start = std::time::Instant::now();
        for _ in 0..rounds {
            let sql = std::hint::black_box(sql.as_bytes());
            std::hint::black_box(super::super::classify_digested(sql, Quoting::Backslash));
        }
        let both_per = both_start.elapsed() / rounds;
        println!(
            "digest {per:>8?} (lexing alone {lex_per:>7?})  classify {classify_per:>8?}  both in one call {both_per:>8?}  {} bytes  {}",
            sql.len(),
            &sql[..sql.len().min(60)]
        );
    }
    println!(
        "mean digest cost over sysbench statements: {:?}",
        total / SYSBENCH.len() as u32
    );
    assert!(total > std::time::Duration::ZERO);
}
