//! Resetting a backend that comes back with state no other client may see
//! (COM_RESET_CONNECTION, `recycle::Recycle::Reset`), and when that happens.
//!
//! A reset is work on the server like any statement, so it runs under an execution slot
//! whenever it can wait for one: a crowd of pinned sessions leaving at once must not run a
//! crowd of resets beside the statements `pool_size` admits. Backends of sessions that left
//! with only pinned state (temporary tables, user variables, ...) are *deferred*: reset at
//! once if a slot is free, otherwise kept on a dirty list, from which a checkout of the same
//! group takes one and resets it inside its own slot (before opening a new connection), and
//! the maintenance tick resets the rest whenever slots are free. Nobody waits on such state.
//!
//! A backend that may hold what other sessions wait for (an open transaction, a lock) is
//! reset at once, slot or not: the statements that hold the slots may be the ones waiting for
//! its locks. So is the backend of a session that goes on (COM_RESET_CONNECTION,
//! COM_CHANGE_USER): its next statement waits for that reset ([`Resets::settled`]), so the
//! server shows it a clean session, as MySQL does.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{Pool, PooledBackend, Slot};
use crate::conn::backend::{Health, PoolKey};
use crate::conn::BackendConn;
use crate::stats::BackendCloseReason;

/// A reset that takes longer is given up and the connection closed.
const RESET_TIMEOUT: Duration = Duration::from_secs(10);

/// How a returned backend that needs a reset may be treated.
#[derive(Clone, Default)]
pub(crate) struct ResetPolicy {
    /// No one waits on its state: it may wait for a free execution slot.
    pub(crate) deferrable: bool,
    /// Counts the reset until it is done, for a session that goes on.
    pub(crate) tracker: Option<Arc<Resets>>,
}

/// A session's resets still running (see the module doc).
#[derive(Default)]
pub(crate) struct Resets {
    pending: AtomicU32,
    done: Notify,
}

impl Resets {
    /// A reset counted here is still running.
    pub(crate) fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) != 0
    }

    /// Waits (at most `within`) until every reset counted here has finished.
    pub(crate) async fn settled(&self, within: Duration) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let wait = async {
            loop {
                let done = self.done.notified();
                tokio::pin!(done);
                done.as_mut().enable();
                if self.pending.load(Ordering::Acquire) == 0 {
                    return;
                }
                done.await;
            }
        };
        let _ = tokio::time::timeout(within, wait).await;
    }

    fn start(tracker: &Option<Arc<Resets>>) {
        if let Some(t) = tracker {
            t.pending.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn finish(tracker: &Option<Arc<Resets>>) {
        if let Some(t) = tracker {
            t.pending.fetch_sub(1, Ordering::AcqRel);
            t.done.notify_waiters();
        }
    }
}

impl Pool {
    /// A backend `recycle::decide` sent for a reset.
    pub(super) fn reset_returned(&self, conn: BackendConn, policy: ResetPolicy) {
        if !policy.deferrable {
            return self.spawn_reset(conn, None, policy.tracker);
        }
        match self.shared.slots.try_acquire() {
            Some(slot) => self.spawn_reset(conn, Some(slot), policy.tracker),
            None => self.put_dirty(conn),
        }
    }

    /// Resets `conn` in the background (holding `slot`, if any, until it is back in the
    /// idle list) and puts it back, or closes it if the reset fails.
    fn spawn_reset(&self, mut conn: BackendConn, slot: Option<Slot>, tracker: Option<Arc<Resets>>) {
        let pool = self.clone();
        Resets::start(&tracker);
        let spawned = tokio::runtime::Handle::try_current().map(|h| {
            let tracker = tracker.clone();
            h.spawn(async move {
                match tokio::time::timeout(RESET_TIMEOUT, conn.reset()).await {
                    Ok(Ok(())) => pool.put_idle(conn),
                    _ => pool.close(conn, BackendCloseReason::ResetFailed),
                }
                // The backend first, then the slot (whose next holder may want it).
                let drained = slot.is_some();
                drop(slot);
                Resets::finish(&tracker);
                if drained {
                    // Keep draining while nobody queues for the slots.
                    pool.drain_dirty();
                }
            })
        });
        if spawned.is_err() {
            // No runtime (process exit): nothing can reuse it anyway.
            self.forget_one();
            Resets::finish(&tracker);
        }
    }

    fn put_dirty(&self, conn: BackendConn) {
        {
            let mut b = self.lock();
            b.dirty_count += 1;
            b.dirty.entry(conn.key.clone()).or_default().push(conn);
        }
        // A checkout waiting for room may reset and use it.
        self.shared.freed.notify_one();
    }

    /// A deferred backend of `key`, if any (the checkout resets it in its own slot).
    pub(super) fn take_dirty(b: &mut super::Backends, key: &PoolKey) -> Option<BackendConn> {
        let conn = b.dirty.get_mut(key)?.pop()?;
        b.dirty_count -= 1;
        Some(conn)
    }

    /// Any deferred backend (to close, making room for another group).
    pub(super) fn take_any_dirty(b: &mut super::Backends) -> Option<BackendConn> {
        let conn = b.dirty.values_mut().find_map(|l| l.pop())?;
        b.dirty_count -= 1;
        Some(conn)
    }

    /// Resets a deferred backend for the checkout that took it; `None` if it had to be
    /// closed instead (the checkout then looks again).
    pub(super) async fn reset_for_checkout(&self, mut conn: BackendConn) -> Option<PooledBackend> {
        if conn.stream.closed_while_idle() {
            self.close(conn, BackendCloseReason::Broken);
            return None;
        }
        // Mid-reset until it is done: if this future is dropped, the backend closes.
        conn.health = Health::Broken;
        let mut guarded = PooledBackend::new(conn, self.clone());
        let reset = tokio::time::timeout(RESET_TIMEOUT, guarded.reset()).await;
        if matches!(reset, Ok(Ok(()))) {
            return Some(guarded);
        }
        self.close(guarded.into_conn(), BackendCloseReason::ResetFailed);
        None
    }

    /// Resets deferred backends while execution slots are free (maintenance tick).
    pub(super) fn drain_dirty(&self) {
        while let Some(slot) = self.shared.slots.try_acquire() {
            let Some(conn) = Self::take_any_dirty(&mut self.lock()) else {
                return;
            };
            self.spawn_reset(conn, Some(slot), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settled_waits_for_every_counted_reset_and_no_longer() {
        let resets = Arc::new(Resets::default());
        let started = std::time::Instant::now();
        resets.settled(Duration::from_secs(5)).await;
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "nothing pending"
        );
        let tracker = Some(resets.clone());
        Resets::start(&tracker);
        Resets::start(&tracker);
        let finisher = tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(30)).await;
                Resets::finish(&tracker);
            }
        });
        let started = std::time::Instant::now();
        resets.settled(Duration::from_secs(5)).await;
        assert!(
            started.elapsed() >= Duration::from_millis(60),
            "waited for both"
        );
        assert_eq!(resets.pending.load(Ordering::Acquire), 0);
        finisher.await.unwrap();
        // A reset that never ends does not hold the session for ever.
        Resets::start(&Some(resets.clone()));
        let started = std::time::Instant::now();
        resets.settled(Duration::from_millis(40)).await;
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
