//! Per-command handling: which commands sluice answers itself (PING, RESET_CONNECTION,
//! CHANGE_USER, KILL), which it refuses, which it relays, and what a finished statement
//! changes in the session.

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use super::prepared::StmtCmd;
use super::{framed, Flow, Session, Step};
use crate::classify::{classify, Classification, KillTarget};
use crate::conn::backend::{query_payload, BackendConn, Health, PoolKey};
use crate::protocol::charset;
use crate::protocol::frame::LogicalSpan;
use crate::protocol::{
    auth, ChangeUser, Command, ErrPacket, ResponseKind, ResponseSummary, SessionStateChange,
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
                self.reply_err(1, &ErrPacket::new(1047, "08S01", msg.as_bytes()))
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
                let class = classify(sql);
                if let Some(target) = class.kill {
                    return self.kill(target).await;
                }
                let rewritten = self.rewritten_sql(sql, &class).map(|q| query_packet(&q));
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
                self.reply_err(1, &ErrPacket::new(1047, "08S01", msg.as_bytes()))
                    .await?;
                Ok(Flow::Continue)
            }
            Command::Unknown(byte) => {
                let msg = format!("Unknown command 0x{byte:02x}; the session continues");
                self.reply_err(1, &ErrPacket::new(1047, "08S01", msg.as_bytes()))
                    .await?;
                Ok(Flow::Continue)
            }
            other => {
                let kind = other.response_kind();
                self.statement(&packet, kind, None).await
            }
        }
    }

    /// What a finished statement changed: transaction status, movable state, pins, locks.
    pub(super) fn after_statement(
        &mut self,
        summary: &ResponseSummary,
        class: Option<&Classification>,
    ) {
        if let Some(status) = summary.status {
            self.state.status = status;
        }
        let Some(backend) = self.backend.as_mut() else {
            return;
        };
        backend.statements += 1;
        if summary.last_insert_id != 0 {
            self.state.last_insert_id = summary.last_insert_id;
            backend.last_insert_id = summary.last_insert_id;
        }
        self.state.warnings_pending = summary.warnings > 0;
        backend.state.apply(&summary.state_changes);
        self.state.movable.apply(&summary.state_changes);
        let mut pins = Vec::new();
        if let Some(class) = class {
            self.apply_locks(class, summary.error.is_none(), &mut pins);
            pins.extend(class_pins(class));
        }
        if has_unexplained_change(&summary.state_changes, class) {
            pins.push(PinReason::UntrackedState);
        }
        if summary
            .status
            .is_some_and(|s| s.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS))
        {
            pins.push(PinReason::Cursor);
        }
        for reason in pins {
            self.pin(reason);
        }
        if let Some(backend) = self.backend.as_mut() {
            backend.health = if self.state.needs_backend() {
                Health::Dirty
            } else {
                Health::Clean
            };
        }
    }

    fn apply_locks(&mut self, class: &Classification, succeeded: bool, pins: &mut Vec<PinReason>) {
        let e = &class.effects;
        if e.get_lock > 0 {
            self.state.named_locks += u32::from(e.get_lock);
            pins.push(PinReason::NamedLock);
        }
        if e.release_all_locks {
            self.state.named_locks = 0;
        } else if e.release_lock > 0 {
            self.state.named_locks = self
                .state
                .named_locks
                .saturating_sub(u32::from(e.release_lock));
        }
        if succeeded && (e.lock_tables || e.flush_with_read_lock) {
            self.state.table_locks = true;
            pins.push(PinReason::TableLock);
        }
        if succeeded && e.lock_instance {
            self.state.instance_lock = true;
            pins.push(PinReason::TableLock);
        }
        if e.unlock_tables {
            self.state.table_locks = false;
        }
        if e.unlock_instance {
            // Before, nothing cleared the lock: the session kept its slot until it left.
            self.state.instance_lock = false;
        }
    }

    pub(super) fn pin(&mut self, reason: PinReason) {
        if self.state.pin(reason) {
            self.ctx.stats.pinned(reason);
            self.reg.info.set_pin(self.state.pin_reason());
            tracing::info!(client = self.reg.info.id, %reason, "session pinned to its backend");
        }
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
                self.reply_err(1, &ErrPacket::new(1047, "08S01", msg.as_bytes()))
                    .await?;
                return Ok(Flow::Continue);
            }
        };
        self.state.movable.multi_statements = on;
        if let Some(b) = self.backend.as_mut() {
            // A session that keeps its backend (transaction, pin) gets it there right away.
            match b
                .run_simple(&crate::conn::backend::set_option_payload(on))
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

    /// COM_CHANGE_USER: re-authenticate against sluice's user list (always through an auth
    /// switch with a fresh nonce), then start a fresh session for the new user.
    async fn change_user(&mut self, body: &[u8]) -> Step {
        let Ok(req) = ChangeUser::decode(body, self.caps) else {
            self.reply_err(
                1,
                &ErrPacket::new(1043, "08S01", b"Bad COM_CHANGE_USER packet"),
            )
            .await?;
            return Ok(Flow::Continue);
        };
        let config = self.ctx.config();
        let user = config.find_user(&req.user).cloned();
        // As the server does, the login's scramble stays: a native-password client answers
        // with it in the request itself (Connector/C ignores a new one in a switch), and any
        // other plugin is switched to native over that same scramble.
        let native = auth::NATIVE.as_bytes();
        let (response, seq) = if req.auth_plugin.as_deref().unwrap_or(native) == native {
            (req.auth_response.clone(), 1)
        } else {
            let mut data = self.scramble.clone();
            data.push(0);
            let mut out = BytesMut::new();
            crate::protocol::AuthSwitchRequest {
                plugin: native.to_vec(),
                data,
            }
            .encode(&mut out);
            let seq = self
                .client
                .send_packet(1, &out)
                .await
                .map_err(|_| ClientCloseReason::Eof)?;
            let span = self
                .client
                .expect_packet()
                .await
                .map_err(|_| ClientCloseReason::Eof)?;
            let response = self.client.payload(&span).into_owned();
            let seq = span.last_seq.wrapping_add(1).max(seq);
            self.client.consume(&span);
            (response, seq)
        };
        let nonce = self.scramble.clone();
        // Re-authentication is a login too: a client must not get unlimited fast guesses
        // over one connection.
        let peer_ip = self.client.peer_addr().map(|a| a.ip());
        if let Some(ip) = peer_ip {
            self.ctx.handshake.backoff(ip, &config).await;
        }
        let verified = user.as_ref().is_some_and(|u| {
            if u.password.is_native_hash() {
                auth::native_verify_hash(&nonce, u.password.expose(), &response)
            } else {
                auth::native_verify(&nonce, u.password.expose().as_bytes(), &response)
            }
        });
        if let Some(ip) = peer_ip {
            self.ctx.handshake.record_login(ip, verified);
        }
        let Some(user) = user.filter(|_| verified) else {
            let host = peer_ip.map(|ip| ip.to_string()).unwrap_or_default();
            let msg = format!(
                "Access denied for user '{}'@'{}' (using password: {})",
                String::from_utf8_lossy(&req.user),
                host,
                if response.is_empty() { "NO" } else { "YES" }
            );
            self.reply_err(seq, &ErrPacket::new(1045, "28000", msg.as_bytes()))
                .await?;
            return Ok(Flow::Continue);
        };
        if let Some(err) = req.collation.and_then(charset::refusal) {
            self.reply_err(seq, &err).await?;
            return Ok(Flow::Continue);
        }
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
            self.reply_err(1, &ErrPacket::new(1094, "HY000", msg.as_bytes()))
                .await?;
            return Ok(Flow::Continue);
        };
        if victim.user() != self.user.name {
            let msg = format!("You are not owner of thread {id}");
            self.reply_err(1, &ErrPacket::new(1095, "HY000", msg.as_bytes()))
                .await?;
            return Ok(Flow::Continue);
        }
        if victim.id != self.reg.info.id {
            if let Err(e) = kill_running_statement(&self.target, &self.key, &victim).await {
                tracing::warn!(
                    client = self.reg.info.id,
                    "KILL QUERY on backend failed: {e}"
                );
            }
        }
        if whole {
            victim.kill.cancel();
            if victim.id == self.reg.info.id {
                self.reply_err(1, &ErrPacket::new(1927, "70100", b"Connection was killed"))
                    .await?;
                return Err(ClientCloseReason::Killed);
            }
        }
        self.ok_reply().await
    }
}

/// Kills the statement `victim` runs now, if any, and never one of another session: the
/// backend may have moved on to someone else by the time a control connection is open. On
/// MariaDB the statement is named by its query id, read while the victim is seen running it
/// before and after (so the id is the victim's), and `KILL QUERY ID` is a no-op once that
/// statement is over. Elsewhere `KILL QUERY <thread>` is sent only if the victim still runs
/// the same statement on the same backend, one round trip before it arrives.
async fn kill_running_statement(
    target: &crate::conn::BackendTarget,
    key: &PoolKey,
    victim: &crate::session::registry::ClientInfo,
) -> Result<(), crate::conn::Error> {
    let running = || {
        (
            victim.backend_thread.load(Ordering::SeqCst),
            victim.queries.load(Ordering::SeqCst),
        )
    };
    let seen = running();
    if seen.0 == 0 {
        return Ok(());
    }
    let mut control = BackendConn::connect(target, key.clone()).await?;
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
        Err(e) if e.code == 1094 => Ok(()),
        Err(e) => Err(crate::conn::Error::Server(e)),
    }
}

/// State changes the classifier says cannot move.
pub(super) fn class_pins(class: &Classification) -> Vec<PinReason> {
    let e = &class.effects;
    let mut pins = Vec::new();
    if e.user_variable_write {
        pins.push(PinReason::UserVariable);
    }
    if e.temporary_table {
        pins.push(PinReason::TemporaryTable);
    }
    if e.sql_prepare {
        pins.push(PinReason::SqlPrepare);
    }
    if e.found_rows {
        pins.push(PinReason::FoundRows);
    }
    if e.unknown_set || e.session_track_change || e.set_role_or_auth {
        pins.push(PinReason::UnknownSet);
    }
    if e.set_transaction_next {
        pins.push(PinReason::NextTransaction);
    }
    if e.handler_open {
        pins.push(PinReason::Handler);
    }
    pins
}

/// The server says session state changed, but nothing it reported (schema, variables)
/// and nothing the classifier recognised explains it.
fn has_unexplained_change(changes: &[SessionStateChange], class: Option<&Classification>) -> bool {
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
    let explained_by_class =
        class.is_some_and(|c| !class_pins(c).is_empty() || c.effects.get_lock > 0);
    !(explained_by_report || explained_by_class)
}

/// A COM_QUERY packet for sluice's own statements.
pub fn query_packet(sql: &[u8]) -> Bytes {
    framed(&query_payload(sql))
}
