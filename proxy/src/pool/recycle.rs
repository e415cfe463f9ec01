//! The single decision about a backend connection that comes back to the pool.

use std::time::{Duration, Instant};

use crate::conn::backend::Health;
use crate::conn::BackendConn;
use crate::stats::BackendCloseReason;

/// What happens to a returned backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recycle {
    /// Back to the idle list as it is (its movable state is recorded and replayed as needed).
    Release,
    /// COM_RESET_CONNECTION first: it carries state no other client may see.
    Reset,
    /// Close it.
    Close(BackendCloseReason),
}

/// Facts about the pool that the decision needs.
pub struct PoolFacts {
    pub closed: bool,
    pub open: u32,
    pub max_open: u32,
    pub lifetime: Duration,
}

/// A backend is never returned in an unknown state: broken ones close, dirty ones are reset.
pub fn decide(conn: &BackendConn, facts: &PoolFacts, now: Instant) -> Recycle {
    if conn.health == Health::Broken {
        Recycle::Close(BackendCloseReason::Broken)
    } else if facts.closed {
        Recycle::Close(BackendCloseReason::Shutdown)
    } else if facts.open > facts.max_open {
        Recycle::Close(BackendCloseReason::OverLimit)
    } else if !facts.lifetime.is_zero() && now.duration_since(conn.created) >= facts.lifetime {
        Recycle::Close(BackendCloseReason::Lifetime)
    } else if conn.health == Health::Dirty {
        Recycle::Reset
    } else {
        Recycle::Release
    }
}
