//! Per-command handling: which commands sluice answers itself (PING, RESET_CONNECTION,
//! CHANGE_USER, KILL), which it refuses, which it relays, and what a finished statement
//! changes in the session.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use super::prepared::StmtCmd;
use super::replay;
use super::state::Rules;
use super::{framed, Flow, Session, Step};
use crate::classify::{classify_in, KillTarget};
use crate::conn::backend::{BackendConn, BackendTarget, Health, PoolKey};
use crate::conn::client::Reauth;
use crate::context::backend_target_for;
use crate::protocol::frame::LogicalSpan;
use crate::protocol::request::query as query_payload;
use crate::protocol::{
    codes, ChangeUser, Command, ErrPacket, ResponseKind, ResponseSummary, SessionStateChange,
    StatusFlags,
};
use crate::stats::{ClientCloseReason, PinReason};

impl Session {
    /// Routes one command. `packet` holds its raw bytes (headers included).
    pub(super) async fn dispatch(&mut self, packet: Bytes, span: LogicalSpan) -> Step {
        let payload = crate::protocol::frame::payload(&packet, &span);
        let cmd = match Command::parse(&payload) {
            Ok(cmd) => cmd,
            Err(e) => {
                let msg = format!("Malformed command packet ({e}); the session continues");
                self.reply_err(1, &ErrPacket::from_code(codes::UNKNOWN_COM, msg.as_bytes()))
                    .await?;
                return Ok(Flow::Continue);
            }
        };
        match cmd {
            Command::Quit => Ok(Flow::Quit),
            Command::Ping => self.ok_reply().await,
            Command::ResetConnection => self.reset_connection().await,
            Command::ChangeUser(body) => {
                let body = body.to_vec();
                self.change_user(&body).await
            }
            Command::ProcessKill(id) => self.kill(KillTarget::Connection(u64::from(id))).await,
            Command::SetOption(option) => self.set_option(option).await,
            Command::Query(sql) => {
                let class = classify_in(sql, self.state.quoting());
                if let Some(target) = class.kill {
                    return self.kill(target).await;
                }
                let rewritten = self.rewritten_query(sql, &class).map(|q| query_packet(&q));
                let packet = rewritten.unwrap_or(packet);
                self.statement(&packet, ResponseKind::Query, Some(&class))
                    .await
            }
            Command::StmtPrepare(sql) => {
                let sql = sql.to_vec();
                self.prepare(&packet, &sql).await
            }
            Command::StmtExecute { stmt_id, .. } => {
                self.stmt_command(&payload, stmt_id, StmtCmd::Execute).await
            }
            Command::StmtBulkExecute { stmt_id, .. } => {
                self.stmt_command(&payload, stmt_id, StmtCmd::BulkExecute)
                    .await
            }
            Command::StmtFetch { stmt_id, .. } => {
                self.stmt_command(&payload, stmt_id, StmtCmd::Fetch).await
            }
            Command::StmtSendLongData { stmt_id, .. } => {
                self.stmt_command(&payload, stmt_id, StmtCmd::SendLongData)
                    .await
            }
            Command::StmtReset(stmt_id) => {
                self.stmt_command(&payload, stmt_id, StmtCmd::Reset).await
            }
            Command::StmtClose(stmt_id) => {
                self.close_stmt(stmt_id);
                Ok(Flow::Continue)
            }
            Command::Unsupported(code) => {
                let msg = format!(
                    "sluice does not support {code:?} (replication and administrative protocol commands \
                     must go to the MySQL server directly); the session continues"
                );
                self.reply_err(1, &ErrPacket::from_code(codes::UNKNOWN_COM, msg.as_bytes()))
                    .await?;
                Ok(Flow::Continue)
            }
            Command::Unknown(byte) => {
                let msg = format!("Unknown command 0x{byte:02x}; the session continues");
                self.reply_err(1, &ErrPacket::from_code(codes::UNKNOWN_COM, msg.as_bytes()))
                    .await?;
                Ok(Flow::Continue)
            }
            other => {
                let kind = other.response_kind();
                self.statement(&packet, kind, None).await
            }
        }
    }

    /// What a finished statement changed: transaction status, movable state, locks and pins
    /// (the statement's `Rules`, when it is one sluice classified). `Flow::Quit` when the
    /// server closes the connection after this answer (COMMIT RELEASE), so the client's
    /// connection ends too.
    pub(super) async fn after_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
    ) -> Flow {
        match self.note_statement(summary, rules) {
            Noted::Done(flow) => flow,
            Noted::Confirm(ask, flow) => self.confirmed(summary, rules, &ask, flow).await,
        }
    }

    /// `after_statement` without a future: all of it, unless the server must first be asked
    /// which named locks the statement took (then `confirmed` does the rest).
    pub(super) fn note_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
    ) -> Noted {
        if let Some(status) = summary.status {
            self.state.status = status;
        }
        let Some(backend) = self.backend.as_mut() else {
            return Noted::Done(Flow::Continue);
        };
        backend.statements += 1;
        self.state.outcome = self.state.outcome.after(summary);
        if summary.last_insert_id != 0 {
            self.state.last_insert_id = summary.last_insert_id;
            backend.last_insert_id = summary.last_insert_id;
        }
        // SHOW WARNINGS leaves the warnings it read where they were: the backend still
        // carries them, and must not go back to the pool with them.
        let reread = rules.is_some_and(|r| r.reads_diagnostics) && self.state.warnings_pending;
        self.state.warnings_pending = summary.warnings > 0 || reread;
        let mut ask = Ask::default();
        if !summary.state_changes.is_empty() {
            backend.state.apply(&summary.state_changes);
            self.state.movable.apply(&summary.state_changes);
            ask.charsets = replay::reports_charset_pair(&summary.state_changes);
        }
        // The backend is gone after this answer: the server closed it, or it failed.
        let (mut closed, mut flow) = (false, Flow::Continue);
        if let Some(rules) = rules {
            let applied = self.state.apply(rules, rules.ran(summary.error.is_some()));
            for reason in &applied.new_pins {
                self.count_pin(*reason);
            }
            if applied.disconnects {
                (closed, flow) = (true, Flow::Quit);
            }
            // Asking the server replaces the diagnostics the client may read next: not after
            // warnings. After an error it asks anyway (a statement that failed, a typo or a
            // killed wait, took no lock, and one believed held would keep the slot for good);
            // `SHOW WARNINGS` then misses the error only if the session kept this backend.
            if !self.state.warnings_pending {
                ask.locks = applied.confirm;
            }
        }
        if ask.charsets && self.state.warnings_pending {
            // Asking would replace the warnings the client may read next: the session keeps
            // this backend, whose character sets sluice cannot describe, instead.
            ask.charsets = false;
            self.pin(PinReason::UntrackedState);
        }
        if !closed && (ask.charsets || !ask.locks.is_empty()) {
            return Noted::Confirm(ask, flow);
        }
        Noted::Done(self.finish_statement(summary, rules, closed, flow))
    }

    /// The rest of `note_statement` once the server said which named locks are held and
    /// what character sets the connection has.
    pub(super) async fn confirmed(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
        ask: &Ask,
        flow: Flow,
    ) -> Flow {
        let mut closed = !ask.locks.is_empty() && !self.confirm_named_locks(&ask.locks).await;
        if ask.charsets && !closed {
            closed = !self.confirm_charsets().await;
        }
        self.finish_statement(summary, rules, closed, flow)
    }

    /// Reads both halves of each character-set pair back (`replay::CHARSET_PAIRS_QUERY`)
    /// into the session's and the backend's state; a server that will not say pins the
    /// session. False if the backend failed meanwhile.
    async fn confirm_charsets(&mut self) -> bool {
        let Some(b) = self.backend.as_mut() else {
            return true;
        };
        let recorded = match b.query_rows(replay::CHARSET_PAIRS_QUERY).await {
            Ok(Ok(result)) => result.rows.first().is_some_and(|row| {
                replay::record_charset_pairs(&mut b.state, row)
                    && replay::record_charset_pairs(&mut self.state.movable, row)
            }),
            Ok(Err(_)) => false,
            Err(_) => return false,
        };
        if !recorded {
            self.pin(PinReason::UntrackedState);
        }
        true
    }

    /// Pins nothing predicted, and what the backend goes back as.
    fn finish_statement(
        &mut self,
        summary: &ResponseSummary,
        rules: Option<&Rules>,
        closed: bool,
        flow: Flow,
    ) -> Flow {
        if rules.is_some() {
            self.reg.info.set_pin(self.state.pin_reason());
        }
        if has_unexplained_change(&summary.state_changes, rules) {
            self.pin(PinReason::UntrackedState);
        }
        if summary
            .status
            .is_some_and(|s| s.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS))
        {
            self.pin(PinReason::Cursor);
        }
        // With an XA transaction open the backend is closed if the session leaves, never
        // reset (`SessionState::xa_open`).
        let closes = closed || self.state.xa_open();
        let needs_backend = self.state.needs_backend();
        if let Some(backend) = self.backend.as_mut() {
            backend.health = match (closes, needs_backend) {
                (true, _) => Health::Broken,
                (false, true) => Health::Dirty,
                (false, false) => Health::Clean,
            };
        }
        flow
    }

    /// GET_LOCK() may have timed out, been killed, or found the lock held elsewhere; a lock
    /// believed held would keep the session's slot until it left. The server says which of
    /// the locks the statement named this connection holds (`IS_USED_LOCK()` returns the
    /// owner's thread id, whatever pseudo_thread_id says): one round trip after the answer,
    /// only for statements that take a lock by a literal name.
    /// False if the backend failed meanwhile.
    async fn confirm_named_locks(&mut self, names: &[Box<[u8]>]) -> bool {
        let Some(b) = self.backend.as_mut() else {
            return true;
        };
        let names = &names[..names.len().min(63)];
        let mut sql = b"SELECT 0".to_vec();
        for (i, name) in names.iter().enumerate() {
            // A literal without quotes or backslashes (the classifier's rule): safe as is.
            sql.extend_from_slice(b" | ((IS_USED_LOCK('");
            sql.extend_from_slice(name);
            sql.extend_from_slice(format!("') <=> {}) << {i})", b.thread_id).as_bytes());
        }
        match b.query_first_u64(&sql).await {
            Ok(Ok(Some(held))) => self.state.confirm_named_locks(names, held),
            // No answer: the locks stay believed held, which keeps the slot, never leaks one.
            Ok(_) => {}
            Err(_) => return false,
        }
        true
    }

    /// Adds a pin reason and counts it if it is new.
    pub(super) fn pin(&mut self, reason: PinReason) {
        if self.state.pin(reason) {
            self.count_pin(reason);
        }
    }

    /// A pin starts: counted in the stats and shown in SHOW CLIENTS.
    fn count_pin(&mut self, reason: PinReason) {
        self.ctx.stats.pinned(reason);
        self.reg.info.set_pin(self.state.pin_reason());
        tracing::info!(client = self.reg.info.id, %reason, "session pinned to its backend");
    }

    /// COM_SET_OPTION: the multi-statements option is movable session state. sluice answers
    /// it as the server would (EOF, or OK-0xFE under DEPRECATE_EOF) and replays it on
    /// whichever backend runs the session's next statement, so it never pins.
    async fn set_option(&mut self, option: u16) -> Step {
        let on = match option {
            0 => true,
            1 => false,
            _ => {
                let msg = format!("Unknown COM_SET_OPTION value {option}; the session continues");
                self.reply_err(1, &ErrPacket::from_code(codes::UNKNOWN_COM, msg.as_bytes()))
                    .await?;
                return Ok(Flow::Continue);
            }
        };
        self.state.movable.multi_statements = on;
        if let Some(b) = self.backend.as_mut() {
            // A session that keeps its backend (transaction, pin) gets it there right away.
            match b
                .run_simple(&crate::protocol::request::set_option(on))
                .await
            {
                Ok(Ok(_)) => b.state.multi_statements = on,
                Ok(Err(err)) => {
                    self.reply_err(1, &err).await?;
                    return Ok(Flow::Continue);
                }
                Err(_) => b.health = Health::Broken,
            }
        }
        let status = self.state.local_status();
        let mut out = BytesMut::new();
        if self
            .caps
            .contains(crate::protocol::Capabilities::CLIENT_DEPRECATE_EOF)
        {
            let mut ok = crate::protocol::OkPacket::new(status);
            ok.header = 0xFE;
            ok.session_state.clear();
            ok.encode(self.caps, &mut out);
        } else {
            crate::protocol::EofPacket {
                warnings: 0,
                status,
            }
            .encode(&mut out);
        }
        self.client
            .send_packet(1, &out)
            .await
            .map_err(|_| ClientCloseReason::Eof)?;
        Ok(Flow::Continue)
    }

    async fn ok_reply(&mut self) -> Step {
        self.send_ok(1).await.map_err(|_| ClientCloseReason::Eof)?;
        Ok(Flow::Continue)
    }

    /// COM_RESET_CONNECTION: a fresh session on the same login. The backend that carried the
    /// old state is reset by the pool before anyone else gets it.
    async fn reset_connection(&mut self) -> Step {
        self.drop_session_state().await;
        self.ok_reply().await
    }

    async fn drop_session_state(&mut self) {
        if let Some(b) = self.backend.as_mut().filter(|_| self.state.needs_backend()) {
            // Named and table locks and an open transaction are visible to other sessions:
            // end them now, as the server does, not when the pool next hands this backend out
            // (a client asking IS_FREE_LOCK() right after its reset must see the lock free).
            if b.reset().await.is_err() {
                b.health = Health::Broken;
            }
        }
        self.backend = None;
        self.state.reset();
        self.stmts.clear();
        self.reg.info.set_pin(None);
        self.release_if_possible();
    }

    /// COM_CHANGE_USER: re-authenticate against sluice's user list (`HandshakeContext::
    /// change_user`, next to the login), then start a fresh session for the new user.
    async fn change_user(&mut self, body: &[u8]) -> Step {
        let Ok(req) = ChangeUser::decode(body, self.caps) else {
            self.reply_err(
                1,
                &ErrPacket::from_code(codes::HANDSHAKE, b"Bad COM_CHANGE_USER packet"),
            )
            .await?;
            return Ok(Flow::Continue);
        };
        let config = std::sync::Arc::clone(&self.config);
        let outcome = self
            .ctx
            .handshake
            .change_user(&mut self.client, &config, &req, &self.scramble)
            .await
            .map_err(|_| ClientCloseReason::Eof)?;
        let (user, seq) = match outcome {
            Reauth::Accepted { user, seq } => (user, seq),
            Reauth::Refused { err, seq, .. } => {
                self.reply_err(seq, &err).await?;
                return Ok(Flow::Continue);
            }
        };
        self.drop_session_state().await;
        self.target = crate::context::backend_target(&config, &user, &self.ctx);
        let collation = req.collation.map(|c| c as u8).unwrap_or(self.key.collation);
        self.key = PoolKey {
            user: std::sync::Arc::from(self.target.user.as_str()),
            caps: self.key.caps,
            collation,
        };
        if let Ok(mut u) = self.reg.info.user.lock() {
            u.clone_from(&user.name);
        }
        self.user = user;
        self.state.clear_movable();
        if let Some(db) = req.database.filter(|d| !d.is_empty()) {
            if let Err(err) = self.select_database(db).await {
                self.reply_err(seq, &err).await?;
                return Ok(Flow::Continue);
            }
        }
        self.send_ok(seq)
            .await
            .map_err(|_| ClientCloseReason::Eof)?;
        Ok(Flow::Continue)
    }

    /// KILL [QUERY|CONNECTION] id, where id is a sluice connection id (what the client's
    /// CONNECTION_ID() returns). As in MySQL, a client may kill only its own user's sessions:
    /// an unknown id is 1094, another user's 1095. The victim's running statement (on
    /// whichever backend) is killed through a separate control connection.
    async fn kill(&mut self, target: KillTarget) -> Step {
        let (id, whole) = match target {
            KillTarget::Query(id) => (id, false),
            KillTarget::Connection(id) => (id, true),
        };
        let victim = u32::try_from(id)
            .ok()
            .and_then(|id| self.ctx.registry.get(id));
        let Some(victim) = victim else {
            let msg = format!("Unknown thread id: {id}");
            self.reply_err(
                1,
                &ErrPacket::from_code(codes::NO_SUCH_THREAD, msg.as_bytes()),
            )
            .await?;
            return Ok(Flow::Continue);
        };
        if victim.user() != self.user.name {
            let msg = format!("You are not owner of thread {id}");
            self.reply_err(1, &ErrPacket::from_code(codes::KILL_DENIED, msg.as_bytes()))
                .await?;
            return Ok(Flow::Continue);
        }
        if victim.id != self.reg.info.id && victim.pipelined.load(Ordering::SeqCst) {
            // Other sessions' statements share its backend: sluice ends its answer itself.
            victim.interrupt.set();
        } else if victim.id != self.reg.info.id {
            // On the server the victim's statement runs on, which need not be this session's
            // (thread ids are per server: another server's same id is someone else's).
            let target_for = |server: usize| match server == self.server {
                true => Cow::Borrowed(&self.target),
                false => Cow::Owned(backend_target_for(
                    &self.config,
                    &self.user,
                    &self.ctx,
                    server,
                )),
            };
            if let Err(e) = kill_running_statement(target_for, &self.key, &victim).await {
                tracing::warn!(
                    client = self.reg.info.id,
                    "KILL QUERY on backend failed: {e}"
                );
            }
        }
        if whole {
            victim.kill.cancel();
            if victim.id == self.reg.info.id {
                self.reply_err(
                    1,
                    &ErrPacket::from_code(codes::CONNECTION_KILLED, b"Connection was killed"),
                )
                .await?;
                return Err(ClientCloseReason::Killed);
            }
        }
        self.ok_reply().await
    }
}

/// Kills the statement `victim` runs now, if any, and never one of another session: the
/// backend may have moved on to someone else by the time a control connection is open.
/// `target_for` reaches a server by its `Config::endpoints` index: the victim's, seen with
/// its thread id and rechecked with it. On MariaDB the statement is named by its query id,
/// read while the victim is seen running it before and after (so the id is the victim's),
/// and `KILL QUERY ID` is a no-op once that statement is over. Elsewhere `KILL QUERY <thread>` is sent only if the victim still runs
/// the same statement on the same backend, one round trip before it arrives.
async fn kill_running_statement<'a>(
    target_for: impl FnOnce(usize) -> Cow<'a, BackendTarget>,
    key: &PoolKey,
    victim: &crate::session::registry::ClientInfo,
) -> Result<(), crate::conn::Error> {
    let running = || {
        (
            victim.backend_thread.load(Ordering::SeqCst),
            victim.queries.load(Ordering::SeqCst),
            victim.backend_server.load(Ordering::SeqCst),
        )
    };
    let seen = running();
    if seen.0 == 0 {
        return Ok(());
    }
    let mut control = BackendConn::connect(&target_for(seen.2 as usize), key.clone()).await?;
    let mariadb = control.server.version.windows(7).any(|w| w == b"MariaDB");
    let sql = if mariadb {
        let find = format!(
            "SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE ID = {}",
            seen.0
        );
        let query_id = control
            .query_first_u64(find.as_bytes())
            .await?
            .map_err(crate::conn::Error::Server)?;
        match query_id {
            Some(q) if running() == seen => format!("KILL QUERY ID {q}"),
            _ => return Ok(()),
        }
    } else if running() == seen {
        format!("KILL QUERY {}", seen.0)
    } else {
        return Ok(());
    };
    match control.run_simple(&query_payload(sql.as_bytes())).await? {
        Ok(_) => Ok(()),
        // 1094 Unknown query id: the statement ended meanwhile, nothing to kill.
        Err(e) if e.code == codes::NO_SUCH_THREAD.code => Ok(()),
        Err(e) => Err(crate::conn::Error::Server(e)),
    }
}

/// The server says session state changed, but nothing it reported (schema, variables)
/// and nothing the classifier recognised explains it.
fn has_unexplained_change(changes: &[SessionStateChange], rules: Option<&Rules>) -> bool {
    let changed = changes
        .iter()
        .any(|c| matches!(c, SessionStateChange::StateChanged));
    if !changed {
        return false;
    }
    let explained_by_report = changes.iter().any(|c| {
        matches!(
            c,
            SessionStateChange::SystemVariable { .. } | SessionStateChange::Schema(_)
        )
    });
    let explained_by_class = rules.is_some_and(Rules::explains_state_change);
    !(explained_by_report || explained_by_class)
}

/// How far `note_statement` got.
pub(super) enum Noted {
    Done(Flow),
    /// What to ask the server first (`Session::confirmed`), and the flow so far.
    Confirm(Ask, Flow),
}

/// What the server is asked after a statement, in one round trip each.
#[derive(Default)]
pub(super) struct Ask {
    /// The named locks the statement may have taken (GET_LOCK() by literal names).
    locks: Vec<Box<[u8]>>,
    /// The statement reported one half of a character-set pair (`replay::CHARSET_PAIRS`).
    charsets: bool,
}

/// A COM_QUERY packet for sluice's own statements.
pub fn query_packet(sql: &[u8]) -> Bytes {
    framed(&query_payload(sql))
}
