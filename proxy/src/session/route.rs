//! Which server a statement runs on: the session's one call of [`topology::route`], made on
//! the acquire path before a slot is taken (each server has its own slots and backends).
//! A session that holds a slot or a backend (transaction, lock, pin) stays where it is.
//!
//! Waiting: while there is no writer (none, or several: split brain) a statement that must
//! go to the writer waits for the next topology with exactly one, up to
//! `writer_wait_timeout`, then gets 1290 (HY000) naming the state. A read with
//! `primary_reads = never` waits for a replica the same way.
//!
//! A query rule's `route` (the statement's `Routing::wish`) takes the place of
//! `topology::route` where there is a choice (`rules::RouteWish::route`, which follows it only
//! where correctness allows); a statement that stays where the session is (it holds a slot
//! or backend, or there is nothing to route between) counts the wish as overridden when it
//! does not fit (`rules::RouteWish::stays_on`).
//!
//! Read-your-writes: `track_write` keeps the union of the session's write GTIDs; with
//! `read_your_writes = wait` a close replica first runs `topology::wait`'s statement
//! (`replica_reached`) and the read falls back to the writer on timeout.

use std::time::Instant;

use super::Session;
use crate::classify::ReadSafety;
use crate::context::{backend_target_for, route_config};
use crate::protocol::{codes, ErrPacket};
use crate::rules::RouteWish;
use crate::topology::{
    self, CheckFailure, Exclusion, GtidPosition, MinGtid, NoWriter, Override, Role, Route,
    RouteInput, SessionFacts, ToWriter, Transaction,
};

/// What a statement tells the router: read from a query's classification, or from a
/// prepared statement's text once, at PREPARE.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pending {
    pub(crate) read: ReadSafety,
    /// The `sluice:min_gtid` token's text, if any.
    pub(crate) min_gtid: Option<Box<str>>,
    /// It reads what the previous statement left (its diagnostics, FOUND_ROWS()).
    pub(crate) reads_previous: bool,
}

/// What a command that is no classified statement tells the router: nothing, so it runs
/// where the session is, or on the writer.
pub(super) static NO_ROUTE: Pending = Pending {
    read: ReadSafety::WriterOnly(crate::classify::WriterOnly::NotARead),
    min_gtid: None,
    reads_previous: false,
};

impl Pending {
    /// What a classified query (or a prepared statement's text) tells the router.
    pub(crate) fn of(class: &crate::classify::Classification) -> Pending {
        use crate::classify::Effect;
        Pending {
            read: class.read,
            min_gtid: class.min_gtid.clone(),
            reads_previous: class
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Diagnostics(_) | Effect::FoundRows)),
        }
    }
}

/// One statement's routing: what it tells the router, and what routing found. Part of the
/// statement (`session::statement::Statement`), so nothing of it outlives that statement.
pub(super) struct Routing<'a> {
    pub(crate) pending: &'a Pending,
    /// `Session::route_ahead` chose the server already: the acquire that follows keeps it.
    pub(crate) routed: bool,
    /// The statement was routed to a replica (`Route::Replica`, `Route::WaitOnReplica`).
    pub(crate) on_replica: bool,
    /// A server routing must avoid: a replica that just failed this read.
    pub(crate) avoid: Option<usize>,
    /// `read_your_writes = wait`: the position the chosen replica must reach first.
    pub(crate) gtid_wait: Option<GtidPosition>,
    /// A query rule's `route` for the statement (`None`: the router's own choice).
    pub(crate) wish: Option<RouteWish>,
}

impl<'a> Routing<'a> {
    pub(crate) fn new(pending: &'a Pending) -> Routing<'a> {
        Routing {
            pending,
            routed: false,
            on_replica: false,
            avoid: None,
            gtid_wait: None,
            wish: None,
        }
    }
}

impl Session {
    /// Routes the statement about to run before anything is taken, so that pipelining can
    /// look for a batch in the routed server's pool (each server has its own batches); the
    /// acquire that follows keeps this route instead of choosing again.
    pub(super) async fn route_ahead(&mut self, route: &mut Routing<'_>) -> Result<(), ErrPacket> {
        if let Some(avoid) = self.route_begin(route) {
            self.route_statement(route, avoid).await?;
        }
        route.routed = true;
        Ok(())
    }

    /// A read that starts holding nothing (no slot, no backend, no transaction) may run
    /// once more on another server when its replica fails before the client saw a byte.
    pub(super) fn holds_nothing(&self) -> bool {
        self.held.backend.is_none() && self.held.slot.is_none() && !self.state.in_transaction()
    }

    /// Starts routing the statement about to run: `Some` with the server to avoid when
    /// there is a choice to make, `None` when there is none (routed ahead already; without
    /// a topology, one server, split off, it is always server 0; a session that holds a
    /// slot or backend stays).
    pub(super) fn route_begin(&mut self, route: &mut Routing<'_>) -> Option<Option<usize>> {
        if std::mem::take(&mut route.routed) {
            return None;
        }
        let avoid = route.avoid.take();
        route.on_replica = false;
        route.gtid_wait = None;
        if !self.config.uses_topology() {
            if route.wish.is_some() {
                self.wish_stays(route);
            }
            return None;
        }
        // A replica's backend kept only for the diagnostics of the read before stays for a
        // read, or for what reads the state that read left (SHOW WARNINGS, FOUND_ROWS());
        // anything else goes elsewhere, and the backend goes (its diagnostics with it: a
        // later read finds none). The writer's stays, as it can run anything.
        let pending = route.pending;
        let stays = pending.read == ReadSafety::ReplicaSafe || pending.reads_previous;
        let diagnostics_only = self.held.slot.is_none() && !self.state.keeps_backend() && !stays;
        if diagnostics_only
            && self.held.backend.is_some()
            && Some(self.held.server) != self.ctx.topology().topology.writer()
        {
            self.state.warnings_pending = false;
            self.held.backend = None;
            self.held.place = None;
        }
        if self.held.slot.is_some() || self.held.backend.is_some() {
            if route.wish.is_some() {
                self.wish_stays(route);
            }
            return None;
        }
        Some(avoid)
    }

    /// The statement runs where the session is without routing: a rule's route for
    /// elsewhere is overridden (pinned, in a transaction or holding what it keeps there, or
    /// with nothing to route between).
    fn wish_stays(&self, route: &Routing<'_>) {
        let Some(wish) = &route.wish else {
            return;
        };
        let why = if self.state.pin_reason().is_some() {
            Override::Pinned
        } else if self.held.slot.is_some() || self.held.backend.is_some() {
            Override::Transaction
        } else {
            Override::NoReplica
        };
        wish.stays_on(self.held.server, &self.ctx.topology().topology, why);
    }

    /// Picks the server for the statement about to run (`route_begin` said there is a
    /// choice, and which server to `avoid`) and points the session's target at it.
    pub(super) async fn route_statement(
        &mut self,
        route: &mut Routing<'_>,
        avoid: Option<usize>,
    ) -> Result<(), ErrPacket> {
        let pending = route.pending;
        // `Some(None)`: a token that is not a GTID position (the read goes to the writer).
        let token = pending
            .min_gtid
            .as_deref()
            .map(|text| GtidPosition::parse_any(text).ok());
        let settings = route_config(&self.config);
        let deadline = Instant::now() + self.config.writer_wait_timeout;
        let mut rx = self.ctx.topology_watch();
        loop {
            let mut snapshot = rx.borrow_and_update().clone();
            if let Some(failed) = avoid.filter(|&i| Some(i) != snapshot.topology.writer()) {
                // The replica that just failed this read: out until the monitor says more.
                let s = std::sync::Arc::make_mut(&mut snapshot);
                if let Some(view) = s.topology.servers.get_mut(failed) {
                    view.role = Role::Excluded(Exclusion::CheckFailed(CheckFailure::Unreachable));
                }
            }
            let queued = self.ctx.queued();
            let input = RouteInput {
                statement: pending.read,
                session: SessionFacts {
                    pinned: self.state.pin_reason().is_some(),
                    transaction: if self.state.in_transaction() {
                        Transaction::ReadWrite
                    } else {
                        Transaction::None
                    },
                    last_write: self.memory.last_write.as_ref(),
                    min_gtid: match &token {
                        None => MinGtid::None,
                        Some(Some(p)) => MinGtid::At(p),
                        Some(None) => MinGtid::Unreadable,
                    },
                },
                config: &settings,
                topology: &snapshot.topology,
                queued: &queued,
                tie_break: self.reg.info.id as usize ^ self.memory.route_count,
            };
            self.memory.route_count = self.memory.route_count.wrapping_add(1);
            let routed = match &route.wish {
                Some(wish) => wish.route(&input),
                None => topology::route(&input),
            };
            let (index, route, why) = match routed {
                Route::Writer { index, why } => {
                    if why == ToWriter::ReadYourWritesFallback {
                        crate::stats::Stats::incr(&self.ctx.stats.ryw_fallbacks);
                    }
                    (index, "writer", why.label())
                }
                Route::Replica { index } => {
                    route.on_replica = true;
                    (index, "replica", "read")
                }
                Route::Held { index } => (index, "held", "read_only_transaction"),
                Route::WaitOnReplica { index, until } => {
                    // `acquire` runs the wait on the replica's backend, then the read there
                    // or, on timeout, on the writer (`fall_back_to_writer`).
                    route.gtid_wait = Some(until);
                    route.on_replica = true;
                    (index, "wait_replica", "read")
                }
                Route::NoWriter { state, .. } => {
                    self.wait_for_topology(&mut rx, deadline, Some(&state))
                        .await?;
                    continue;
                }
                Route::NoReplica => {
                    self.wait_for_topology(&mut rx, deadline, None).await?;
                    continue;
                }
            };
            self.ctx.stats.routed(index, route, why);
            self.use_server(index);
            return Ok(());
        }
    }

    /// Read-your-writes: the union of every write GTID the session's OKs reported (MariaDB
    /// `last_gtid`, MySQL OWN_GTID), so a later read goes only where all of them are.
    pub(super) fn track_write(&mut self, summary: &crate::protocol::ResponseSummary) {
        let Some(report) = crate::protocol::last_write_gtid(&summary.state_changes) else {
            return;
        };
        let Ok(text) = std::str::from_utf8(report.text()) else {
            return;
        };
        let Ok(position) = GtidPosition::parse_any(text.trim()) else {
            return;
        };
        match &mut self.memory.last_write {
            Some(have) if have.flavor() == position.flavor() => have.include(&position),
            other => *other = Some(position),
        }
    }

    /// `read_your_writes = wait`: runs the GTID wait on the replica backend just checked
    /// out; whether the replica reached the position within `gtid_wait_timeout`.
    pub(super) async fn replica_reached(&mut self, until: &GtidPosition) -> bool {
        let sql = topology::wait::gtid_wait_statement(until, self.config.gtid_wait_timeout);
        let Some(b) = self.held.backend.as_mut() else {
            return false;
        };
        match b.query_rows(&sql).await {
            Ok(Ok(result)) => {
                let cell = result.rows.first().and_then(|r| r.first());
                topology::wait::WaitOutcome::from_cell(cell.and_then(|c| c.as_deref()))
                    == topology::wait::WaitOutcome::Reached
            }
            Ok(Err(_)) => false,
            Err(_) => {
                b.health = crate::conn::backend::Health::Broken;
                false
            }
        }
    }

    /// The replica did not reach the session's write in time: give its slot and backend
    /// back and run the read on the writer (counted as a read-your-writes fallback).
    pub(super) fn fall_back_to_writer(&mut self, route: &mut Routing<'_>) -> Result<(), ErrPacket> {
        self.held.backend = None;
        self.held.slot = None;
        route.on_replica = false;
        crate::stats::Stats::incr(&self.ctx.stats.ryw_fallbacks);
        let snapshot = self.ctx.topology();
        let Some(writer) = snapshot.topology.writer() else {
            let state = match &snapshot.topology.verdict {
                topology::Verdict::NoWriter(state) => Some(state.clone()),
                topology::Verdict::Writer { .. } => None,
            };
            return Err(no_server_error(state.as_ref(), &self.config));
        };
        let why = ToWriter::ReadYourWritesFallback.label();
        self.ctx.stats.routed(writer, "writer", why);
        self.use_server(writer);
        Ok(())
    }

    /// Before a pinning statement reserves its place: the place is the writer's.
    pub(super) fn use_writer_for_pin(&mut self, writer: usize) {
        if self.config.uses_topology() {
            self.use_server(writer);
        }
    }

    /// The session's statements run on server `index` from now on.
    fn use_server(&mut self, index: usize) {
        if self.held.server != index && index < self.config.endpoints().len() {
            self.held.server = index;
            self.held.target = backend_target_for(&self.config, &self.login.user, &self.ctx, index);
        }
    }

    /// Waits for the next topology until `deadline`; then the read-only error.
    async fn wait_for_topology(
        &self,
        rx: &mut tokio::sync::watch::Receiver<std::sync::Arc<topology::task::Snapshot>>,
        deadline: Instant,
        no_writer: Option<&NoWriter>,
    ) -> Result<(), ErrPacket> {
        let changed = tokio::time::timeout_at(deadline.into(), rx.changed()).await;
        match changed {
            Ok(Ok(())) => Ok(()),
            // Timed out, or the monitor is gone (shutdown): nothing will change.
            _ => Err(no_server_error(no_writer, &self.config)),
        }
    }
}

/// 1290 (HY000), naming the state and the setting that bounded the wait.
fn no_server_error(no_writer: Option<&NoWriter>, config: &crate::config::Config) -> ErrPacket {
    let wait = super::fmt_ms(config.writer_wait_timeout);
    let msg = match no_writer {
        Some(NoWriter::Ambiguous { candidates }) => format!(
            "sluice has no writer: {} servers are writable and replicate from nobody (split brain: servers {candidates:?}); sluice does not guess which is right. Waited writer_wait_timeout {wait}. Make all but one read-only (SET GLOBAL read_only=1) or a replica, then retry",
            candidates.len()
        ),
        Some(NoWriter::Unreachable { writer }) => format!(
            "sluice has no writer: the writer (server {writer}) is unreachable and no other server may take its place. Waited writer_wait_timeout {wait}; retry once a server is the one writable primary"
        ),
        Some(NoWriter::NoCandidate) => format!(
            "sluice has no writer: no server is writable and not replicating (a switchover in progress?). Waited writer_wait_timeout {wait}; retry once one server is the primary"
        ),
        None => format!(
            "sluice has no usable replica for this read (primary_reads = never). Waited writer_wait_timeout {wait}; retry, or set primary_reads = fallback"
        ),
    };
    ErrPacket::from_code(codes::OPTION_PREVENTS_STATEMENT, msg.as_bytes())
}
