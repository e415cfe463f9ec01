//! One monitor check: the two queries that turn a connection into an [`Observation`].
//!
//! 1. `SELECT @@server_id, @@global.read_only, <positions>`: MariaDB's `gtid_slave_pos`
//!    and `gtid_binlog_pos`, MySQL's `gtid_executed`. No privilege is needed.
//! 2. `SHOW SLAVE STATUS` (MariaDB) / `SHOW REPLICA STATUS` (MySQL 8.0.22+), read by
//!    column name: MariaDB 10.11 needs `SLAVE MONITOR` (alias `REPLICA MONITOR`) or SUPER
//!    for it, MySQL `REPLICATION CLIENT`. For MariaDB multi-source replication only the
//!    default connection is read.
//!
//! The connection is anything that runs a text query and returns its rows
//! ([`TextQuery`]); sluice's [`BackendConn`] opened with the monitor's credentials is one.

use std::future::Future;
use std::time::Duration;

use super::gtid::GtidPosition;
use super::observation::{CheckFailure, IoThread, Observation, ReplicaStatus, ServerState};
use super::Flavor;
use crate::conn::{self, BackendConn};
use crate::protocol::{ErrPacket, TextResult};

/// A connection that can run a text query and read its rows.
pub trait TextQuery {
    /// Runs `sql`; `Ok(Err(_))` is the server's refusal.
    fn text_query(
        &mut self,
        sql: &[u8],
    ) -> impl Future<Output = Result<Result<TextResult, ErrPacket>, conn::Error>> + Send;
}

impl TextQuery for BackendConn {
    fn text_query(
        &mut self,
        sql: &[u8],
    ) -> impl Future<Output = Result<Result<TextResult, ErrPacket>, conn::Error>> + Send {
        self.query_rows(sql)
    }
}

/// Names of one `SHOW ... STATUS` column in MariaDB (and MySQL before 8.0.22) and in
/// MySQL 8.0.22+.
struct Column(&'static str, &'static str);

const IO_RUNNING: Column = Column("Slave_IO_Running", "Replica_IO_Running");
const SQL_RUNNING: Column = Column("Slave_SQL_Running", "Replica_SQL_Running");
const LAG: Column = Column("Seconds_Behind_Master", "Seconds_Behind_Source");
const SOURCE_HOST: Column = Column("Master_Host", "Source_Host");
const SOURCE_PORT: Column = Column("Master_Port", "Source_Port");
const SOURCE_ID: Column = Column("Master_Server_Id", "Source_Server_Id");
const IO_ERRNO: Column = Column("Last_IO_Errno", "Last_IO_Errno");
const SQL_ERRNO: Column = Column("Last_SQL_Errno", "Last_SQL_Errno");

/// Runs one check within `timeout`.
pub async fn observe<C: TextQuery>(conn: &mut C, flavor: Flavor, timeout: Duration) -> Observation {
    match tokio::time::timeout(timeout, check(conn, flavor)).await {
        Ok(observation) => observation,
        Err(_) => Err(CheckFailure::Timeout),
    }
}

/// How a connection error reads as a check failure (also for the monitor's connect).
pub fn failure_of(err: &conn::Error) -> CheckFailure {
    match err {
        conn::Error::Server(e) => CheckFailure::Refused { code: e.code },
        conn::Error::Timeout(_) => CheckFailure::Timeout,
        conn::Error::Protocol(_) | conn::Error::Unexpected { .. } => {
            CheckFailure::Malformed("not a MySQL protocol answer")
        }
        conn::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            CheckFailure::Unreachable
        }
        conn::Error::UnsupportedPlugin | conn::Error::Tls(_) | conn::Error::TlsUnavailable => {
            CheckFailure::Unreachable
        }
        conn::Error::Io(_) | conn::Error::Closed | conn::Error::Truncated => CheckFailure::Lost,
    }
}

async fn check<C: TextQuery>(conn: &mut C, flavor: Flavor) -> Observation {
    let (vars_sql, status_sql): (&[u8], &[u8]) = match flavor {
        Flavor::MariaDb => (
            b"SELECT @@server_id, @@global.read_only, @@global.gtid_slave_pos, \
              @@global.gtid_binlog_pos",
            b"SHOW SLAVE STATUS",
        ),
        Flavor::MySql => (
            b"SELECT @@server_id, @@global.read_only, @@global.gtid_executed",
            b"SHOW REPLICA STATUS",
        ),
    };
    let vars = run(conn, vars_sql).await?;
    let status = run(conn, status_sql).await?;
    state_from(flavor, &vars, &status)
}

async fn run<C: TextQuery>(conn: &mut C, sql: &[u8]) -> Result<TextResult, CheckFailure> {
    match conn.text_query(sql).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(refused)) => Err(CheckFailure::Refused { code: refused.code }),
        Err(e) => Err(failure_of(&e)),
    }
}

/// Builds the state from the two results (pure; the unit tests feed it rows).
pub fn state_from(flavor: Flavor, vars: &TextResult, status: &TextResult) -> Observation {
    let row = vars
        .rows
        .first()
        .ok_or(CheckFailure::Malformed("no row of variables"))?;
    let value = |i: usize| row.get(i).and_then(|v| v.as_deref());
    let server_id = text(value(0))
        .and_then(|t| t.parse::<u32>().ok())
        .ok_or(CheckFailure::Malformed("@@server_id"))?;
    let read_only = match value(1) {
        Some(b"1") | Some(b"ON") => true,
        Some(b"0") | Some(b"OFF") => false,
        _ => return Err(CheckFailure::Malformed("@@read_only")),
    };
    let replication = match status.rows.len() {
        0 => None,
        _ => Some(replica_status(status)?),
    };
    // A replica's replicated position; a non-replica's binlog (MariaDB). MySQL GTIDs name
    // their origin, so gtid_executed serves both.
    let position_text = match (flavor, &replication) {
        (Flavor::MariaDb, Some(_)) => value(2),
        (Flavor::MariaDb, None) => value(3),
        (Flavor::MySql, _) => value(2),
    };
    let position = GtidPosition::parse(flavor, text(position_text).unwrap_or(""))
        .map_err(|_| CheckFailure::Malformed("GTID position"))?;
    Ok(ServerState {
        server_id,
        read_only,
        replication,
        position,
    })
}

fn replica_status(status: &TextResult) -> Result<ReplicaStatus, CheckFailure> {
    let get = |c: &Column| -> Result<Option<&[u8]>, CheckFailure> {
        status
            .get(0, c.0)
            .or_else(|| status.get(0, c.1))
            .ok_or(CheckFailure::Malformed(c.0))
    };
    let number = |c: &Column| -> Result<Option<u64>, CheckFailure> {
        match get(c)? {
            None => Ok(None),
            Some(v) => text(Some(v))
                .and_then(|t| t.parse().ok())
                .map(Some)
                .ok_or(CheckFailure::Malformed(c.0)),
        }
    };
    let lag = number(&LAG)?.map(Duration::from_secs);
    let source_port = number(&SOURCE_PORT)?.unwrap_or(0);
    Ok(ReplicaStatus {
        io: IoThread::parse(get(&IO_RUNNING)?.unwrap_or_default()),
        sql_running: get(&SQL_RUNNING)?.is_some_and(|v| v.eq_ignore_ascii_case(b"Yes")),
        lag,
        source_host: text(get(&SOURCE_HOST)?).unwrap_or("").to_string(),
        source_port: u16::try_from(source_port).map_err(|_| CheckFailure::Malformed("port"))?,
        // 0 until the IO thread has connected once.
        source_server_id: number(&SOURCE_ID)?
            .and_then(|id| u32::try_from(id).ok())
            .filter(|&id| id != 0),
        last_io_errno: number(&IO_ERRNO)?.unwrap_or(0) as u32,
        last_sql_errno: number(&SQL_ERRNO)?.unwrap_or(0) as u32,
    })
}

fn text(v: Option<&[u8]>) -> Option<&str> {
    v.and_then(|b| std::str::from_utf8(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(columns: &[&str], rows: &[&[Option<&str>]]) -> TextResult {
        TextResult {
            columns: columns.iter().map(|c| c.as_bytes().to_vec()).collect(),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|v| v.map(|s| s.as_bytes().to_vec())).collect())
                .collect(),
        }
    }

    fn vars(id: &str, ro: &str, slave: &str, binlog: &str) -> TextResult {
        result(
            &["@@server_id", "@@global.read_only", "slave", "binlog"],
            &[&[Some(id), Some(ro), Some(slave), Some(binlog)]],
        )
    }

    const MARIADB_COLS: [&str; 8] = [
        "Slave_IO_Running",
        "Slave_SQL_Running",
        "Seconds_Behind_Master",
        "Master_Host",
        "Master_Port",
        "Master_Server_Id",
        "Last_IO_Errno",
        "Last_SQL_Errno",
    ];

    #[test]
    fn a_mariadb_replica_and_primary() {
        let status = result(
            &MARIADB_COLS,
            &[&[
                Some("Yes"),
                Some("Yes"),
                Some("3"),
                Some("db1"),
                Some("3306"),
                Some("1"),
                Some("0"),
                Some("0"),
            ]],
        );
        let replica = state_from(
            Flavor::MariaDb,
            &vars("2", "1", "0-1-9", "0-1-9,0-2-1"),
            &status,
        )
        .unwrap();
        assert_eq!((replica.server_id, replica.read_only), (2, true));
        assert_eq!(replica.position.to_string(), "0-1-9");
        let r = replica.replication.unwrap();
        assert_eq!((r.io, r.sql_running), (IoThread::Running, true));
        assert_eq!(r.lag, Some(Duration::from_secs(3)));
        assert_eq!(
            (r.source_host.as_str(), r.source_port, r.source_server_id),
            ("db1", 3306, Some(1))
        );

        let none = result(&MARIADB_COLS, &[]);
        let primary = state_from(Flavor::MariaDb, &vars("1", "0", "", "0-1-9"), &none).unwrap();
        assert!(primary.replication.is_none());
        assert!(primary.is_writer_candidate());
        assert_eq!(primary.position.to_string(), "0-1-9");
    }

    #[test]
    fn null_lag_stopped_threads_and_mysql_names() {
        let status = result(
            &[
                "Replica_IO_Running",
                "Replica_SQL_Running",
                "Seconds_Behind_Source",
                "Source_Host",
                "Source_Port",
                "Source_Server_Id",
                "Last_IO_Errno",
                "Last_SQL_Errno",
            ],
            &[&[
                Some("Connecting"),
                Some("No"),
                None,
                Some("10.0.0.1"),
                Some("3306"),
                Some("0"),
                Some("2003"),
                Some("0"),
            ]],
        );
        let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5";
        let v = result(&["a", "b", "c"], &[&[Some("7"), Some("ON"), Some(uuid)]]);
        let s = state_from(Flavor::MySql, &v, &status).unwrap();
        let r = s.replication.clone().unwrap();
        assert_eq!(
            (r.io, r.sql_running, r.lag),
            (IoThread::Connecting, false, None)
        );
        assert_eq!((r.source_server_id, r.last_io_errno), (None, 2003));
        assert!(s.is_replicating());
        assert_eq!(s.position.to_string(), uuid);
    }

    #[test]
    fn unreadable_answers_are_malformed() {
        let none = result(&MARIADB_COLS, &[]);
        let bad = [
            vars("x", "0", "", ""),
            vars("1", "maybe", "", ""),
            vars("1", "0", "", "0-1"),
            result(&["a"], &[]),
        ];
        for v in bad {
            assert!(matches!(
                state_from(Flavor::MariaDb, &v, &none),
                Err(CheckFailure::Malformed(_))
            ));
        }
        let missing_column = result(&["Slave_IO_Running"], &[&[Some("Yes")]]);
        assert!(matches!(
            state_from(Flavor::MariaDb, &vars("1", "1", "", ""), &missing_column),
            Err(CheckFailure::Malformed(_))
        ));
    }

    #[test]
    fn connection_errors_map_to_failures() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            failure_of(&conn::Error::Io(refused)),
            CheckFailure::Unreachable
        );
        assert_eq!(failure_of(&conn::Error::Closed), CheckFailure::Lost);
        assert_eq!(
            failure_of(&conn::Error::Timeout("x")),
            CheckFailure::Timeout
        );
        let denied = ErrPacket::new(1045, "28000", "denied");
        assert_eq!(
            failure_of(&conn::Error::Server(denied)),
            CheckFailure::Refused { code: 1045 }
        );
    }
}
