//! Per-command handling: which commands sluice answers itself (PING, RESET_CONNECTION,
//! CHANGE_USER, KILL, SET_OPTION, a `USE` or COM_INIT_DB with no backend held), which it
//! refuses, and which it runs as a statement (`Session::run_statement`).

use bytes::{Bytes, BytesMut};

use super::prepared::StmtCmd;
use super::route::Pending;
use super::state::Rules;
use super::statement::Statement;
use super::{framed, Flow, Session, Step};
use crate::classify::{references_table, KillTarget};
use crate::conn::backend::{Health, PoolKey};
use crate::conn::client::Reauth;
use crate::protocol::frame::LogicalSpan;
use crate::protocol::request::query as query_payload;
use crate::protocol::{codes, ChangeUser, Command, ErrPacket};
use crate::stats::ClientCloseReason;

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
            Command::Ping => {
                // The server's COM_PING sets ROW_COUNT() to 0; sluice's does not reach it.
                self.row_count_zeroed();
                self.ok_reply().await
            }
            Command::ResetConnection => self.reset_connection().await,
            Command::ChangeUser(body) => {
                let body = body.to_vec();
                self.change_user(&body).await
            }
            Command::ProcessKill(id) => self.kill(KillTarget::Connection(u64::from(id))).await,
            Command::SetOption(option) => self.set_option(option).await,
            // Choosing a database needs no backend (and so no slot) when none is held.
            Command::InitDb(db) if !db.is_empty() && self.held.backend.is_none() => {
                let db = db.to_vec();
                self.choose_database(db).await
            }
            Command::Query(sql) => {
                // Read once per query: the digest is made only if something reads it.
                let ruleset = self.ctx.rules();
                let mut digest = None;
                let class = self.classify_query(sql, ruleset.as_deref(), &mut digest);
                if let Some(target) = class.kill {
                    return self.kill(target).await;
                }
                if let Some(db) = use_alone(&class).filter(|_| self.held.backend.is_none()) {
                    return self.choose_database(db.as_bytes().to_vec()).await;
                }
                let mut rules = Rules::of(&class);
                let rewritten = self.rewritten_query(sql, &class, &mut rules);
                // Whether it clears the diagnostics the session keeps (asked only then).
                if self.diagnostics_pending() && !rules.touches_tables {
                    rules.touches_tables = references_table(sql, self.state.quoting());
                }
                let sent = rewritten.map(|q| query_packet(&q));
                let pending = Pending::of(&class);
                let mut st =
                    Statement::query(sent.as_deref().unwrap_or(&packet), &class, &rules, &pending);
                st.client_text = sent.is_some().then_some(&packet[..]);
                (st.digest, st.ruleset) = (digest.as_ref(), ruleset);
                self.run_statement(&mut st).await
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
                self.run_statement(&mut Statement::command(&packet, kind))
                    .await
            }
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
                self.reply_err(1, &ErrPacket::from_code(codes::UNKNOWN_COM, msg.as_bytes()))
                    .await?;
                return Ok(Flow::Continue);
            }
        };
        self.state.movable.multi_statements = on;
        if let Some(b) = self.held.backend.as_mut() {
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
            .login
            .caps
            .contains(crate::protocol::Capabilities::CLIENT_DEPRECATE_EOF)
        {
            let mut ok = crate::protocol::OkPacket::new(status);
            ok.header = 0xFE;
            ok.session_state.clear();
            ok.encode(self.login.caps, &mut out);
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

    pub(super) async fn ok_reply(&mut self) -> Step {
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
        if let Some(b) = self
            .held
            .backend
            .as_mut()
            .filter(|_| self.state.needs_backend())
        {
            // Named and table locks and an open transaction are visible to other sessions:
            // end them now, as the server does, not when the pool next hands this backend out
            // (a client asking IS_FREE_LOCK() right after its reset must see the lock free).
            if b.reset().await.is_err() {
                b.health = Health::Broken;
            }
        }
        self.held.backend = None;
        self.state.reset();
        self.memory.conditions = None;
        self.trackers = None;
        // A fresh session takes the server's globals as they are now, as directly.
        self.login.globals = self.ctx.globals.hold();
        self.login.key.globals = self.login.globals.generation();
        self.stmts.clear();
        self.reg.info.set_pin(None);
        self.release_if_possible();
    }

    /// COM_CHANGE_USER: re-authenticate against sluice's user list (`HandshakeContext::
    /// change_user`, next to the login), then start a fresh session for the new user.
    async fn change_user(&mut self, body: &[u8]) -> Step {
        let Ok(req) = ChangeUser::decode(body, self.login.caps) else {
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
            .change_user(&mut self.client, &config, &req, &self.login.scramble)
            .await
            .map_err(|_| ClientCloseReason::Eof)?;
        let (user, seq) = match outcome {
            Reauth::Accepted { user, seq } => (user, seq),
            Reauth::Refused { err, seq, .. } => {
                self.reply_err(seq, &err).await?;
                return Ok(Flow::Continue);
            }
        };
        // The new user's max_client_connections: at its limit the session keeps the old user.
        let most = user.limits(&config).max_client_connections;
        if let Err(reached) = self
            .ctx
            .registry
            .count_user(&self.reg.info, &user.name, most)
        {
            let err = crate::user_limits::clients_reached(&user.name, reached);
            self.reply_err(seq, &err).await?;
            return Ok(Flow::Continue);
        }
        self.drop_session_state().await;
        self.held.target = crate::context::backend_target(&config, &user, &self.ctx);
        let collation = req
            .collation
            .map(|c| c as u8)
            .unwrap_or(self.login.key.collation);
        self.login.key = PoolKey {
            user: std::sync::Arc::from(self.held.target.user.as_str()),
            caps: self.login.key.caps,
            collation,
            globals: self.login.key.globals,
        };
        if let Ok(mut u) = self.reg.info.user.lock() {
            u.clone_from(&user.name);
        }
        self.login.user = user;
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
}

/// The database a query that is only `USE db` chooses.
fn use_alone(class: &crate::classify::Classification) -> Option<&str> {
    let alone = class.kind == crate::classify::StatementKind::Use && !class.multi_statement;
    class
        .use_schema
        .as_deref()
        .filter(|db| alone && !db.is_empty())
}

/// A COM_QUERY packet for sluice's own statements.
pub(crate) fn query_packet(sql: &[u8]) -> Bytes {
    framed(&query_payload(sql))
}
