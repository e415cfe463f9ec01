//! One client session, from accept to close: read a command, run it on a backend (taking an
//! execution slot and a backend only for as long as the rules in `state` require), relay the
//! answer, and decide what to keep.

pub mod commands;
pub mod identity;
pub mod prepared;
pub mod registry;
pub mod relay;
pub mod replay;
pub mod state;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::net::TcpStream;

use crate::classify::Classification;
use crate::config::UserConfig;
use crate::conn::backend::{BackendTarget, Health, PoolKey};
use crate::conn::client::{send_err, ClientHello, HandshakeError};
use crate::conn::{self, PacketStream};
use crate::context::{backend_target, Context};
use crate::pool::{self, PooledBackend, Slot};
use crate::protocol::{codes, flags, Capabilities, ErrPacket, OkPacket, ResponseKind};
use crate::stats::{ClientCloseReason, Stats};
use registry::{ClientPhase, Registration};
use relay::{relay, RelayError, RelayOptions};
use state::{Rules, SessionState};

/// What the loop does after a command.
pub enum Flow {
    Continue,
    Quit,
}

/// `Err` ends the session for the given reason.
pub type Step = Result<Flow, ClientCloseReason>;

pub struct Session {
    ctx: Arc<Context>,
    client: PacketStream,
    /// Capabilities negotiated with the client.
    caps: Capabilities,
    user: UserConfig,
    key: PoolKey,
    target: BackendTarget,
    state: SessionState,
    /// Declared (and so dropped) before `slot`: a backend goes back to the idle list before
    /// its slot wakes the next waiter, who would otherwise find no idle backend and open one
    /// more than pool_size.
    backend: Option<PooledBackend>,
    slot: Option<Slot>,
    /// When this session last got an execution slot (its login before the first): admission
    /// control lets those who waited longest fill the top of the queue.
    last_served: Instant,
    /// Resolves when the drain deadline passes (registered once per session).
    hard_stop: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    /// This client's prepared statements, by the ids sluice gave it.
    stmts: prepared::ClientStmts,
    /// The login's scramble, reused by COM_CHANGE_USER.
    scramble: Vec<u8>,
    reg: Registration,
}

/// Serves one accepted socket until the client leaves.
pub async fn serve(ctx: Arc<Context>, socket: TcpStream) {
    let config = ctx.config();
    let addr = socket
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut client = PacketStream::new(socket, config.max_allowed_packet as usize);
    Stats::incr(&ctx.stats.clients_accepted);
    let Some(reg) = ctx
        .registry
        .register(addr.clone(), config.max_client_connections)
    else {
        let msg = format!(
            "Too many connections: sluice accepts at most max_client_connections={} clients",
            config.max_client_connections
        );
        send_err(
            &mut client,
            0,
            &ErrPacket::new(1040, "08004", msg.as_bytes()),
        )
        .await;
        ctx.stats.client_closed(ClientCloseReason::TooManyClients);
        return;
    };
    let id = reg.info.id;
    let login = ctx.handshake.accept(&mut client, id, &config);
    let hello = match tokio::time::timeout(config.client_login_timeout, login).await {
        Ok(Ok(hello)) => hello,
        Ok(Err(e)) => {
            let reason = match e {
                HandshakeError::Rejected("access denied") => ClientCloseReason::AuthFailed,
                _ => ClientCloseReason::HandshakeFailed,
            };
            tracing::info!(client = id, %addr, %reason, "login failed: {e}");
            if let HandshakeError::Conn(conn::Error::Protocol(p)) = &e {
                // Unframeable bytes (an oversized length, an HTTP request): say so, as MySQL
                // does, before closing. The client's response would have been packet 1.
                let msg = format!("Bad handshake: {p}");
                send_err(
                    &mut client,
                    2,
                    &ErrPacket::new(1043, "08S01", msg.as_bytes()),
                )
                .await;
            }
            ctx.stats.client_closed(reason);
            return;
        }
        Err(_) => {
            tracing::info!(client = id, %addr, "login timed out");
            ctx.stats.client_closed(ClientCloseReason::LoginTimeout);
            return;
        }
    };
    tracing::info!(client = id, %addr, user = %hello.user.name, "client connected");
    let reason = Session::new(ctx.clone(), client, hello.clone_meta(), reg)
        .start(hello)
        .await;
    tracing::info!(client = id, %reason, "client disconnected");
    ctx.stats.client_closed(reason);
}

impl ClientHello {
    fn clone_meta(&self) -> (Capabilities, u8, UserConfig) {
        (self.caps, self.collation, self.user.clone())
    }
}

impl Session {
    fn new(
        ctx: Arc<Context>,
        client: PacketStream,
        (caps, collation, user): (Capabilities, u8, UserConfig),
        reg: Registration,
    ) -> Session {
        let config = ctx.config();
        let target = backend_target(&config, &user, &ctx);
        let key = PoolKey {
            user: Arc::from(target.user.as_str()),
            caps: (caps & flags::shaping_mask()).bits(),
            collation,
        };
        if let Ok(mut u) = reg.info.user.lock() {
            u.clone_from(&user.name);
        }
        Session {
            hard_stop: Box::pin(ctx.hard_stop.child_token().cancelled_owned()),
            ctx,
            client,
            caps,
            user,
            key,
            target,
            state: SessionState::new(None)
                .with_multi_statements(caps.contains(Capabilities::CLIENT_MULTI_STATEMENTS)),
            slot: None,
            last_served: Instant::now(),
            backend: None,
            stmts: prepared::ClientStmts::default(),
            scramble: Vec::new(),
            reg,
        }
    }

    /// Finishes the login (checking the default database on a backend, as MySQL would) and
    /// runs the command loop.
    async fn start(mut self, hello: ClientHello) -> ClientCloseReason {
        self.scramble = hello.scramble;
        self.state.start_autocommit(hello.autocommit);
        if let Some(db) = hello.database {
            if let Err(err) = self.select_database(db).await {
                send_err(&mut self.client, hello.next_seq, &err).await;
                return ClientCloseReason::HandshakeFailed;
            }
        }
        if self.send_ok(hello.next_seq).await.is_err() {
            return ClientCloseReason::Eof;
        }
        self.reg.info.set_phase(ClientPhase::Idle);
        self.run().await
    }

    /// The command loop. Shutdown and KILL CONNECTION end it between statements.
    async fn run(&mut self) -> ClientCloseReason {
        // A child token per session, registered once: polling the shared token itself would
        // make every session take the same lock on every command.
        let shutdown = self.ctx.shutdown.child_token().cancelled_owned();
        let killed = self.reg.info.kill.clone().cancelled_owned();
        tokio::pin!(shutdown, killed);
        loop {
            let stall = self.ctx.config().client_login_timeout;
            self.client.trim();
            let next = tokio::select! {
                r = self.client.next_packet_within(stall) => r,
                _ = &mut shutdown => return self.goodbye(1053, "08S01",
                    "Server shutdown in progress: sluice is stopping; reconnect to another instance").await,
                _ = &mut killed => return self.goodbye(1927, "70100",
                    "Connection was killed").await,
            };
            let span = match next {
                Ok(Some(span)) => span,
                Ok(None) => return ClientCloseReason::Eof,
                Err(e) => return self.protocol_error(e).await,
            };
            if span.first_seq != 0 {
                let msg = format!(
                    "Got packets out of order: a command must start with sequence id 0, got {}",
                    span.first_seq
                );
                return self
                    .fatal(1156, "08S01", &msg, span.last_seq.wrapping_add(1))
                    .await;
            }
            let packet = self.client.take(&span);
            match self.dispatch(packet, span).await {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => return ClientCloseReason::Quit,
                Err(reason) => return reason,
            }
        }
    }

    /// Runs one statement on a backend and relays its response.
    async fn statement(
        &mut self,
        packet: &[u8],
        kind: ResponseKind,
        class: Option<&Classification>,
    ) -> Step {
        self.reg.info.queries.fetch_add(1, Ordering::Relaxed);
        Stats::incr(&self.ctx.stats.statements);
        let rules = class.map(Rules::of);
        if let Err(err) = self.acquire().await {
            self.release_if_possible();
            self.reply_err(1, &err).await?;
            return Ok(Flow::Continue);
        }
        if let Some(r) = &rules {
            self.present_identity(r.presents).await;
        }
        let mut flow = Flow::Continue;
        if let Some(summary) = self.relay_on_backend(packet, kind, None).await? {
            flow = self.after_statement(&summary, rules.as_ref()).await;
        }
        self.release_if_possible();
        Ok(flow)
    }

    /// Relays `packet` on the session's backend (which `acquire` provided). `Ok(None)`: the
    /// backend was lost, the client was told, and the session goes on.
    async fn relay_on_backend(
        &mut self,
        packet: &[u8],
        kind: ResponseKind,
        rewrite_stmt_id: Option<u32>,
    ) -> Result<Option<crate::protocol::ResponseSummary>, ClientCloseReason> {
        let opts = RelayOptions {
            strip_session_track: !self.caps.contains(Capabilities::CLIENT_SESSION_TRACK),
            client_write_timeout: self.ctx.config().client_write_timeout,
            rewrite_stmt_id,
        };
        let Some(backend) = self.backend.as_mut() else {
            return Ok(None);
        };
        // Mid-response until proven otherwise: if this future is dropped now, the backend closes.
        backend.health = Health::Broken;
        self.reg
            .info
            .backend_thread
            .store(backend.thread_id, Ordering::Relaxed);
        self.reg.info.set_phase(ClientPhase::Active);
        let started = Instant::now();
        let written = self.client.bytes_written();
        let result = tokio::select! {
            r = relay(&mut self.client, backend, packet, kind, &opts) => r,
            _ = self.hard_stop.as_mut() => return Err(ClientCloseReason::Shutdown),
        };
        self.ctx.latency.backend_time.record(started.elapsed());
        self.ctx.pool.slots().record_service(started.elapsed());
        self.ctx
            .stats
            .bytes_to_clients
            .fetch_add(self.client.bytes_written() - written, Ordering::Relaxed);
        self.reg.info.backend_thread.store(0, Ordering::Relaxed);
        match result {
            Ok(summary) => Ok(Some(summary)),
            Err(RelayError::Client(e)) => {
                tracing::debug!(client = self.reg.info.id, "client failed mid-response: {e}");
                Err(match e {
                    conn::Error::Timeout(_) => ClientCloseReason::WriteTimeout,
                    _ => ClientCloseReason::Eof,
                })
            }
            Err(RelayError::Backend { error, next_seq }) => {
                self.backend_lost(error, next_seq).await?;
                Ok(None)
            }
        }
    }

    /// The backend died mid-statement. Without an open transaction or pinned state the
    /// session goes on with a fresh backend next time; otherwise that state is gone, and the
    /// client is disconnected just as MySQL would have done.
    async fn backend_lost(
        &mut self,
        error: conn::Error,
        next_seq: u8,
    ) -> Result<(), ClientCloseReason> {
        tracing::warn!(client = self.reg.info.id, backend = %self.target.addr, "backend lost mid-statement: {error}");
        self.backend = None;
        let lost_state = self.state.needs_backend();
        self.state.reset_transaction();
        self.release_if_possible();
        let msg = format!(
            "Lost connection to backend {} during query; {}",
            self.target.addr,
            if lost_state {
                "the open transaction or session state is gone, reconnect"
            } else {
                "the statement may or may not have run, the next one gets a fresh backend"
            }
        );
        self.reply_err(
            next_seq,
            &ErrPacket::from_code(codes::BACKEND_LOST, msg.as_bytes()),
        )
        .await?;
        if lost_state {
            Err(ClientCloseReason::BackendLost)
        } else {
            Ok(())
        }
    }

    /// Takes an execution slot and a backend (if not held already) and brings the backend
    /// to the session's movable state.
    async fn acquire(&mut self) -> Result<(), ErrPacket> {
        let queued = Instant::now();
        let result = self.acquire_inner().await;
        if result.is_ok() {
            self.ctx.latency.queue_wait.record(queued.elapsed());
        }
        result
    }

    async fn acquire_inner(&mut self) -> Result<(), ErrPacket> {
        let config = self.ctx.config();
        let mut deadline = Instant::now() + config.queue_timeout;
        if !self.ctx.pool.backend_up() {
            // During an outage nobody waits longer than backend_down_wait, in the slot
            // queue or for a backend.
            deadline = deadline.min(Instant::now() + config.backend_down_wait);
        }
        if self.slot.is_none() {
            self.admit(&config)?;
            self.reg.info.set_phase(ClientPhase::Waiting);
            self.wait_while_paused(deadline).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            // The admission estimate can be wrong (a burst right after cheap statements):
            // a statement admitted under max_queue_wait still never waits longer than it.
            let shed_after = config.max_queue_wait.filter(|t| *t < left);
            let acquired = self.ctx.pool.acquire_slot(shed_after.unwrap_or(left)).await;
            if acquired.is_ok() {
                self.last_served = Instant::now();
            }
            let slot = acquired.map_err(|e| match (shed_after, &e) {
                    (_, pool::Error::QueueTimeout { waited, .. }) if !self.ctx.pool.backend_up() => {
                        self.pool_error(&pool::Error::BackendDown {
                            view: Box::new(self.ctx.pool.outage()),
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
        if self.backend.is_none() {
            let b = self
                .ctx
                .pool
                .checkout(
                    &self.key,
                    &self.state.movable,
                    &self.target,
                    deadline,
                    config.backend_down_wait,
                )
                .await
                .map_err(|e| self.pool_error(&e))?;
            self.backend = Some(b);
        }
        self.sync_backend().await
    }

    /// Latency-target admission (`max_queue_wait`): a statement that would wait longer than
    /// the target fails fast with a retryable error instead of queueing for seconds (and one
    /// admitted on a wrong estimate fails once it has waited the target, in `acquire_inner`).
    /// A session inside a transaction is never shed (it holds its slot anyway).
    fn admit(&self, config: &crate::config::Config) -> Result<(), ErrPacket> {
        let Some(target) = config.max_queue_wait else {
            return Ok(());
        };
        let starved = self.last_served.elapsed();
        let Err(expected) = self.ctx.pool.slots().admit(target, starved) else {
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

    async fn wait_while_paused(&self, deadline: Instant) -> Result<(), ErrPacket> {
        if !*self.ctx.paused.borrow() {
            return Ok(());
        }
        let mut rx = self.ctx.paused.subscribe();
        let wait = async move { rx.wait_for(|paused| !*paused).await.map(|_| ()) };
        match tokio::time::timeout_at(deadline.into(), wait).await {
            Ok(_) => Ok(()),
            Err(_) => Err(ErrPacket::from_code(
                codes::QUEUE_TIMEOUT,
                &b"sluice is PAUSED and queue_timeout passed; RESUME it on the admin console, then retry"[..],
            )),
        }
    }

    /// Replays schema and session variables onto the backend if it differs (one round trip).
    async fn sync_backend(&mut self) -> Result<(), ErrPacket> {
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
                .ctx
                .pool
                .open_fresh(
                    &self.key,
                    &self.target,
                    Instant::now() + self.ctx.config().backend_down_wait,
                )
                .await
                .map_err(|e| pool_error_packet(&e, &self.ctx.config()))?;
            self.backend = Some(fresh);
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

    /// Gives back what the session's state no longer requires.
    fn release_if_possible(&mut self) {
        // The backend first, then the slot (see the field order of `Session`).
        if !self.state.needs_backend() {
            if let Some(b) = self.backend.as_mut() {
                // The state that made it dirty is gone (COMMIT, last statement closed).
                if b.health == Health::Dirty {
                    b.health = Health::Clean;
                }
            }
            self.backend = None;
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

    fn pool_error(&self, e: &pool::Error) -> ErrPacket {
        if matches!(e, pool::Error::QueueTimeout { .. }) {
            Stats::incr(&self.ctx.stats.queue_timeouts);
        }
        pool_error_packet(e, &self.ctx.config())
    }

    async fn send_ok(&mut self, seq: u8) -> Result<(), conn::Error> {
        let mut ok = OkPacket::new(self.state.local_status());
        ok.session_state.clear();
        let mut out = BytesMut::new();
        ok.encode(self.caps, &mut out);
        self.client.send_packet(seq, &out).await.map(|_| ())
    }

    /// Sends an ERR for the current command; a client that is gone ends the session.
    async fn reply_err(&mut self, seq: u8, err: &ErrPacket) -> Result<(), ClientCloseReason> {
        Stats::incr(&self.ctx.stats.client_errors);
        let mut out = BytesMut::new();
        err.encode(&mut out);
        self.client
            .send_packet(seq, &out)
            .await
            .map(|_| ())
            .map_err(|_| ClientCloseReason::Eof)
    }

    async fn fatal(&mut self, code: u16, state: &str, msg: &str, seq: u8) -> ClientCloseReason {
        tracing::info!(client = self.reg.info.id, code, "closing client: {msg}");
        send_err(
            &mut self.client,
            seq,
            &ErrPacket::new(code, state, msg.as_bytes()),
        )
        .await;
        ClientCloseReason::ProtocolError
    }

    async fn protocol_error(&mut self, e: conn::Error) -> ClientCloseReason {
        use crate::protocol::Error as P;
        match e {
            conn::Error::Protocol(P::PacketTooLarge { len, max }) => {
                let msg = format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max}); raise max_allowed_packet in sluice and the server"
                );
                self.fatal(1153, "08S01", &msg, 1).await
            }
            conn::Error::Protocol(P::SequenceMismatch { expected, got }) => {
                let msg = format!(
                    "Got packets out of order (expected sequence id {expected}, got {got})"
                );
                self.fatal(1156, "08S01", &msg, got.wrapping_add(1)).await
            }
            conn::Error::Timeout(_) => {
                self.fatal(
                    1159,
                    "08S01",
                    "Got timeout reading communication packets: the client stalled mid-packet",
                    1,
                )
                .await
            }
            conn::Error::Truncated | conn::Error::Closed => ClientCloseReason::Eof,
            _ => ClientCloseReason::IoError,
        }
    }

    async fn goodbye(&mut self, code: u16, state: &str, msg: &str) -> ClientCloseReason {
        send_err(
            &mut self.client,
            0,
            &ErrPacket::new(code, state, msg.as_bytes()),
        )
        .await;
        self.client.shutdown().await;
        if code == 1927 {
            ClientCloseReason::Killed
        } else {
            ClientCloseReason::Shutdown
        }
    }
}

impl Drop for Session {
    /// A session that ends holding a backend with state no other client may see hands it
    /// back dirty, so the pool resets (or, mid-response, closes) it.
    fn drop(&mut self) {
        if let Some(b) = self.backend.as_mut() {
            if b.health == Health::Clean && self.state.needs_backend() {
                b.health = Health::Dirty;
            }
        }
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
        pool::Error::Closed => ErrPacket::new(1053, "08S01", b"Server shutdown in progress: sluice is stopping"),
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

/// `Duration` in the units an operator reads.
pub fn fmt_ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Raw bytes of a packet whose payload sluice builds itself (seq 0).
pub fn framed(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 4);
    crate::protocol::frame::write_packet(&mut out, 0, payload);
    out.freeze()
}
