//! The session side: PREPARE, EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA, RESET and
//! CLOSE.

use std::sync::Arc;

use super::{ClientStmt, StmtCmd};
use crate::conn::stmts::stmt_key;
use crate::protocol::{codes, ErrPacket, ResponseKind};
use crate::session::{Flow, Session, Step};
use crate::stats::{ClientCloseReason, PinReason, Stats};

impl Session {
    /// COM_STMT_PREPARE runs on any backend; the client sees its own statement id.
    pub(in crate::session) async fn prepare(&mut self, packet: &[u8], sql: &[u8]) -> Step {
        Stats::incr(&self.ctx.stats.statements);
        let class = crate::classify::classify(sql);
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
        // A stateless read may share one write to the backend with other sessions' reads.
        if cmd == StmtCmd::Execute
            && stmt.reads_only
            && crate::protocol::stmt_execute::without_cursor(payload)
            && self.pipelinable(&stmt.rules)
        {
            let own = crate::session::pipeline::Own::Execute {
                payload,
                stmt: &stmt,
            };
            if let crate::session::pipeline::Piped::Done(step) =
                self.pipelined(own, &stmt.rules, None).await
            {
                return step;
            }
        }
        if let Err(err) = self.acquire().await {
            self.release_if_possible();
            if kind != ResponseKind::None {
                self.reply_err(1, &err).await?;
            }
            return Ok(Flow::Continue);
        }
        if cmd.runs() {
            self.present_identity(stmt.rules.presents).await;
        }
        let backend_id = match self.ensure_prepared(&stmt).await {
            Ok(id) => id,
            Err(err) => {
                self.release_if_possible();
                if kind != ResponseKind::None {
                    self.reply_err(1, &err).await?;
                }
                return Ok(Flow::Continue);
            }
        };
        let packet = match self.backend.as_mut() {
            Some(b) if cmd.runs() => {
                // One lookup for the held types and their update (the key is the SQL text).
                let held = b.stmts.get(&stmt.key);
                let types = held.as_ref().and_then(|s| s.types.as_deref());
                let (packet, holds) = cmd.for_backend(payload, backend_id, &stmt, types);
                if let Some(s) = held {
                    s.types = holds;
                }
                packet
            }
            _ => cmd.for_backend(payload, backend_id, &stmt, None).0,
        };
        let mut flow = Flow::Continue;
        if let Some(summary) = self.relay_on_backend(Some(&packet), kind, None).await? {
            // An execution does what its statement does: locks and pins as for a query
            // (before, a prepared GET_LOCK() left its lock unseen).
            let rules = cmd.runs().then_some(&stmt.rules);
            flow = self.after_statement(&summary, rules).await;
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
