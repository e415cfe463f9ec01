//! One client session, from accept to close: read a command, run it on a backend (taking an
//! execution slot and a backend only for as long as the rules in `state` require), relay the
//! answer, and decide what to keep.

mod acquire;
pub mod commands;
pub mod errors;
pub mod identity;
mod pipeline;
pub mod prepared;
// Lives at the crate root (shared with `context` and the admin console); re-exported here.
pub use crate::registry;
pub mod relay;
pub mod replay;
mod route;
pub mod state;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::net::TcpStream;

use crate::classify::Classification;
use crate::config::{Config, UserConfig};
use crate::conn::backend::{BackendTarget, Health, PoolKey};
use crate::conn::busy_poll::BusyPoll;
use crate::conn::client::{send_err, ClientHello, HandshakeError};
use crate::conn::latch::Latched;
use crate::conn::{self, PacketStream};
use crate::context::{backend_target, Context};
use crate::pool::{PinPlace, PooledBackend, Slot};
use crate::protocol::{flags, Capabilities, ErrPacket, OkPacket, ResponseKind};
use crate::stats::{ClientCloseReason, Stats};
pub use acquire::pool_error_packet;
use registry::{ClientPhase, Registration};
use relay::{relay_command, RelayError, RelayOptions};
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
    /// The config this command runs under: taken from `ctx` once per command (`run`), so a
    /// statement sees one consistent config and takes the config lock once.
    config: Arc<Config>,
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
    /// Held while the session keeps `backend` between statements for a pin (`pool::places`);
    /// dropped after the backend went back.
    place: Option<PinPlace>,
    slot: Option<Slot>,
    /// Resets of backends this session gave back dirty; its next statement waits for them,
    /// so that after COM_RESET_CONNECTION the server shows it no old lock or table.
    resets: Arc<crate::pool::Resets>,
    /// When this session last got an execution slot (its login before the first): admission
    /// control lets those who waited longest fill the top of the queue.
    last_served: Instant,
    /// Resolves when the drain deadline passes (registered once per session; latched, as
    /// it is polled whenever a relay waits).
    hard_stop: std::pin::Pin<Box<Latched<tokio_util::sync::WaitForCancellationFutureOwned>>>,
    /// This client's prepared statements, by the ids sluice gave it.
    stmts: prepared::ClientStmts,
    /// The login's scramble, reused by COM_CHANGE_USER.
    scramble: Vec<u8>,
    reg: Registration,
    /// The server (index in `Config::endpoints`) whose pool `slot`, `backend` and `place`
    /// come from, and that `target` points at.
    server: usize,
    /// What the next statement tells the router (`route::Pending`).
    pending: route::Pending,
    /// The position of the session's last write (read-your-writes).
    last_write: Option<crate::topology::GtidPosition>,
    /// Spreads the router's ties.
    route_count: usize,
    /// The current statement was routed to a replica (`route::Route::Replica`).
    on_replica: bool,
    /// A server the next routing must avoid: a replica that just failed a read.
    avoid: Option<usize>,
    /// The relay may hand a backend failure back for a retry (nothing reached the client).
    retry_read: bool,
    /// Set by the relay when it did so.
    read_retry_now: bool,
    /// A pipelined statement's answer: its batch's times (`batches::Turn`), which the
    /// relay reads and completes.
    turn: Option<crate::pool::batches::Turn>,
    /// `read_your_writes = wait`: the position the chosen replica must reach first.
    gtid_wait: Option<crate::topology::GtidPosition>,
    /// When the next relay starts, if its caller read the clock just before (`statement`);
    /// taken by `relay_on_backend`, which otherwise reads it itself.
    relay_start: Option<Instant>,
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
        let err = errors::too_many_clients(config.max_client_connections);
        send_err(&mut client, 0, &err).await;
        ctx.stats.client_closed(ClientCloseReason::TooManyClients);
        return;
    };
    let id = reg.info.id;
    let login = ctx.handshake.accept(&mut client, id, &config);
    let hello = match tokio::time::timeout(config.client_login_timeout, login).await {
        Ok(Ok(hello)) => hello,
        Ok(Err(e)) => {
            let reason = e.close_reason();
            tracing::info!(client = id, %addr, %reason, "login failed: {e}");
            if let HandshakeError::Conn(conn::Error::Protocol(p)) = &e {
                // Unframeable bytes (an oversized length, an HTTP request): say so, as MySQL
                // does, before closing. The client's response would have been packet 1.
                send_err(&mut client, 2, &errors::bad_handshake(p)).await;
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
    let reason = Session::new(ctx.clone(), config, client, hello.clone_meta(), reg)
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
        config: Arc<Config>,
        client: PacketStream,
        (caps, collation, user): (Capabilities, u8, UserConfig),
        reg: Registration,
    ) -> Session {
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
            hard_stop: Box::pin(Latched::new(ctx.hard_stop.child_token().cancelled_owned())),
            ctx,
            config,
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
            place: None,
            resets: Arc::default(),
            stmts: prepared::ClientStmts::default(),
            scramble: Vec::new(),
            reg,
            server: 0,
            pending: route::Pending::default(),
            last_write: None,
            route_count: 0,
            on_replica: false,
            avoid: None,
            retry_read: false,
            read_retry_now: false,
            turn: None,
            gtid_wait: None,
            relay_start: None,
        }
    }

    /// Finishes the login (checking the default database with the server, as MySQL would)
    /// and runs the command loop.
    async fn start(mut self, hello: ClientHello) -> ClientCloseReason {
        self.scramble = hello.scramble;
        self.state.start_with(hello.fresh_status);
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
        // make every session take the same lock on every command. Latched: the two are
        // polled again only once one of them has woken the session (shutdown first).
        let shutdown = self.ctx.shutdown.child_token().cancelled_owned();
        let killed = self.reg.info.kill.clone().cancelled_owned();
        let ctx = Arc::clone(&self.ctx);
        let mut stop = Latched::new(async move {
            tokio::select! {
                biased;
                _ = shutdown => ClientCloseReason::Shutdown,
                _ = killed => ClientCloseReason::Killed,
            }
        });
        loop {
            // The socket nearly always takes the answer at once: then no future at all.
            if self.client.queued() > 0 && !matches!(self.client.try_flush(), Ok(true)) {
                if let Err(reason) = self.flush_response().await {
                    return reason;
                }
            }
            // The previous command's config: a reload applies from the next command on.
            let stall = self.config.client_login_timeout;
            self.client.trim();
            // The read first: a command that is ready does not also poll the cancellations.
            // They are still polled whenever the read waits, and tokio's cooperative budget
            // makes even a client that never lets it wait yield now and then.
            let next = tokio::select! {
                biased;
                r = self.client.next_packet_within(stall) => r,
                reason = &mut stop => {
                    let err = match reason {
                        ClientCloseReason::Shutdown => errors::shutdown(),
                        _ => errors::killed(),
                    };
                    return self.goodbye(err, reason).await;
                }
            };
            let span = match next {
                Ok(Some(span)) => span,
                Ok(None) => return ClientCloseReason::Eof,
                Err(e) => return self.protocol_error(e).await,
            };
            if span.first_seq != 0 {
                let err = errors::command_out_of_order(span.first_seq);
                return self.fatal(&err, span.last_seq.wrapping_add(1)).await;
            }
            // The one config lock of this command: everything it does reads `self.config`.
            self.config = self.ctx.config();
            let packet = self.client.take(&span);
            let _busy = ctx.busy.enter();
            match self.dispatch(packet, span).await {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => return ClientCloseReason::Quit,
                Err(reason) => return reason,
            }
        }
    }

    /// Writes what the last command left queued: the tail of a relayed response waits until
    /// the statement has given back its backend and slot, so a client that reacts at once
    /// (the next statement, a new connection) finds them free, not still held.
    pub(in crate::session) async fn flush_response(&mut self) -> Result<(), ClientCloseReason> {
        // Nearly always the socket takes it all at once: no future, no select.
        match self.client.try_flush() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(_) => return Err(ClientCloseReason::Eof),
        }
        let timeout = self.config.client_write_timeout;
        // Biased, as in `run`: the write first, the hard stop whenever it waits.
        tokio::select! {
            biased;
            r = self.client.flush(Some(timeout)) => r.map_err(|e| match e {
                conn::Error::Timeout(_) => ClientCloseReason::WriteTimeout,
                _ => ClientCloseReason::Eof,
            }),
            _ = self.hard_stop.as_mut() => Err(ClientCloseReason::Shutdown),
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
        let pending = class.map(route::Pending::of);
        // An autocommit read that starts with nothing held may be retried once on another
        // server when its replica fails before the client saw a byte.
        let mut retries =
            usize::from(class.is_some_and(|c| c.read.is_replica_safe()) && self.holds_nothing());
        // A statement that will pin gets its place first, or does not run at all.
        if self.place.is_none() && rules.as_ref().and_then(Rules::pin_ahead).is_some() {
            if let Err(err) = self.reserve_pin(rules.as_ref()).await {
                self.reply_err(1, &err).await?;
                return Ok(Flow::Continue);
            }
        }
        // A stateless read may share one write to the backend with other sessions' reads.
        let reads_only = kind == ResponseKind::Query && class.is_some_and(pipeline::reads_only);
        if let Some(r) = rules.as_ref().filter(|r| reads_only && self.pipelinable(r)) {
            if let pipeline::Piped::Done(step) = self
                .pipelined(pipeline::Own::Query(packet), r, pending.as_ref())
                .await
            {
                return step;
            }
        }
        let mut flow = Flow::Continue;
        loop {
            // Unless `pipelined` routed it already and then let it run on its own.
            if let Some(p) = pending.as_ref().filter(|_| !self.routed_now()) {
                self.pending = p.clone();
            }
            let acquired = match self.acquire().await {
                Ok(at) => at,
                Err(err) => {
                    self.release_if_possible();
                    if retries > 0 && self.on_replica {
                        retries -= 1;
                        self.avoid = Some(self.server);
                        Stats::incr(&self.ctx.stats.read_retries);
                        continue;
                    }
                    self.reply_err(1, &err).await?;
                    return Ok(Flow::Continue);
                }
            };
            let presented = match &rules {
                Some(r) if r.presents != state::Presents::default() => {
                    self.present_identity(r.presents).await
                }
                _ => false,
            };
            // The relay starts where the acquire ended, unless a round trip came between.
            self.relay_start = (!presented).then_some(acquired);
            self.retry_read = retries > 0 && self.on_replica;
            let relayed = self.relay_on_backend(Some(packet), kind, None).await;
            self.retry_read = false;
            if std::mem::take(&mut self.read_retry_now) {
                retries -= 1;
                self.avoid = Some(self.server);
                Stats::incr(&self.ctx.stats.read_retries);
                continue;
            }
            if let Some(summary) = relayed? {
                // `after_statement`, with its future only when the server must be asked first.
                flow = match self.note_statement(&summary, rules.as_ref()) {
                    commands::Noted::Done(flow) => flow,
                    commands::Noted::Confirm(ask, flow) => {
                        self.confirmed(&summary, rules.as_ref(), &ask, flow).await
                    }
                };
            }
            break;
        }
        self.release_if_possible();
        if matches!(flow, Flow::Quit) {
            // The server closes the connection after this answer (COMMIT RELEASE): the
            // client gets the answer first, as from the server.
            self.flush_response().await?;
        }
        Ok(flow)
    }

    /// Relays `packet` on the session's backend (which `acquire` provided); `None`: it was
    /// sent already, in a pipelined batch, and a KILL QUERY may interrupt its answer here.
    /// `Ok(None)`: the backend was lost, the client was told, and the session goes on.
    async fn relay_on_backend(
        &mut self,
        packet: Option<&[u8]>,
        kind: ResponseKind,
        rewrite_stmt_id: Option<u32>,
    ) -> Result<Option<crate::protocol::ResponseSummary>, ClientCloseReason> {
        // Taken first, so that it is never left for a later relay.
        let relay_start = self.relay_start.take();
        // Only a pipelined answer (sent already) may be interrupted here: no clone otherwise.
        let info = packet.is_none().then(|| Arc::clone(&self.reg.info));
        let opts = RelayOptions {
            strip_session_track: !self.caps.contains(Capabilities::CLIENT_SESSION_TRACK),
            client_write_timeout: self.config.client_write_timeout,
            rewrite_stmt_id,
            interrupt: info.as_deref().map(|i| &i.interrupt),
            busy_poll: BusyPoll {
                budget: self.config.backend_busy_poll,
                busy: &self.ctx.busy,
                stats: &self.ctx.stats.busy_poll,
            },
        };
        let Some(backend) = self.backend.as_mut() else {
            return Ok(None);
        };
        // Mid-response until proven otherwise: if this future is dropped now, the backend closes.
        backend.health = Health::Broken;
        self.reg.info.running_on(backend.thread_id, self.server);
        self.reg.info.set_phase(ClientPhase::Active);
        // A pipelined answer's backend time (and statement time) starts at its batch's write.
        let sent_at = self.turn.as_ref().map(|t| t.sent);
        let started = relay_start.or(sent_at).unwrap_or_else(Instant::now);
        // Counted as queued: the response's tail is flushed after the statement (`run`).
        let written = self.client.bytes_written() + self.client.queued() as u64;
        // Biased, as in `run`: the relay first, the hard stop whenever it waits.
        let result = tokio::select! {
            biased;
            r = relay_command(&mut self.client, backend, packet, kind, &opts) => r,
            _ = self.hard_stop.as_mut() => return Err(ClientCloseReason::Shutdown),
        };
        let ended = Instant::now();
        self.ctx.latency.backend_time.record(ended - started);
        let held_from = self.turn.as_mut().map_or(started, |t| t.answered(ended));
        self.pool().slots().record_service(ended - held_from);
        self.ctx.stats.bytes_to_clients.fetch_add(
            self.client.bytes_written() + self.client.queued() as u64 - written,
            Ordering::Relaxed,
        );
        self.reg.info.backend_thread.store(0, Ordering::Relaxed);
        match result {
            Ok(summary) => {
                self.track_write(&summary);
                Ok(Some(summary))
            }
            Err(RelayError::Client(e)) => {
                tracing::debug!(client = self.reg.info.id, "client failed mid-response: {e}");
                Err(match e {
                    conn::Error::Timeout(_) => ClientCloseReason::WriteTimeout,
                    _ => ClientCloseReason::Eof,
                })
            }
            // Nothing reached the client (the next packet would be its first): the read
            // runs again elsewhere, and the client never sees the replica fail.
            Err(RelayError::Backend { error, next_seq: 1 }) if self.retry_read => {
                tracing::info!(client = self.reg.info.id, backend = %self.target.addr, "replica failed before the first byte of a read ({error}); retrying it on another server");
                self.backend = None;
                self.release_if_possible();
                self.read_retry_now = true;
                Ok(None)
            }
            Err(RelayError::Backend { error, next_seq }) => {
                self.backend_lost(error, next_seq).await?;
                Ok(None)
            }
            // The client has its answer (1317): only the backend is gone.
            Err(RelayError::Interrupted(error)) => {
                tracing::warn!(client = self.reg.info.id, backend = %self.target.addr, "backend lost while an interrupted answer was read: {error}");
                self.backend = None;
                self.release_if_possible();
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
        let err = errors::backend_lost(&self.target.addr.to_string(), lost_state);
        self.reply_err(next_seq, &err).await?;
        if lost_state {
            Err(ClientCloseReason::BackendLost)
        } else {
            Ok(())
        }
    }

    /// The pool of the server the session runs on (`server`).
    fn pool(&self) -> &crate::pool::Pool {
        self.ctx.pool_for(self.server).unwrap_or(&self.ctx.pool)
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

    async fn fatal(&mut self, err: &ErrPacket, seq: u8) -> ClientCloseReason {
        tracing::info!(
            client = self.reg.info.id,
            code = err.code,
            "closing client: {}",
            String::from_utf8_lossy(&err.message)
        );
        send_err(&mut self.client, seq, err).await;
        ClientCloseReason::ProtocolError
    }

    async fn protocol_error(&mut self, e: conn::Error) -> ClientCloseReason {
        use crate::protocol::Error as P;
        match e {
            conn::Error::Protocol(P::PacketTooLarge { len, max }) => {
                self.fatal(&errors::packet_too_large(len, max), 1).await
            }
            conn::Error::Protocol(P::SequenceMismatch { expected, got }) => {
                let err = errors::packets_out_of_order(expected, got);
                self.fatal(&err, got.wrapping_add(1)).await
            }
            conn::Error::Timeout(_) => self.fatal(&errors::read_timeout(), 1).await,
            conn::Error::Truncated | conn::Error::Closed => ClientCloseReason::Eof,
            _ => ClientCloseReason::IoError,
        }
    }

    /// Ends the session between statements (shutdown, KILL) with `err` and `reason`.
    async fn goodbye(&mut self, err: ErrPacket, reason: ClientCloseReason) -> ClientCloseReason {
        send_err(&mut self.client, 0, &err).await;
        self.client.shutdown().await;
        reason
    }
}

impl Drop for Session {
    /// A session that ends holding a backend with state no other client may see hands it
    /// back dirty, so the pool resets (or, mid-response, closes) it. Unless that state may
    /// hold up others (a transaction, a lock), the reset may wait for a free slot.
    fn drop(&mut self) {
        if let Some(b) = self.backend.as_mut() {
            if b.health == Health::Clean && self.state.needs_backend() {
                b.health = Health::Dirty;
            }
            if !self.state.holds_slot() {
                b.defer_reset();
            }
        }
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
