//! The session side: PREPARE, EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA, RESET and
//! CLOSE.

use super::{ClientStmt, Meaning, StmtCmd};
use crate::conn::stmts::Parse;
use crate::protocol::{codes, ErrPacket, ResponseKind};
use crate::session::answer::{Answer, Outgoing};
use crate::session::route::{Routing, NO_ROUTE};
use crate::session::statement::Statement;
use crate::session::values::Around;
use crate::session::{Flow, Session, Step};
use crate::stats::{ClientCloseReason, Stats};

impl Session {
    /// COM_STMT_PREPARE runs on any backend; the client sees its own statement id.
    pub(in crate::session) async fn prepare(&mut self, packet: &[u8], sql: &[u8]) -> Step {
        Stats::incr(&self.ctx.stats.statements);
        // Digested by its text here, once, if anything reads digests (`StmtDef::digest`).
        let mut digest = None;
        let class = self.classify_query(sql, self.ctx.rules().as_deref(), &mut digest);
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
        let cap = self.config.max_prepared_statements_per_client;
        if self.stmts.len() >= cap as usize {
            let msg = format!(
                "Can't create more than max_prepared_statements_per_client statements (current value: {cap}) \
                 in one session; close the prepared statements it no longer uses (COM_STMT_CLOSE, \
                 or a client-side statement cache)"
            );
            let err = ErrPacket::from_code(codes::MAX_PREPARED_STMT_COUNT_REACHED, msg.as_bytes());
            self.reply_err(1, &err).await?;
            return Ok(Flow::Continue);
        }
        // What a PREPARE tells the router: nothing (it runs where the session is, or on the
        // writer).
        if let Err(err) = self.acquire(&mut Routing::new(&NO_ROUTE)).await {
            self.release_if_possible();
            self.reply_err(1, &err).await?;
            return Ok(Flow::Continue);
        }
        let client_id = self.stmts.next_id();
        let none = Around::default();
        let out = Outgoing {
            rewrite_stmt_id: Some(client_id),
            ..Outgoing::new(packet, ResponseKind::Prepare, &none)
        };
        let Answer::Done(summary, _) = self.relay_on(out).await? else {
            self.release_if_possible();
            return Ok(Flow::Continue);
        };
        if let (Some(ok), Some(b)) = (summary.prepare_ok.as_ref(), self.held.backend.as_mut()) {
            // The backend was in the session's state: the statement's parse is its own.
            let parse = Parse::of(&b.state, &b.baseline.parse);
            let quoting = self.state.quoting();
            let def = self.stmts.define(parse, sql, ok.params, || Meaning {
                rules: prepared_rules(&class, sql, quoting),
                reads_only: crate::session::statement::reads_only(&class),
                route: crate::session::route::Pending::of(&class),
                outcome_calls: outcome_calls(&class, rewritten.is_some(), sql, quoting),
                digest,
            });
            let cap = self.config.max_prepared_statements_per_backend as usize;
            for old in b.stmts.insert(def.key.clone(), ok.stmt_id, cap) {
                b.queue_stmt_close(old);
            }
            let stmt = ClientStmt {
                def,
                types: None,
                bound: None,
            };
            self.stmts.insert(client_id, stmt);
        }
        // Preparing runs nothing: the statement's effects count when it is executed.
        self.after_statement(&summary, None).await;
        self.release_if_possible();
        Ok(Flow::Continue)
    }

    /// EXECUTE, BULK_EXECUTE, FETCH, SEND_LONG_DATA and RESET: the statement the client's
    /// id names runs as any statement does (`Session::run_statement`), its packet addressed
    /// to the backend's own copy of it, prepared there first if needed.
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
        // Where it reads ROW_COUNT() or FOUND_ROWS(): a copy with the session's values.
        self.runs_as(client_id, &mut stmt, cmd, payload);
        if cmd == StmtCmd::Reset && self.held.backend.is_none() {
            // Nothing pending anywhere: long data and cursors pin the session. The server's
            // COM_STMT_RESET sets ROW_COUNT() to 0.
            self.row_count_zeroed();
            return self
                .send_ok(1)
                .await
                .map(|_| Flow::Continue)
                .map_err(|_| ClientCloseReason::Eof);
        }
        if let Some(types) = cmd.sent_types(payload, stmt.def.params) {
            stmt.types = Some(types.clone());
            if let Some(s) = self.stmts.get_mut(client_id) {
                s.types = Some(types);
            }
        }
        self.run_statement(&mut Statement::prepared(payload, &stmt, cmd))
            .await
    }

    /// Makes sure the session's backend holds `stmt`, preparing it there first if needed
    /// (the PREPARE_OK is consumed, never forwarded); true if it did (a round trip).
    pub(in crate::session) async fn ensure_prepared(
        &mut self,
        stmt: &ClientStmt,
    ) -> Result<bool, ErrPacket> {
        let cap = self.config.max_prepared_statements_per_backend as usize;
        let Some(b) = self.held.backend.as_mut() else {
            return Err(ErrPacket::from_code(
                codes::BACKEND_LOST,
                &b"no backend"[..],
            ));
        };
        if b.stmts.get(&stmt.def.key).is_some() {
            return Ok(false);
        }
        // Prepared under the client's parse, whatever the session's state is now: the
        // differences are set before and after it, in the same write.
        let own = Parse::of(&b.state, &b.baseline.parse);
        let prepared = if own == *stmt.def.parse {
            b.prepare_internal(stmt.def.sql()).await
        } else {
            // Both sides with explicit values (a variable at its start value is set back to
            // that value, never to DEFAULT: the server's global character sets are not the
            // connection's).
            let here = own.over(&b.state);
            let under = stmt.def.parse.over(&here);
            let to = crate::session::replay::replay_commands(&here, &under);
            let back = crate::session::replay::replay_commands(&under, &here);
            b.prepare_under(&to, stmt.def.sql(), &back).await
        };
        match prepared {
            Ok(Ok(ok)) => {
                for old in b.stmts.insert(stmt.def.key.clone(), ok.stmt_id, cap) {
                    b.queue_stmt_close(old);
                }
                Ok(true)
            }
            Ok(Err(err)) => Err(err),
            Err(e) => {
                b.health = crate::conn::backend::Health::Broken;
                self.held.backend = None;
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

/// A prepared statement's rules: a query's, and whether it names a table (known once, at
/// PREPARE, for the diagnostics its executions clear).
fn prepared_rules(
    class: &crate::classify::Classification,
    sql: &[u8],
    quoting: crate::classify::Quoting,
) -> crate::session::state::Rules {
    let mut rules = crate::session::state::Rules::of(class);
    rules.touches_tables |= crate::classify::references_table(sql, quoting);
    rules
}

/// A prepared statement's ROW_COUNT() and FOUND_ROWS() calls, in the text it is prepared
/// with: when that text is `rewritten` (the client's id in place of CONNECTION_ID()), its
/// calls are found in it again.
fn outcome_calls(
    class: &crate::classify::Classification,
    rewritten: bool,
    sql: &[u8],
    quoting: crate::classify::Quoting,
) -> Option<Box<super::OutcomeCalls>> {
    let calls = super::OutcomeCalls::of(class)?;
    if !rewritten {
        return Some(calls);
    }
    super::OutcomeCalls::of(&crate::classify::classify_in(sql, quoting))
}
