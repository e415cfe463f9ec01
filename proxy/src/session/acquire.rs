//! What a statement runs on, taken and given back: the execution slot, the backend
//! connection and, for a session that keeps its backend between statements, a pinned place
//! (`pool::places`). The one rule for when a session may release its backend lives here
//! (`release_if_possible`). A login's default-database check uses none of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::registry::ClientPhase;
use super::state::Rules;
use super::{fmt_ms, replay, Session};
use crate::conn::{self, backend::Health};
use crate::pool::{self, CheckError, Hold};
use crate::protocol::{codes, ErrPacket};
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
        let config = Arc::clone(&self.config);
        let deadline = Instant::now() + config.client_login_timeout;
        let checked = self
            .pool()
            .check_database(
                &self.key,
                &self.target,
                &db,
                deadline,
                config.backend_down_wait,
            )
            .await;
        match checked {
            Ok(()) => {
                // The first statement's checkout then prefers a backend already in it.
                self.state.movable.schema = Some(db);
                Ok(())
            }
            Err(CheckError::Refused(err)) => Err(err),
            Err(CheckError::Pool(e)) => Err(self.pool_error(&e)),
        }
    }

    /// Before a statement that will pin its session runs: a pinned place, so that the
    /// backend it runs on may stay with the session afterwards. Refused (9005) once
    /// `pin_wait` has passed with every place taken: the statement then does not run at all,
    /// and the session stays as it was.
    pub(super) async fn reserve_pin(&mut self, rules: Option<&Rules>) -> Result<(), ErrPacket> {
        if self.place.is_some() {
            return Ok(());
        }
        let Some(reason) = rules.and_then(Rules::pin_ahead) else {
            return Ok(());
        };
        let wait = self.config.pin_wait;
        // A statement that pins runs on the writer: its place comes from the writer's pool.
        if self.backend.is_none() && self.slot.is_none() {
            if let Some(writer) = self.ctx.topology().topology.writer() {
                self.use_writer_for_pin(writer);
            }
        }
        match self.pool().pin_place(Hold::Pin(reason), wait).await {
            Ok(place) => {
                self.place = Some(place);
                Ok(())
            }
            Err(e) => Err(self.pool_error(&e)),
        }
    }

    /// Takes an execution slot and a backend (if not held already) and brings the backend
    /// to the session's movable state. Returns when it was done: the clock read that ends
    /// the queue wait also starts the statement's relay (`Session::relay_start`).
    pub(super) async fn acquire(&mut self) -> Result<Instant, ErrPacket> {
        let queued = Instant::now();
        // Nothing to wait for before the slot queue (no reset, no routing): the queue's
        // deadline counts from this same clock read.
        let direct = !self.resets.pending() && !self.config.uses_topology();
        // A backend this session gave back dirty (COM_RESET_CONNECTION, COM_CHANGE_USER)
        // is reset before its next statement runs anywhere.
        if !direct {
            self.resets.settled(RESET_WAIT).await;
        }
        self.acquire_inner(direct.then_some(queued)).await?;
        let done = Instant::now();
        self.ctx.latency.queue_wait.record(done - queued);
        Ok(done)
    }

    async fn acquire_inner(&mut self, now: Option<Instant>) -> Result<(), ErrPacket> {
        // The one routing call: which server's slots and backends this statement takes
        // (awaited only when there is a choice to make).
        if let Some(pending) = self.route_begin() {
            self.route_statement(pending).await?;
        }
        self.take_slot_and_backend(now).await?;
        if let Some(until) = self.gtid_wait.take() {
            if !self.replica_reached(&until).await {
                self.fall_back_to_writer()?;
                self.take_slot_and_backend(None).await?;
            }
        }
        Ok(())
    }

    /// The slot and backend of the server the session is routed to, state replayed.
    /// `now`: the time, if the caller has just read it.
    async fn take_slot_and_backend(&mut self, now: Option<Instant>) -> Result<(), ErrPacket> {
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
        if self.slot.is_none() {
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
                self.last_served = Instant::now();
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
            self.slot = Some(slot);
        }
        // Its state as the session's already: nothing to compare or replay below.
        let mut in_state = false;
        if self.backend.is_none() {
            // An idle backend first, without the checkout's future (which waits if need be).
            if let Some((b, same)) = self
                .pool()
                .checkout_idle(&self.key, &self.state.movable, up)
            {
                self.take_backend(b);
                in_state = same;
            }
        }
        if self.backend.is_none() {
            let b = self
                .pool()
                .checkout(
                    &self.key,
                    &self.state.movable,
                    &self.target,
                    deadline,
                    // A read on a replica that is down fails at once and is retried on
                    // another server instead of waiting for this one.
                    if self.on_replica {
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
        match &self.backend {
            Some(b) if !in_state && b.state != self.state.movable => self.sync_backend().await,
            _ => Ok(()),
        }
    }

    /// Latency-target admission (`max_queue_wait`): a statement that would wait longer than
    /// the target fails fast with a retryable error instead of queueing for seconds (and one
    /// admitted on a wrong estimate fails once it has waited the target, in `acquire_inner`).
    /// A session inside a transaction is never shed (it holds its slot anyway).
    fn admit(&self) -> Result<(), ErrPacket> {
        let Some(target) = self.config.max_queue_wait else {
            return Ok(());
        };
        let starved = self.last_served.elapsed();
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
        let Some(b) = self.backend.as_mut() else {
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
            self.backend = None;
            let fresh = self
                .pool()
                .open_fresh(
                    &self.key,
                    &self.target,
                    Instant::now() + self.config.backend_down_wait,
                )
                .await
                .map_err(|e| pool_error_packet(&e, &self.config))?;
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
                self.backend = None;
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
                    self.backend = None;
                    return Err(err);
                }
                b.state = want.clone();
                Ok(())
            }
            Err(e) => {
                b.health = Health::Broken;
                self.backend = None;
                Err(lost(e))
            }
        }
    }

    /// Gives back what the session's state no longer requires. A session keeps its backend
    /// while its state needs it: inside a transaction or a lock (which keep the slot too, so
    /// pool_size bounds them), or while pinned, which takes a pinned place.
    pub(super) fn release_if_possible(&mut self) {
        if self.state.needs_backend() && self.backend.is_some() {
            self.keep_backend();
        }
        // The backend first, then its place, then the slot (see the field order of `Session`).
        if !self.state.needs_backend() || self.backend.is_none() {
            if let Some(b) = self.backend.as_mut() {
                // The state that made it dirty is gone (COMMIT, last statement closed).
                if b.health == Health::Dirty {
                    b.health = Health::Clean;
                }
            }
            self.backend = None;
            self.place = None;
        }
        if !self.state.holds_slot() {
            self.slot = None;
        }
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
            // Only a transaction or a lock: the slot the session keeps bounds these.
            None if self.state.holds_slot() => {
                self.place = None;
                return;
            }
            None => Hold::Warnings,
        };
        match (&mut self.place, hold) {
            (Some(place), _) => place.set(hold),
            (None, Hold::Warnings) => match self.pool().try_pin_place(hold) {
                Some(place) => self.place = Some(place),
                None => {
                    // Every place is taken: the warnings are not worth one. The backend goes
                    // back, reset first (another client must not read them), and a SHOW
                    // WARNINGS now finds none, as after any other statement.
                    self.state.warnings_pending = false;
                    if let Some(b) = self.backend.as_mut() {
                        if b.health == Health::Clean {
                            b.health = Health::Dirty;
                        }
                        b.defer_reset();
                    }
                    self.backend = None;
                }
            },
            // The state is on the backend already (nothing predicted it): keep it there.
            (None, hold) => self.place = Some(self.pool().pin_place_anyway(hold)),
        }
    }

    /// The session's backend from now on; its reset, if it comes back dirty, is tracked.
    pub(super) fn take_backend(&mut self, mut b: pool::PooledBackend) {
        b.report_resets_to(self.resets.clone());
        self.backend = Some(b);
    }

    fn pool_error(&self, e: &pool::Error) -> ErrPacket {
        if matches!(e, pool::Error::QueueTimeout { .. }) {
            Stats::incr(&self.ctx.stats.queue_timeouts);
        }
        pool_error_packet(e, &self.config)
    }
}

/// The one place pool errors become client-visible errors.
pub fn pool_error_packet(e: &pool::Error, config: &crate::config::Config) -> ErrPacket {
    match e {
        pool::Error::QueueTimeout { waited, pool_size, queued } => ErrPacket::from_code(
            codes::QUEUE_TIMEOUT,
            format!(
                "sluice: no backend became free within queue_timeout ({:?}, waited {:?}); \
                 pool_size={pool_size}, {queued} statements queued. Retry, raise pool_size or queue_timeout, \
                 or look for long transactions in SHOW CLIENTS",
                config.queue_timeout, waited
            )
            .as_bytes(),
        ),
        pool::Error::Connect { addr, user, kind, source } => {
            // A login refusal keeps the server's own code (1045, 1049 ...) so that drivers
            // treat it as the permanent error it is; the text says it is sluice's backend login.
            let (code, state) = match source {
                crate::conn::Error::Server(e) => (e.code, String::from_utf8_lossy(&e.sql_state).into_owned()),
                _ => (
                    codes::BACKEND_UNREACHABLE.code,
                    codes::BACKEND_UNREACHABLE.sql_state.to_string(),
                ),
            };
            ErrPacket::new(
                code,
                &state,
                format!(
                    "sluice cannot log in to its backend MySQL server at '{addr}' as '{user}' ({kind}): {source}; {}",
                    connect_advice(*kind)
                )
                .as_bytes(),
            )
        }
        pool::Error::BackendDown { view, waited } => {
            let down_for = view.down_since.map(|t| t.elapsed()).unwrap_or_default();
            let last = view.last_error.as_ref().map_or_else(
                || "none".to_string(),
                |e| format!("{} ({}, {} ago)", e.message, e.kind, fmt_ms(e.at.elapsed())),
            );
            ErrPacket::from_code(
                codes::BACKEND_UNREACHABLE,
                format!(
                    "sluice cannot reach its backend MySQL server at '{}' (down for {}, waited {} of backend_down_wait {}); \
                     last connect error: {last}. sluice keeps reconnecting; retry later",
                    view.addr,
                    fmt_ms(down_for),
                    fmt_ms(*waited),
                    fmt_ms(config.backend_down_wait),
                )
                .as_bytes(),
            )
        }
        pool::Error::PinLimit(r) => ErrPacket::from_code(codes::PIN_LIMIT, pin_refusal_text(r).as_bytes()),
        pool::Error::NoAnswer { addr, waited } => ErrPacket::from_code(
            codes::BACKEND_UNREACHABLE,
            format!(
                "sluice got no answer from its backend MySQL server at '{addr}' within {} while checking the \
                 default database of this login; retry",
                fmt_ms(*waited)
            )
            .as_bytes(),
        ),
        pool::Error::Closed => ErrPacket::from_code(codes::SHUTDOWN, b"Server shutdown in progress: sluice is stopping"),
    }
}

/// What an operator should look at after a connect failure.
fn connect_advice(kind: crate::stats::ConnectFailure) -> &'static str {
    use crate::stats::ConnectFailure as F;
    match kind {
        F::AccessDenied => {
            "check backend_user / backend_password in sluice's config and the account's grants"
        }
        F::UnknownDatabase => "check that the database exists on the backend",
        F::Tls => "check backend_tls, backend_tls_ca and the server's certificate",
        F::Protocol => "the backend speaks a protocol or auth plugin sluice does not support",
        F::ServerError => "the server refused this login; the message above says why",
        _ => "retry; sluice keeps reconnecting",
    }
}

/// What a client hears when its statement could not pin: the cap, where it came from, who
/// holds the places, and what to raise.
fn pin_refusal_text(r: &pool::PinRefusal) -> String {
    let from = r
        .from_server
        .map(|n| format!(", from the server's max_connections={n}"))
        .unwrap_or_default();
    let by: Vec<String> = r.by.iter().map(|(h, n)| format!("{h} {n}")).collect();
    format!(
        "sluice cannot pin this session to a backend connection for its {}: all {} connections that \
         pinned sessions may use are taken (max_backend_connections={}{from}, less pool_size={} kept \
         for statements that do not pin); {} sessions are pinned ({}). Waited {} (pin_wait). The \
         statement did not run. Raise max_backend_connections (and the server's max_connections), or \
         have sessions drop temporary tables, user variables and locks they no longer need; then retry",
        r.wanted,
        r.cap,
        r.max_open,
        r.pool_size,
        r.pinned,
        if by.is_empty() { "none".to_string() } else { by.join(", ") },
        fmt_ms(r.waited),
    )
}
