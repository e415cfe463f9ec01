//! Pool upkeep, driven by `app::maintenance` and shutdown: idle and lifetime closes, health
//! checks of idle backends, and closing everything at the end. What happens to each
//! backend is `recycle::decide`'s verdict.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::recycle::{self, ConnFacts, Occasion, Recycle};
use super::Pool;
use crate::conn::backend::PoolKey;
use crate::conn::BackendConn;

impl Pool {
    /// Closes idle backends that were unused for `idle_timeout`, keeping `min_idle` of the
    /// warm group (other groups' idle backends all time out), and idle ones older than
    /// `server_lifetime` (warm-up replaces them). A zero duration disables either.
    pub(crate) fn close_idle_older_than(&self, idle_timeout: Duration, min_idle: u32) -> usize {
        let now = Instant::now();
        let warm = self.warm_key();
        let mut victims = Vec::new();
        {
            let mut b = self.lock();
            let facts = self.facts(b.open);
            for (key, list) in b.idle.iter_mut() {
                let mut keep = if Some(key) == warm.as_ref() {
                    list.len() as u32
                } else {
                    0
                };
                // Oldest first, so the kept ones are the most recently used.
                let mut i = 0;
                while i < list.len() {
                    let occasion = Occasion::IdleSweep {
                        idle_expired: !idle_timeout.is_zero()
                            && now.duration_since(list[i].last_used) >= idle_timeout,
                        spare: keep > min_idle || keep == 0,
                    };
                    let verdict = recycle::decide(
                        ConnFacts::of(&list[i], now, self.retired(&list[i])),
                        &facts,
                        occasion,
                    );
                    if let Recycle::Close(reason) = verdict {
                        let conn = list.remove(i);
                        self.shared.stats.backend_closed(reason);
                        victims.push(conn);
                        keep = keep.saturating_sub(1);
                    } else {
                        i += 1;
                    }
                }
            }
            b.idle_count -= victims.len() as u32;
            // Deferred resets that waited this long for a slot: the server cleans up on close.
            let before = victims.len();
            for list in b.dirty.values_mut() {
                let mut i = 0;
                while i < list.len() {
                    let waited = now.duration_since(list[i].last_used);
                    let occasion = Occasion::DeferredReset {
                        waited_out: !idle_timeout.is_zero() && waited >= idle_timeout,
                    };
                    let verdict = recycle::decide(
                        ConnFacts::of(&list[i], now, self.retired(&list[i])),
                        &facts,
                        occasion,
                    );
                    if let Recycle::Close(reason) = verdict {
                        victims.push(list.remove(i));
                        self.shared.stats.backend_closed(reason);
                    } else {
                        i += 1;
                    }
                }
            }
            b.dirty_count -= (victims.len() - before) as u32;
            b.open -= victims.len() as u32;
        }
        let n = victims.len();
        if n > 0 {
            self.shared.freed.notify_waiters();
        }
        self.close_idle_control(idle_timeout);
        self.drain_dirty();
        n
    }

    fn warm_key(&self) -> Option<PoolKey> {
        let warm = self.shared.warm.lock().unwrap_or_else(|p| p.into_inner());
        warm.as_ref().map(|w| w.0.clone())
    }

    /// Pings the idle backends, one at a time and each under a free execution slot: a health
    /// check is work on the server too, and a large idle pool (after many pinned sessions
    /// left) must not ping all at once. Stops early while statements queue; a checkout
    /// checks a backend's socket itself. One round at a time.
    pub(crate) async fn check_idle(&self) {
        if self.shared.health_round.swap(true, Ordering::AcqRel) {
            return;
        }
        let ids: Vec<u64> = self.lock().idle.values().flatten().map(|c| c.id).collect();
        for id in ids {
            let Some(slot) = self.shared.slots.try_acquire() else {
                break;
            };
            // Used (or closed) in the meantime: nothing to check.
            let Some(mut conn) = self.take_idle_by_id(id) else {
                continue;
            };
            let ping = tokio::time::timeout(Duration::from_secs(2), conn.ping()).await;
            self.give_back(conn, matches!(ping, Ok(Ok(()))));
            drop(slot);
        }
        self.shared.health_round.store(false, Ordering::Release);
    }

    fn take_idle_by_id(&self, id: u64) -> Option<BackendConn> {
        let mut b = self.lock();
        let list = b.idle.values_mut().find(|l| l.iter().any(|c| c.id == id))?;
        let at = list.iter().position(|c| c.id == id)?;
        let conn = list.swap_remove(at);
        b.idle_count -= 1;
        self.shared.checking.fetch_add(1, Ordering::Relaxed);
        Some(conn)
    }

    /// Returns a backend `take_idle_by_id` took out for a health check.
    fn give_back(&self, conn: BackendConn, healthy: bool) {
        self.shared.checking.fetch_sub(1, Ordering::Relaxed);
        let facts = self.facts(0);
        let occasion = Occasion::HealthCheck { healthy };
        match recycle::decide(
            ConnFacts::of(&conn, Instant::now(), self.retired(&conn)),
            &facts,
            occasion,
        ) {
            Recycle::Close(reason) => self.close(conn, reason),
            Recycle::Release | Recycle::Reset => self.put_idle(conn),
        }
    }

    /// Stops handing out backends and closes the idle ones.
    pub(crate) fn close_all(&self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        self.shared.slots.close();
        let idle = {
            let mut b = self.lock();
            let mut all: Vec<BackendConn> = b.idle.drain().flat_map(|(_, v)| v).collect();
            all.extend(b.dirty.drain().flat_map(|(_, v)| v));
            b.open -= all.len() as u32;
            b.idle_count = 0;
            b.dirty_count = 0;
            all
        };
        let (now, facts) = (Instant::now(), self.facts(0));
        for conn in &idle {
            if let Recycle::Close(reason) = recycle::decide(
                ConnFacts::of(conn, now, self.retired(conn)),
                &facts,
                Occasion::Shutdown,
            ) {
                self.shared.stats.backend_closed(reason);
            }
        }
        self.close_control();
        self.shared.freed.notify_waiters();
    }

    /// Shows each idle backend to `f` (SHOW SERVERS) under the pool lock: `f` must be quick.
    pub fn for_each_idle(&self, mut f: impl FnMut(&BackendConn)) {
        self.lock().idle.values().flatten().for_each(&mut f);
    }
}
