//! `PooledBackend`: a checked-out backend that goes back through `recycle::decide` on drop,
//! whatever path the session took (an early `?`, a cancelled future, a panic).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::reset::{ResetPolicy, Resets};
use super::Pool;
use crate::conn::BackendConn;

pub struct PooledBackend {
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
    pub fn report_resets_to(&mut self, resets: Arc<Resets>) {
        self.policy.tracker = Some(resets);
    }

    /// Nobody waits on this backend's state (no transaction, no lock): its reset may wait
    /// for a free execution slot.
    pub fn defer_reset(&mut self) {
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
