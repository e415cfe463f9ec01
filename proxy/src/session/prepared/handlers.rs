//! The session side: PREPARE, EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA, RESET and
//! CLOSE.

use std::sync::Arc;

use super::{ClientStmt, StmtCmd};
use crate::conn::stmts::stmt_key;
use crate::protocol::{codes, ErrPacket, ResponseKind};
use crate::session::{Flow, Session, Step};
use crate::stats::{ClientCloseReason, PinReason, Stats};

/// What one try at a statement command came to.
enum Executed {
    /// Relayed: the client has the answer, and this is what comes next.
    Relayed(Flow),
    /// The client has an error (or, for SEND_LONG_DATA, nothing), and the session goes on.
    Failed,
    /// A replica failed before the client saw anything: the command runs again elsewhere.
    ElsewhereAgain,
}

impl Session {
    /// COM_STMT_PREPARE runs on any backend; the client sees its own statement id.
    pub(in crate::session) async fn prepare(&mut self, packet: &[u8], sql: &[u8]) -> Step {
        Stats::incr(&self.ctx.stats.statements);
        let class = crate::classify::classify_in(sql, self.state.quoting());
        // With the client's id in its text the statement is this client's own: its
        // backend copy is keyed by that text, so no other client reuses it.
        let rewritten = self.rewritten_sql(sql, &class);
        let framed_prepare = rewritten
            .as_ref()
            .map(|q| crate::session::framed(&crate::protocol::request::stmt_prepare(q)));
        let packet = framed_prepare.as_deref().unwrap_or(packet);
        let sql = rewritten.as_deref().unwrap_or(sql);
        // As the server does, a PREPARE that fails leaves no "last prepared" statement,
        // so a pipelined EXECUTE(-1) fails instead of running an older one.
        self.stmts.forget_last();
        if let Err(err) = self.acquire().await {
            self.release_if_possible();
            self.reply_err(1, &err).await?;
            return Ok(Flow::Continue);
        }
        let client_id = self.stmts.next_id();
        let Some(summary) = self
            .relay_on_backend(Some(packet), ResponseKind::Prepare, Some(client_id))
            .await?
        else {
            self.release_if_possible();
            return Ok(Flow::Continue);
        };
        if let (Some(ok), Some(b)) = (summary.prepare_ok.as_ref(), self.backend.as_mut()) {
            let key = stmt_key(self.state.movable.schema.as_deref(), sql);
            let cap = self.config.max_prepared_statements_per_backend as usize;
            for old in b.stmts.insert(key.clone(), ok.stmt_id, cap) {
                b.queue_stmt_close(old);
            }
            self.stmts.insert(
                client_id,
                ClientStmt {
                    key,
                    sql: Arc::from(sql),
                    params: ok.params,
                    types: None,
                    rules: crate::session::state::Rules::of(&class),
                    reads_only: crate::session::pipeline::reads_only(&class),
                    route: crate::session::route::Pending::of(&class),
                },
            );
        }
        // Preparing runs nothing: the statement's effects count when it is executed.
        self.after_statement(&summary, None).await;
        self.release_if_possible();
        Ok(Flow::Continue)
    }

    /// EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA and RESET: find or create the
    /// statement on the backend that runs it, re-address the packet, relay.
    pub(in crate::session) async fn stmt_command(
        &mut self,
        payload: &[u8],
        client_id: u32,
        cmd: StmtCmd,
    ) -> Step {
        let kind = cmd.response();
        let client_id = self.stmts.resolve(client_id);
        let Some(mut stmt) = self.stmts.get(client_id).cloned() else {
            if kind == ResponseKind::None {
                return Ok(Flow::Continue); // SEND_LONG_DATA has no response, even for errors
            }
            let msg = format!(
                "Unknown prepared statement handler ({client_id}) given to {}",
                cmd.name()
            );
            self.reply_err(
                1,
                &ErrPacket::from_code(codes::UNKNOWN_STMT_HANDLER, msg.as_bytes()),
            )
            .await?;
            return Ok(Flow::Continue);
        };
        if cmd == StmtCmd::Reset && self.backend.is_none() {
            // Nothing pending anywhere: long data and cursors pin the session.
            return self
                .send_ok(1)
                .await
                .map(|_| Flow::Continue)
                .map_err(|_| ClientCloseReason::Eof);
        }
        if let Some(types) = cmd.sent_types(payload, stmt.params) {
            stmt.types = Some(types.clone());
            if let Some(s) = self.stmts.get_mut(client_id) {
                s.types = Some(types);
            }
        }
        self.reg
            .info
            .queries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Stats::incr(&self.ctx.stats.statements);
        // An execution that will pin gets its place first, as a query does.
        let reserved = match cmd.runs() {
            true => self.reserve_pin(Some(&stmt.rules)).await,
            false => Ok(()),
        };
        if let Err(err) = reserved {
            self.reply_err(1, &err).await?;
            return Ok(Flow::Continue);
        }
        // Only an execution without a cursor routes by its text, as a query would: a cursor
        // keeps its rows on one backend (it pins the session), and long data, fetches and
        // resets go to the backend that holds them (or, holding nothing, the writer).
        let plain =
            cmd == StmtCmd::Execute && crate::protocol::stmt_execute::without_cursor(payload);
        let route = plain.then(|| stmt.route.clone());
        // A stateless read may share one write to the backend with other sessions' reads.
        if plain && stmt.reads_only && self.pipelinable(&stmt.rules) {
            let own = crate::session::pipeline::Own::Execute {
                payload,
                stmt: &stmt,
            };
            if let crate::session::pipeline::Piped::Done(step) =
                self.pipelined(own, &stmt.rules, route.as_ref()).await
            {
                return step;
            }
        }
        let mut retries = usize::from(
            route.as_ref().is_some_and(|r| r.read.is_replica_safe()) && self.holds_nothing(),
        );
        let mut flow = Flow::Continue;
        loop {
            // Unless `pipelined` routed it already and then let it run on its own.
            if let Some(r) = route.as_ref().filter(|_| !self.routed_now()) {
                self.pending = r.clone();
            }
            match self
                .execute_on_backend(payload, &stmt, cmd, retries > 0)
                .await?
            {
                Executed::Relayed(f) => flow = f,
                Executed::Failed => {}
                Executed::ElsewhereAgain => {
                    // The replica failed before the client saw a byte: once more, elsewhere.
                    retries -= 1;
                    self.avoid = Some(self.server);
                    Stats::incr(&self.ctx.stats.read_retries);
                    continue;
                }
            }
            break;
        }
        if kind == ResponseKind::None {
            // SEND_LONG_DATA: the data waits on this backend for the EXECUTE.
            self.pin(PinReason::PreparedStatement);
        } else if cmd.runs() {
            self.state.unpin(PinReason::PreparedStatement);
            self.reg.info.set_pin(self.state.pin_reason());
        }
        self.release_if_possible();
        if matches!(flow, Flow::Quit) {
            self.flush_response().await?; // see `Session::statement`
        }
        Ok(flow)
    }

    /// One try at `cmd` on the backend the session acquires: prepared there first if needed,
    /// re-addressed, relayed. `may_retry`: a replica that fails before the client saw a byte
    /// (at the acquire, while preparing, or before the answer's first packet) leaves the
    /// command to run again elsewhere instead of failing it.
    async fn execute_on_backend(
        &mut self,
        payload: &[u8],
        stmt: &ClientStmt,
        cmd: StmtCmd,
        may_retry: bool,
    ) -> Result<Executed, ClientCloseReason> {
        let kind = cmd.response();
        if let Err(err) = self.acquire().await {
            self.release_if_possible();
            if may_retry && self.on_replica {
                return Ok(Executed::ElsewhereAgain);
            }
            if kind != ResponseKind::None {
                self.reply_err(1, &err).await?;
            }
            return Ok(Executed::Failed);
        }
        if cmd.runs() {
            self.present_identity(stmt.rules.presents).await;
        }
        let backend_id = match self.ensure_prepared(stmt).await {
            Ok(id) => id,
            Err(err) => {
                let lost = self.backend.is_none();
                self.release_if_possible();
                if lost && may_retry && self.on_replica {
                    return Ok(Executed::ElsewhereAgain);
                }
                if kind != ResponseKind::None {
                    self.reply_err(1, &err).await?;
                }
                return Ok(Executed::Failed);
            }
        };
        let packet = match self.backend.as_mut() {
            Some(b) if cmd.runs() => {
                // One lookup for the held types and their update (the key is the SQL text).
                let held = b.stmts.get(&stmt.key);
                let types = held.as_ref().and_then(|s| s.types.as_deref());
                let (packet, holds) = cmd.for_backend(payload, backend_id, stmt, types);
                if let Some(s) = held {
                    s.types = holds;
                }
                packet
            }
            _ => cmd.for_backend(payload, backend_id, stmt, None).0,
        };
        self.retry_read = may_retry && self.on_replica;
        let relayed = self.relay_on_backend(Some(&packet), kind, None).await;
        self.retry_read = false;
        if std::mem::take(&mut self.read_retry_now) {
            return Ok(Executed::ElsewhereAgain);
        }
        Ok(match relayed? {
            // An execution does what its statement does: locks and pins as for a query
            // (before, a prepared GET_LOCK() left its lock unseen).
            Some(summary) => {
                let rules = cmd.runs().then_some(&stmt.rules);
                Executed::Relayed(self.after_statement(&summary, rules).await)
            }
            None => Executed::Failed,
        })
    }

    /// The backend id of `stmt` on the session's backend, preparing it there first if
    /// needed (the PREPARE_OK is consumed, never forwarded).
    pub(in crate::session) async fn ensure_prepared(
        &mut self,
        stmt: &ClientStmt,
    ) -> Result<u32, ErrPacket> {
        let cap = self.config.max_prepared_statements_per_backend as usize;
        let Some(b) = self.backend.as_mut() else {
            return Err(ErrPacket::from_code(
                codes::BACKEND_LOST,
                &b"no backend"[..],
            ));
        };
        if let Some(s) = b.stmts.get(&stmt.key) {
            return Ok(s.id);
        }
        match b.prepare_internal(&stmt.sql).await {
            Ok(Ok(ok)) => {
                for old in b.stmts.insert(stmt.key.clone(), ok.stmt_id, cap) {
                    b.queue_stmt_close(old);
                }
                Ok(ok.stmt_id)
            }
            Ok(Err(err)) => Err(err),
            Err(e) => {
                b.health = crate::conn::backend::Health::Broken;
                self.backend = None;
                Err(ErrPacket::from_code(
                    codes::BACKEND_LOST,
                    format!("Lost connection to backend while preparing: {e}; retry").as_bytes(),
                ))
            }
        }
    }

    /// COM_STMT_CLOSE frees the client's id; the backend copy stays for reuse until the
    /// cache evicts it.
    pub(in crate::session) fn close_stmt(&mut self, client_id: u32) {
        let client_id = self.stmts.resolve(client_id);
        self.stmts.remove(client_id);
    }
}
