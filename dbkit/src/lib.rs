//! dbkit: start, pin, stop and clean up a private MariaDB/MySQL server.
//!
//! Used by `loadgen` at run time and by every integration test in the workspace.
//! It needs only `std`, `libc` and `tempfile` (no async runtime), so a test can start
//! a server before it builds its own runtime.
//!
//! # Layout
//! - [`error`]: the one error type, [`Error`].
//! - [`binary`]: finding `mariadbd`/`mysqld` and telling the two flavours apart.
//! - [`affinity`]: CPU pinning with `sched_setaffinity` (processes and single threads).
//! - [`spawn`]: the long-lived spawner thread that starts children with `PR_SET_PDEATHSIG`.
//! - [`greeting`]: waiting for a server by reading its protocol-10 greeting.
//! - [`server`]: [`LocalServer`] and [`ServerOptions`].
//! - [`test_server`]: the once-per-process [`TestServer`] for integration tests.

pub mod affinity;
pub mod binary;
pub mod error;
pub mod greeting;
pub mod server;
pub mod spawn;
pub mod test_server;

pub use binary::{find_server_binary, Flavor};
pub use error::Error;
pub use server::{raise_nofile_limit, LocalServer, ServerOptions};
pub use test_server::{test_server, TestServer};

/// Result alias for dbkit operations.
pub type Result<T> = std::result::Result<T, Error>;
