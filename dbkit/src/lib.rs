//! dbkit: start, pin, stop and clean up a private MariaDB/MySQL server.
//!
//! Used by `loadgen` at run time and by every integration test in the workspace.
//! It needs no async runtime (`std`, `libc`, `tempfile`, and the blocking `mysql` client for
//! the replication steps), so a test can start a server before it builds its own runtime.
//!
//! # Layout
//! - [`error`]: the one error type, [`Error`].
//! - [`binary`]: finding `mariadbd`/`mysqld` and telling the two flavours apart.
//! - [`affinity`]: CPU pinning with `sched_setaffinity` (processes and single threads).
//! - [`spawn`]: the long-lived spawner thread that starts children with `PR_SET_PDEATHSIG`.
//! - [`greeting`]: waiting for a server by reading its protocol-10 greeting.
//! - `datadir`: initialising a datadir and writing the init file.
//! - [`server`]: [`LocalServer`] and [`ServerOptions`].
//! - [`sql`]: blocking SQL on a dbkit server (the `mysql` crate), for the replication steps.
//! - [`replication`]: [`Cluster`], a MariaDB primary and GTID replicas with failure controls.
//! - [`test_server`]: the once-per-process [`TestServer`] for integration tests.

pub mod affinity;
pub mod binary;
mod datadir;
pub mod error;
pub mod greeting;
pub mod replication;
pub mod server;
pub mod spawn;
pub mod sql;
pub mod test_server;

pub use binary::{find_server_binary, Flavor};
pub use error::{Error, ReplicationProblem};
pub use replication::{Cluster, ClusterOptions};
pub use server::{raise_nofile_limit, LocalServer, ServerOptions};
pub use test_server::{test_server, TestServer};

/// Result alias for dbkit operations.
pub type Result<T> = std::result::Result<T, Error>;
