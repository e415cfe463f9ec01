//! Table tests for [`ReadSafety`]: one row per rule of `read.rs`, plus keywords hidden in
//! strings, comments and identifiers, which must not change the verdict.

use super::*;
use ReadSafety::{ReadOnlyBegin, ReplicaSafe, WriterOnly as W};
use WriterOnly as Why;

#[test]
fn read_safety_of_every_rule() {
    #[rustfmt::skip]
    let rows: &[(&str, ReadSafety)] = &[
        // Reads.
        ("SELECT 1", ReplicaSafe),
        ("select id, val from t where id between 1 and 20 order by val desc limit 5", ReplicaSafe),
        ("(SELECT a FROM t) UNION (SELECT b FROM u)", ReplicaSafe),
        ("TABLE t", ReplicaSafe),
        ("VALUES (1), (2)", ReplicaSafe),
        ("WITH c AS (SELECT 1 AS x) SELECT x FROM c", ReplicaSafe),
        ("WITH c(x, y) AS (SELECT 1, 2) SELECT x FROM c", ReplicaSafe),
        ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT n FROM c", ReplicaSafe),
        ("SELECT COUNT(*), MAX(a), CONCAT(b, 'x'), NOW(), UUID() FROM t WHERE a IN (1, 2)", ReplicaSafe),
        ("SELECT CAST(a AS DECIMAL(10, 2)), IFNULL(b, 0) FROM t JOIN (SELECT 1) d ON (1)", ReplicaSafe),
        ("SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", ReplicaSafe),
        ("SELECT CONNECTION_ID()", ReplicaSafe),
        ("SELECT @@server_id", ReplicaSafe),
        ("SELECT @x + 1 FROM t", ReplicaSafe),
        ("SELECT UUID_SHORT(), RAND()", ReplicaSafe),
        ("SELECT a FROM t FOR SYSTEM_TIME ALL", ReplicaSafe),
        ("SELECT 1; SELECT 2", ReplicaSafe),
        ("DESCRIBE t", ReplicaSafe),
        ("DESC t", ReplicaSafe),
        ("EXPLAIN SELECT * FROM t", ReplicaSafe),
        ("EXPLAIN UPDATE t SET a = 1", ReplicaSafe), // EXPLAIN does not run it
        ("SHOW TABLES", ReplicaSafe),
        ("SHOW FULL TABLES FROM app", ReplicaSafe),
        ("SHOW COLUMNS FROM t", ReplicaSafe),
        ("SHOW FULL COLUMNS FROM t", ReplicaSafe),
        ("SHOW INDEX FROM t", ReplicaSafe),
        ("SHOW CREATE TABLE t", ReplicaSafe),
        ("SHOW DATABASES", ReplicaSafe),
        ("SHOW TABLE STATUS", ReplicaSafe),
        // Locking reads.
        ("SELECT * FROM t WHERE id = 1 FOR UPDATE", W(Why::LockingRead)),
        ("select * from t for update skip locked", W(Why::LockingRead)),
        ("SELECT * FROM t FOR SHARE", W(Why::LockingRead)),
        ("SELECT * FROM t LOCK IN SHARE MODE", W(Why::LockingRead)),
        ("SELECT * FROM t WHERE a = 'x' FOR UPDATE", W(Why::LockingRead)),
        ("(SELECT a FROM t FOR UPDATE)", W(Why::LockingRead)),
        ("SELECT 1; SELECT a FROM t FOR UPDATE", W(Why::LockingRead)),
        // INTO.
        ("SELECT 1 INTO @x", W(Why::UserVariableAssignment)),
        ("SELECT a FROM t INTO @x, @y", W(Why::UserVariableAssignment)),
        ("SELECT a INTO b FROM t", ReplicaSafe), // refused by the server everywhere
        ("SELECT a FROM t INTO OUTFILE '/tmp/x'", W(Why::SelectInto)),
        ("SELECT a INTO DUMPFILE '/tmp/x' FROM t", W(Why::SelectInto)),
        // Sequences.
        ("SELECT NEXTVAL(s)", W(Why::Sequence)),
        ("SELECT NEXT VALUE FOR s", W(Why::Sequence)),
        ("SELECT PREVIOUS VALUE FOR s", W(Why::Sequence)),
        ("SELECT LASTVAL(s)", W(Why::Sequence)),
        ("SELECT SETVAL(s, 10)", W(Why::Sequence)),
        // Variables, locks, session dependence, side effects.
        ("SELECT @x := 1", W(Why::UserVariableAssignment)),
        ("SELECT a, @n := @n + 1 FROM t", W(Why::UserVariableAssignment)),
        ("SELECT GET_LOCK('a', 0)", W(Why::Lock)),
        ("SELECT RELEASE_LOCK('a')", W(Why::Lock)),
        ("SELECT IS_FREE_LOCK('a')", W(Why::Lock)),
        ("SELECT IS_USED_LOCK('a')", W(Why::Lock)),
        ("SELECT LAST_INSERT_ID()", W(Why::SessionDependent)),
        ("SELECT @@last_insert_id", W(Why::SessionDependent)),
        ("SELECT FOUND_ROWS()", W(Why::SessionDependent)),
        ("SELECT ROW_COUNT()", W(Why::SessionDependent)),
        ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1", W(Why::SessionDependent)),
        ("SHOW WARNINGS", W(Why::ServerSpecific)),
        ("SELECT SLEEP(1)", W(Why::SideEffect)),
        ("SELECT MASTER_GTID_WAIT('0-1-5', 1)", W(Why::SideEffect)),
        ("SELECT MASTER_POS_WAIT('bin.1', 4)", W(Why::SideEffect)),
        ("SELECT WAIT_FOR_EXECUTED_GTID_SET('x:1', 1)", W(Why::SideEffect)),
        // Functions sluice does not know.
        ("SELECT my_func(1)", W(Why::UnknownFunction)),
        ("SELECT app.f(a) FROM t", W(Why::UnknownFunction)),
        ("SELECT `f`(a) FROM t", W(Why::UnknownFunction)),
        ("SELECT a FROM t WHERE b = audit(a)", W(Why::UnknownFunction)),
        // Server-specific SHOW and EXPLAIN.
        ("SHOW STATUS", W(Why::ServerSpecific)),
        ("SHOW FULL PROCESSLIST", W(Why::ServerSpecific)),
        ("SHOW SLAVE STATUS", W(Why::ServerSpecific)),
        ("SHOW MASTER STATUS", W(Why::ServerSpecific)),
        ("SHOW VARIABLES LIKE 'read_only'", W(Why::ServerSpecific)),
        ("EXPLAIN FOR CONNECTION 5", W(Why::ServerSpecific)),
        ("EXPLAIN ANALYZE SELECT 1", W(Why::NotARead)),
        ("ANALYZE SELECT 1", W(Why::NotARead)),
        // Not reads.
        ("INSERT INTO t VALUES (1)", W(Why::NotARead)),
        ("UPDATE t SET a = 1", W(Why::NotARead)),
        ("DELETE FROM t", W(Why::NotARead)),
        ("SET @x = 1", W(Why::NotARead)),
        ("CALL p()", W(Why::NotARead)),
        ("DO 1", W(Why::NotARead)),
        ("BEGIN", W(Why::NotARead)),
        ("START TRANSACTION", W(Why::NotARead)),
        ("START TRANSACTION READ WRITE", W(Why::NotARead)),
        ("COMMIT", W(Why::NotARead)),
        ("WITH c AS (SELECT 1) UPDATE t SET a = 1", W(Why::NotARead)),
        ("SELECT 1; INSERT INTO t VALUES (1)", W(Why::NotARead)),
        ("SELECT 1; DELETE FROM t; SELECT 2", W(Why::NotARead)),
        ("INSERT INTO t VALUES (1); SELECT 1", W(Why::NotARead)),
        // Read-only transactions.
        ("START TRANSACTION READ ONLY", ReadOnlyBegin),
        ("start transaction read only", ReadOnlyBegin),
        ("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", ReadOnlyBegin),
        ("START TRANSACTION READ ONLY; INSERT INTO t VALUES (1)", W(Why::NotARead)),
        ("START TRANSACTION READ ONLY; SELECT 1", W(Why::NotARead)),
    ];
    for (sql, want) in rows {
        assert_eq!(classify(sql.as_bytes()).read, *want, "{sql}");
    }
}

#[test]
fn keywords_in_strings_comments_and_identifiers_do_not_change_the_verdict() {
    #[rustfmt::skip]
    let rows: &[(&str, ReadSafety)] = &[
        ("SELECT 'FOR UPDATE' FROM t", ReplicaSafe),
        ("SELECT \"lock in share mode\"", ReplicaSafe),
        ("SELECT a FROM t WHERE b = 'x; DELETE FROM t'", ReplicaSafe),
        ("SELECT 'sleep(1)', 'get_lock(1)', 'nextval(s)'", ReplicaSafe),
        ("SELECT 'next value for s', '@x := 1', 'INTO @y'", ReplicaSafe),
        ("SELECT a /* FOR UPDATE */ FROM t", ReplicaSafe),
        ("SELECT a FROM t -- FOR UPDATE\n", ReplicaSafe),
        ("SELECT a FROM t # INTO @x\n", ReplicaSafe),
        ("SELECT `update`, `into`, `next` FROM t", ReplicaSafe),
        ("SELECT `for` FROM t", ReplicaSafe),
        ("SELECT a /* my_func( */ FROM t", ReplicaSafe),
        ("SELECT a FROM t WHERE b = 'it''s FOR UPDATE'", ReplicaSafe),
        ("SELECT 'SLEEP(' FROM t WHERE a = \"GET_LOCK(\"", ReplicaSafe),
        // And the other way round: the real keyword next to a decoy.
        ("SELECT 'x' FROM t /* ok */ FOR UPDATE", W(Why::LockingRead)),
        ("SELECT '/*' , SLEEP(1), '*/'", W(Why::SideEffect)),
        // Executable comments run on the server, so they count.
        ("SELECT a FROM t /*!50000 FOR UPDATE */", W(Why::LockingRead)),
        ("SELECT /*M! SLEEP(1), */ 1", W(Why::SideEffect)),
    ];
    for (sql, want) in rows {
        assert_eq!(classify(sql.as_bytes()).read, *want, "{sql}");
    }
}

#[test]
fn plain_words_that_look_unsafe_fall_back_to_the_full_scan() {
    // No special bytes, so the fast path sees these first; a column named like a keyword
    // costs a full scan and, at worst, a writer read.
    for (sql, want) in [
        ("SELECT share FROM t", ReplicaSafe),
        ("SELECT next FROM t", ReplicaSafe),
        ("SELECT previous FROM t", ReplicaSafe),
        ("SELECT a FROM t FOR UPDATE", W(Why::LockingRead)),
        ("SELECT a FROM t LOCK IN SHARE MODE", W(Why::LockingRead)),
        ("SELECT NEXT VALUE FOR s", W(Why::Sequence)),
        ("select previous value for s", W(Why::Sequence)),
        (
            "SELECT a FROM t WHERE b = 1 AND c = 2 GROUP BY a FOR UPDATE",
            W(Why::LockingRead),
        ),
    ] {
        assert_eq!(classify(sql.as_bytes()).read, want, "{sql}");
        assert_eq!(fast::classify_plain(sql.as_bytes()), None, "{sql}");
    }
    // Words with the same rare letters do not leave the fast path.
    for sql in [
        "SELECT max(a) FROM t WHERE x = 1",
        "SELECT pid, hash, xpath_updated, updates, shares FROM t WHERE next_id > 3",
        "SELECT a FROM t WHERE b = 1 GROUP BY a HAVING c > 2",
    ] {
        let plain = sql.replace("max(a)", "a");
        assert_eq!(
            fast::classify_plain(plain.as_bytes()).map(|c| c.read),
            Some(ReplicaSafe),
            "{plain}"
        );
    }
    // A plain INTO stays in the fast path: the server refuses it everywhere.
    assert_eq!(
        fast::classify_plain(b"SELECT a INTO b FROM t").map(|c| c.read),
        Some(ReplicaSafe)
    );
    assert_eq!(
        fast::classify_plain(b"SELECT id FROM t").map(|c| c.read),
        Some(ReplicaSafe)
    );
}

#[test]
fn min_gtid_tokens_are_read_from_comments_only() {
    let rows: &[(&str, Option<&str>)] = &[
        ("/* sluice:min_gtid=0-1-42 */ SELECT 1", Some("0-1-42")),
        (
            "SELECT a FROM t /*sluice:min_gtid=0-1-5,1-2-7*/",
            Some("0-1-5,1-2-7"),
        ),
        (
            "SELECT 1 /* sluice:min_gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5 */",
            Some("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
        ),
        (
            "/* sluice:min_gtid=0-1-1 */ /* sluice:min_gtid=0-1-2 */ SELECT 1",
            Some("0-1-1"),
        ),
        ("/* sluice:min_gtid= */ SELECT 1", Some("")),
        ("SELECT '/* sluice:min_gtid=0-1-42 */'", None),
        ("SELECT 1 -- sluice:min_gtid=0-1-42", None),
        ("SELECT 1 /* sluice:min_gtid=0-1-42", None),
        ("/* sluice: min_gtid=0-1-42 */ SELECT 1", None),
        ("SELECT 1", None),
    ];
    for (sql, want) in rows {
        let c = classify(sql.as_bytes());
        assert_eq!(c.min_gtid.as_deref(), *want, "{sql}");
    }
    // The token does not change what the statement is.
    let c = classify(b"/* sluice:min_gtid=0-1-42 */ SELECT a FROM t FOR UPDATE");
    assert_eq!(c.read, W(Why::LockingRead));
    assert_eq!(c.kind, StatementKind::Select);
}
