//! A query rule's `timeout`, written into the statement so that the server enforces it and
//! answers with its own error: MariaDB's `SET STATEMENT max_statement_time=<s> FOR ...`
//! (1969, ER_STATEMENT_TIMEOUT), MySQL's `/*+ MAX_EXECUTION_TIME(<ms>) */` hint after SELECT
//! (3024, ER_QUERY_TIMEOUT). Where neither applies (other statements, a multi-statement, a
//! statement with a SET STATEMENT or a hint of its own) the statement path kills it at the
//! deadline instead (KILL QUERY on its backend thread).

use std::time::Duration;

use super::lexer::{is_kw, Lexer, Quoting, Tok};
use super::{Classification, StatementKind};

/// Which server syntax takes a statement's time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLimitSyntax {
    /// MariaDB 10.1+: `SET STATEMENT max_statement_time=<seconds> FOR <statement>`.
    MariaDb,
    /// MySQL 5.7.8+: the `MAX_EXECUTION_TIME(<ms>)` optimizer hint, for SELECT only.
    MySql,
}

/// `sql` (a COM_QUERY text that `class` describes) with the time limit written in, or
/// `None` when the server cannot take it that way.
pub fn with_time_limit(
    sql: &[u8],
    class: &Classification,
    limit: Duration,
    syntax: TimeLimitSyntax,
    quoting: Quoting,
) -> Option<Vec<u8>> {
    use StatementKind as K;
    if class.multi_statement || limit.is_zero() {
        return None;
    }
    match syntax {
        TimeLimitSyntax::MariaDb => {
            let limited = matches!(
                class.kind,
                K::Select | K::Insert | K::Update | K::Delete | K::Replace | K::Do
            );
            // `SET STATEMENT ... FOR <select>` is classified as its select; it has its own.
            let first = Lexer::new(sql, quoting).next();
            if !limited || first.is_some_and(|t| is_kw(sql, &t, b"set")) {
                return None;
            }
            let seconds = format!("{:.3}", limit.as_secs_f64());
            let seconds = seconds.trim_end_matches('0').trim_end_matches('.');
            let mut out = format!("SET STATEMENT max_statement_time={seconds} FOR ").into_bytes();
            out.extend_from_slice(sql);
            Some(out)
        }
        TimeLimitSyntax::MySql => {
            if class.kind != K::Select {
                return None;
            }
            let first = Lexer::new(sql, quoting)
                .next()
                .filter(|t| t.kind == Tok::Word && is_kw(sql, t, b"select"))?;
            // A hint of its own (or a comment where ours would go): leave it alone.
            let rest = &sql[first.end..];
            if rest.trim_ascii_start().starts_with(b"/*") {
                return None;
            }
            let ms = limit.as_millis().max(1);
            let mut out = sql[..first.end].to_vec();
            out.extend_from_slice(format!(" /*+ MAX_EXECUTION_TIME({ms}) */").as_bytes());
            out.extend_from_slice(rest);
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;

    fn limit(sql: &str, ms: u64, syntax: TimeLimitSyntax) -> Option<String> {
        let class = classify(sql.as_bytes());
        with_time_limit(
            sql.as_bytes(),
            &class,
            Duration::from_millis(ms),
            syntax,
            Quoting::Backslash,
        )
        .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn mariadb_takes_set_statement_for_dml() {
        use TimeLimitSyntax::MariaDb;
        assert_eq!(
            limit("SELECT SLEEP(5)", 1000, MariaDb).as_deref(),
            Some("SET STATEMENT max_statement_time=1 FOR SELECT SLEEP(5)")
        );
        assert_eq!(
            limit("UPDATE t SET a = 1", 1500, MariaDb).as_deref(),
            Some("SET STATEMENT max_statement_time=1.5 FOR UPDATE t SET a = 1")
        );
        assert_eq!(
            limit("DELETE FROM t", 250, MariaDb).as_deref(),
            Some("SET STATEMENT max_statement_time=0.25 FOR DELETE FROM t")
        );
        for other in [
            "SELECT 1; SELECT 2",
            "BEGIN",
            "CREATE TABLE t (a INT)",
            "SET STATEMENT max_statement_time=9 FOR SELECT 1",
            "CALL p()",
        ] {
            assert_eq!(limit(other, 1000, MariaDb), None, "{other}");
        }
    }

    #[test]
    fn mysql_takes_the_hint_on_select_only() {
        use TimeLimitSyntax::MySql;
        assert_eq!(
            limit("select c from t", 1000, MySql).as_deref(),
            Some("select /*+ MAX_EXECUTION_TIME(1000) */ c from t")
        );
        assert_eq!(
            limit("  /* a */ SELECT SLEEP(5)", 20, MySql).as_deref(),
            Some("  /* a */ SELECT /*+ MAX_EXECUTION_TIME(20) */ SLEEP(5)")
        );
        for other in [
            "UPDATE t SET a = 1",
            "SELECT /*+ BKA(t) */ * FROM t",
            "(SELECT 1)",
            "WITH x AS (SELECT 1) SELECT * FROM x",
        ] {
            assert_eq!(limit(other, 1000, MySql), None, "{other}");
        }
    }
}
