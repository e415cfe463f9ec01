//! Pipelining, the session's side (`pool::batches` holds the batch itself): which
//! statements may share one write to a backend with other sessions' statements
//! ([`Session::pipelinable`], the one home of that rule), how a statement leads or joins a
//! batch, and how the backend is handed on once its answer is relayed.
//!
//! What keeps it transparent:
//! - Only autocommit reads the classifier proves replica-safe (so without side effects and
//!   without reading what an earlier statement left: no FOUND_ROWS(), ROW_COUNT(),
//!   LAST_INSERT_ID(), locks, SLEEP(), user variables or stored functions), with nothing
//!   to present or pin, from a session that holds nothing, are pipelined. Every member of a
//!   batch has the same pool key and movable state, which the leader replays once.
//! - Each session relays its own answer to its own client; nothing of one answer reaches
//!   another client.
//! - A KILL QUERY never reaches the server while other sessions' statements share the
//!   backend: the victim's answer ends with 1317 in sluice and the rest of it is read and
//!   dropped (`relay::drain`). The batch's last statement is killed on the server as usual,
//!   since nothing runs after it there.
//! - If the backend fails, every member whose answer had not begun runs again on its own:
//!   they are reads, and their clients have seen nothing.
//!
//! When a read that finds a slot free batches anyway: only while its batch would hold it
//! back by less than `pipeline_max_delay`, counting each statement's own server time
//! (`Slots::statement_cost`), not the wait for a CPU it would have inside the server too.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::registry::ClientPhase;
use super::state::Rules;
use super::{Flow, Session, Step};
use crate::classify::{Classification, Effect};
use crate::conn::backend::Health;
use crate::pool::batches::{Baton, Chain, Member};
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

impl Session {
    /// The rule: a statement may be pipelined if it is an autocommit read that a replica
    /// could run (no side effect, nothing read from an earlier statement), its rules
    /// present, pin and lock nothing, and the session holds nothing and waits for nothing.
    pub(super) fn pipelinable(
        &self,
        kind: ResponseKind,
        class: Option<&Classification>,
        rules: &Rules,
    ) -> bool {
        self.config.pipeline_depth > 1
            && kind == ResponseKind::Query
            && !self.config.uses_topology()
            && class.is_some_and(|c| {
                c.read.is_replica_safe()
                    && !c.multi_statement
                    && c.min_gtid.is_none()
                    // A user variable a statement earlier in the batch might have set (through a
                    // view's function, which nothing sees) would be read here.
                    && !c.effects.iter().any(|e| matches!(e, Effect::UserVariableRead))
            })
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

    /// Runs `packet` in a batch: joins an open one (always when it would queue for a slot,
    /// with a slot free only under `pipeline_max_delay`), or leads a new one.
    pub(super) async fn pipelined(&mut self, packet: &[u8], rules: &Rules) -> Piped {
        let batches = Arc::clone(self.pool().batches());
        let slots = Arc::clone(self.pool().slots());
        // Cleared first: a KILL from now on finds the flag and interrupts this statement.
        self.reg.info.interrupt.clear();
        self.reg.info.pipelined.store(true, Ordering::SeqCst);
        // With a slot free, a batch saves a send but gives up running beside the others:
        // worth it only for statements that are short on average. What counts is their own
        // server time: on a server running more statements than it has CPUs, most of a
        // statement's slot time is the wait for a CPU, which it would spend in a batch too.
        let free = slots.has_free();
        let cpus = slots.server_cpus(self.config.server_cpus);
        let max_delay = self.config.pipeline_max_delay;
        let short = !max_delay.is_zero()
            && slots.statement_cost(cpus) * self.config.pipeline_depth <= max_delay;
        // Alone on the server (nothing running, nothing queued: nobody to batch with), or
        // statements too long to hold back: the statement runs on its own at once.
        if free && (!short || slots.in_use() == 0) {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return Piped::Alone;
        }
        let arrivals = slots.arrivals();
        if let Some(rx) = batches.join(&self.key, &self.state.movable, arrivals, packet) {
            return self.as_member(rx, rules).await;
        }
        let room = self.config.pipeline_depth as usize - 1;
        let batch = batches.open(&self.key, &self.state.movable, slots.arrivals() + 1, room);
        if let Err(err) = self.acquire().await {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            batch.fail(&err);
            self.release_if_possible();
            return Piped::Done(self.reply_err(1, &err).await.map(|_| Flow::Continue));
        }
        // Got a free slot at once, with others running: the short statements that arrived
        // in the same wake-up may join before the write.
        if free && slots.in_use() > 1 {
            tokio::task::yield_now().await;
        }
        let members = batch.close();
        if members.is_empty() {
            self.reg.info.pipelined.store(false, Ordering::SeqCst);
            return Piped::Done(self.run_alone(packet, rules).await);
        }
        let stats = &self.ctx.stats.pipeline;
        Stats::incr(&stats.batches);
        stats
            .statements
            .fetch_add(members.len() as u64 + 1, Ordering::Relaxed);
        let Some(b) = self.backend.as_mut() else {
            return Piped::Alone;
        };
        b.stream.queue_raw(packet);
        for m in &members {
            b.stream.queue_raw(&m.packet);
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
        self.answer(rules, members.into_iter(), false, sent).await
    }

    /// A leader nobody joined runs its statement on the slot and backend it holds, as
    /// `Session::statement` would have.
    async fn run_alone(&mut self, packet: &[u8], rules: &Rules) -> Step {
        let relayed = self
            .relay_on_backend(Some(packet), ResponseKind::Query, None)
            .await?;
        let flow = match relayed {
            Some(summary) => self.after_statement(&summary, Some(rules)).await,
            None => Flow::Continue,
        };
        self.release_if_possible();
        Ok(flow)
    }

    /// Waits for this member's turn, then relays its answer.
    async fn as_member(&mut self, rx: oneshot::Receiver<Baton>, rules: &Rules) -> Piped {
        self.reg.info.set_phase(ClientPhase::Waiting);
        let queued = Instant::now();
        let info = Arc::clone(&self.reg.info);
        let interrupted = info.interrupt.notify.notified();
        tokio::pin!(rx, interrupted);
        interrupted.as_mut().enable();
        if info.interrupt.is_set() {
            return self.interrupted_waiting(rx).await;
        }
        let baton = tokio::select! {
            biased;
            b = &mut rx => b,
            _ = self.hard_stop.as_mut() => return Piped::Done(Err(ClientCloseReason::Shutdown)),
            _ = interrupted => return self.interrupted_waiting(rx).await,
        };
        match baton {
            Ok(Baton::Run(chain)) => {
                let chain = *chain;
                self.last_served = Instant::now();
                self.ctx.latency.queue_wait.record(queued.elapsed());
                let Chain {
                    backend,
                    slot,
                    rest,
                    dirty,
                    sent,
                } = chain;
                self.take_backend(backend);
                self.slot = Some(slot);
                self.answer(rules, rest, dirty, sent).await
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
    ) -> Piped {
        Stats::incr(&self.ctx.stats.pipeline.interrupts);
        if let Err(reason) = self.reply_err(1, &super::errors::interrupted()).await {
            // The client is gone too; its turn is still read and dropped below.
            let _ = self.turn_to_drop(rx).await;
            return Piped::Done(Err(reason));
        }
        self.turn_to_drop(rx).await
    }

    /// Waits for a turn whose answer nobody gets, drops that answer and hands on.
    async fn turn_to_drop(&mut self, rx: std::pin::Pin<&mut oneshot::Receiver<Baton>>) -> Piped {
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
                sent,
            } = *chain;
            self.take_backend(backend);
            self.slot = Some(slot);
            self.drop_answer().await;
            self.hand_on(rest, dirty, sent).await;
        }
        Piped::Done(Ok(Flow::Continue))
    }

    /// Relays this statement's answer from the batch's backend, then hands the backend on.
    /// `sent`: when the batch was written.
    async fn answer(&mut self, rules: &Rules, rest: Rest, dirty: bool, sent: Instant) -> Piped {
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
        self.sent_at = Some(sent);
        let relayed = self.relay_on_backend(None, ResponseKind::Query, None).await;
        self.sent_at = None;
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
                self.hand_on(rest, dirty, sent).await;
                return if retry {
                    self.add_retries(1);
                    Piped::Alone
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
        self.hand_on(rest, dirty, sent).await;
        Piped::Done(Ok(flow))
    }

    /// Gives the backend and slot to the next member whose session still waits; the last
    /// statement's session gives them back to the pool.
    async fn hand_on(&mut self, mut rest: Rest, dirty: bool, sent: Instant) {
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
                sent,
            };
            match next.tx.send(Baton::Run(Box::new(chain))) {
                Ok(()) => return,
                // That member's session has ended: its answer is read and dropped here.
                Err(Baton::Run(chain)) => {
                    let chain = *chain;
                    rest = chain.rest;
                    self.take_backend(chain.backend);
                    self.slot = Some(chain.slot);
                    self.drop_answer().await;
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
    async fn drop_answer(&mut self) {
        let Some(b) = self.backend.as_mut() else {
            return;
        };
        let tracker = super::relay::tracker_for(b, ResponseKind::Query);
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
