//! What one monitor check saw on one server: the inputs of [`super::roles::decide`].
//!
//! Built by [`super::monitor::observe`] from `@@read_only`, the GTID position and
//! `SHOW SLAVE STATUS` (`SHOW REPLICA STATUS` on MySQL), or by tests directly.

use std::fmt;
use std::time::Duration;

use super::gtid::GtidPosition;

/// One server's state as its monitor check read it, or why the check failed.
pub type Observation = Result<ServerState, CheckFailure>;

/// Why a monitor check produced no state. Every variant excludes the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckFailure {
    /// No connection: refused, unreachable, or the login failed at the transport.
    Unreachable,
    /// The check did not finish within its timeout.
    Timeout,
    /// The connection broke during the check.
    Lost,
    /// The server refused a login or a query with this error (e.g. 1045 bad monitor
    /// password, 1227 no SLAVE MONITOR / REPLICATION CLIENT privilege).
    Refused { code: u16 },
    /// The answer could not be understood (a column missing, a position that does not
    /// parse); the server's version may be unsupported.
    Malformed(&'static str),
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckFailure::Unreachable => f.write_str("unreachable"),
            CheckFailure::Timeout => f.write_str("check timed out"),
            CheckFailure::Lost => f.write_str("connection lost during the check"),
            CheckFailure::Refused { code } => write!(f, "server refused the check ({code})"),
            CheckFailure::Malformed(what) => write!(f, "unreadable answer: {what}"),
        }
    }
}

/// A reachable server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// `@@server_id`; replicas name their source by it (`Master_Server_Id`), which survives
    /// DNS names, VIPs and ports that differ from sluice's view.
    pub server_id: u32,
    /// `@@global.read_only` (MySQL's `super_read_only` implies it).
    pub read_only: bool,
    /// `None`: `SHOW SLAVE STATUS` returned no row (the server replicates from nobody).
    pub replication: Option<ReplicaStatus>,
    /// What it has applied: a replica's replicated position (MariaDB `gtid_slave_pos`,
    /// which a stray local write cannot inflate), a non-replica's binlog position, or MySQL's
    /// `gtid_executed`.
    pub position: GtidPosition,
}

impl ServerState {
    /// Are its replication threads doing anything? A server whose threads are both stopped
    /// (promoted by `STOP SLAVE` without `RESET SLAVE ALL`) is not replicating.
    pub fn is_replicating(&self) -> bool {
        self.replication
            .as_ref()
            .is_some_and(|r| r.io != IoThread::Stopped || r.sql_running)
    }

    /// Writable and replicating from nobody: what a writer looks like.
    pub fn is_writer_candidate(&self) -> bool {
        !self.read_only && !self.is_replicating()
    }
}

/// The IO thread's state (`Slave_IO_Running` / `Replica_IO_Running`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoThread {
    /// `Yes`: connected to its source and fetching.
    Running,
    /// `Connecting` (or MariaDB's `Preparing`): running, but not connected to its source.
    Connecting,
    /// `No`.
    Stopped,
}

impl IoThread {
    /// Parses the column's text; unknown text reads as stopped (the safe side: excluded).
    pub fn parse(text: &[u8]) -> IoThread {
        if text.eq_ignore_ascii_case(b"Yes") {
            IoThread::Running
        } else if text.eq_ignore_ascii_case(b"Connecting")
            || text.eq_ignore_ascii_case(b"Preparing")
        {
            IoThread::Connecting
        } else {
            IoThread::Stopped
        }
    }
}

/// One row of `SHOW SLAVE STATUS`, the parts a routing decision uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub io: IoThread,
    /// `Slave_SQL_Running = Yes`.
    pub sql_running: bool,
    /// `Seconds_Behind_Master`; `None` is SQL NULL (a thread stopped or the source not
    /// connected): unknown, never zero.
    pub lag: Option<Duration>,
    /// `Master_Host` and `Master_Port`, as configured (for display).
    pub source_host: String,
    pub source_port: u16,
    /// `Master_Server_Id`: the source's `@@server_id`; `None` until it has connected once.
    pub source_server_id: Option<u32>,
    /// `Last_IO_Errno` and `Last_SQL_Errno` (0: none), for display.
    pub last_io_errno: u32,
    pub last_sql_errno: u32,
}
