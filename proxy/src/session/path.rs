//! The one path every statement takes, from the client's bytes to the backend and back:
//! [`Session::run_statement`] runs a query or a command on a prepared statement
//! (`statement::Statement`) through these steps, in this order:
//!
//! 0. be let in (`session::steer`): its user's `max_concurrency` gate and the query rules'
//!    decision (a block, the rule's gate, its route wish and deadline), before anything is
//!    acquired;
//! 1. reserve a pinned place first if the statement will pin (`Session::reserve_pin`);
//! 2. pipeline it if it may (`Session::may_pipeline`): join or lead a batch of its server's
//!    (`Session::pipelined`), which may leave it to run alone;
//! 3. alone (`Session::attempt`): route and take a slot and a backend (`Session::acquire`),
//!    clear another session's diagnostics if it reads them, address its packet to that
//!    backend (`Session::addressed`: a query as sent, an execution to the backend's own copy
//!    of its statement, which `Session::ensure_prepared` prepares there first if need be),
//!    relay it with what goes around it in the same write (its rule's deadline too) and note
//!    what it changed (`Session::relay_statement`; a rewritten query the server cannot parse
//!    runs as the client wrote it, `Session::as_the_client_wrote`);
//! 4. a read whose replica failed before the client saw a byte runs once more elsewhere;
//! 5. give back what the session no longer needs (`Session::release_if_possible`);
//! 6. count it in its digest's row (`Session::record_digest`).

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use super::answer::{Answer, Outgoing};
use super::errors::out_of_time_code;
use super::finished::Noted;
use super::pipeline::Piped;
use super::prepared::StmtCmd;
use super::state::Rules;
use super::statement::{Request, Statement};
use super::steer::Deadline;
use super::{Flow, Session, Step};
use crate::classify::{Classification, Effect};
use crate::pool::batches::ForBackend;
use crate::protocol::{codes, ErrPacket, ResponseKind, ResponseSummary};
use crate::stats::{ClientCloseReason, PinReason, Stats};

/// What one try at a statement came to.
pub(super) enum Tried {
    /// Relayed: the client has the answer, and this is what comes next.
    Done(Flow),
    /// The client has an error (or, for SEND_LONG_DATA, nothing); the session goes on.
    Failed,
    /// Server `.0`, a replica, failed before the client saw anything: it runs again
    /// elsewhere.
    RetryElsewhere(usize),
}

/// The statement changes the server's globals (`SET GLOBAL`).
fn sets_globals(class: &Classification) -> bool {
    class.effects.iter().any(|e| matches!(e, Effect::GlobalSet))
}

impl Session {
    /// Runs one statement on a backend and relays its answer: the one path of every query
    /// and every command on a prepared statement (the module doc lists its steps).
    pub(super) async fn run_statement(&mut self, st: &mut Statement<'_>) -> Step {
        self.reg
            .info
            .queries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Stats::incr(&self.ctx.stats.statements);
        // One future, no nested one for the steps: every statement would copy it.
        let step = 'run: {
            // Digests, query rules and per-user limits (`session::steer`): nothing is
            // acquired before the statement is let in (awaited only if it has a gate or a
            // rule to pass).
            if self.steer_ahead(st) {
                if let Err(err) = self.admit_statement(st).await {
                    break 'run self.reply_err(1, &err).await.map(|()| Flow::Continue);
                }
            }
            // An autocommit read that starts with nothing held may run once more on another
            // server when its replica fails before the client saw a byte.
            st.retries =
                usize::from(st.route.pending.read.is_replica_safe() && self.holds_nothing());
            // A statement that will pin gets its place first, or does not run at all.
            if self.held.place.is_none() && st.rules.and_then(Rules::pin_ahead).is_some() {
                if let Err(err) = self.reserve_pin(st.rules).await {
                    break 'run self.reply_err(1, &err).await.map(|()| Flow::Continue);
                }
            }
            // A stateless read may share one write to the backend with other sessions' reads.
            let mut holds = None;
            if self.may_pipeline(st) {
                match self.pipelined(st).await {
                    Piped::Done(step) => break 'run step,
                    // A read its batch's replica failed runs alone, avoiding that replica.
                    Piped::Alone => st.tally.retried |= st.route.avoid.is_some(),
                    Piped::Holds(packet) => holds = Some(packet),
                }
            }
            let flow = loop {
                let tried = match holds.take() {
                    // A leader nobody joined: on the slot and backend it holds.
                    Some(packet) => self.relay_statement(st, &packet, None).await,
                    None => self.attempt(st).await,
                };
                match tried {
                    Err(reason) => break 'run Err(reason),
                    Ok(Tried::Done(flow)) => break flow,
                    Ok(Tried::Failed) => break Flow::Continue,
                    Ok(Tried::RetryElsewhere(server)) => {
                        st.retries -= 1;
                        st.tally.retried = true;
                        st.route.avoid = Some(server);
                        Stats::incr(&self.ctx.stats.read_retries);
                    }
                }
            };
            self.after_prepared_command(st.request);
            self.settle_last_insert_id().await;
            self.release_if_possible();
            Ok(flow)
        };
        if st.tally.arrived.is_some() {
            self.record_digest(st);
        }
        if matches!(step, Ok(Flow::Quit)) {
            // The server closes the connection after this answer (COMMIT RELEASE): the
            // client gets the answer first, as from the server.
            self.flush_response().await?;
        }
        step
    }

    /// One try at the statement on its own: route and acquire, clear another session's
    /// diagnostics if it reads them, address the packet to the backend, relay.
    async fn attempt(&mut self, st: &mut Statement<'_>) -> Result<Tried, ClientCloseReason> {
        let acquired = match self.acquire(&mut st.route).await {
            Ok(at) => at,
            Err(err) => return self.not_run(st, &err, true).await,
        };
        let cleared = match self.diagnostics_cleared(st.rules).await {
            Ok(talked) => talked,
            Err(err) => return self.not_run(st, &err, false).await,
        };
        // A command on a prepared statement needs it on this backend: prepared there first
        // if need be (awaited only then).
        let prepared = match st.request.prepared() {
            Some(stmt) => self.ensure_prepared(stmt).await,
            None => Ok(false),
        };
        let addressed = prepared.and_then(|p| Ok((self.addressed(st.request)?, p)));
        let (packet, prepared) = match addressed {
            Ok(addressed) => addressed,
            Err(err) => {
                // A replica lost while preparing: nothing reached the client.
                let lost = self.held.backend.is_none();
                return self.not_run(st, &err, lost).await;
            }
        };
        // The relay starts where the acquire ended, unless a round trip came between.
        let started = (!cleared && !prepared).then_some(acquired);
        self.relay_statement(st, &packet, started).await
    }

    /// The statement's packet for the backend the session holds (`ForBackend`): a query as
    /// sent, a command on a prepared statement addressed to that backend's own copy of it
    /// (`Session::ensure_prepared` saw to it that there is one).
    pub(super) fn addressed<'a>(
        &mut self,
        request: Request<'a>,
    ) -> Result<Cow<'a, [u8]>, ErrPacket> {
        let packet = self
            .held
            .backend
            .as_mut()
            .and_then(|b| request.packet_for(b));
        packet.ok_or_else(|| ErrPacket::from_code(codes::BACKEND_LOST, &b"no backend"[..]))
    }

    /// The statement did not run (`err`): a replica read that may run elsewhere does so
    /// when the failure is `retryable` (nothing reached the client), else the client gets
    /// the error.
    async fn not_run(
        &mut self,
        st: &Statement<'_>,
        err: &ErrPacket,
        retryable: bool,
    ) -> Result<Tried, ClientCloseReason> {
        self.release_if_possible();
        if retryable && st.may_retry() {
            return Ok(Tried::RetryElsewhere(self.held.server));
        }
        // SEND_LONG_DATA has no response, even for errors.
        if st.kind != ResponseKind::None {
            self.reply_err(1, err).await?;
        }
        Ok(Tried::Failed)
    }

    /// Relays `packet` on the backend the session holds, with what goes around it in the
    /// same write (`values::Around`), and notes what the statement changed.
    async fn relay_statement(
        &mut self,
        st: &mut Statement<'_>,
        packet: &[u8],
        started: Option<std::time::Instant>,
    ) -> Result<Tried, ClientCloseReason> {
        let around = self.around(st.rules);
        let trackers = self.expect_trackers(st.class, st.rules);
        // A query rule's deadline: in the statement's text, or a KILL at the deadline.
        let deadline = st
            .admitted
            .timeout()
            .map(|limit| self.deadline(st, packet, limit));
        let (packet, kill) = match &deadline {
            Some(Deadline::InText(limited)) => (&limited[..], None),
            Some(Deadline::Kill(k)) => (packet, Some((&*k.fired, &k.err))),
            None => (packet, None),
        };
        let out = Outgoing {
            started,
            may_retry: st.may_retry(),
            rewrite_stmt_id: st.request.client_stmt_id(),
            withhold_parse_error: st.client_text.is_some(),
            timed_out: kill,
            ..Outgoing::new(packet, st.kind, &around)
        };
        let relayed = self.relay_on(out).await;
        // The answer is in: a KILL at the deadline not sent yet is not sent at all.
        let limited = deadline.is_some();
        let killed = kill.is_some_and(|(fired, _)| fired.load(Ordering::SeqCst));
        drop(deadline);
        let failed = !matches!(&relayed, Ok(Answer::Done(s, _)) if s.error.is_none());
        self.trackers_after(trackers, failed);
        let summary = match relayed? {
            Answer::Done(summary, took) => {
                st.answered(&summary, took);
                summary
            }
            Answer::Nothing => return Ok(Tried::Failed),
            Answer::RetryElsewhere(server) => return Ok(Tried::RetryElsewhere(server)),
        };
        let out_of_time = |e: &ErrPacket| killed || out_of_time_code(e.code);
        if limited && summary.error.as_ref().is_some_and(out_of_time) {
            st.admitted.timed_out();
        }
        let value = self.after_around(&around).await;
        let Some(summary) = self.as_the_client_wrote(st, summary).await? else {
            return Ok(Tried::Failed);
        };
        if summary.error.is_none() && st.class.is_some_and(sets_globals) {
            // Logins from now on see the new globals (`pool::globals`).
            self.ctx.globals.changed();
        }
        // `after_statement`, with its future only when the server must be asked first.
        // An execution does what its statement does: locks and pins as for a query.
        let flow = match self.note_statement(&summary, st.rules) {
            Noted::Done(flow) => flow,
            Noted::Confirm(ask, flow) => self.confirmed(&summary, st.rules, &ask, flow).await,
        };
        self.remember_conditions(st, &summary);
        self.record_read_back(value);
        Ok(Tried::Done(flow))
    }

    /// The answer the client gets to a query sluice rewrote: the rewrite's own (`summary`),
    /// unless the server refused to parse it. Then nothing ran and the relay withheld the
    /// error (`Outgoing::withhold_parse_error`: the answer's first and only packet), whose
    /// message would quote sluice's text: the client's own text runs in its place, on the
    /// same backend, and its answer is the client's. `None`: that relay left nothing to
    /// note. Costs nothing for any other statement.
    pub(super) async fn as_the_client_wrote(
        &mut self,
        st: &Statement<'_>,
        summary: ResponseSummary,
    ) -> Result<Option<ResponseSummary>, ClientCloseReason> {
        let parse_error = summary.error.as_ref().is_some_and(|e| {
            e.code == codes::PARSE_ERROR.code || e.code == codes::SYNTAX_ERROR.code
        });
        // The relay withholds only an error that is the answer's first packet.
        let withheld = parse_error && summary.status.is_none() && summary.result_sets == 0;
        let Some(original) = st.client_text.filter(|_| withheld) else {
            return Ok(Some(summary));
        };
        let none = super::values::Around::default();
        match self
            .relay_on(Outgoing::new(original, st.kind, &none))
            .await?
        {
            Answer::Done(summary, _) => Ok(Some(summary)),
            Answer::Nothing | Answer::RetryElsewhere(_) => Ok(None),
        }
    }

    /// What a command on a prepared statement leaves, whatever its answer: long data waits
    /// on its backend for the EXECUTE (the session pins), and an execution uses it up.
    fn after_prepared_command(&mut self, request: Request<'_>) {
        match request {
            Request::Prepared {
                cmd: StmtCmd::SendLongData,
                ..
            } => self.pin(PinReason::PreparedStatement),
            Request::Prepared { cmd, .. } if cmd.runs() => {
                self.state.unpin(PinReason::PreparedStatement);
                self.reg.info.set_pin(self.state.pin_reason());
            }
            _ => {}
        }
    }
}
