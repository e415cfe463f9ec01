//! What a statement runs on, taken and given back: the execution slot, the backend
//! connection and, for a session that keeps its backend between statements, a pinned place
//! (`pool::places`). The one rule for when a session may release its backend lives here
//! (`release_if_possible`). A login's default-database check uses none of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::route::Routing;
use super::state::Rules;
use super::{errors, fmt_ms, replay, Session};
use crate::conn::{self, backend::Health};
use crate::pool::{self, CheckError, Hold};
use crate::protocol::{codes, ErrPacket};
use crate::registry::ClientPhase;
use crate::stats::Stats;

/// A statement waits at most this long for the reset of a backend its session gave back (a
/// reset gives up after 10 s and closes the connection, which ends its state too).
const RESET_WAIT: Duration = Duration::from_secs(11);

impl Session {
    /// Makes `db` the session's schema once the server has confirmed that the backend
    /// account may use it (its own 1049 / 1044 otherwise), at login and COM_CHANGE_USER.
    /// Checked on a control connection: a login never waits for an execution slot or a
    /// pool connection, however many sessions are pinned or queued.
    pub(super) async fn select_database(&mut self, db: Vec<u8>) -> Result<(), ErrPacket> {
        match self.database_checked(db).await {
            Ok(()) => Ok(()),
            Err(CheckError::Refused(err)) => Err(err),
            Err(CheckError::Pool(e)) => Err(self.pool_error(&e)),
        }
    }

    /// `select_database`, with the server's refusal told apart from sluice's own errors.
    async fn database_checked(&mut self, db: Vec<u8>) -> Result<(), CheckError> {
        let config = Arc::clone(&self.config);
        let deadline = Instant::now() + config.client_login_timeout;
        let checked = self
            .pool()
            .check_database(
                &self.login.key,
                &self.held.target,
                &db,
                deadline,
                config.backend_down_wait,
            )
            .await;
        // The first statement's checkout then prefers a backend already in it.
        checked.map(|()| self.state.movable.schema = Some(db))
    }

    /// COM_INIT_DB or `USE db` while the session holds no backend: checked as a login's
    /// default database is (`select_database`, never an execution slot), answered here, and
    /// brought to the backend of the session's next statement by the replay of its schema.
    /// The OK is the server's: the schema in its session state for a client that tracks it.
    pub(super) async fn choose_database(&mut self, db: Vec<u8>) -> super::Step {
        self.reg
            .info
            .queries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Stats::incr(&self.ctx.stats.statements);
        if let Err(e) = self.database_checked(db.clone()).await {
            let err = match e {
                // The session's ROW_COUNT() and diagnostics, as after the server's error.
                CheckError::Refused(err) => {
                    self.failed_alone(&err);
                    err
                }
                CheckError::Pool(e) => self.pool_error(&e),
            };
            self.reply_err(1, &err).await?;
            return Ok(super::Flow::Continue);
        }
        // The server's COM_INIT_DB and `USE` set ROW_COUNT() to 0.
        self.row_count_zeroed();
        let mut ok = crate::protocol::OkPacket::new(
            self.state.local_status() | crate::protocol::StatusFlags::SERVER_SESSION_STATE_CHANGED,
        );
        ok.session_state = vec![crate::protocol::SessionStateChange::Schema(db)];
        let mut out = bytes::BytesMut::new();
        ok.encode(self.login.caps, &mut out);
        self.client
            .send_packet(1, &out)
            .await
            .map_err(|_| crate::stats::ClientCloseReason::Eof)?;
        Ok(super::Flow::Continue)
    }

    /// Before a statement that will pin its session runs: a pinned place, so that the
    /// backend it runs on may stay with the session afterwards. Refused (9005) once
    /// `pin_wait` has passed with every place taken: the statement then does not run at all,
    /// and the session stays as it was.
    pub(super) async fn reserve_pin(&mut self, rules: Option<&Rules>) -> Result<(), ErrPacket> {
        // A session in a transaction or holding a lock has its backend already: a pin adds
        // no connection, and a statement inside a transaction is never refused for want of
        // a place (`keep_backend` settles its place, or its slot, when it ends).
        let holds_backend = self.held.backend.is_some() && self.state.holds_locks();
        if self.held.place.is_some() || holds_backend {
            return Ok(());
        }
        let Some(reason) = rules.and_then(Rules::pin_ahead) else {
            return Ok(());
        };
        let wait = self.config.pin_wait;
        // A statement that pins runs on the writer: its place comes from the writer's pool.
        if self.held.backend.is_none() && self.held.slot.is_none() {
            if let Some(writer) = self.ctx.topology().topology.writer() {
                self.use_writer_for_pin(writer);
            }
        }
        match self.pool().pin_place(Hold::Pin(reason), wait).await {
            Ok(place) => {
                self.held.place = Some(place);
                Ok(())
            }
            Err(e) => Err(self.pool_error(&e)),
        }
    }

    /// Takes an execution slot and a backend (if not held already) on the server the
    /// statement is routed to (`route`), and brings the backend to the session's movable
    /// state. Returns when it was done: the clock read that ends the queue wait also starts
    /// the statement's relay (`relay::Outgoing::started`).
    pub(super) async fn acquire(&mut self, route: &mut Routing<'_>) -> Result<Instant, ErrPacket> {
        let queued = Instant::now();
        // Nothing to wait for before the slot queue (no reset, no routing): the queue's
        // deadline counts from this same clock read.
        let direct = !self.held.resets.pending() && !self.config.uses_topology();
        // A backend this session gave back dirty (COM_RESET_CONNECTION, COM_CHANGE_USER)
        // is reset before its next statement runs anywhere.
        if !direct {
            self.held.resets.settled(RESET_WAIT).await;
        }
        self.acquire_inner(route, direct.then_some(queued)).await?;
        let done = Instant::now();
        self.ctx.latency.queue_wait.record(done - queued);
        Ok(done)
    }

    async fn acquire_inner(
        &mut self,
        route: &mut Routing<'_>,
        now: Option<Instant>,
    ) -> Result<(), ErrPacket> {
        // The one routing call: which server's slots and backends this statement takes
        // (awaited only when there is a choice to make).
        if let Some(avoid) = self.route_begin(route) {
            self.route_statement(route, avoid).await?;
        }
        self.take_slot_and_backend(now, route.on_replica).await?;
        if let Some(until) = route.gtid_wait.take() {
            if !self.replica_reached(&until).await {
                self.fall_back_to_writer(route)?;
                self.take_slot_and_backend(None, route.on_replica).await?;
            }
        }
        Ok(())
    }

    /// The slot and backend of the server the session is routed to, state replayed.
    /// `now`: the time, if the caller has just read it; `on_replica`: routed to a replica.
    async fn take_slot_and_backend(
        &mut self,
        now: Option<Instant>,
        on_replica: bool,
    ) -> Result<(), ErrPacket> {
        // The settings it needs, copied (cheaper than holding the config's Arc).
        let (down_wait, max_queue_wait) =
            (self.config.backend_down_wait, self.config.max_queue_wait);
        let now = now.unwrap_or_else(Instant::now);
        let mut window = self.config.queue_timeout;
        let up = self.pool().backend_up();
        if !up {
            // During an outage nobody waits longer than backend_down_wait, in the slot
            // queue or for a backend.
            window = window.min(down_wait);
        }
        let deadline = now + window;
        if let Some(kept) = self.held.slot.as_mut() {
            // Kept since its last statement (no pinned place was free): it runs again.
            kept.set_kept(false);
        } else if self.state.holds_locks() {
            self.take_held_slot(window).await?;
        } else {
            self.admit()?;
            self.reg.info.set_phase(ClientPhase::Waiting);
            // Awaited only while paused (its future is not needed otherwise).
            let paused = *self.ctx.paused.borrow();
            let left = if paused && self.wait_while_paused(deadline).await? {
                deadline.saturating_duration_since(Instant::now())
            } else {
                window
            };
            // The admission estimate can be wrong (a burst right after cheap statements):
            // a statement admitted under max_queue_wait still never waits longer than it.
            let shed_after = max_queue_wait.filter(|t| *t < left);
            let acquired = self.pool().acquire_slot(shed_after.unwrap_or(left)).await;
            if acquired.is_ok() {
                self.memory.last_served = Instant::now();
            }
            let slot = acquired.map_err(|e| match (shed_after, &e) {
                    (_, pool::Error::QueueTimeout { waited, .. }) if !self.pool().backend_up() => {
                        self.pool_error(&pool::Error::BackendDown {
                            view: Box::new(self.pool().outage()),
                            waited: *waited,
                        })
                    }
                    (Some(target), pool::Error::QueueTimeout { queued, .. }) => {
                        Stats::incr(&self.ctx.stats.shed);
                        let msg = format!(
                            "sluice is overloaded: no execution slot within max_queue_wait {} ({queued} statements queued); retry shortly",
                            fmt_ms(target)
                        );
                        ErrPacket::from_code(codes::OVERLOADED, msg.as_bytes())
                    }
                    _ => self.pool_error(&e),
                })?;
            self.held.slot = Some(slot);
        }
        // Its state as the session's already: nothing to compare or replay below.
        let mut in_state = false;
        if self.held.backend.is_none() {
            // An idle backend first, without the checkout's future (which waits if need be).
            if let Some((b, same)) =
                self.pool()
                    .checkout_idle(&self.login.key, &self.state.movable, up)
            {
                self.take_backend(b);
                in_state = same;
            }
        }
        if self.held.backend.is_none() {
            let b = self
                .pool()
                .checkout(
                    &self.login.key,
                    &self.state.movable,
                    &self.held.target,
                    deadline,
                    // A read on a replica that is down fails at once and is retried on
                    // another server instead of waiting for this one.
                    if on_replica {
                        Duration::ZERO
                    } else {
                        down_wait
                    },
                )
                .await
                .map_err(|e| self.pool_error(&e))?;
            self.take_backend(b);
        }
        // Awaited only when there is state to replay: most backends match already.
        match &self.held.backend {
            Some(b) if !in_state && b.state != self.state.movable => self.sync_backend().await,
            _ => Ok(()),
        }
    }

    /// The slot of a statement of a session in a transaction or holding a lock: others may
    /// wait on what it holds, so it goes ahead of their statements, and it is never shed
    /// (`max_queue_wait`), paused or timed out for want of a slot: after waiting its
    /// patience with no slot coming back (or `window`), it runs beyond pool_size
    /// (`pool::Slots::acquire_held`). Its backend is its own already.
    async fn take_held_slot(&mut self, window: Duration) -> Result<(), ErrPacket> {
        self.reg.info.set_phase(ClientPhase::Waiting);
        let slot = self.pool().acquire_held_slot(window).await;
        let slot = slot.map_err(|e| self.pool_error(&e))?;
        self.memory.last_served = Instant::now();
        self.held.slot = Some(slot);
        Ok(())
    }

    /// Latency-target admission (`max_queue_wait`): a statement that would wait longer than
    /// the target fails fast with a retryable error instead of queueing for seconds (and one
    /// admitted on a wrong estimate fails once it has waited the target, in `acquire_inner`).
    /// A session in a transaction or holding a lock is never shed (`take_held_slot`).
    fn admit(&self) -> Result<(), ErrPacket> {
        let Some(target) = self.config.max_queue_wait else {
            return Ok(());
        };
        let starved = self.memory.last_served.elapsed();
        let Err(expected) = self.pool().slots().admit(target, starved) else {
            return Ok(());
        };
        Stats::incr(&self.ctx.stats.shed);
        let msg = format!(
            "sluice is overloaded: the expected queue wait {} exceeds max_queue_wait {}; retry shortly",
            fmt_ms(expected),
            fmt_ms(target)
        );
        Err(ErrPacket::from_code(codes::OVERLOADED, msg.as_bytes()))
    }

    /// True if it waited (the clock moved on).
    async fn wait_while_paused(&self, deadline: Instant) -> Result<bool, ErrPacket> {
        if !*self.ctx.paused.borrow() {
            return Ok(false);
        }
        let mut rx = self.ctx.paused.subscribe();
        let wait = async move { rx.wait_for(|paused| !*paused).await.map(|_| ()) };
        match tokio::time::timeout_at(deadline.into(), wait).await {
            Ok(_) => Ok(true),
            Err(_) => Err(ErrPacket::from_code(
                codes::QUEUE_TIMEOUT,
                &b"sluice is PAUSED and queue_timeout passed; RESUME it on the admin console, then retry"[..],
            )),
        }
    }

    /// Replays schema and session variables onto the backend if it differs (one round trip).
    pub(super) async fn sync_backend(&mut self) -> Result<(), ErrPacket> {
        let Some(b) = self.held.backend.as_mut() else {
            return Ok(());
        };
        if b.state == self.state.movable {
            return Ok(());
        }
        let want = &self.state.movable;
        if want.schema.is_none() && b.state.schema.is_some() {
            // No command unselects a database: use a fresh connection instead. This one is
            // clean and goes back to the idle list for sessions that want its schema (the
            // pool evicts an idle backend if it is at max_backend_connections).
            self.held.backend = None;
            let fresh = self
                .pool()
                .open_fresh(
                    &self.login.key,
                    &self.held.target,
                    Instant::now() + self.config.backend_down_wait,
                )
                .await
                .map_err(|e| errors::pool_error_packet(&e, &self.config))?;
            self.take_backend(fresh);
            return Box::pin(self.sync_backend()).await;
        }
        let lost = |e: conn::Error| {
            ErrPacket::from_code(
                codes::BACKEND_LOST,
                format!("Lost connection to backend while restoring session state: {e}; retry")
                    .as_bytes(),
            )
        };
        if crate::pool::replay_score(&b.state, want) == 0 {
            if let Err(e) = b.reset().await {
                b.health = Health::Broken;
                self.held.backend = None;
                return Err(lost(e));
            }
        }
        let cmds = replay::replay_commands(&b.state, want);
        let refs: Vec<&[u8]> = cmds.iter().map(|c| c.as_slice()).collect();
        Stats::incr(&self.ctx.stats.replays);
        match b.run_pipeline(&refs).await {
            Ok(results) => {
                if let Some(Err(err)) = results.into_iter().find(|r| r.is_err()) {
                    b.health = Health::Dirty;
                    self.held.backend = None;
                    return Err(err);
                }
                b.state = want.clone();
                Ok(())
            }
            Err(e) => {
                b.health = Health::Broken;
                self.held.backend = None;
                Err(lost(e))
            }
        }
    }

    /// Gives back what the session's state no longer requires. A session keeps its backend
    /// while its state needs it: inside a transaction or a lock, or while pinned, each on a
    /// pinned place. The slot goes back after every statement, unless the backend stays
    /// without a place (a transaction or lock when every place was taken): the slot then
    /// bounds such backends by pool_size, as places bound the others.
    pub(super) fn release_if_possible(&mut self) {
        if self.state.needs_backend() && self.held.backend.is_some() {
            self.keep_backend();
        }
        // The backend first, then its place, then the slot (see the field order of `Session`).
        if !self.state.needs_backend() || self.held.backend.is_none() {
            if let Some(b) = self.held.backend.as_mut() {
                // The state that made it dirty is gone (COMMIT, last statement closed).
                if b.health == Health::Dirty {
                    b.health = Health::Clean;
                }
            }
            self.held.backend = None;
            self.held.place = None;
        }
        let kept_without_place = self.held.backend.is_some() && self.held.place.is_none();
        match self.held.slot.as_mut() {
            Some(slot) if kept_without_place => {
                slot.set_kept(true);
                Stats::incr(&self.ctx.stats.slots_kept);
            }
            _ => self.held.slot = None,
        }
        self.list_lock_holder();
        self.reg.info.set_phase(if self.state.in_transaction() {
            ClientPhase::IdleInTransaction
        } else {
            ClientPhase::Idle
        });
    }

    /// The session keeps its backend past this statement: it must hold the place for it.
    fn keep_backend(&mut self) {
        let hold = match self.state.pin_reason() {
            Some(reason) => Hold::Pin(reason),
            None if self.state.holds_locks() => Hold::Transaction,
            None => Hold::Warnings,
        };
        // A transaction or lock whose statement ran on a slot: with no place free, it keeps
        // that slot instead (`release_if_possible`), as before places were needed for them;
        // a statement inside a transaction never fails for want of a place.
        let may_keep_slot = self.state.holds_locks() && self.held.slot.is_some();
        match (&mut self.held.place, hold) {
            (Some(place), _) => place.set(hold),
            (None, _) if may_keep_slot => {
                self.held.place = self.pool().try_pin_place(hold);
            }
            (None, Hold::Warnings) => match self.pool().try_pin_place(hold) {
                Some(place) => self.held.place = Some(place),
                None => {
                    // Every place is taken: the warnings are not worth one. The backend goes
                    // back as it is: its diagnostics are marked as this session's, and a
                    // read by anyone else finds them cleared first (`session::values`); this
                    // session's next read finds none, as after any other statement.
                    self.state.warnings_pending = false;
                    if let Some(b) = self
                        .held
                        .backend
                        .as_mut()
                        .filter(|b| b.health == Health::Dirty)
                    {
                        b.health = Health::Clean;
                    }
                    self.held.backend = None;
                }
            },
            // The state is on the backend already (nothing predicted it): keep it there.
            (None, hold) => self.held.place = Some(self.pool().pin_place_anyway(hold)),
        }
    }

    /// The session's backend from now on; its reset, if it comes back dirty, is tracked.
    pub(super) fn take_backend(&mut self, mut b: pool::PooledBackend) {
        b.report_resets_to(self.held.resets.clone());
        b.visible.taken();
        self.held.backend = Some(b);
    }

    fn pool_error(&self, e: &pool::Error) -> ErrPacket {
        if matches!(e, pool::Error::QueueTimeout { .. }) {
            Stats::incr(&self.ctx.stats.queue_timeouts);
        }
        errors::pool_error_packet(e, &self.config)
    }
}

/// A statement whose client stopped reading gives its execution slot up: the server only
/// waits for the client, and no number of stalled readers may hold up the slot queue. Its
/// backend stays with it on a pinned place (`Hold::Stalled`, unless it holds one already),
/// so the pool opens another for the slot; with no place free it keeps its slot. The slot is
/// not taken back: the statement is the session's last use of it (a session in a transaction
/// takes one for its next statement, ahead of others). True if it gave the slot up.
pub(super) fn give_up_slot(
    slot: &mut Option<pool::Slot>,
    place: &mut Option<pool::PinPlace>,
    pool: &pool::Pool,
) -> bool {
    if slot.is_none() {
        return false;
    }
    if place.is_none() {
        match pool.try_pin_place(Hold::Stalled) {
            Some(p) => *place = Some(p),
            None => return false,
        }
    }
    *slot = None;
    Stats::incr(&pool.stats().pipeline.stalled_readers);
    true
}
