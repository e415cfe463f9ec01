//! How the pool opens a backend connection: the one connect every path shares (a checkout,
//! a fresh backend, the reconnect loop, a control connection), counted, with the server's
//! greeting and max_connections learnt; a failure recorded, which may start the reconnect
//! loop; and the close of an idle backend evicted to make room.

use std::time::{Duration, Instant};

use super::outage;
use super::recycle::{self, ConnFacts, Occasion, Recycle};
use super::{take_any_idle, Error, Pool, PooledBackend};
use crate::conn::backend::{BackendTarget, PoolKey};
use crate::conn::{self, BackendConn};
use crate::stats::Stats;

impl Pool {
    /// A brand-new backend (no schema selected), making room by evicting an idle one if the
    /// cap is reached. Used when a session must leave a schema behind. If the server goes
    /// down meanwhile, waits for the reconnect loop until `until`, like `checkout`.
    pub(crate) async fn open_fresh(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        until: Instant,
    ) -> Result<PooledBackend, Error> {
        let started = Instant::now();
        loop {
            match self.open_fresh_once(key, target).await {
                Err(Error::Connect { kind, .. }) if !kind.is_permanent() => {
                    self.wait_up(until, started).await?
                }
                other => return other,
            }
        }
    }

    /// Waits until `until` for the reconnect loop to find the server up; the down error
    /// (counting from `started`) if it does not.
    pub(super) async fn wait_up(&self, until: Instant, started: Instant) -> Result<(), Error> {
        let mut up = self.shared.outage.subscribe();
        let back = tokio::time::timeout_at(until.into(), up.wait_for(|up| *up)).await;
        if matches!(back, Ok(Ok(_))) {
            Ok(())
        } else {
            Err(self.down_error(started.elapsed()))
        }
    }

    async fn open_fresh_once(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
    ) -> Result<PooledBackend, Error> {
        let evicted = {
            let mut b = self.lock();
            if b.open < self.allowed_open() {
                b.open += 1;
                None
            } else {
                match take_any_idle(&mut b).or_else(|| Self::take_any_dirty(&mut b)) {
                    Some(victim) => Some(victim),
                    None => {
                        return Err(Error::QueueTimeout {
                            waited: Duration::ZERO,
                            pool_size: self.shared.slots.size(),
                            queued: self.shared.slots.waiting(),
                        })
                    }
                }
            }
        };
        self.evicted(evicted);
        self.open_new(key, target).await
    }

    /// Opens a backend for which a place in `open` was already reserved.
    pub(super) async fn open_new(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
    ) -> Result<PooledBackend, Error> {
        self.remember_group(key, target);
        let conn = self.connect_reserved(key, target).await?;
        Ok(PooledBackend::new(conn, self.clone()))
    }

    /// Connects for a reserved place; on failure gives the place back, records the error,
    /// and starts the reconnect loop if the server looks down.
    pub(super) async fn connect_reserved(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
    ) -> Result<BackendConn, Error> {
        match self.open_conn(key, target, false).await {
            Ok(conn) => Ok(conn),
            Err(source) => {
                self.lock().open -= 1;
                self.shared.freed.notify_one();
                Err(self.connect_failed(key, target, source))
            }
        }
    }

    /// Opens and logs in a backend connection and records it: the count, the server's
    /// greeting, and (once) the server's max_connections.
    /// A control connection (`control`) is counted apart from the pool's own.
    pub(super) async fn open_conn(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        control: bool,
    ) -> Result<BackendConn, conn::Error> {
        // The globals it opens under: a session of an older generation may have asked.
        let key = PoolKey {
            globals: self.shared.globals.current(),
            ..key.clone()
        };
        let mut conn = BackendConn::connect(target, key).await?;
        let stats = &self.shared.stats;
        Stats::incr(if control {
            &stats.control_connects
        } else {
            &stats.backend_connects
        });
        self.shared.server.learn(&conn.server);
        self.learn_limit(&mut conn).await?;
        Ok(conn)
    }

    /// Records a failed connect, and starts the reconnect loop if the server looks down.
    pub(super) fn connect_failed(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        source: conn::Error,
    ) -> Error {
        let kind = outage::classify(&source);
        Stats::incr(&self.shared.stats.backend_connect_errors);
        self.shared.stats.connect_failed(kind);
        if self
            .shared
            .outage
            .failed(&target.addr.to_string(), kind, source.to_string())
        {
            self.spawn_reconnect(key.clone(), target.clone());
        }
        Error::Connect {
            addr: target.addr.to_string(),
            user: target.user.clone(),
            kind,
            source,
        }
    }

    /// Counts the close of an evicted backend, whose place in `open` the caller reuses.
    pub(super) fn evicted(&self, victim: Option<BackendConn>) {
        let Some(conn) = victim else {
            return;
        };
        let now = Instant::now();
        let facts = self.facts(0);
        if let Recycle::Close(reason) = recycle::decide(
            ConnFacts::of(&conn, now, self.retired(&conn)),
            &facts,
            Occasion::Evict,
        ) {
            self.shared.stats.backend_closed(reason);
        }
        drop(conn);
    }
}
