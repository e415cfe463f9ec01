//! The dbkit error type: every failure names what was tried and where the logs are.

use std::path::PathBuf;

/// Why a server could not be found, initialised, started or reached.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `mariadbd`/`mysqld` binary exists on this machine.
    #[error(
        "no MySQL/MariaDB server binary found (looked for {looked_for}). Three ways out: \
         (1) install it: `apt-get install -y mariadb-server`; \
         (2) start a Docker engine (loadgen then uses a pinned mysql:8.0 container); \
         (3) point at a running server with `--mysql-url mysql://user:pass@host:port/db`"
    )]
    NotFound {
        /// The names and directories that were searched.
        looked_for: String,
    },
    /// Initialising the data directory failed.
    #[error("initialising the datadir {datadir} with {tool} failed: {detail}")]
    Init {
        /// The tool that was run (`mariadb-install-db` or `mysqld --initialize-insecure`).
        tool: String,
        /// The datadir being initialised.
        datadir: PathBuf,
        /// Exit status and the tail of its output.
        detail: String,
    },
    /// The server process exited or could not be spawned.
    #[error("starting {binary} failed: {detail} (error log: {log})")]
    Start {
        /// The server binary.
        binary: PathBuf,
        /// What happened, including the tail of the error log when there is one.
        detail: String,
        /// The server's error log.
        log: PathBuf,
    },
    /// The server did not answer in time.
    #[error("{what} did not happen within {secs} s (error log: {log})")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long we waited.
        secs: u64,
        /// The server's error log.
        log: PathBuf,
    },
    /// A statement dbkit ran on one of its servers failed.
    #[error("{sql:?} on 127.0.0.1:{port} failed: {detail}")]
    Sql {
        /// The server's port.
        port: u16,
        /// The statement as it was run (dbkit's fixed test passwords included).
        sql: String,
        /// The server's error code, when the server answered with one.
        code: Option<u16>,
        /// The client library's description.
        detail: String,
    },
    /// A replication step cannot be done as asked.
    #[error("replication: {0}")]
    Replication(#[from] ReplicationProblem),
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What dbkit was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a [`crate::replication::Cluster`] step was refused or did not take effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationProblem {
    /// Replication control is implemented for MariaDB only (this machine has no MySQL).
    #[error("replication clusters need MariaDB (10.5.9 or later); found {version}")]
    NotMariaDb {
        /// The server's `--version` line.
        version: String,
    },
    /// The index names no server of the cluster.
    #[error("the cluster has no server {index}")]
    NoSuchServer {
        /// The index asked for.
        index: usize,
    },
    /// The step needs a replica, and this server is the primary.
    #[error("server {index} is the primary, not a replica")]
    IsPrimary {
        /// The server.
        index: usize,
    },
    /// A GTID position with characters other than digits, `-`, `,` and spaces.
    #[error("{0:?} is not a MariaDB GTID position (domain-server-seq, comma-separated)")]
    BadPosition(String),
    /// A variable name with characters other than letters, digits, `_` and `.`.
    #[error("{0:?} is not a system variable name")]
    BadVariable(String),
    /// A replica's threads did not both run in time.
    #[error(
        "server {index} does not replicate: IO thread {io}, SQL thread {sql}, \
         last IO error {io_error:?}, last SQL error {sql_error:?}"
    )]
    NotReplicating {
        /// The replica.
        index: usize,
        /// `Slave_IO_Running` as last seen.
        io: String,
        /// `Slave_SQL_Running` as last seen.
        sql: String,
        /// `Last_IO_Error`.
        io_error: String,
        /// `Last_SQL_Error`.
        sql_error: String,
    },
}

impl Error {
    /// Wraps an `io::Error` with a short description of what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// The last `max_bytes` of a file, for error messages (empty if unreadable).
pub(crate) fn tail_of(path: &std::path::Path, max_bytes: usize) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let start = bytes.len().saturating_sub(max_bytes);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}
