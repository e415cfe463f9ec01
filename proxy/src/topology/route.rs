//! Where one statement goes: [`route`], the one function that holds every routing rule of
//! the read/write split. Pure: the statement's [`ReadSafety`], the session's facts, the
//! routing settings and the latest [`Topology`] in, a [`Route`] out, so each rule has a row
//! in the table test below.
//!
//! # The rules, in order
//! 1. A statement inside a transaction that already has a backend stays on it
//!    ([`Route::Held`]): a transaction lives on one connection.
//! 2. `read_write_split = off`: everything goes to the writer (as with one server).
//! 3. A pinned session, a read-write transaction, and every statement the classifier cannot
//!    prove replica-safe go to the writer.
//! 4. Reads (autocommit replica-safe statements, and `START TRANSACTION READ ONLY`) go to a
//!    usable replica ([`Role::Replica`]: answered its check, threads running, lag known and
//!    within `max_replica_lag`, which [`super::roles::decide`] already applied) whose
//!    monitored position covers what the session requires (read-your-writes), the shortest
//!    FIFO queue first, then the lowest lag ([`choose_replica`]).
//!    With `primary_reads = always` the writer competes too; with `never` it takes only
//!    read-your-writes fallbacks.
//! 5. No replica covers the requirement: with `read_your_writes = wait`, a replica whose lag
//!    is within `gtid_wait_timeout` first waits for the position
//!    ([`Route::WaitOnReplica`]); otherwise the read goes to the writer
//!    ([`ToWriter::ReadYourWritesFallback`]).
//! 6. No usable replica at all: the writer (`primary_reads = fallback | always`), or the
//!    read waits for one ([`Route::NoReplica`], `never`).
//! 7. Whatever goes to the writer while there is none waits for one
//!    ([`Route::NoWriter`], up to `writer_wait_timeout`); sluice never guesses a writer.
//!
//! # A query rule's wish
//! [`route_wished`] takes a rule's `route` (writer, any replica, one server) as one more
//! input. It changes only what the rules above leave free: a held read-only transaction
//! stays held; the writer is always allowed; a replica is allowed only for a replica-safe
//! statement of a session that is neither pinned nor in a read-write transaction, on a
//! usable replica that has the session's writes (read-your-writes). Otherwise the statement
//! goes where [`route`] sends it, and the caller learns why ([`Override`]).
//!
//! # Read-your-writes
//! The requirement is the session's last write GTID (`read_your_writes = session | wait`)
//! and the statement's `/* sluice:min_gtid=... */` token (honoured in every mode: the
//! application asked for it). Without a token there is no guarantee across sessions.

use std::time::Duration;

use super::choose::{choose_replica, Candidate};
use super::gtid::GtidPosition;
use super::roles::{NoWriter, Role, Topology, Verdict};
use crate::classify::{ReadSafety, WriterOnly};
pub use crate::config::RouteTarget;

// The three setting values are the config's own types (config depends on nothing above
// it; the router reads them as they are).
pub use crate::config::{PrimaryReads, ReadWriteSplit, ReadYourWrites};

/// The routing settings (from `Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteConfig {
    pub read_write_split: ReadWriteSplit,
    pub primary_reads: PrimaryReads,
    pub read_your_writes: ReadYourWrites,
    /// `gtid_wait_timeout`: how long a `wait` may wait; also how close (in lag) a replica
    /// must be to be asked to. Default: 100 ms.
    pub gtid_wait_timeout: Duration,
}

/// The session's transaction, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transaction {
    /// Autocommit, no transaction open.
    None,
    /// An open transaction that may write (BEGIN, START TRANSACTION, autocommit=0).
    ReadWrite,
    /// An open `START TRANSACTION READ ONLY` running on server `index`.
    ReadOnly { index: usize },
}

/// A `sluice:min_gtid` token, as the session read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinGtid<'a> {
    None,
    At(&'a GtidPosition),
    /// The token's text is not a GTID position (the read goes to the writer, the safe side).
    Unreadable,
}

/// What the session knows about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFacts<'a> {
    /// Pinned to its backend (temporary table, lock, ...): it must stay on the writer.
    pub pinned: bool,
    pub transaction: Transaction,
    /// The position of the session's last write (union of what its OKs reported).
    pub last_write: Option<&'a GtidPosition>,
    pub min_gtid: MinGtid<'a>,
}

/// Everything [`route`] decides from.
#[derive(Debug, Clone, Copy)]
pub struct RouteInput<'a> {
    /// The classifier's verdict on the statement (`Classification::read`).
    pub statement: ReadSafety,
    pub session: SessionFacts<'a>,
    pub config: &'a RouteConfig,
    /// The latest published topology (roles, lag, positions; index = configured server).
    pub topology: &'a Topology,
    /// Statements queued for or running on each server's slots (index = server; missing
    /// means 0), from the pool.
    pub queued: &'a [usize],
    /// A value that changes from call to call (e.g. a counter), to spread ties.
    pub tie_break: usize,
}

/// Where the statement goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Run it on the writer.
    Writer { index: usize, why: ToWriter },
    /// Run it on this replica.
    Replica { index: usize },
    /// Run `wait::gtid_wait_statement(until, gtid_wait_timeout)` on this replica first;
    /// if it reports a timeout, run the statement on the writer instead
    /// ([`ToWriter::ReadYourWritesFallback`]).
    WaitOnReplica { index: usize, until: GtidPosition },
    /// Stay on the server the open transaction runs on.
    Held { index: usize },
    /// It must go to the writer and there is none: wait (in the FIFO queue) up to
    /// `writer_wait_timeout` for the next topology with one, then fail read-only.
    NoWriter { why: ToWriter, state: NoWriter },
    /// A read with `primary_reads = never` and no usable replica: wait for one like for a
    /// writer.
    NoReplica,
}

/// Why a statement goes to the writer (a closed set, for /metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToWriter {
    SplitOff,
    Pinned,
    InTransaction,
    /// The classifier could not prove it replica-safe.
    NotSafe(WriterOnly),
    /// No usable replica has the session's write (or the token's position).
    ReadYourWritesFallback,
    /// No usable replica.
    NoReplica,
    /// `primary_reads = always` and the writer was the best candidate.
    PrimaryReads,
    /// The `sluice:min_gtid` token did not parse.
    UnreadableToken,
    /// A query rule asked for the writer (`route = writer`).
    Rule,
}

impl ToWriter {
    /// The label for /metrics (`reason="..."`).
    pub fn label(&self) -> &'static str {
        match self {
            ToWriter::SplitOff => "split_off",
            ToWriter::Pinned => "pinned",
            ToWriter::InTransaction => "in_transaction",
            ToWriter::NotSafe(_) => "not_safe",
            ToWriter::ReadYourWritesFallback => "ryw_fallback",
            ToWriter::NoReplica => "no_replica",
            ToWriter::PrimaryReads => "primary_reads",
            ToWriter::UnreadableToken => "unreadable_token",
            ToWriter::Rule => "rule",
        }
    }
}

/// Decides where one statement goes (the rules in the module docs, in order).
pub fn route(input: &RouteInput<'_>) -> Route {
    let RouteInput {
        statement,
        session,
        config,
        topology,
        ..
    } = *input;
    let to_writer = |why: ToWriter| match &topology.verdict {
        Verdict::Writer { index, .. } => Route::Writer { index: *index, why },
        Verdict::NoWriter(state) => Route::NoWriter {
            why,
            state: state.clone(),
        },
    };
    if let Transaction::ReadOnly { index } = session.transaction {
        return Route::Held { index };
    }
    if config.read_write_split == ReadWriteSplit::Off {
        return to_writer(ToWriter::SplitOff);
    }
    if session.pinned {
        return to_writer(ToWriter::Pinned);
    }
    if session.transaction == Transaction::ReadWrite {
        return to_writer(ToWriter::InTransaction);
    }
    if let ReadSafety::WriterOnly(why) = statement {
        return to_writer(ToWriter::NotSafe(why));
    }
    match required(input) {
        Some(required) => read(input, &required, to_writer),
        None => to_writer(ToWriter::UnreadableToken),
    }
}

/// The positions a read must see: the session's last write (unless read_your_writes is
/// off) and the statement's token; `None` when the token does not parse.
fn required<'a>(input: &RouteInput<'a>) -> Option<Vec<&'a GtidPosition>> {
    let session = input.session;
    let token = match session.min_gtid {
        MinGtid::None => None,
        MinGtid::At(p) => Some(p),
        MinGtid::Unreadable => return None,
    };
    let own = match input.config.read_your_writes {
        ReadYourWrites::Off => None,
        ReadYourWrites::Session | ReadYourWrites::Wait => session.last_write,
    };
    let required = [own, token]
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .collect();
    Some(required)
}

/// Why a rule's route wish was not followed (a closed set, for logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Override {
    /// The session's transaction runs where it runs.
    Transaction,
    Pinned,
    /// The classifier could not prove the statement safe on a replica.
    NotReplicaSafe,
    /// No usable replica (or not the one named) has what the session must read.
    NoReplica,
    /// The statement's `sluice:min_gtid` token does not parse: only the writer is safe.
    UnreadableToken,
}

impl Override {
    pub fn label(self) -> &'static str {
        match self {
            Override::Transaction => "transaction",
            Override::Pinned => "pinned",
            Override::NotReplicaSafe => "not_replica_safe",
            Override::NoReplica => "no_usable_replica",
            Override::UnreadableToken => "unreadable_token",
        }
    }
}

/// [`route`] with a query rule's wish (module docs): the route, and `Err` with the reason
/// when the wish was not followed.
pub fn route_wished(input: &RouteInput<'_>, wish: RouteTarget) -> (Route, Result<(), Override>) {
    let topology = input.topology;
    let writer = topology.writer();
    let role = |i: usize| topology.servers.get(i).map(|s| s.role);
    if let Transaction::ReadOnly { index } = input.session.transaction {
        let held_fits = match wish {
            RouteTarget::Writer => writer == Some(index),
            RouteTarget::Replica => role(index) == Some(Role::Replica),
            RouteTarget::Server(i) => i == index,
        };
        let outcome = if held_fits {
            Ok(())
        } else {
            Err(Override::Transaction)
        };
        return (Route::Held { index }, outcome);
    }
    let wants_writer = match wish {
        RouteTarget::Writer => true,
        RouteTarget::Replica => false,
        RouteTarget::Server(i) => {
            writer == Some(i) || (writer.is_none() && role(i) != Some(Role::Replica))
        }
    };
    if wants_writer {
        let route = match &topology.verdict {
            Verdict::Writer { index, .. } => Route::Writer {
                index: *index,
                why: ToWriter::Rule,
            },
            Verdict::NoWriter(state) => Route::NoWriter {
                why: ToWriter::Rule,
                state: state.clone(),
            },
        };
        return (route, Ok(()));
    }
    let refused = if input.session.pinned {
        Some(Override::Pinned)
    } else if input.session.transaction == Transaction::ReadWrite {
        Some(Override::Transaction)
    } else if !input.statement.is_replica_safe() {
        Some(Override::NotReplicaSafe)
    } else {
        None
    };
    let Some(required) = required(input).filter(|_| refused.is_none()) else {
        return (
            route(input),
            Err(refused.unwrap_or(Override::UnreadableToken)),
        );
    };
    let chosen = match wish {
        RouteTarget::Server(i) => {
            let covers = |s: &super::roles::ServerView| {
                required
                    .iter()
                    .all(|need| s.position.as_ref().is_some_and(|have| have.covers(need)))
            };
            let usable = topology
                .servers
                .get(i)
                .is_some_and(|s| s.role == Role::Replica && covers(s));
            usable.then_some(Route::Replica { index: i })
        }
        _ => {
            // Any replica: the split on for this statement, the writer only as a fallback.
            let config = RouteConfig {
                read_write_split: ReadWriteSplit::On,
                primary_reads: PrimaryReads::Fallback,
                ..*input.config
            };
            let forced = RouteInput {
                config: &config,
                ..*input
            };
            let to_writer = |_| Route::NoReplica;
            match read(&forced, &required, to_writer) {
                r @ (Route::Replica { .. } | Route::WaitOnReplica { .. }) => Some(r),
                _ => None,
            }
        }
    };
    match chosen {
        Some(r) => (r, Ok(())),
        None => (route(input), Err(Override::NoReplica)),
    }
}

/// Rules 4 to 6 for a read that requires `required` (all of them).
fn read(
    input: &RouteInput<'_>,
    required: &[&GtidPosition],
    to_writer: impl Fn(ToWriter) -> Route,
) -> Route {
    let topology = input.topology;
    let config = input.config;
    let writer = topology.writer();
    let queued = |i: usize| input.queued.get(i).copied().unwrap_or(0);
    let replicas: Vec<Candidate<'_>> = topology
        .servers
        .iter()
        .enumerate()
        .filter(|(_, s)| s.role == Role::Replica)
        .map(|(index, s)| Candidate {
            index,
            queued: queued(index),
            lag: s.lag.unwrap_or(Duration::MAX),
            position: s.position.as_ref(),
        })
        .collect();
    let covers = |c: &Candidate<'_>| {
        required
            .iter()
            .all(|need| c.position.is_some_and(|have| have.covers(need)))
    };
    let mut eligible: Vec<Candidate<'_>> = replicas.iter().copied().filter(covers).collect();
    if let (PrimaryReads::Always, Some(w)) = (config.primary_reads, writer) {
        // The writer has every write by definition.
        eligible.push(Candidate {
            index: w,
            queued: queued(w),
            lag: Duration::ZERO,
            position: None,
        });
    }
    match choose_replica(&eligible, None, input.tie_break) {
        Some(index) if Some(index) == writer => return to_writer(ToWriter::PrimaryReads),
        Some(index) => return Route::Replica { index },
        None => {}
    }
    if replicas.is_empty() {
        return match config.primary_reads {
            PrimaryReads::Never => Route::NoReplica,
            PrimaryReads::Fallback | PrimaryReads::Always => to_writer(ToWriter::NoReplica),
        };
    }
    if config.read_your_writes == ReadYourWrites::Wait {
        let close: Vec<Candidate<'_>> = replicas
            .iter()
            .copied()
            .filter(|c| c.position.is_some() && c.lag <= config.gtid_wait_timeout)
            .collect();
        // Reached only with a requirement: without one every replica covers it.
        let chosen = choose_replica(&close, None, input.tie_break);
        if let (Some(index), Some((first, rest))) = (chosen, required.split_first()) {
            let mut until = (*first).clone();
            for need in rest {
                until.include(need);
            }
            return Route::WaitOnReplica { index, until };
        }
    }
    to_writer(ToWriter::ReadYourWritesFallback)
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
