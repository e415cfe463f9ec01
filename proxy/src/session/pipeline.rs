//! Pipelining, the session's side (`pool::batches` holds the batch itself): which
//! statements may share one write to a backend with other sessions' statements
//! ([`Session::pipelinable`], the one home of that rule), how a statement leads or joins a
//! batch, and how the backend is handed on once its answer is relayed.
//!
//! What keeps it transparent:
//! - Only autocommit reads the classifier proves replica-safe (so without side effects and
//!   without reading what an earlier statement left: no FOUND_ROWS(), ROW_COUNT(),
//!   LAST_INSERT_ID(), locks, SLEEP(), user variables or stored functions), with nothing
//!   to present or pin, from a session that holds nothing, are pipelined: queries, and
//!   executions of prepared statements without a cursor, each addressed to the batch
//!   backend's own copy of its statement (one not prepared there runs on its own). Every member of a
//!   batch has the same pool key and movable state, which the leader replays once.
//! - Each session relays its own answer to its own client; nothing of one answer reaches
//!   another client.
//! - A KILL QUERY never reaches the server while other sessions' statements share the
//!   backend: the victim's answer ends with 1317 in sluice and the rest of it is read and
//!   dropped (`relay::drain`). The batch's last statement is killed on the server as usual,
//!   since nothing runs after it there.
//! - If the backend fails, every member whose answer had not begun runs again on its own:
//!   they are reads, and their clients have seen nothing.
//! - With several servers a statement is routed before it looks for a batch
//!   (`Session::route_ahead`), and batches are per server: a batch never mixes reads routed
//!   to different servers, and a read that must first wait for a replica to reach the
//!   session's writes runs on its own.
//!
//! When a read that finds a slot free batches anyway: only while its batch would hold it
//! back by less than `pipeline_max_delay`, counting each statement's own server time
//! (`Slots::statement_cost`), not the wait for a CPU it would have inside the server too.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::registry::ClientPhase;
use super::route::Pending;
use super::state::Rules;
use super::{Flow, Session, Step};
use crate::classify::{Classification, Effect};
use crate::conn::backend::Health;
use bytes::Bytes;

use super::prepared::{ClientStmt, StmtCmd};
use crate::conn::BackendConn;
use crate::pool::batches::{Baton, Chain, ForBackend, Member, Turn, Work};
use crate::protocol::{ResponseKind, StatusFlags};
use crate::stats::{ClientCloseReason, PinReason, Stats};

/// What became of a statement offered for pipelining.
pub(super) enum Piped {
    /// It ran (or failed with an error the client got): the command is over.
    Done(Step),
    /// It runs on its own, on whatever the session holds now.
    Alone,
}

type Rest = std::vec::IntoIter<Member>;

/// The rule's statement half: an autocommit read that a replica could run (no side effect,
/// nothing read from an earlier statement), one statement, with no position to wait for.
/// Checked for a query as it comes, for a prepared statement once, when it is prepared.
pub(in crate::session) fn reads_only(class: &Classification) -> bool {
    class.read.is_replica_safe()
        && !class.multi_statement
        && class.min_gtid.is_none()
        // A user variable a statement earlier in the batch might have set (through a view's
        // function, which nothing sees) would be read here.
        && !class.effects.iter().any(|e| matches!(e, Effect::UserVariableRead))
}

/// The statement a session offers for pipelining.
pub(in crate::session) enum Own<'a> {
    /// A COM_QUERY, framed as the client sent it.
    Query(&'a [u8]),
    /// A COM_STMT_EXECUTE without cursor (`payload` unframed) of a prepared statement.
    Execute {
        payload: &'a [u8],
        stmt: &'a ClientStmt,
    },
}

impl Own<'_> {
    fn response(&self) -> ResponseKind {
        match self {
            Own::Query(_) => ResponseKind::Query,
            Own::Execute { .. } => ResponseKind::Execute,
        }
    }

    /// What a batch runs for it when it joins as a member.
    fn work(&self) -> Work {
        match self {
            Own::Query(packet) => Work::Query(Bytes::copy_from_slice(packet)),
            Own::Execute { payload, stmt } => Work::Execute(Box::new(Execution {
                payload: Bytes::copy_from_slice(payload),
                stmt: (*stmt).clone(),
            })),
        }
    }
}

/// A member's execution, addressed to the batch's backend once it is known.
struct Execution {
    payload: Bytes,
    stmt: ClientStmt,
}

impl ForBackend for Execution {
    fn packet_for(&self, backend: &mut BackendConn) -> Option<Vec<u8>> {
        // Only where it is prepared already: preparing it would hold back the whole batch.
        execution_on(backend, &self.payload, &self.stmt)
    }
}

/// The execute `payload` of `stmt` addressed to `backend`'s copy of it, with the parameter
/// types that copy lacks; `None` when `backend` does not hold the statement.
fn execution_on(backend: &mut BackendConn, payload: &[u8], stmt: &ClientStmt) -> Option<Vec<u8>> {
    let held = backend.stmts.get(&stmt.key)?;
    let (packet, holds) =
        StmtCmd::Execute.for_backend(payload, held.id, stmt, held.types.as_deref());
    held.types = holds;
    Some(packet)
}

impl Session {
    /// The rule's session half (`reads_only` is the statement's): a statement may be
    /// pipelined if its rules present, pin and lock nothing, and the session holds nothing
    /// and waits for nothing, in autocommit.
    pub(super) fn pipelinable(&self, rules: &Rules) -> bool {
        self.config.pipeline_depth > 1
            && rules.is_stateless()
            && self.backend.is_none()
            && self.slot.is_none()
            && self.place.is_none()
            && !self.state.needs_backend()
            && self
                .state
                .status
                .contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
            && !self.resets.pending()
    }

    /// Runs `own` in a batch: joins an open one (always when it would queue for a slot,
    /// with a slot free only under `pipeline_max_delay`), or leads a new one. With several
    /// servers it is routed first (`pending`: what a query tells the router), and its batch
    /// is one of the routed server's.
    pub(in crate::session) async fn pipelined(
        &mut self,
        own: Own<'_>,
        rules: &Rules,
        pending: Option<&Pending>,
    ) -> Piped {
        if self.config.uses_topology() {
            if let Err(err) = self.route_ahead(pending).await {
                return Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue));
            }
            // A read that first waits for a replica to reach the session's writes runs on
            // its own (the wait takes the backend); the route stands.
            if self.gtid_wait.is_some() {
                return Piped::Alone;
            }
        }
        let kind = own.response();
        // With a slot free, a batch saves a send but gives up running beside the others:
        // worth it only for statements that are short on average. What counts is their own
        // server time: on a server running more statements than it has CPUs, most of a
        // statement's slot time is the wait for a CPU, which it would spend in a batch too.
        let (free, alone) = {
            let slots = self.pool().slots();
            let free = slots.has_free();
            let max_delay = self.config.pipeline_max_delay;
            let short = || {
                let cpus = slots.server_cpus(self.config.server_cpus);
                !max_delay.is_zero()
                    && slots.statement_cost(cpus) * self.config.pipeline_depth <= max_delay
            };
            // Alone on the server (nothing running, nothing queued: nobody to batch with),
            // or statements too long to hold back: it runs on its own at once, decided
            // before anything is set up for a batch (the one-client path pays nothing).
            (free, free && (slots.in_use() == 0 || !short()))
        };
        if alone {
            return Piped::Alone;
        }
        let batches = Arc::clone(self.pool().batches());
        let slots = Arc::clone(self.pool().slots());
        // Cleared first: a KILL from now on finds the flag and interrupts this statement.
        self.reg.info.interrupt.clear();
        self.reg.info.pipelined.store(true, Ordering::SeqCst);
        let arrivals = slots.arrivals();
        if let Some(rx) = batches.join(&self.key, &self.state.movable, arrivals, || own.work()) {
            return self.as_member(rx, rules, kind).await;
        }
        let room = self.config.pipeline_depth as usize - 1;
        let batch = batches.open(&self.key, &self.state.movable, slots.arrivals() + 1, room);
        if let Err(err) = self.acquire().await {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            if self.on_replica {
                // A replica that cannot serve: every statement of the batch runs on its own,
                // where a read that fails on a replica is tried once more elsewhere.
                drop(batch);
                self.add_retries(1);
                self.release_if_possible();
                return self.elsewhere();
            }
            batch.fail(&err);
            self.release_if_possible();
            return Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue));
        }
        // Got a free slot at once, with others running: the short statements that arrived
        // in the same wake-up may join before the write.
        if free && slots.in_use() > 1 {
            tokio::task::yield_now().await;
        }
        // The leader's own packet: an execution names the statement by this backend's id,
        // preparing it here first if needed.
        let built;
        let packet: &[u8] = match own {
            Own::Query(packet) => packet,
            Own::Execute { payload, stmt } => match self.ensure_prepared(stmt).await {
                Ok(_) => {
                    let Some(b) = self.backend.as_mut() else {
                        return Piped::Alone;
                    };
                    let Some(p) = execution_on(b, payload, stmt) else {
                        return Piped::Alone;
                    };
                    built = p;
                    &built
                }
                Err(err) => {
                    // The members run on their own (`batch` drops); the error is this one's,
                    // unless a replica was lost while preparing: then it runs again elsewhere.
                    drop(batch);
                    self.reg.info.pipelined.store(false, Ordering::SeqCst);
                    let lost = self.backend.is_none();
                    self.release_if_possible();
                    if lost && self.on_replica {
                        self.add_retries(1);
                        return self.elsewhere();
                    }
                    return Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue));
                }
            },
        };
        let mut members = batch.close();
        let Some(b) = self.backend.as_mut() else {
            return Piped::Alone;
        };
        // Members' packets for this backend; an execution not prepared here runs on its own.
        let mut packets = Vec::with_capacity(members.len());
        members.retain(|m| {
            let p = match &m.work {
                Work::Query(p) => Some(p.clone()),
                Work::Execute(e) => e.packet_for(b).map(Bytes::from),
            };
            let kept = p.is_some();
            packets.extend(p);
            kept
        });
        if members.is_empty() {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return self.run_alone(packet, rules, kind).await;
        }
        let stats = &self.ctx.stats.pipeline;
        Stats::incr(&stats.batches);
        stats
            .statements
            .fetch_add(members.len() as u64 + 1, Ordering::Relaxed);
        b.stream.queue_raw(packet);
        for p in &packets {
            b.stream.queue_raw(p);
        }
        b.health = Health::Broken;
        let sent = Instant::now();
        if b.stream.flush(None).await.is_err() {
            // Nothing was answered: every statement of the batch runs again on its own.
            self.add_retries(members.len() + 1);
            self.backend = None;
            self.release_if_possible();
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return Piped::Alone;
        }
        self.answer(rules, members.into_iter(), false, Turn::new(sent), kind)
            .await
    }

    /// A leader nobody joined runs its statement on the slot and backend it holds, as
    /// `Session::statement` would have: a replica that fails before the first byte of its
    /// answer leaves it to run again elsewhere.
    async fn run_alone(&mut self, packet: &[u8], rules: &Rules, kind: ResponseKind) -> Piped {
        self.retry_read = self.on_replica;
        let relayed = self.relay_on_backend(Some(packet), kind, None).await;
        self.retry_read = false;
        if std::mem::take(&mut self.read_retry_now) {
            return self.elsewhere();
        }
        let flow = match relayed {
            Ok(Some(summary)) => self.after_statement(&summary, Some(rules)).await,
            Ok(None) => Flow::Continue,
            Err(reason) => return Piped::Done(Err(reason)),
        };
        self.release_if_possible();
        Piped::Done(Ok(flow))
    }

    /// The statement runs again on its own, avoiding the replica that just failed it (the
    /// server it ran on, if a replica).
    fn elsewhere(&mut self) -> Piped {
        self.avoid = self.on_replica.then_some(self.server);
        Piped::Alone
    }

    /// Waits for this member's turn, then relays its answer.
    async fn as_member(
        &mut self,
        rx: oneshot::Receiver<Baton>,
        rules: &Rules,
        kind: ResponseKind,
    ) -> Piped {
        // A member never acquires, which would end its route: ended here, so that nothing
        // after this statement keeps it (and a member run again on its own is routed again,
        // in case the batch's server is what failed).
        self.pending.routed_for = None;
        self.reg.info.set_phase(ClientPhase::Waiting);
        let queued = Instant::now();
        let info = Arc::clone(&self.reg.info);
        let interrupted = info.interrupt.wait();
        tokio::pin!(rx, interrupted);
        if info.interrupt.is_set() {
            return self.interrupted_waiting(rx, kind).await;
        }
        let baton = tokio::select! {
            biased;
            b = &mut rx => b,
            _ = self.hard_stop.as_mut() => return Piped::Done(Err(ClientCloseReason::Shutdown)),
            _ = interrupted => return self.interrupted_waiting(rx, kind).await,
        };
        match baton {
            Ok(Baton::Run(chain)) => {
                let chain = *chain;
                // One clock read for both (they are a statement's hot path).
                let now = Instant::now();
                self.last_served = now;
                self.ctx.latency.queue_wait.record(now - queued);
                let Chain {
                    backend,
                    slot,
                    rest,
                    dirty,
                    turn,
                } = chain;
                self.take_backend(backend);
                self.slot = Some(slot);
                self.answer(rules, rest, dirty, turn, kind).await
            }
            Ok(Baton::Fail(err)) => {
                self.reg.info.pipelined.store(false, Ordering::SeqCst);
                Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue))
            }
            // The batch never ran this statement: alone, unless a KILL came meanwhile.
            Ok(Baton::Retry) | Err(_) => {
                self.reg.info.pipelined.store(false, Ordering::SeqCst);
                if self.reg.info.interrupt.is_set() {
                    Stats::incr(&self.ctx.stats.pipeline.interrupts);
                    let err = super::errors::interrupted();
                    return Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue));
                }
                self.add_retries(1);
                Piped::Alone
            }
        }
    }

    /// A KILL QUERY came while the statement waited in its batch: the client has its 1317
    /// at once, and the answer, when its turn comes, is read and dropped.
    async fn interrupted_waiting(
        &mut self,
        rx: std::pin::Pin<&mut oneshot::Receiver<Baton>>,
        kind: ResponseKind,
    ) -> Piped {
        Stats::incr(&self.ctx.stats.pipeline.interrupts);
        if let Err(reason) = self.reply_err(1, &super::errors::interrupted()).await {
            // The client is gone too; its turn is still read and dropped below.
            let _ = self.turn_to_drop(rx, kind).await;
            return Piped::Done(Err(reason));
        }
        self.turn_to_drop(rx, kind).await
    }

    /// Waits for a turn whose answer nobody gets, drops that answer and hands on.
    async fn turn_to_drop(
        &mut self,
        rx: std::pin::Pin<&mut oneshot::Receiver<Baton>>,
        kind: ResponseKind,
    ) -> Piped {
        self.reg.info.pipelined.store(false, Ordering::SeqCst);
        let baton = tokio::select! {
            biased;
            b = rx => b,
            _ = self.hard_stop.as_mut() => return Piped::Done(Err(ClientCloseReason::Shutdown)),
        };
        if let Ok(Baton::Run(chain)) = baton {
            let Chain {
                backend,
                slot,
                rest,
                dirty,
                mut turn,
            } = *chain;
            self.take_backend(backend);
            self.slot = Some(slot);
            self.drop_answer(kind).await;
            turn.answered(Instant::now());
            self.hand_on(rest, dirty, turn).await;
        }
        Piped::Done(Ok(Flow::Continue))
    }

    /// Relays this statement's answer from the batch's backend, then hands the backend on.
    /// `turn`: when the batch was written and this answer's turn began; `kind`: the answer
    /// this statement gets.
    async fn answer(
        &mut self,
        rules: &Rules,
        rest: Rest,
        dirty: bool,
        turn: Turn,
        kind: ResponseKind,
    ) -> Piped {
        self.reg
            .info
            .pipelined_statements
            .fetch_add(1, Ordering::Relaxed);
        let last = rest.len() == 0;
        if last {
            // Nothing of another session runs after it on this backend: a KILL may go to
            // the server, as for any statement.
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
        }
        if self.reg.info.interrupt.is_set() {
            Stats::incr(&self.ctx.stats.pipeline.interrupts);
        }
        self.retry_read = true;
        self.turn = Some(turn);
        let relayed = self.relay_on_backend(None, kind, None).await;
        // The relay moved the turn on to where the next answer's begins.
        let turn = self.turn.take().unwrap_or(turn);
        self.retry_read = false;
        self.reg.info.pipelined.store(false, Ordering::SeqCst);
        let retry = std::mem::take(&mut self.read_retry_now);
        let summary = match relayed {
            Err(reason) => {
                // This client is gone mid-answer: the backend closes, the rest run alone.
                self.add_retries(rest.len());
                return Piped::Done(Err(reason));
            }
            Ok(None) => {
                self.hand_on(rest, dirty, turn).await;
                return if retry {
                    self.add_retries(1);
                    self.elsewhere()
                } else {
                    Piped::Done(Ok(Flow::Continue))
                };
            }
            Ok(Some(summary)) => summary,
        };
        let flow = self.after_statement(&summary, Some(rules)).await;
        let mut dirty = dirty;
        if !last {
            // The next statement on this backend replaces its diagnostics.
            if std::mem::take(&mut self.state.warnings_pending) {
                Stats::incr(&self.ctx.stats.pipeline.warnings_dropped);
            }
            if self.state.needs_backend() {
                // A state change nothing predicted, on a backend others' statements follow
                // on: the backend is closed at the end of the batch, and the session lets go
                // of a state it cannot keep.
                tracing::warn!(
                    client = self.reg.info.id,
                    "a pipelined read changed session state; its backend closes after the batch"
                );
                self.state.unpin(PinReason::UntrackedState);
                dirty = true;
            }
        }
        self.hand_on(rest, dirty, turn).await;
        Piped::Done(Ok(flow))
    }

    /// Gives the backend and slot to the next member whose session still waits; the last
    /// statement's session gives them back to the pool.
    async fn hand_on(&mut self, mut rest: Rest, dirty: bool, mut turn: Turn) {
        while let Some(next) = rest.next() {
            let (Some(backend), Some(slot)) = (self.backend.take(), self.slot.take()) else {
                // The backend failed: the members left run on their own (their senders
                // drop with `rest`).
                self.add_retries(rest.len() + 1);
                return self.release_if_possible();
            };
            let chain = Chain {
                backend,
                slot,
                rest,
                dirty,
                turn,
            };
            let kind = next.work.response();
            match next.tx.send(Baton::Run(Box::new(chain))) {
                Ok(()) => return,
                // That member's session has ended: its answer is read and dropped here.
                Err(Baton::Run(chain)) => {
                    let chain = *chain;
                    rest = chain.rest;
                    self.take_backend(chain.backend);
                    self.slot = Some(chain.slot);
                    self.drop_answer(kind).await;
                    turn.answered(Instant::now());
                }
                Err(_) => return,
            }
        }
        if dirty {
            if let Some(b) = self.backend.as_mut() {
                b.health = Health::Broken;
            }
        }
        self.release_if_possible();
    }

    /// Reads one answer nobody will get; a backend that fails meanwhile is closed.
    async fn drop_answer(&mut self, kind: ResponseKind) {
        let Some(b) = self.backend.as_mut() else {
            return;
        };
        let tracker = super::relay::tracker_for(b, kind);
        if super::relay::drain(b, tracker, 1).await.is_err() {
            b.health = Health::Broken;
            self.backend = None;
        }
    }

    fn add_retries(&self, n: usize) {
        self.ctx
            .stats
            .pipeline
            .retries
            .fetch_add(n as u64, Ordering::Relaxed);
    }
}
