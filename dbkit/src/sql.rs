//! Blocking SQL on a dbkit server, for the control steps of [`crate::replication`].
//!
//! One short-lived connection per step: a step often follows a kill or a restart, so a
//! connection kept from before would be dead. Values come back as text (the text protocol
//! sends nothing else), `None` for SQL NULL.

use std::collections::BTreeMap;
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::Error;

/// How long a connect may take on a loaded 2-core machine.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Read timeout for a statement that does not wait on purpose.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// One row: column values in order, `None` for NULL.
pub type Row = Vec<Option<String>>;

/// A logged-in connection to `127.0.0.1:port`.
pub struct Sql {
    conn: mysql::Conn,
    port: u16,
}

impl Sql {
    /// Logs in as `user`. `waits_up_to` extends the read timeout for a statement that blocks
    /// on purpose (`MASTER_GTID_WAIT`).
    pub fn connect(
        port: u16,
        user: &str,
        password: &str,
        waits_up_to: Duration,
    ) -> Result<Sql, Error> {
        let opts = mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some(user))
            .pass(Some(password))
            .prefer_socket(false)
            .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
            .read_timeout(Some(STATEMENT_TIMEOUT + waits_up_to))
            .write_timeout(Some(STATEMENT_TIMEOUT));
        let conn = mysql::Conn::new(opts).map_err(|e| sql_error(port, "(login)", e))?;
        Ok(Sql { conn, port })
    }

    /// Runs a statement and drops any result.
    pub fn exec(&mut self, sql: &str) -> Result<(), Error> {
        self.conn
            .query_drop(sql)
            .map_err(|e| sql_error(self.port, sql, e))
    }

    /// Runs a query and returns its rows as text.
    pub fn rows(&mut self, sql: &str) -> Result<Vec<Row>, Error> {
        let rows: Vec<mysql::Row> = self
            .conn
            .query(sql)
            .map_err(|e| sql_error(self.port, sql, e))?;
        Ok(rows.iter().map(row_text).collect())
    }

    /// The first column of the first row (`None` for no row or NULL).
    pub fn value(&mut self, sql: &str) -> Result<Option<String>, Error> {
        Ok(self
            .rows(sql)?
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next().flatten()))
    }

    /// Each row as a map from column name to value (for `SHOW SLAVE STATUS`).
    pub fn named_rows(
        &mut self,
        sql: &str,
    ) -> Result<Vec<BTreeMap<String, Option<String>>>, Error> {
        let rows: Vec<mysql::Row> = self
            .conn
            .query(sql)
            .map_err(|e| sql_error(self.port, sql, e))?;
        Ok(rows
            .iter()
            .map(|row| {
                let names = row.columns_ref().iter().map(|c| c.name_str().into_owned());
                names.zip(row_text(row)).collect()
            })
            .collect())
    }
}

fn row_text(row: &mysql::Row) -> Row {
    (0..row.len())
        .map(|i| match row.as_ref(i) {
            None | Some(mysql::Value::NULL) => None,
            Some(mysql::Value::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            // The text protocol only sends bytes; anything else is shown as SQL would.
            Some(other) => Some(other.as_sql(true).trim_matches('\'').to_string()),
        })
        .collect()
}

fn sql_error(port: u16, sql: &str, e: mysql::Error) -> Error {
    let code = match &e {
        mysql::Error::MySqlError(m) => Some(m.code),
        _ => None,
    };
    Error::Sql {
        port,
        sql: sql.to_string(),
        code,
        detail: e.to_string(),
    }
}
