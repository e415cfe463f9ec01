//! The single decision about what happens to a backend connection: when a session gives it
//! back, and on each of the pool's side paths (the idle sweep, a deferred reset that waited
//! too long, a health check, an eviction, shutdown). `decide` takes plain facts, not a live
//! connection, so every outcome is tested in a table below.
//!
//! Counters: each `Occasion::Checkin` outcome counts in `Stats::recycled` (`release`,
//! `reset`, `close`), and every `Recycle::Close` counts its reason in
//! `Stats::backend_closed`; the pool does both where it carries the verdict out.

use std::time::{Duration, Instant};

use crate::conn::backend::Health;
use crate::conn::BackendConn;
use crate::stats::BackendCloseReason;

/// What happens to a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recycle {
    /// Back to (or stays on) the idle list as it is (its movable state is recorded and
    /// replayed as needed).
    Release,
    /// COM_RESET_CONNECTION first: it carries state no other client may see.
    Reset,
    /// Close it.
    Close(BackendCloseReason),
}

/// Facts about the pool that the decision needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolFacts {
    pub(crate) closed: bool,
    pub(crate) open: u32,
    pub(crate) max_open: u32,
    /// `server_lifetime`; zero: no limit.
    pub(crate) lifetime: Duration,
}

/// Facts about the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnFacts {
    pub(crate) health: Health,
    /// Since it was opened.
    pub(crate) age: Duration,
    /// It opened under globals the server no longer has, and no session that logged in
    /// under them is left (`pool::globals`).
    pub(crate) retired: bool,
}

impl ConnFacts {
    /// `retired`: as `pool::Globals::retired` says of its generation.
    pub(crate) fn of(conn: &BackendConn, now: Instant, retired: bool) -> ConnFacts {
        ConnFacts {
            health: conn.health,
            age: now.duration_since(conn.created),
            retired,
        }
    }
}

/// Why the pool asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Occasion {
    /// A session gave the backend back (`Pool::checkin`).
    Checkin,
    /// The upkeep sweep looks at an idle backend (`Pool::close_idle_older_than`).
    /// `idle_expired`: unused for `idle_timeout`; `spare`: its group may lose it (it keeps
    /// more than `min_idle`, or it is not the warm group).
    IdleSweep { idle_expired: bool, spare: bool },
    /// The sweep looks at a dirty backend waiting for a free slot to be reset;
    /// `waited_out`: it waited `idle_timeout`.
    DeferredReset { waited_out: bool },
    /// An idle backend's ping answered (`healthy`) or not (`Pool::check_idle`).
    HealthCheck { healthy: bool },
    /// Another group needs its place at max_backend_connections (`Pool::checkout`,
    /// `Pool::open_fresh`).
    Evict,
    /// The pool stops (`Pool::close_all`).
    Shutdown,
}

/// A backend is never returned in an unknown state: broken ones close, dirty ones are reset.
pub(crate) fn decide(conn: ConnFacts, pool: &PoolFacts, occasion: Occasion) -> Recycle {
    let too_old = !pool.lifetime.is_zero() && conn.age >= pool.lifetime;
    match occasion {
        Occasion::Checkin => {
            if conn.health == Health::Broken {
                Recycle::Close(BackendCloseReason::Broken)
            } else if pool.closed {
                Recycle::Close(BackendCloseReason::Shutdown)
            } else if pool.open > pool.max_open {
                Recycle::Close(BackendCloseReason::OverLimit)
            } else if too_old {
                Recycle::Close(BackendCloseReason::Lifetime)
            } else if conn.retired {
                Recycle::Close(BackendCloseReason::Retired)
            } else if conn.health == Health::Dirty {
                Recycle::Reset
            } else {
                Recycle::Release
            }
        }
        Occasion::IdleSweep {
            idle_expired,
            spare,
        } => {
            if too_old {
                Recycle::Close(BackendCloseReason::Lifetime)
            } else if conn.retired {
                Recycle::Close(BackendCloseReason::Retired)
            } else if idle_expired && spare {
                Recycle::Close(BackendCloseReason::IdleTimeout)
            } else {
                Recycle::Release
            }
        }
        // The server cleans up on close: no slot needed.
        Occasion::DeferredReset { waited_out: true } => {
            Recycle::Close(BackendCloseReason::IdleTimeout)
        }
        Occasion::DeferredReset { waited_out: false } => Recycle::Reset,
        Occasion::HealthCheck { healthy: true } => Recycle::Release,
        Occasion::HealthCheck { healthy: false } => Recycle::Close(BackendCloseReason::HealthCheck),
        Occasion::Evict => Recycle::Close(BackendCloseReason::Evicted),
        Occasion::Shutdown => Recycle::Close(BackendCloseReason::Shutdown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendCloseReason as C;

    const HOUR: Duration = Duration::from_secs(3600);

    fn pool(closed: bool, open: u32, lifetime: Duration) -> PoolFacts {
        PoolFacts {
            closed,
            open,
            max_open: 10,
            lifetime,
        }
    }

    fn conn(health: Health, age: Duration) -> ConnFacts {
        ConnFacts {
            health,
            age,
            retired: false,
        }
    }

    fn retired(health: Health) -> ConnFacts {
        ConnFacts {
            health,
            age: Duration::from_secs(1),
            retired: true,
        }
    }

    #[test]
    fn every_outcome_of_every_occasion() {
        let young = Duration::from_secs(1);
        let old = 2 * HOUR;
        let ok = pool(false, 5, HOUR);
        let sweep = |idle_expired, spare| Occasion::IdleSweep {
            idle_expired,
            spare,
        };
        #[rustfmt::skip]
        let table: &[(ConnFacts, PoolFacts, Occasion, Recycle)] = &[
            // Checkin: broken first, then shutdown, over limit, lifetime, dirty, clean.
            (conn(Health::Broken, old), pool(true, 11, HOUR), Occasion::Checkin, Recycle::Close(C::Broken)),
            (conn(Health::Dirty, old), pool(true, 11, HOUR), Occasion::Checkin, Recycle::Close(C::Shutdown)),
            (conn(Health::Dirty, old), pool(false, 11, HOUR), Occasion::Checkin, Recycle::Close(C::OverLimit)),
            (conn(Health::Dirty, old), ok, Occasion::Checkin, Recycle::Close(C::Lifetime)),
            (conn(Health::Dirty, young), ok, Occasion::Checkin, Recycle::Reset),
            (conn(Health::Clean, young), ok, Occasion::Checkin, Recycle::Release),
            (conn(Health::Clean, young), pool(false, 10, HOUR), Occasion::Checkin, Recycle::Release),
            // Opened under globals nobody sees any more: closed, dirty or clean.
            (retired(Health::Clean), ok, Occasion::Checkin, Recycle::Close(C::Retired)),
            (retired(Health::Dirty), ok, Occasion::Checkin, Recycle::Close(C::Retired)),
            (retired(Health::Broken), ok, Occasion::Checkin, Recycle::Close(C::Broken)),
            (retired(Health::Clean), ok, sweep(false, false), Recycle::Close(C::Retired)),
            // A zero lifetime never expires.
            (conn(Health::Clean, old), pool(false, 5, Duration::ZERO), Occasion::Checkin, Recycle::Release),
            // Idle sweep: lifetime beats min_idle; idle_timeout only for a spare one.
            (conn(Health::Clean, old), ok, sweep(false, false), Recycle::Close(C::Lifetime)),
            (conn(Health::Clean, young), ok, sweep(true, true), Recycle::Close(C::IdleTimeout)),
            (conn(Health::Clean, young), ok, sweep(true, false), Recycle::Release),
            (conn(Health::Clean, young), ok, sweep(false, true), Recycle::Release),
            (conn(Health::Dirty, young), ok, Occasion::DeferredReset { waited_out: true }, Recycle::Close(C::IdleTimeout)),
            (conn(Health::Dirty, young), ok, Occasion::DeferredReset { waited_out: false }, Recycle::Reset),
            (conn(Health::Clean, young), ok, Occasion::HealthCheck { healthy: true }, Recycle::Release),
            (conn(Health::Clean, young), ok, Occasion::HealthCheck { healthy: false }, Recycle::Close(C::HealthCheck)),
            (conn(Health::Clean, young), ok, Occasion::Evict, Recycle::Close(C::Evicted)),
            (conn(Health::Dirty, young), ok, Occasion::Evict, Recycle::Close(C::Evicted)),
            (conn(Health::Clean, young), ok, Occasion::Shutdown, Recycle::Close(C::Shutdown)),
        ];
        for (i, (c, p, occasion, want)) in table.iter().enumerate() {
            assert_eq!(
                decide(*c, p, *occasion),
                *want,
                "row {i}: {c:?} {p:?} {occasion:?}"
            );
        }
    }
}
