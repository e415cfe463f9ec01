//! A statement is a value: a [`Statement`] holds everything that lives exactly as long as
//! one statement (what the client asked for, its classification and rules, its routing, its
//! retry allowance, its batch turn), made when its command is read and passed down the one
//! path every statement takes (`session::path`). Its [`Request`] is how its packet is built
//! for a backend: a query as the client sent it, a command on a prepared statement addressed
//! to the backend's own copy of that statement (`ForBackend`, as for a batch's members).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::answer::Took;
use super::prepared::{ClientStmt, StmtCmd};
use super::route::{Pending, Routing, NO_ROUTE};
use super::state::Rules;
use crate::classify::{Classification, Digest, Effect};
use crate::conn::BackendConn;
use crate::gate::GateGuard;
use crate::pool::batches::{query_text, ForBackend, Turn, Work};
use crate::protocol::{stmt_execute, ResponseKind, ResponseSummary};
use crate::rules::{Admitted, RuleSet};

/// What the client asked for, and how it becomes a packet for a backend.
#[derive(Clone, Copy)]
pub(super) enum Request<'a> {
    /// A command that goes to the backend as the client sent it (framed): a COM_QUERY, its
    /// text perhaps rewritten (`identity`), or another command sluice relays as it is.
    AsSent(&'a [u8]),
    /// A command on a prepared statement (`payload` unframed): addressed to the backend's
    /// own copy of the statement.
    Prepared {
        payload: &'a [u8],
        stmt: &'a ClientStmt,
        cmd: StmtCmd,
    },
}

impl<'a> Request<'a> {
    /// What a batch runs for it when it joins as a member (only queries and executions
    /// without a cursor are pipelined).
    pub(crate) fn work(self) -> Work {
        match self {
            Request::AsSent(packet) => Work::Query(Bytes::copy_from_slice(packet)),
            Request::Prepared { payload, stmt, .. } => {
                Work::Execute(Box::new(Execution::new(payload, stmt)))
            }
        }
    }

    /// The prepared statement a command on one names.
    pub(crate) fn prepared(self) -> Option<&'a ClientStmt> {
        match self {
            Request::Prepared { stmt, .. } => Some(stmt),
            Request::AsSent(_) => None,
        }
    }

    /// The id the client knows the prepared statement by, for a command on one (the
    /// server's errors about it must name that one); `None` for anything else, and for
    /// MariaDB's "the last one prepared" (-1).
    pub(crate) fn client_stmt_id(self) -> Option<u32> {
        let Request::Prepared { payload, .. } = self else {
            return None;
        };
        let id = u32::from_le_bytes(payload.get(1..5)?.try_into().ok()?);
        (id != super::prepared::LAST_PREPARED).then_some(id)
    }

    /// Its text as the server shows it while running it (PROCESSLIST).
    pub(crate) fn text(self) -> Option<&'a [u8]> {
        match self {
            Request::AsSent(packet) => query_text(packet),
            Request::Prepared { stmt, .. } => Some(stmt.def.sql()),
        }
    }
}

impl<'a> ForBackend<'a> for Request<'a> {
    fn packet_for(&self, backend: &mut BackendConn) -> Option<Cow<'a, [u8]>> {
        match *self {
            Request::AsSent(packet) => Some(Cow::Borrowed(packet)),
            Request::Prepared { payload, stmt, cmd } => {
                cmd.on_backend(payload, stmt, backend).map(Cow::Owned)
            }
        }
    }

    fn text(&self) -> Option<&[u8]> {
        Request::text(*self)
    }
}

/// One statement on its way from the client to a backend and back: everything that lives
/// exactly as long as it. Made by `dispatch` (a query, a relayed command) or
/// `stmt_command` (a command on a prepared statement), run by `Session::run_statement`
/// (`session::path`), dropped once its answer is relayed and what it held given back.
///
/// What digests, query rules and per-user limits make of it lives here too
/// (`session::steer`): its digest, the gate places it holds (dropped with it, so after
/// its answer and the release of its backend), the deciding rule (its deadline; its route
/// wish is in `route`), and what its digest record takes.
pub(super) struct Statement<'a> {
    pub(crate) request: Request<'a>,
    /// The answer it gets.
    pub(crate) kind: ResponseKind,
    /// A query's classification (`None`: a command sluice does not classify, an execution).
    pub(crate) class: Option<&'a Classification>,
    /// What it asks of the session (`None`: not a statement sluice classified, or a
    /// command on a prepared statement that does not run it).
    pub(crate) rules: Option<&'a Rules>,
    /// Where it runs: what it tells the router, and what routing found.
    pub(crate) route: Routing<'a>,
    /// How many more times it may run elsewhere after its replica failed before the client
    /// saw a byte (an autocommit read that starts with nothing held: once).
    pub(crate) retries: usize,
    /// Its answer came from a pipelined batch: the batch's times.
    pub(crate) turn: Option<Turn>,
    /// A query whose text sluice rewrote (`session::identity`): the packet as the client
    /// sent it, which goes in its place if the server cannot parse the rewrite.
    pub(crate) client_text: Option<&'a [u8]>,
    /// Its digest: computed only when something reads it (digests on, or a rule that
    /// matches on it); a query's by `dispatch`, a prepared statement's once, at PREPARE.
    pub(crate) digest: Option<&'a Digest>,
    /// The query rules in force when its command was read (`None`: none, or not read yet).
    pub(crate) ruleset: Option<Arc<RuleSet>>,
    /// What the rules let it do: the deciding rule and its gate place.
    pub(crate) admitted: Admitted,
    /// Its place at its user's `max_concurrency` gate.
    pub(crate) user_place: Option<GateGuard>,
    /// What its digest record takes.
    pub(crate) tally: Tally,
}

/// What a statement's digest record takes besides its digest (`Session::record_digest`).
#[derive(Default)]
pub(super) struct Tally {
    /// When it arrived: read only when its digest is recorded (`None` otherwise).
    pub(crate) arrived: Option<Instant>,
    /// Its answer from the server: what it said, and when the relay ran.
    pub(crate) answer: Option<(Outcome, Took)>,
    /// It ran again on another server after its replica failed.
    pub(crate) retried: bool,
}

/// What an answer from the server says, for the digest record.
#[derive(Clone, Copy)]
pub(super) struct Outcome {
    pub(crate) rows: u64,
    pub(crate) affected: u64,
    pub(crate) error: bool,
}

impl Outcome {
    pub(crate) fn of(summary: &ResponseSummary) -> Outcome {
        Outcome {
            rows: summary.rows,
            affected: summary.affected_rows,
            error: summary.error.is_some(),
        }
    }
}

impl<'a> Statement<'a> {
    /// A classified query; `pending` is what its classification tells the router.
    pub(crate) fn query(
        packet: &'a [u8],
        class: &'a Classification,
        rules: &'a Rules,
        pending: &'a Pending,
    ) -> Self {
        let request = Request::AsSent(packet);
        Statement::new(
            request,
            ResponseKind::Query,
            Some(class),
            Some(rules),
            pending,
        )
    }

    /// A command relayed as the client sent it, which sluice does not classify.
    pub(crate) fn command(packet: &'a [u8], kind: ResponseKind) -> Self {
        Statement::new(Request::AsSent(packet), kind, None, None, &NO_ROUTE)
    }

    /// A command on a prepared statement. Only an execution without a cursor routes by its
    /// text, as a query would: a cursor keeps its rows on one backend (it pins the session),
    /// and long data, fetches and resets go to the backend that holds them (or, holding
    /// nothing, the writer).
    pub(crate) fn prepared(payload: &'a [u8], stmt: &'a ClientStmt, cmd: StmtCmd) -> Self {
        let plain = cmd == StmtCmd::Execute && stmt_execute::without_cursor(payload);
        let pending = if plain { &stmt.def.route } else { &NO_ROUTE };
        let rules = cmd.runs().then_some(&stmt.def.rules);
        let request = Request::Prepared { payload, stmt, cmd };
        let mut st = Statement::new(request, cmd.response(), None, rules, pending);
        // Digested by its text, once, at PREPARE (`StmtDef::digest`).
        st.digest = cmd.runs().then(|| stmt.def.digest.get()).flatten();
        st
    }

    fn new(
        request: Request<'a>,
        kind: ResponseKind,
        class: Option<&'a Classification>,
        rules: Option<&'a Rules>,
        pending: &'a Pending,
    ) -> Self {
        Statement {
            request,
            kind,
            class,
            rules,
            route: Routing::new(pending),
            retries: 0,
            turn: None,
            client_text: None,
            digest: None,
            ruleset: None,
            admitted: Admitted::default(),
            user_place: None,
            tally: Tally::default(),
        }
    }

    /// Its answer came from the server (`took`: when the relay ran); its digest record
    /// takes them, if it is recorded.
    pub(crate) fn answered(&mut self, summary: &ResponseSummary, took: Took) {
        if self.tally.arrived.is_some() {
            self.tally.answer = Some((Outcome::of(summary), took));
        }
    }

    /// A statement that runs SQL (a query, an execution): the ones rules and per-user
    /// limits see.
    pub(crate) fn runs_sql(&self) -> bool {
        self.rules.is_some()
    }

    /// The statement's half of the pipelining rule: one read the classifier proved safe to
    /// share a backend ([`reads_only`]), sent as a query or as an execution without
    /// a cursor (whose text was classified at PREPARE).
    pub(crate) fn reads_only(&self) -> bool {
        match self.request {
            Request::AsSent(_) => self.class.is_some_and(reads_only),
            Request::Prepared { payload, stmt, cmd } => {
                cmd == StmtCmd::Execute
                    && stmt.def.reads_only
                    && stmt_execute::without_cursor(payload)
            }
        }
    }

    /// A backend that fails before the client saw a byte sends it elsewhere: a read routed
    /// to a replica, with a retry left.
    pub(crate) fn may_retry(&self) -> bool {
        self.retries > 0 && self.route.on_replica
    }
}

/// The rule's statement half: an autocommit read that a replica could run (no side effect,
/// nothing read from an earlier statement), one statement, with no position to wait for.
/// Checked for a query as it comes, for a prepared statement once, when it is prepared.
pub(super) fn reads_only(class: &Classification) -> bool {
    class.read.is_replica_safe()
        && !class.multi_statement
        && class.min_gtid.is_none()
        // A user variable a statement earlier in the batch might have set (through a view's
        // function, which nothing sees) would be read here.
        && !class.effects.iter().any(|e| matches!(e, Effect::UserVariableRead))
}

/// A member's execution, addressed to the batch's backend once it is known.
pub(super) struct Execution {
    payload: Bytes,
    stmt: ClientStmt,
}

impl Execution {
    pub(crate) fn new(payload: &[u8], stmt: &ClientStmt) -> Execution {
        Execution {
            payload: Bytes::copy_from_slice(payload),
            stmt: stmt.clone(),
        }
    }
}

impl ForBackend<'static> for Execution {
    fn packet_for(&self, backend: &mut BackendConn) -> Option<Cow<'static, [u8]>> {
        let packet = StmtCmd::Execute.on_backend(&self.payload, &self.stmt, backend);
        packet.map(Cow::Owned)
    }

    fn text(&self) -> Option<&[u8]> {
        Some(self.stmt.def.sql())
    }
}
