//! One client session, from accept to close: read a command (`commands`), run it on a
//! backend as a statement (a `statement::Statement`, down the one path of `path`: taking an
//! execution slot and a backend only for as long as the rules in `state` require), relay the
//! answer (`answer`, `relay`), and decide what to keep (`finished`, `acquire`).
//!
//! [`Session`] holds only what lives as long as the client: its login, its state, what it
//! holds on a server, its memory of past statements, its prepared statements and its place
//! in the registry. What lives for one statement is that statement's.

mod acquire;
mod answer;
mod commands;
mod conditions;
mod errors;
mod finished;
mod identity;
mod kill;
mod outcome;
mod path;
mod pipeline;
mod prepared;
mod relay;
mod replay;
mod replies;
mod route;
mod state;
mod statement;
mod steer;
mod values;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::net::TcpStream;

use crate::config::{Config, UserConfig};
use crate::conn::backend::{BackendTarget, Health, PoolKey};
use crate::conn::client::{send_err, ClientHello, HandshakeError};
use crate::conn::latch::Latched;
use crate::conn::{self, PacketStream};
use crate::context::{backend_target, Context};
use crate::pool::{PinPlace, PooledBackend, Slot};
use crate::protocol::{flags, Capabilities};
use crate::stats::{ClientCloseReason, Stats};
// The live sessions live at the crate root (shared with `context` and the admin console).
use crate::registry::{self, ClientPhase, Registration};
use state::SessionState;

/// What the loop does after a command.
pub(crate) enum Flow {
    Continue,
    Quit,
}

/// `Err` ends the session for the given reason.
pub(crate) type Step = Result<Flow, ClientCloseReason>;

/// One client's session: what lives as long as the client's connection. What lives for one
/// statement is that statement's (`statement::Statement`).
pub(crate) struct Session {
    ctx: Arc<Context>,
    /// The config this command runs under: taken from `ctx` once per command (`run`), so a
    /// statement sees one consistent config and takes the config lock once.
    config: Arc<Config>,
    client: PacketStream,
    /// Declared (and so dropped) before `held`: when the last session of an old generation
    /// of the server's globals leaves, its backend closes at check-in (`pool::recycle`)
    /// instead of going idle for nobody.
    login: Login,
    state: SessionState,
    held: Held,
    /// What the client's session tracks (`session_track_*`), from its first backend's
    /// start values and its own SETs; `None` until then.
    trackers: Option<values::ClientTrackers>,
    memory: Memory,
    /// Resolves when the drain deadline passes (registered once per session; latched, as
    /// it is polled whenever a relay waits).
    hard_stop: std::pin::Pin<Box<Latched<tokio_util::sync::WaitForCancellationFutureOwned>>>,
    /// This client's prepared statements, by the ids sluice gave it.
    stmts: prepared::ClientStmts,
    reg: Registration,
}

/// Who the client is, as its login (or COM_CHANGE_USER, or COM_RESET_CONNECTION for the
/// globals) made it.
struct Login {
    /// Capabilities negotiated with the client.
    caps: Capabilities,
    user: UserConfig,
    /// The idle backends it may take; its `globals` is this session's generation of the
    /// server's globals (`globals`).
    key: PoolKey,
    /// The server's globals as the login (or last reset) found them: the session takes
    /// only backends opened under them (`pool::globals`).
    globals: crate::pool::GlobalsHold,
    /// The login's scramble, reused by COM_CHANGE_USER.
    scramble: Vec<u8>,
    /// The session's wait_timeout as the server starts it (`ClientHello::idle_timeout`):
    /// how long the client may sit idle unless it SETs its own. `None` until a backend has
    /// read the server's (then asked again when the session next waits).
    idle: Option<Duration>,
}

/// What the session holds on a server, during a statement or between statements (a
/// transaction, a lock, a pin), and which server that is. `Session::release_if_possible`
/// decides what it keeps.
struct Held {
    /// Declared (and so dropped) before `slot`: a backend goes back to the idle list before
    /// its slot wakes the next waiter, who would otherwise find no idle backend and open one
    /// more than pool_size.
    backend: Option<PooledBackend>,
    /// Held while the session keeps `backend` between statements for a pin (`pool::places`);
    /// dropped after the backend went back.
    place: Option<PinPlace>,
    slot: Option<Slot>,
    /// Listed among the lock holders while the session holds named locks (IS_USED_LOCK()
    /// names it by its client id: `identity`).
    lock_listing: Option<registry::LockListing>,
    /// Resets of backends this session gave back dirty; its next statement waits for them,
    /// so that after COM_RESET_CONNECTION the server shows it no old lock or table.
    resets: Arc<crate::pool::Resets>,
    /// The server (index in `Config::endpoints`) whose pool `slot`, `backend` and `place`
    /// come from, and that `target` points at.
    server: usize,
    /// Where the session's backend connections go: that server, as the login's backend
    /// account.
    target: BackendTarget,
}

/// What the session remembers of its past statements for routing and admission, and of its
/// diagnostics.
struct Memory {
    /// When this session last got an execution slot (its login before the first): admission
    /// control lets those who waited longest fill the top of the queue.
    last_served: Instant,
    /// The position of the session's last write (read-your-writes).
    last_write: Option<crate::topology::GtidPosition>,
    /// Spreads the router's ties.
    route_count: usize,
    /// The session's conditions where no backend may hold them (`values`).
    conditions: Option<conditions::Conditions>,
    /// The digest of the session's last query text (`steer`).
    last_digest: steer::LastDigest,
}

/// Serves one accepted socket until the client leaves.
pub(crate) async fn serve(ctx: Arc<Context>, socket: TcpStream) {
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
    // The user's max_client_connections, counted once the login is proven (1226 beyond it).
    let most = hello.user.limits(&config).max_client_connections;
    if let Err(reached) = ctx.registry.count_user(&reg.info, &hello.user.name, most) {
        tracing::info!(client = id, %addr, user = %hello.user.name, "login refused: the user's max_client_connections is reached");
        let err = crate::user_limits::clients_reached(&hello.user.name, reached);
        send_err(&mut client, hello.next_seq, &err).await;
        ctx.stats.client_closed(ClientCloseReason::TooManyClients);
        return;
    }
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
        let globals = ctx.globals.hold();
        let key = PoolKey {
            user: Arc::from(target.user.as_str()),
            caps: (caps & flags::shaping_mask()).bits(),
            collation,
            globals: globals.generation(),
        };
        if let Ok(mut u) = reg.info.user.lock() {
            u.clone_from(&user.name);
        }
        Session {
            hard_stop: Box::pin(Latched::new(ctx.hard_stop.child_token().cancelled_owned())),
            ctx,
            config,
            client,
            login: Login {
                caps,
                user,
                key,
                globals,
                scramble: Vec::new(),
                idle: None,
            },
            state: SessionState::new(None)
                .with_multi_statements(caps.contains(Capabilities::CLIENT_MULTI_STATEMENTS)),
            held: Held {
                backend: None,
                place: None,
                slot: None,
                lock_listing: None,
                resets: Arc::default(),
                server: 0,
                target,
            },
            trackers: None,
            memory: Memory {
                last_served: Instant::now(),
                last_write: None,
                route_count: 0,
                conditions: None,
                last_digest: steer::LastDigest::default(),
            },
            stmts: prepared::ClientStmts::default(),
            reg,
        }
    }

    /// Finishes the login (checking the default database with the server, as MySQL would)
    /// and runs the command loop.
    async fn start(mut self, hello: ClientHello) -> ClientCloseReason {
        self.login.scramble = hello.scramble;
        self.login.idle = hello.idle_timeout;
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
            // A backend the session holds between statements (a transaction, a pin) is
            // watched too: the server may end it (KILL, a timeout, a shutdown).
            let held = self.held.backend.is_some();
            // The session's wait_timeout runs while no byte of a command has come; its timer
            // starts only once the read has to wait (nothing per command that is ready).
            let idle = self.client.buffered() == 0;
            let interactive = self.login.caps.contains(Capabilities::CLIENT_INTERACTIVE);
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
                reset = answer::server_speaks(self.held.backend.as_mut()), if held => {
                    return self.held_backend_ended(reset).await;
                }
                () = idle_expired(
                    &self.state.movable,
                    (&mut self.login.idle, interactive),
                    &ctx.handshake.server,
                ), if idle => {
                    if self.client.buffered() > 0 {
                        // A command has begun to come: it is no longer idle.
                        continue;
                    }
                    return self.idle_timed_out().await;
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

    /// The pool of the server the session runs on (`server`).
    fn pool(&self) -> &crate::pool::Pool {
        self.ctx
            .pool_for(self.held.server)
            .unwrap_or(&self.ctx.pool)
    }
}

impl Drop for Session {
    /// A session that ends holding a backend with state no other client may see hands it
    /// back dirty, so the pool resets (or, mid-response, closes) it. Unless that state may
    /// hold up others (a transaction, a lock), the reset may wait for a free slot.
    fn drop(&mut self) {
        if let Some(b) = self.held.backend.as_mut() {
            if b.health == Health::Clean && self.state.needs_backend() {
                b.health = Health::Dirty;
            }
            if !self.state.holds_locks() {
                b.defer_reset();
            }
        }
    }
}

/// Resolves once the client has been idle for its session's wait_timeout: the value its own
/// SETs gave (`movable`, as the server's tracker reported it), else the one its login
/// started with (`login.0`, asked of the latest `server` info while not known; `login.1`:
/// the client is interactive). Never without either. Its clock starts when it is first
/// polled, and only a read that has to wait polls it.
async fn idle_expired(
    movable: &crate::conn::backend::MovableState,
    login: (&mut Option<Duration>, bool),
    server: &crate::conn::server_info::ServerInfoCell,
) {
    let (start, interactive) = login;
    let own = movable
        .vars
        .get(&b"wait_timeout"[..])
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if start.is_none() {
        *start = server.idle().map(|t| t.for_login(interactive));
    }
    match own.or(*start) {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}

/// `Duration` in the units an operator reads.
pub(crate) fn fmt_ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Raw bytes of a packet whose payload sluice builds itself (seq 0).
pub(crate) fn framed(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 4);
    crate::protocol::frame::write_packet(&mut out, 0, payload);
    out.freeze()
}
