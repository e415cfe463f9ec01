//! Pool errors: cheap, data-light, and each knows what the client should see.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session waited `queue_timeout` for an execution slot or a backend connection.
    #[error("waited {waited:?} for a backend (pool_size={pool_size}, {queued} queued)")]
    QueueTimeout {
        waited: Duration,
        pool_size: u32,
        queued: usize,
    },
    /// Opening a backend connection failed.
    #[error("cannot connect to backend {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: crate::conn::Error,
    },
    /// The pool is shutting down.
    #[error("the pool is closed")]
    Closed,
}
