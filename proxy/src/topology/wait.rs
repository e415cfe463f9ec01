//! The statement a replica runs to wait for a GTID position before a read-your-writes read
//! (`read_your_writes = wait`, [`super::Route::WaitOnReplica`]), and how its one-cell answer
//! reads.
//!
//! - MariaDB: `SELECT MASTER_GTID_WAIT('<position>', <timeout s>)` returns 0 when the
//!   replica has applied the position, -1 on timeout
//!   (<https://mariadb.com/kb/en/master_gtid_wait/>).
//! - MySQL: `SELECT WAIT_FOR_EXECUTED_GTID_SET('<set>', <timeout s>)` returns 0 when the set
//!   is in `gtid_executed`, 1 on timeout
//!   (<https://dev.mysql.com/doc/refman/8.0/en/gtid-functions.html>).
//!
//! Both take fractional seconds. The position is sluice's own typed [`GtidPosition`], whose
//! text is digits, hex, `-`, `:`, `,` and tag letters; the literal is still checked byte by
//! byte, because a wait must never become an injection if a position type grows.

use std::time::Duration;

use super::gtid::GtidPosition;

/// Why no statement was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The text has a byte a GTID never has (a quote, a backslash, a control byte).
    #[error("a GTID position may only hold letters, digits, '-', ':', ',' and '_'")]
    UnsafeText,
}

/// The wait statement for `position` with `timeout` (rounded down to milliseconds).
pub fn gtid_wait_statement(position: &GtidPosition, timeout: Duration) -> Vec<u8> {
    let function = match position {
        GtidPosition::MariaDb(_) => "MASTER_GTID_WAIT",
        GtidPosition::MySql(_) => "WAIT_FOR_EXECUTED_GTID_SET",
    };
    // A typed position always prints as safe text; fall back to an empty one (which every
    // server has reached) rather than panic.
    wait_sql(function, &position.to_string(), timeout)
        .unwrap_or_else(|_| wait_sql(function, "", timeout).unwrap_or_default())
}

/// `SELECT <function>('<text>', <seconds>)` with `text` checked.
fn wait_sql(function: &str, text: &str, timeout: Duration) -> Result<Vec<u8>, WaitError> {
    let safe = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b':' | b',' | b'_');
    if !text.bytes().all(safe) {
        return Err(WaitError::UnsafeText);
    }
    let ms = timeout.as_millis();
    Ok(format!(
        "SELECT {function}('{text}', {}.{:03})",
        ms / 1000,
        ms % 1000
    )
    .into_bytes())
}

/// What the wait's answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The replica has the position: run the read there.
    Reached,
    /// The timeout passed (or the server answered NULL or something else): run the read
    /// on the writer.
    NotReached,
}

impl WaitOutcome {
    /// Reads the one cell of the wait's result (`None` is SQL NULL).
    pub fn from_cell(cell: Option<&[u8]>) -> WaitOutcome {
        match cell {
            Some(b"0") => WaitOutcome::Reached,
            _ => WaitOutcome::NotReached,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> GtidPosition {
        GtidPosition::parse_any(text).unwrap()
    }

    #[test]
    fn mariadb_and_mysql_statements() {
        let ms = Duration::from_millis;
        assert_eq!(
            gtid_wait_statement(&pos("0-1-42,1-2-7"), ms(100)),
            b"SELECT MASTER_GTID_WAIT('0-1-42,1-2-7', 0.100)"
        );
        let set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5";
        assert_eq!(
            gtid_wait_statement(&pos(set), Duration::from_millis(2500)),
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{set}', 2.500)").as_bytes()
        );
        assert_eq!(
            gtid_wait_statement(&pos("0-1-1"), Duration::from_micros(1999)),
            b"SELECT MASTER_GTID_WAIT('0-1-1', 0.001)"
        );
        assert_eq!(
            gtid_wait_statement(&pos("0-1-1"), Duration::ZERO),
            b"SELECT MASTER_GTID_WAIT('0-1-1', 0.000)"
        );
    }

    #[test]
    fn tagged_mysql_sets_stay_literal() {
        let set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:tag_1:1-5";
        let sql = gtid_wait_statement(&pos(set), Duration::from_secs(1));
        assert_eq!(
            sql,
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{set}', 1.000)").as_bytes()
        );
    }

    #[test]
    fn text_that_could_escape_the_literal_is_refused() {
        let t = Duration::from_secs(1);
        for bad in [
            "0-1-1'); DROP TABLE t; --",
            "0-1-1\\",
            "a'b",
            "0-1-1\0",
            "x\ny",
            "0-1-1 ",
            "\"",
        ] {
            assert_eq!(
                wait_sql("MASTER_GTID_WAIT", bad, t),
                Err(WaitError::UnsafeText),
                "{bad:?}"
            );
        }
        assert_eq!(
            wait_sql("MASTER_GTID_WAIT", "", t).unwrap(),
            b"SELECT MASTER_GTID_WAIT('', 1.000)"
        );
    }

    #[test]
    fn answers() {
        assert_eq!(WaitOutcome::from_cell(Some(b"0")), WaitOutcome::Reached);
        for other in [Some(&b"-1"[..]), Some(b"1"), None, Some(b"")] {
            assert_eq!(WaitOutcome::from_cell(other), WaitOutcome::NotReached);
        }
    }
}
