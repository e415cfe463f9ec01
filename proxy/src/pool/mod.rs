//! Backend ownership: execution slots (`slots`), idle backend connections grouped by
//! `PoolKey`, the checkout that picks the best one, the check-in decision (`recycle`), the
//! places pinned sessions may hold (`places`), the cap on connections (`limits`) and the
//! control connections of login checks (`control`).
//!
//! The idle lists live under one sync mutex that is never held across an `.await`.
//!
//! What is `pub` here is what the integration tests and loadgen read of a running proxy
//! through `context::Context` (a pool's snapshot, slots, outage, pinned places); the rest is
//! the crate's own (`pub(crate)`).

pub(crate) mod batches;
mod connect;
mod control;
mod error;
mod fence;
mod globals;
mod guard;
pub(crate) mod limiter;
pub(crate) mod limits;
mod maintain;
mod opener;
mod outage;
mod places;
mod recycle;
mod reset;
mod slots;

pub(crate) use crate::conn::backend::replay_score;
pub(crate) use control::CheckError;
pub(crate) use error::Error;
pub(crate) use globals::{Globals, GlobalsHold};
pub(crate) use guard::PooledBackend;
pub(crate) use places::{Hold, PinPlace, PinRefusal};
pub(crate) use reset::Resets;
pub(crate) use slots::{Slot, Slots};

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::config::BackendLimit;
use crate::conn::backend::{BackendTarget, MovableState, PoolKey};
use crate::conn::server_info::ServerInfoCell;
use crate::conn::BackendConn;
use crate::stats::{BackendCloseReason, Stats};
use outage::{Outage, OutageView};

#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    slots: Arc<Slots>,
    backends: Mutex<Backends>,
    freed: Notify,
    /// max_backend_connections in force: `limit` resolved against the server (`limits`).
    max_open: AtomicU32,
    limit: Mutex<BackendLimit>,
    learned: Mutex<limits::Learned>,
    places: places::Places,
    lanes: control::Lanes,
    lifetime_secs: AtomicU32,
    closed: AtomicBool,
    stats: Arc<Stats>,
    /// Is the server reachable; the reconnect loop's flag.
    outage: Outage,
    /// The group `min_idle` keeps warm: the last one that needed a new connection.
    warm: Mutex<Option<Arc<(PoolKey, BackendTarget)>>>,
    /// Warm-up connects in flight, so a slow connect is not started twice.
    warming: AtomicU32,
    /// Idle backends out for a health check: still idle as far as warm-up is concerned.
    checking: AtomicU32,
    /// A health-check round is running (`maintain::check_idle`).
    health_round: AtomicBool,
    batches: Arc<batches::Batches>,
    fences: fence::Fences,
    /// The generation of the server's globals new backends open under.
    globals: Arc<Globals>,
    /// The server's globals digest last read (`Pool::watch_globals`).
    globals_seen: Mutex<Option<u64>>,
    /// The latest greeting of the server, written by every new connection.
    server: Arc<ServerInfoCell>,
}

enum Plan {
    Idle(BackendConn),
    /// A deferred backend of the group, to reset first (`pool::reset`).
    Dirty(BackendConn),
    Open(Option<BackendConn>),
    Wait,
}

#[derive(Default)]
struct Backends {
    // FxHash: every checkout and check-in looks the key up, so the hash is on every
    // statement's path. The keys are the few backend accounts that logged in successfully,
    // so SipHash's flooding resistance buys nothing here.
    idle: FxHashMap<PoolKey, Vec<BackendConn>>,
    /// Backends whose reset waits for a free execution slot (`pool::reset`).
    dirty: FxHashMap<PoolKey, Vec<BackendConn>>,
    /// Every open backend: idle, dirty, checked out, pinned, connecting or resetting.
    open: u32,
    idle_count: u32,
    dirty_count: u32,
}

/// A point-in-time view for SHOW POOLS and metrics.
#[derive(Clone, Debug)]
pub struct PoolSnapshot {
    pub pool_size: u32,
    pub slots_in_use: u32,
    pub waiting: usize,
    pub open: u32,
    pub idle: u32,
    /// Backends waiting for a slot to be reset (`pool::reset`).
    pub to_reset: u32,
    pub(crate) max_open: u32,
    /// The server's max_connections when max_open was derived from it (`auto`).
    pub(crate) max_open_from_server: Option<u32>,
    /// Places pinned sessions hold, and how many they may hold.
    pub pinned: u32,
    pub pinned_max: u32,
    pub(crate) pinned_by: Vec<(Hold, u32)>,
    pub(crate) groups: Vec<(PoolKey, usize)>,
}

/// Settings the pool reads; all live-tunable.
pub(crate) struct PoolSettings {
    pub(crate) pool_size: u32,
    pub(crate) max_backend_connections: BackendLimit,
    pub(crate) server_lifetime: Duration,
}

impl Pool {
    pub(crate) fn new(
        settings: &PoolSettings,
        stats: Arc<Stats>,
        server: Arc<ServerInfoCell>,
        globals: Arc<Globals>,
    ) -> Pool {
        let pool = Pool {
            shared: Arc::new(Shared {
                slots: Slots::new(settings.pool_size),
                backends: Mutex::new(Backends::default()),
                freed: Notify::new(),
                max_open: AtomicU32::new(0),
                limit: Mutex::new(settings.max_backend_connections),
                learned: Mutex::default(),
                places: Default::default(),
                lanes: Default::default(),
                lifetime_secs: AtomicU32::new(
                    settings.server_lifetime.as_secs().min(u32::MAX as u64) as u32,
                ),
                closed: AtomicBool::new(false),
                stats,
                outage: Outage::default(),
                warm: Mutex::new(None),
                warming: AtomicU32::new(0),
                checking: AtomicU32::new(0),
                health_round: AtomicBool::new(false),
                batches: Arc::default(),
                fences: Default::default(),
                globals,
                globals_seen: Mutex::default(),
                server,
            }),
        };
        pool.set_limit(settings.max_backend_connections);
        pool
    }

    pub(crate) fn apply(&self, settings: &PoolSettings) {
        self.shared.slots.resize(settings.pool_size);
        self.shared.lifetime_secs.store(
            settings.server_lifetime.as_secs().min(u32::MAX as u64) as u32,
            Ordering::Relaxed,
        );
        // Also wakes checkouts and place waiters: the room may have grown.
        self.set_limit(settings.max_backend_connections);
    }

    /// Open connections the pool may have: max_backend_connections, or more when pinned
    /// sessions overflowed their places, so that `pool_size` connections always remain for
    /// statements that do not pin.
    fn allowed_open(&self) -> u32 {
        self.max_open()
            .max(self.pinned() + self.shared.slots.size())
    }

    pub fn slots(&self) -> &Arc<Slots> {
        &self.shared.slots
    }

    /// Open pipelined batches (`batches`).
    pub(crate) fn batches(&self) -> &Arc<batches::Batches> {
        &self.shared.batches
    }

    pub(crate) fn stats(&self) -> &Arc<Stats> {
        &self.shared.stats
    }

    /// Waits (FIFO) for an execution slot.
    pub(crate) async fn acquire_slot(&self, timeout: Duration) -> Result<Slot, Error> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        self.shared
            .slots
            .acquire(timeout)
            .await
            .map_err(|waited| Error::QueueTimeout {
                waited,
                pool_size: self.shared.slots.size(),
                queued: self.shared.slots.waiting(),
            })
    }

    /// An execution slot for a statement of a session that holds a transaction or a lock
    /// (`Slots::acquire_held`): ahead of other statements, and never a queue timeout; a
    /// statement that runs beyond pool_size instead is counted (`Stats::slot_overflows`).
    pub(crate) async fn acquire_held_slot(&self, timeout: Duration) -> Result<Slot, Error> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let slot = self
            .shared
            .slots
            .acquire_held(timeout)
            .await
            .map_err(|_| Error::Closed)?;
        if slot.is_overflow() {
            Stats::incr(&self.shared.stats.slot_overflows);
            tracing::debug!(
                pool_size = self.shared.slots.size(),
                overflowing = self.shared.slots.overflowing(),
                "a statement of a session in a transaction or holding a lock runs beyond \
                 pool_size: no execution slot came back within its patience"
            );
        }
        Ok(slot)
    }

    /// A backend for `key`, preferring one whose movable state already matches `want`;
    /// opens a new one when none is idle and the cap allows, otherwise waits until `deadline`.
    /// While the server is down, waits for the reconnect loop at most `down_wait` (and never
    /// past `deadline`), then fails with `Error::BackendDown`.
    pub(crate) async fn checkout(
        &self,
        key: &PoolKey,
        want: &MovableState,
        target: &BackendTarget,
        deadline: Instant,
        down_wait: Duration,
    ) -> Result<PooledBackend, Error> {
        // Read once the first plan is anything but an idle backend that is ready: the
        // checkout that finds one (nearly every checkout) never needs it.
        let mut started: Option<Instant> = None;
        let mut down_until: Option<Instant> = None;
        loop {
            if self.shared.closed.load(Ordering::Relaxed) {
                return Err(Error::Closed);
            }
            let mut up_rx = self.shared.outage.subscribe();
            let up = *up_rx.borrow_and_update();
            if !up && down_until.is_none() {
                down_until = Some(deadline.min(Instant::now() + down_wait));
            }
            // Fast path without registering for a wake-up (that takes the Notify's lock).
            let plan = match self.plan_checkout(key, want, up) {
                Plan::Wait => None,
                other => Some(other),
            };
            let freed = self.shared.freed.notified();
            tokio::pin!(freed);
            let plan = match plan {
                Some(plan) => plan,
                None => {
                    freed.as_mut().enable();
                    self.plan_checkout(key, want, up)
                }
            };
            match plan {
                Plan::Idle(mut conn) => {
                    if conn.stream.closed_while_idle() {
                        started.get_or_insert_with(Instant::now);
                        // The server closed it (restart, kill, wait_timeout): try the next.
                        self.close(conn, BackendCloseReason::Broken);
                        continue;
                    }
                    return Ok(PooledBackend::new(conn, self.clone()));
                }
                Plan::Dirty(conn) => {
                    started.get_or_insert_with(Instant::now);
                    if let Some(ready) = self.reset_for_checkout(conn).await {
                        return Ok(ready);
                    }
                }
                Plan::Open(evicted) => {
                    started.get_or_insert_with(Instant::now);
                    self.evicted(evicted);
                    match self.open_new(key, target).await {
                        Err(Error::Connect { kind, .. }) if !kind.is_permanent() => continue,
                        other => return other,
                    }
                }
                Plan::Wait => {
                    let started = *started.get_or_insert_with(Instant::now);
                    let until = if up {
                        deadline
                    } else {
                        down_until.unwrap_or(deadline)
                    };
                    let back_up = async {
                        if up {
                            std::future::pending::<()>().await
                        } else {
                            let _ = up_rx.wait_for(|up| *up).await;
                        }
                    };
                    tokio::select! {
                        _ = freed => {}
                        _ = back_up => {}
                        _ = tokio::time::sleep_until(until.into()) => {
                            return Err(if up {
                                Error::QueueTimeout {
                                    waited: started.elapsed(),
                                    pool_size: self.shared.slots.size(),
                                    queued: self.shared.slots.waiting(),
                                }
                            } else {
                                self.down_error(started.elapsed())
                            });
                        }
                    }
                }
            }
        }
    }

    /// Nearly every checkout: an idle backend of `key` (the best for `want`, as `checkout`
    /// would choose) while the server is up, taken at once, without the outage receiver and
    /// the wake-up registration `checkout` sets up. `None`: `checkout` must decide (it may
    /// open, wait or reset); an idle backend the server closed is closed on the way.
    /// `up`: the caller's reading of `backend_up`. With the backend, whether its state is
    /// `want` already (nothing to replay).
    pub(crate) fn checkout_idle(
        &self,
        key: &PoolKey,
        want: &MovableState,
        up: bool,
    ) -> Option<(PooledBackend, bool)> {
        if !up || self.shared.closed.load(Ordering::Relaxed) {
            return None;
        }
        let idle = take_best(&mut self.lock(), key, want);
        let (mut conn, score) = idle?;
        if conn.stream.closed_while_idle() {
            self.close(conn, BackendCloseReason::Broken);
            return None;
        }
        Some((PooledBackend::new(conn, self.clone()), score == 3))
    }

    fn down_error(&self, waited: Duration) -> Error {
        Error::BackendDown {
            view: Box::new(self.shared.outage.view()),
            waited,
        }
    }

    /// Whether the backend server is reachable, and its last connect error.
    pub fn outage(&self) -> OutageView {
        self.shared.outage.view()
    }

    pub fn backend_up(&self) -> bool {
        self.shared.outage.is_up()
    }

    /// Under the lock: an idle backend, or a reserved place for a new one (possibly after
    /// evicting an idle backend of another group), or nothing yet.
    /// While the server is down (`!may_open`) only the reconnect loop opens connections.
    fn plan_checkout(&self, key: &PoolKey, want: &MovableState, may_open: bool) -> Plan {
        let mut b = self.lock();
        if let Some((conn, _)) = take_best(&mut b, key, want) {
            Plan::Idle(conn)
        } else if let Some(conn) = Self::take_dirty(&mut b, key) {
            // A reset is cheaper than a new connection, and drains the deferred ones.
            Plan::Dirty(conn)
        } else if !may_open {
            Plan::Wait
        } else if b.open < self.allowed_open() {
            b.open += 1;
            Plan::Open(None)
        } else if let Some(victim) = take_any_idle(&mut b).or_else(|| Self::take_any_dirty(&mut b))
        {
            // Make room: an idle (or deferred) backend of another group gives its place up.
            Plan::Open(Some(victim))
        } else {
            Plan::Wait
        }
    }

    fn close(&self, conn: BackendConn, reason: BackendCloseReason) {
        self.shared.stats.backend_closed(reason);
        drop(conn);
        self.forget_one();
    }

    fn forget_one(&self) {
        self.lock().open -= 1;
        self.shared.freed.notify_one();
    }

    pub fn snapshot(&self) -> PoolSnapshot {
        let b = self.lock();
        PoolSnapshot {
            pool_size: self.shared.slots.size(),
            slots_in_use: self.shared.slots.in_use(),
            waiting: self.shared.slots.waiting(),
            open: b.open,
            idle: b.idle_count,
            to_reset: b.dirty_count,
            max_open: self.max_open(),
            max_open_from_server: self.cap_from_server(),
            pinned: self.pinned(),
            pinned_max: self.pin_cap(),
            pinned_by: self.pinned_by(),
            groups: b.idle.iter().map(|(k, v)| (k.clone(), v.len())).collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Backends> {
        // A panic while holding this lock cannot leave the lists inconsistent (every
        // mutation is a single push/remove), so a poisoned lock is still usable.
        self.shared
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// The idle backend of `key` that needs the least replay for `want`, most recently used
/// first, and its `replay_score`.
fn take_best(b: &mut Backends, key: &PoolKey, want: &MovableState) -> Option<(BackendConn, u8)> {
    let list = b.idle.get_mut(key)?;
    if list.is_empty() {
        return None;
    }
    let mut best = list.len() - 1;
    let mut best_score = 0;
    for (i, conn) in list.iter().enumerate().rev() {
        let score = replay_score(&conn.state, want);
        if score > best_score {
            best = i;
            best_score = score;
            if score == 3 {
                break;
            }
        }
    }
    let conn = list.swap_remove(best);
    b.idle_count -= 1;
    Some((conn, best_score))
}

fn take_any_idle(b: &mut Backends) -> Option<BackendConn> {
    let conn = b.idle.values_mut().find_map(|l| l.pop())?;
    b.idle_count -= 1;
    Some(conn)
}
