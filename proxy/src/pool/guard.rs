//! `PooledBackend`: a checked-out backend that goes back through `recycle::decide` on drop,
//! whatever path the session took (an early `?`, a cancelled future, a panic).

use std::ops::{Deref, DerefMut};

use super::Pool;
use crate::conn::BackendConn;

pub struct PooledBackend {
    conn: Option<BackendConn>,
    pool: Pool,
}

impl PooledBackend {
    pub(super) fn new(conn: BackendConn, pool: Pool) -> Self {
        PooledBackend {
            conn: Some(conn),
            pool,
        }
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
            self.pool.checkin(conn);
        }
    }
}
