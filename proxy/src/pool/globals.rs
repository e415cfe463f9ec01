//! The server's global variables as a session sees them. A connection takes the globals in
//! force when it opens as its session values (`sql_mode`, `max_allowed_packet`, ...), so a
//! direct client sees a `SET GLOBAL` from its next connection on, and never in the one it has.
//! Through sluice a client's connection is its login, and its statements run on pooled
//! backends opened at other times: each backend is labelled with the generation of the
//! globals it opened under (`PoolKey::globals`), each session with the one its login (or
//! COM_RESET_CONNECTION, COM_CHANGE_USER) found, and a session takes only backends of its
//! own generation (its key).
//!
//! The generation moves on when sluice sees the globals change: a `SET GLOBAL` that succeeded
//! through sluice, or the admin console's `RECONNECT` for a change made on the server
//! directly. Backends of an older generation serve the sessions that logged in before; once
//! none of those is left, they close as they come back (`recycle::decide`). A session of an
//! older generation that needs a new connection gets one of the current globals, the only
//! ones the server hands out.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::conn::backend::{BackendTarget, PoolKey};

/// A digest of the globals a new connection takes as its session values (`VARIABLE_SCOPE =
/// 'SESSION'`: the ones with both scopes), as one number. MariaDB only: MySQL has no such
/// table and refuses it, which leaves the watch without an answer (`RECONNECT` there).
const DIGEST: &[u8] =
    b"SELECT CONV(LEFT(MD5(GROUP_CONCAT(VARIABLE_NAME, '=', IFNULL(GLOBAL_VALUE, '') \
    ORDER BY VARIABLE_NAME SEPARATOR ';')), 15), 16, 10) FROM information_schema.SYSTEM_VARIABLES \
    WHERE VARIABLE_SCOPE = 'SESSION'";

/// The watch gives up on a read after this (the control connection may be busy with logins).
const WATCH_WAIT: Duration = Duration::from_secs(2);

/// The generation in force, and the live sessions of each.
#[derive(Default)]
pub(crate) struct Globals {
    current: AtomicU64,
    live: Mutex<BTreeMap<u64, u32>>,
}

/// A session's generation, counted live until it drops.
pub(crate) struct GlobalsHold {
    globals: Arc<Globals>,
    generation: u64,
}

impl Globals {
    /// The generation new connections open under.
    pub(crate) fn current(&self) -> u64 {
        self.current.load(Ordering::Acquire)
    }

    /// The server's globals changed: logins from now on see the new ones.
    pub(crate) fn changed(&self) -> u64 {
        self.current.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The generation a session logging in now sees, held until it drops.
    pub(crate) fn hold(self: &Arc<Self>) -> GlobalsHold {
        let mut live = self.live();
        let generation = self.current();
        *live.entry(generation).or_default() += 1;
        GlobalsHold {
            globals: Arc::clone(self),
            generation,
        }
    }

    /// A backend of `generation` serves nobody any more: it is old, and no session of it
    /// is left.
    pub(crate) fn retired(&self, generation: u64) -> bool {
        generation != self.current() && !self.live().contains_key(&generation)
    }

    fn live(&self) -> MutexGuard<'_, BTreeMap<u64, u32>> {
        // Every mutation is one increment or decrement: a poisoned lock is consistent.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl super::Pool {
    /// Reads the server's globals digest (`DIGEST`) on `key`'s control connection; one other
    /// than the last read means they changed: the generation moves on. That includes a change
    /// a SET GLOBAL through sluice made (and counted) already, since another may have come
    /// with it; the cost is one more generation, rare as SET GLOBAL is.
    pub(crate) async fn watch_globals(&self, key: &PoolKey, target: &BackendTarget) {
        let deadline = Instant::now() + WATCH_WAIT;
        let Some(digest) = self.number_on_control(key, target, DIGEST, deadline).await else {
            return;
        };
        let mut seen = self
            .shared
            .globals_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if seen.is_some_and(|before| before != digest) {
            let generation = self.shared.globals.changed();
            tracing::info!(
                generation,
                "the server's globals changed: logins from now on see the new values"
            );
        }
        *seen = Some(digest);
    }

    /// `conn` opened under globals nobody sees any more (`Globals::retired`).
    pub(super) fn retired(&self, conn: &crate::conn::BackendConn) -> bool {
        self.shared.globals.retired(conn.key.globals)
    }
}

impl GlobalsHold {
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

impl Drop for GlobalsHold {
    fn drop(&mut self) {
        let mut live = self.globals.live();
        if let Some(n) = live.get_mut(&self.generation) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.generation);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_generation_retires_once_its_last_session_leaves() {
        let globals = Arc::new(Globals::default());
        let old = globals.hold();
        assert_eq!(old.generation(), 0);
        assert!(!globals.retired(0), "the current generation never retires");
        assert_eq!(globals.changed(), 1);
        let new = globals.hold();
        assert_eq!(new.generation(), 1);
        assert!(!globals.retired(0), "a session of it is left");
        drop(old);
        assert!(globals.retired(0));
        drop(new);
        assert!(!globals.retired(1));
    }
}
