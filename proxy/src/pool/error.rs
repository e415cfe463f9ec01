//! Pool errors: cheap, data-light, and each knows what the client should see.

use std::time::Duration;

use super::outage::OutageView;
use super::places::PinRefusal;
use crate::stats::ConnectFailure;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The session waited `queue_timeout` for an execution slot or a backend connection.
    #[error("waited {waited:?} for a backend (pool_size={pool_size}, {queued} queued)")]
    QueueTimeout {
        waited: Duration,
        pool_size: u32,
        queued: usize,
    },
    /// Opening a backend connection failed. Permanent kinds (access denied, unknown database)
    /// reach the client at once; others make the checkout wait for the reconnect loop.
    #[error("cannot connect to backend {addr} as {user}: {source}")]
    Connect {
        addr: String,
        user: String,
        kind: ConnectFailure,
        #[source]
        source: crate::conn::Error,
    },
    /// The server stayed unreachable for as long as the statement could wait.
    #[error("backend {} is down (waited {waited:?})", view.addr)]
    BackendDown {
        view: Box<OutageView>,
        waited: Duration,
    },
    /// A statement that would pin its session found no pinned place free within `pin_wait`.
    #[error("no backend connection to pin ({} of {} pinned places taken)", .0.pinned, .0.cap)]
    PinLimit(Box<PinRefusal>),
    /// The server accepted the connection but did not answer a login-time check in time.
    #[error("backend {addr} did not answer (waited {waited:?})")]
    NoAnswer { addr: String, waited: Duration },
    /// The pool is shutting down.
    #[error("the pool is closed")]
    Closed,
}
