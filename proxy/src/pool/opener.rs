//! Backend connections opened outside a checkout: the one reconnect loop of an outage and
//! the `min_idle` warm-up. Both hand what they open to the idle list.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{outage, Pool};
use crate::conn::backend::{BackendTarget, PoolKey};
use crate::conn::BackendConn;
use crate::stats::Stats;

impl Pool {
    pub(super) fn spawn_reconnect(&self, key: PoolKey, target: BackendTarget) {
        let pool = self.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(pool.reconnect(key, target));
        }
    }

    /// The one reconnect loop of an outage: exponential backoff until the server answers.
    /// A connection it opens goes to the idle list for the first waiter.
    async fn reconnect(self, key: PoolKey, target: BackendTarget) {
        let mut delay = outage::BACKOFF_START;
        loop {
            let (pause, next) = outage::next_backoff(delay);
            delay = next;
            tokio::time::sleep(pause).await;
            if self.shared.closed.load(Ordering::Relaxed) {
                // Shutting down: waiters were woken by close_all and see the pool closed.
                self.shared.outage.stop_reconnecting();
                return;
            }
            match self.open_conn(&key, &target, false).await {
                Ok(conn) => {
                    self.adopt(conn);
                    self.shared.outage.back_up();
                    return;
                }
                Err(e) => {
                    let kind = outage::classify(&e);
                    Stats::incr(&self.shared.stats.backend_connect_errors);
                    self.shared.stats.connect_failed(kind);
                    if kind.is_permanent() {
                        // The server answers (it refuses this account): it is up.
                        self.shared.outage.still_down(kind, e.to_string());
                        self.shared.outage.back_up();
                        return;
                    }
                    self.shared.outage.still_down(kind, e.to_string());
                }
            }
        }
    }

    /// Takes a connection opened outside a checkout into the idle list, if the cap allows.
    fn adopt(&self, conn: BackendConn) {
        {
            let mut b = self.lock();
            if b.open >= self.allowed_open() {
                return;
            }
            b.open += 1;
        }
        self.put_idle(conn);
    }

    pub(super) fn remember_group(&self, key: &PoolKey, target: &BackendTarget) {
        let mut warm = self.shared.warm.lock().unwrap_or_else(|p| p.into_inner());
        if warm.as_ref().map(|w| &w.0) != Some(key) {
            *warm = Some(Arc::new((key.clone(), target.clone())));
        }
    }

    /// Sets the group `min_idle` warms before any client has connected.
    pub(crate) fn set_warm_group(&self, key: PoolKey, target: BackendTarget) {
        self.remember_group(&key, &target);
    }

    /// Opens connections (in the background) until the warm group has `min_idle` idle ones,
    /// within the cap; nothing while the server is down (the reconnect loop comes first).
    pub(crate) fn warm_up(&self, min_idle: u32) {
        if min_idle == 0
            || !self.shared.outage.is_up()
            || self.shared.closed.load(Ordering::Relaxed)
        {
            return;
        }
        let Some(group) = self
            .shared
            .warm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return;
        };
        let missing = {
            let mut b = self.lock();
            let idle = b.idle.get(&group.0).map_or(0, Vec::len) as u32;
            let in_flight = self.shared.warming.load(Ordering::Relaxed)
                + self.shared.checking.load(Ordering::Relaxed);
            let room = self.allowed_open().saturating_sub(b.open);
            let n = min_idle.saturating_sub(idle + in_flight).min(room);
            b.open += n;
            n
        };
        for _ in 0..missing {
            self.shared.warming.fetch_add(1, Ordering::Relaxed);
            let (pool, group) = (self.clone(), group.clone());
            tokio::spawn(async move {
                if let Ok(conn) = pool.connect_reserved(&group.0, &group.1).await {
                    pool.put_idle(conn);
                }
                pool.shared.warming.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }
}
