//! `PooledBackend`: a checked-out backend that goes back through `recycle::decide` on drop,
//! whatever path the session took (an early `?`, a cancelled future, a panic), and that way
//! back itself (`Pool::checkin`, the idle list).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::recycle::{self, ConnFacts, Occasion, PoolFacts, Recycle};
use super::reset::{ResetPolicy, Resets};
use super::{Backends, Pool};
use crate::conn::backend::Health;
use crate::conn::BackendConn;
use crate::stats::RecycleOutcome;

pub(crate) struct PooledBackend {
    conn: Option<BackendConn>,
    pool: Pool,
    /// How a reset on return may be run (`pool::reset`).
    policy: ResetPolicy,
}

impl PooledBackend {
    pub(super) fn new(conn: BackendConn, pool: Pool) -> Self {
        PooledBackend {
            conn: Some(conn),
            pool,
            policy: ResetPolicy::default(),
        }
    }

    /// A reset this backend needs on return is counted in `resets` until it is done.
    pub(crate) fn report_resets_to(&mut self, resets: Arc<Resets>) {
        self.policy.tracker = Some(resets);
    }

    /// Nobody waits on this backend's state (no transaction, no lock): its reset may wait
    /// for a free execution slot.
    pub(crate) fn defer_reset(&mut self) {
        self.policy.deferrable = true;
        self.policy.tracker = None;
    }

    /// The connection itself, bypassing the check-in.
    pub(super) fn into_conn(mut self) -> BackendConn {
        self.conn.take().expect("backend present until drop")
    }
}

impl Deref for PooledBackend {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        self.conn.as_ref().expect("backend present until drop")
    }
}

impl DerefMut for PooledBackend {
    fn deref_mut(&mut self) -> &mut BackendConn {
        self.conn.as_mut().expect("backend present until drop")
    }
}

impl Drop for PooledBackend {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.checkin(conn, std::mem::take(&mut self.policy));
        }
    }
}

impl Pool {
    /// The return path of every backend (called from `PooledBackend::drop`).
    pub(crate) fn checkin(&self, mut conn: BackendConn, policy: ResetPolicy) {
        let now = Instant::now();
        conn.last_used = now;
        if self.fenced(conn.thread_id) {
            // A KILL QUERY may still land on it (`fence`): nobody else may get it.
            conn.health = Health::Broken;
        }
        // One lock for the decision and, for the backend that goes back as it is (nearly
        // every one), its place on the idle list.
        let mut b = self.lock();
        let facts = self.facts(b.open);
        match recycle::decide(
            ConnFacts::of(&conn, now, self.retired(&conn)),
            &facts,
            Occasion::Checkin,
        ) {
            Recycle::Release => {
                push_idle(&mut b, conn);
                drop(b);
                self.shared.freed.notify_one();
                self.shared.stats.recycled(RecycleOutcome::Release);
            }
            Recycle::Reset => {
                drop(b);
                self.shared.stats.recycled(RecycleOutcome::Reset);
                self.reset_returned(conn, policy);
            }
            Recycle::Close(reason) => {
                drop(b);
                self.shared.stats.recycled(RecycleOutcome::Close);
                self.close(conn, reason);
            }
        }
    }

    /// What `recycle::decide` needs to know about the pool, with `open` read under the lock.
    pub(super) fn facts(&self, open: u32) -> PoolFacts {
        PoolFacts {
            closed: self.shared.closed.load(Ordering::Relaxed),
            open,
            max_open: self.allowed_open(),
            lifetime: Duration::from_secs(self.shared.lifetime_secs.load(Ordering::Relaxed) as u64),
        }
    }

    pub(super) fn put_idle(&self, conn: BackendConn) {
        push_idle(&mut self.lock(), conn);
        self.shared.freed.notify_one();
    }
}

/// A clean backend onto its group's idle list (the caller wakes a waiter).
fn push_idle(b: &mut Backends, conn: BackendConn) {
    debug_assert_eq!(conn.health, Health::Clean);
    b.idle_count += 1;
    // Looked up first: the group exists nearly always, and `entry` would clone the key.
    match b.idle.get_mut(&conn.key) {
        Some(list) => list.push(conn),
        None => b.idle.entry(conn.key.clone()).or_default().push(conn),
    }
}
