//! Pipelining, the session's side (`pool::batches` holds the batch itself): which
//! statements may share one write to a backend with other sessions' statements
//! ([`Session::may_pipeline`], the one home of that rule: the statement's half
//! `statement::reads_only`, the session's half `Session::pipelinable`), how a statement leads or
//! joins a batch, and how the backend is handed on once its answer is relayed.
//!
//! What keeps it transparent:
//! - Only autocommit reads the classifier proves replica-safe (so without side effects and
//!   without reading what an earlier statement left: no FOUND_ROWS(), ROW_COUNT(),
//!   LAST_INSERT_ID(), locks, SLEEP(), user variables or stored functions), with nothing
//!   to present or pin, from a session that holds nothing, are pipelined: queries, and
//!   executions of prepared statements without a cursor, each addressed to the batch
//!   backend's own copy of its statement (one not prepared there runs on its own). Every
//!   member of a batch has the same pool key and movable state, which the leader replays
//!   once.
//! - Each session relays its own answer to its own client; nothing of one answer reaches
//!   another client.
//! - A KILL QUERY of a member ends its client's answer with 1317 in sluice at once, and its
//!   session goes on (a member still waiting leaves the batch). Its statement is stopped on
//!   the server by its own query id, by the session that reads its answer, never by thread
//!   id, which would reach whichever statement of the batch runs then (`session::kill`).
//!   The batch's last statement is killed by thread id as usual: nothing runs after it there.
//! - No member waits on another client's reading speed, nor for long on another statement's
//!   server time: an answer whose client takes nothing for `Session::stall_after`, or that
//!   is still coming after `Session::answer_patience`, cuts the members behind it loose
//!   (`pool::batches::cut_loose`): each runs again on its own (a read whose client has seen
//!   nothing), and its copy's answer is read and dropped. A stalled reader also gives its slot up
//!   (`session::acquire::give_up_slot`).
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

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::answer::{Answer, Behind, Outgoing};
use super::relay::Relay;
use super::state::Rules;
use super::statement::Statement;
use super::{Flow, Session, Step};
use crate::conn::backend::Health;
use crate::pool::batches::{Baton, Chain, Member, OpenBatch, Rest, Turn};
use crate::protocol::{ErrPacket, ResponseKind, StatusFlags};
use crate::registry::ClientPhase;
use crate::stats::{ClientCloseReason, PinReason, Stats};

/// What became of a statement offered for pipelining.
pub(super) enum Piped<'a> {
    /// It ran (or failed with an error the client got): the command is over.
    Done(Step),
    /// It runs on its own, from the start (routing and acquire).
    Alone,
    /// A leader nobody joined: it runs on its own, on the slot and backend it holds, with
    /// its packet addressed to that backend already.
    Holds(Cow<'a, [u8]>),
}

impl Session {
    /// Whether `st` may share one write to a backend with other sessions' statements: the
    /// statement's half (`Statement::reads_only`) and the session's (`pipelinable`). A
    /// statement with a query rule's deadline runs alone: its time limit is its own.
    pub(super) fn may_pipeline(&self, st: &Statement<'_>) -> bool {
        st.rules.is_some_and(|r| self.pipelinable(r))
            && st.reads_only()
            && st.admitted.timeout().is_none()
    }

    /// The rule's session half: a statement may be pipelined if its rules present, pin and
    /// lock nothing, and the session holds nothing and waits for nothing, in autocommit.
    fn pipelinable(&self, rules: &Rules) -> bool {
        self.config.pipeline_depth > 1
            && rules.is_stateless()
            && self.held.backend.is_none()
            && self.held.slot.is_none()
            && self.held.place.is_none()
            && !self.state.needs_backend()
            && self
                .state
                .status
                .contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
            && !self.held.resets.pending()
    }

    /// Runs `st` in a batch: joins an open one (always when it would queue for a slot,
    /// with a slot free only under `pipeline_max_delay`), or leads a new one. With several
    /// servers it is routed first, and its batch is one of the routed server's.
    pub(super) async fn pipelined<'a>(&mut self, st: &mut Statement<'a>) -> Piped<'a> {
        if self.config.uses_topology() {
            if let Err(err) = self.route_ahead(&mut st.route).await {
                return Piped::Done(self.reply_and_go_on(&err).await);
            }
            // A read that first waits for a replica to reach the session's writes runs on
            // its own (the wait takes the backend); the route stands.
            if st.route.gtid_wait.is_some() {
                return Piped::Alone;
            }
        }
        let Some(free) = self.worth_batching() else {
            return Piped::Alone;
        };
        // Cleared first: a KILL from now on finds the flag and interrupts this statement.
        self.reg.info.interrupt.clear();
        self.reg.info.pipelined.store(true, Ordering::SeqCst);
        let (pool, request) = (self.pool(), st.request);
        let arrivals = pool.slots().arrivals();
        let joined = pool
            .batches()
            .join(&self.login.key, &self.state.movable, arrivals, || {
                request.work()
            });
        if let Some(rx) = joined {
            return self.as_member(st, rx).await;
        }
        let room = self.config.pipeline_depth as usize - 1;
        let ticket = pool.slots().arrivals() + 1;
        let batch = pool
            .batches()
            .open(&self.login.key, &self.state.movable, ticket, room);
        self.lead(st, batch, free).await
    }

    /// Whether a statement looks for a batch at all, and if so whether a slot is free.
    /// With a slot free, a batch saves a send but gives up running beside the others: worth
    /// it only for statements that are short on average. What counts is their own server
    /// time: on a server running more statements than it has CPUs, most of a statement's
    /// slot time is the wait for a CPU, which it would spend in a batch too.
    fn worth_batching(&self) -> Option<bool> {
        let slots = self.pool().slots();
        let free = slots.has_free();
        let max_delay = self.config.pipeline_max_delay;
        let short = || {
            let cpus = slots.server_cpus(self.config.server_cpus);
            !max_delay.is_zero()
                && slots.statement_cost(cpus) * self.config.pipeline_depth <= max_delay
        };
        // Alone on the server (nothing running, nothing queued: nobody to batch with), or
        // statements too long to hold back: it runs on its own at once, decided before
        // anything is set up for a batch (the one-client path pays nothing).
        let alone = free && (slots.in_use() == 0 || !short());
        (!alone).then_some(free)
    }

    /// Leads `batch`: takes a slot and a backend as any statement, addresses its own
    /// packet to that backend, and writes the members' after it. `free`: a slot was free
    /// when it looked.
    async fn lead<'a>(
        &mut self,
        st: &mut Statement<'a>,
        batch: OpenBatch,
        free: bool,
    ) -> Piped<'a> {
        if let Err(err) = self.acquire(&mut st.route).await {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            if st.route.on_replica {
                // A replica that cannot serve: every statement of the batch runs on its own,
                // where a read that fails on a replica is tried once more elsewhere.
                drop(batch);
                self.add_retries(1);
                self.release_if_possible();
                return self.elsewhere(st, self.held.server);
            }
            batch.fail(&err);
            self.release_if_possible();
            return Piped::Done(self.reply_and_go_on(&err).await);
        }
        // Got a free slot at once, with others running: the short statements that arrived
        // in the same wake-up may join before the write.
        if free && self.pool().slots().in_use() > 1 {
            tokio::task::yield_now().await;
        }
        // An execution names the statement by this backend's id, prepared here first if
        // need be.
        let prepared = match st.request.prepared() {
            Some(stmt) => self.ensure_prepared(stmt).await.map(|_| ()),
            None => Ok(()),
        };
        match prepared.and_then(|()| self.addressed(st.request)) {
            Ok(packet) => self.write_batch(st, batch.close(), packet).await,
            Err(err) => {
                // The members run on their own (`batch` drops); the error is this one's,
                // unless a replica was lost while preparing: then it runs again elsewhere.
                drop(batch);
                self.reg.info.pipelined.store(false, Ordering::SeqCst);
                let lost = self.held.backend.is_none();
                self.release_if_possible();
                if lost && st.route.on_replica {
                    self.add_retries(1);
                    return self.elsewhere(st, self.held.server);
                }
                Piped::Done(self.reply_and_go_on(&err).await)
            }
        }
    }

    /// Writes the leader's `packet` and its `members`' statements in one write, then relays
    /// the leader's answer. Members whose statement is not prepared on this backend run on
    /// their own; with none left, the leader does too.
    async fn write_batch<'a>(
        &mut self,
        st: &mut Statement<'a>,
        mut members: Vec<Member>,
        packet: Cow<'a, [u8]>,
    ) -> Piped<'a> {
        let Some(b) = self.held.backend.as_mut() else {
            return Piped::Alone;
        };
        let mut packets = Vec::with_capacity(members.len());
        members.retain(|m| {
            let p = m.work.packet_for(b);
            let kept = p.is_some();
            packets.extend(p);
            kept
        });
        if members.is_empty() {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return Piped::Holds(packet);
        }
        let stats = &self.ctx.stats.pipeline;
        Stats::incr(&stats.batches);
        stats
            .statements
            .fetch_add(members.len() as u64 + 1, Ordering::Relaxed);
        b.stream.queue_raw(&packet);
        for p in &packets {
            b.stream.queue_raw(p);
        }
        b.health = Health::Broken;
        let sent = Instant::now();
        if b.stream.flush(None).await.is_err() {
            // Nothing was answered: every statement of the batch runs again on its own.
            self.add_retries(members.len() + 1);
            self.held.backend = None;
            self.release_if_possible();
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return Piped::Alone;
        }
        let text = st.request.text();
        self.answer(st, members.into_iter(), false, Turn::new(sent), text)
            .await
    }

    /// The statement runs again on its own, avoiding `server` (which just failed it) if it
    /// is the replica the statement was routed to.
    fn elsewhere<'a>(&self, st: &mut Statement<'_>, server: usize) -> Piped<'a> {
        st.route.avoid = st.route.on_replica.then_some(server);
        Piped::Alone
    }

    /// Sends the client `err` for its statement; the session goes on.
    async fn reply_and_go_on(&mut self, err: &ErrPacket) -> Step {
        self.reply_err(1, err).await.map(|_| Flow::Continue)
    }

    /// Waits for this member's turn, then relays its answer.
    async fn as_member<'a>(
        &mut self,
        st: &mut Statement<'a>,
        rx: oneshot::Receiver<Baton>,
    ) -> Piped<'a> {
        // A member never acquires, which would end its route: ended here, so that a member
        // run again on its own is routed again, in case the batch's server is what failed.
        st.route.routed = false;
        self.reg.info.set_phase(ClientPhase::Waiting);
        let queued = Instant::now();
        let info = Arc::clone(&self.reg.info);
        let interrupted = info.interrupt.wait();
        tokio::pin!(rx, interrupted);
        if info.interrupt.is_set() {
            return self.interrupted_waiting().await;
        }
        let baton = tokio::select! {
            biased;
            b = &mut rx => b,
            _ = self.hard_stop.as_mut() => return Piped::Done(Err(ClientCloseReason::Shutdown)),
            _ = interrupted => return self.interrupted_waiting().await,
        };
        match baton {
            Ok(Baton::Run(chain)) => {
                let Chain {
                    backend,
                    slot,
                    rest,
                    dirty,
                    turn,
                } = *chain;
                // One clock read for both (they are a statement's hot path).
                let now = Instant::now();
                self.memory.last_served = now;
                self.ctx.latency.queue_wait.record(now - queued);
                self.take_backend(backend);
                self.held.slot = Some(slot);
                let text = st.request.text();
                self.answer(st, rest, dirty, turn, text).await
            }
            Ok(Baton::Fail(err)) => {
                self.reg.info.pipelined.store(false, Ordering::SeqCst);
                Piped::Done(self.reply_and_go_on(&err).await)
            }
            // The batch never ran this statement: alone, unless a KILL came meanwhile.
            Ok(Baton::Retry) | Err(_) => {
                self.reg.info.pipelined.store(false, Ordering::SeqCst);
                if self.reg.info.interrupt.is_set() {
                    Stats::incr(&self.ctx.stats.pipeline.interrupts);
                    let err = super::errors::interrupted();
                    return Piped::Done(self.reply_and_go_on(&err).await);
                }
                self.add_retries(1);
                Piped::Alone
            }
        }
    }

    /// A KILL QUERY came while the statement waited in its batch: the client has its 1317
    /// at once and the session goes on. It leaves the batch: the session that reaches its
    /// answer reads and drops it, and stops its statement on the server (`Session::hand_on`).
    async fn interrupted_waiting<'a>(&mut self) -> Piped<'a> {
        Stats::incr(&self.ctx.stats.pipeline.interrupts);
        self.reg.info.pipelined.store(false, Ordering::SeqCst);
        let err = super::errors::interrupted();
        Piped::Done(self.reply_and_go_on(&err).await)
    }

    /// Relays this statement's answer from the batch's backend, then hands the backend on.
    /// `turn`: when the batch was written and this answer's turn began; `text`: the
    /// statement's as the server shows it.
    async fn answer<'a>(
        &mut self,
        st: &mut Statement<'_>,
        mut rest: Rest,
        dirty: bool,
        turn: Turn,
        text: Option<&[u8]>,
    ) -> Piped<'a> {
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
        let none = super::values::Around::default();
        st.turn = Some(turn);
        let out = Outgoing {
            packet: None,
            behind: Some(Behind {
                rest: &mut rest,
                own: text,
            }),
            // The relay moves it on to where the next answer's hold begins.
            turn: st.turn.as_mut(),
            // A read whose client has seen nothing.
            may_retry: true,
            ..Outgoing::new(&[], st.kind, &none)
        };
        let relayed = self.relay_on(out).await;
        let turn = st.turn.unwrap_or(turn);
        self.reg.info.pipelined.store(false, Ordering::SeqCst);
        let summary = match relayed {
            Err(reason) => {
                // This client is gone mid-answer: the backend closes, the rest run alone.
                self.add_retries(rest.len());
                return Piped::Done(Err(reason));
            }
            Ok(Answer::Nothing) => {
                self.hand_on(rest, dirty, turn).await;
                return Piped::Done(Ok(Flow::Continue));
            }
            Ok(Answer::RetryElsewhere(server)) => {
                self.hand_on(rest, dirty, turn).await;
                self.add_retries(1);
                return self.elsewhere(st, server);
            }
            Ok(Answer::Done(summary, took)) => {
                st.answered(&summary, took);
                summary
            }
        };
        let flow = self.after_statement(&summary, st.rules).await;
        // Raised again where the session next reads its diagnostics, if the next statement
        // here replaces them.
        self.remember_conditions(st, &summary);
        let dirty = (!last && self.leaves_nothing_for_the_next()) || dirty;
        self.hand_on(rest, dirty, turn).await;
        Piped::Done(Ok(flow))
    }

    /// After an answer with others' statements behind it on the backend: what the next
    /// statement there replaces (its diagnostics: a read's are raised again where its session
    /// next reads them, `values::Conditions`) is dropped, and a state change nothing
    /// predicted makes the backend close at the end of the batch (true), the session
    /// letting go of a state it cannot keep.
    fn leaves_nothing_for_the_next(&mut self) -> bool {
        if std::mem::take(&mut self.state.warnings_pending) {
            Stats::incr(&self.ctx.stats.pipeline.warnings_dropped);
        }
        if !self.state.needs_backend() {
            return false;
        }
        tracing::warn!(
            client = self.reg.info.id,
            "a pipelined read changed session state; its backend closes after the batch"
        );
        self.state.unpin(PinReason::UntrackedState);
        true
    }

    /// Gives the backend and slot to the next member whose session still waits; the last
    /// statement's session gives them back to the pool. An answer nobody waits for any more
    /// (its session left, was killed, or runs it elsewhere) is read and dropped here.
    async fn hand_on(&mut self, mut rest: Rest, dirty: bool, mut turn: Turn) {
        while let Some(next) = rest.next() {
            let Some(backend) = self.held.backend.take() else {
                // The backend failed: the members left run on their own (their senders
                // drop with `rest`).
                self.add_retries(rest.len() + 1);
                return self.release_if_possible();
            };
            let kind = next.work.response();
            match self.held.slot.take() {
                Some(slot) => {
                    let chain = Chain {
                        backend,
                        slot,
                        rest,
                        dirty,
                        turn,
                    };
                    match next.tx.send(Baton::Run(Box::new(chain))) {
                        Ok(()) => return,
                        Err(Baton::Run(chain)) => {
                            let chain = *chain;
                            rest = chain.rest;
                            self.held.backend = Some(chain.backend);
                            self.held.slot = Some(chain.slot);
                        }
                        Err(_) => return,
                    }
                }
                // The slot was given up (the answer before stalled): everyone behind it was
                // cut loose, and only their answers are left to drop.
                None => self.held.backend = Some(backend),
            }
            self.drop_answer(kind, next.work.text(), &mut rest).await;
            turn.answered(Instant::now());
        }
        if dirty {
            if let Some(b) = self.held.backend.as_mut() {
                b.health = Health::Broken;
            }
        }
        self.release_if_possible();
    }

    /// Reads one answer nobody will get; a backend that fails meanwhile is closed. One still
    /// running after `stall_after` is stopped on the server (when its `text` tells it apart
    /// from the statements behind it); after an answer's patience they are cut loose.
    async fn drop_answer(&mut self, kind: ResponseKind, text: Option<&[u8]>, rest: &mut Rest) {
        let (kill_after, patience) = (self.stall_after(), self.answer_patience());
        let Some(b) = self.held.backend.as_mut() else {
            return;
        };
        let plan = super::kill::unique_text(text, rest).map(|t| {
            super::kill::KillPlan::new(&self.held.target, &self.login.key, b.thread_id, t)
        });
        let stats = &self.ctx.stats.pipeline;
        let mut relay = Relay::sent(b, kind);
        let cut = (Some(rest), patience);
        let dropped = super::kill::drain_dropped(b, &mut relay, plan, kill_after, cut, stats).await;
        if dropped.is_err() {
            b.health = Health::Broken;
            self.held.backend = None;
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
