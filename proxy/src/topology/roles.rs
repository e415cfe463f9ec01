//! Roles from observations: which server is the writer, which replicas may take reads, and
//! why the others may not. Pure: observations and the last round's [`Memory`] in, a
//! [`Topology`] out.
//!
//! # The writer
//! A writer candidate is a server that answered, has `read_only=OFF` and replicates from
//! nobody. The rules, in order:
//! 1. The agreed writer (last round's) stays the writer while it is the only candidate. If
//!    any other server is a candidate too (split brain, e.g. an old primary that came back
//!    writable), there is **no writer**: every candidate, the agreed one included, is a
//!    *competing writer* that gets no writes and no reads ([`NoWriter::Ambiguous`]), the
//!    split-brain alert is raised, and the others are remembered as rivals. sluice does not
//!    guess which side is right; writes wait until only one remains.
//! 2. A new writer is agreed only when it is the *only* candidate and not a rival. So a
//!    failover (the old writer unreachable, one replica promoted) is followed, while two
//!    writable servers are never settled by guessing: writes wait ([`NoWriter::Ambiguous`]).
//! 3. A rival stops being one only when it is seen read-only or replicating, or when the
//!    agreed writer is seen stepping down (read-only or replicating: a switchover in
//!    progress). A rival is never promoted because the writer merely *failed a check*: one
//!    lost probe must not hand writes to a server that was competing with it (the flap
//!    ProxySQL users report when a `read_only` check times out).
//! 4. With no memory (sluice just started), several candidates are ambiguous too.
//!
//! # Replicas
//! A server that is not the writer takes reads only if it answered, replicates (IO thread
//! connected, SQL thread running), has `read_only=ON`, knows its lag (NULL is unknown, never
//! zero), lags at most `max_replica_lag` counted along its chain of sources, and does not
//! follow a competing writer or a broken relay. Each other case has its own
//! [`Exclusion`].

use std::collections::BTreeSet;
use std::time::Duration;

use super::gtid::GtidPosition;
use super::observation::{CheckFailure, IoThread, Observation, ServerState};

/// The limits a routing decision applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A replica lagging more than this (along its chain of sources) takes no reads.
    pub max_replica_lag: Duration,
}

/// What the last round agreed on; carried from one round to the next. Indexes are positions
/// in the configured server list: start from `Memory::default()` when the list changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// The agreed writer.
    pub writer: Option<usize>,
    /// Servers seen writable and replicating from nobody while `writer` was agreed.
    pub rivals: BTreeSet<usize>,
}

/// One server's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Writer,
    /// May take reads.
    Replica,
    Excluded(Exclusion),
}

/// Why a server takes neither writes nor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// The monitor check failed.
    CheckFailed(CheckFailure),
    /// Writable and replicating from nobody while another server is (or several are) the
    /// writer: split brain.
    CompetingWriter,
    /// `read_only=OFF` while replicating: writes may land on it that its source never has.
    WritableReplica,
    /// `read_only=ON` and replicating from nobody (no replication configured): its data
    /// follows no writer. Also a writer stepping down in a switchover.
    NotReplicating,
    SqlThreadStopped,
    IoThreadStopped,
    /// The IO thread runs but is not connected to its source (the source is down).
    IoThreadConnecting,
    /// `Seconds_Behind_Master` is NULL.
    LagUnknown,
    LagTooHigh {
        lag: Duration,
    },
    /// Replicates from a competing writer.
    FollowsCompetingWriter,
    /// Its source is a replica whose own replication is broken (a thread stopped, lag
    /// unknown) or its chain of sources loops.
    SourceBroken,
}

impl std::fmt::Display for Exclusion {
    /// The reason as SHOW SERVERS shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exclusion::CheckFailed(why) => write!(f, "monitor check failed: {why}"),
            Exclusion::CompetingWriter => f.write_str("competing writer (split brain)"),
            Exclusion::WritableReplica => f.write_str("read_only=OFF while replicating"),
            Exclusion::NotReplicating => f.write_str("read-only and replicating from nobody"),
            Exclusion::SqlThreadStopped => f.write_str("SQL thread stopped"),
            Exclusion::IoThreadStopped => f.write_str("IO thread stopped"),
            Exclusion::IoThreadConnecting => f.write_str("IO thread not connected to its source"),
            Exclusion::LagUnknown => f.write_str("lag unknown (Seconds_Behind_Master is NULL)"),
            Exclusion::LagTooHigh { lag } => {
                write!(f, "lag {} s over max_replica_lag", lag.as_secs())
            }
            Exclusion::FollowsCompetingWriter => f.write_str("replicates from a competing writer"),
            Exclusion::SourceBroken => f.write_str("its source's replication is broken"),
        }
    }
}

/// The cluster's verdict on writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Writes go to `index`. `rivals` is always empty since split brain means no writer
    /// (kept so that callers need not change).
    Writer { index: usize, rivals: Vec<usize> },
    /// Writes wait (up to `writer_wait_timeout`), then fail as read-only.
    NoWriter(NoWriter),
}

/// Why there is no writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoWriter {
    /// The agreed writer's check failed and no other server may take its place.
    Unreachable { writer: usize },
    /// Every server that answered is read-only or replicating (a switchover in progress),
    /// or none answered.
    NoCandidate,
    /// Several servers are writable and replicate from nobody, and none of them is the
    /// agreed writer: sluice does not guess which one is right.
    Ambiguous { candidates: Vec<usize> },
}

/// What a round found that an operator must hear about (logged, counted in /metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alert {
    /// Servers writable and replicating from nobody besides the agreed writer (there is no
    /// writer while this lasts).
    SplitBrain { writer: usize, rivals: Vec<usize> },
    /// Several such servers and no agreed writer: no writes until it is resolved.
    Ambiguous { candidates: Vec<usize> },
    /// A replica with `read_only=OFF`.
    WritableReplica { index: usize },
}

/// One server as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerView {
    pub role: Role,
    /// Lag along its chain of sources (zero for the writer); `None` if unknown.
    pub lag: Option<Duration>,
    /// What it has applied, if the check read it.
    pub position: Option<GtidPosition>,
}

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub verdict: Verdict,
    /// In the order of the observations (the configured `servers`).
    pub servers: Vec<ServerView>,
    /// What to carry into the next round.
    pub memory: Memory,
}

impl Topology {
    /// The writer's index, if there is one.
    pub fn writer(&self) -> Option<usize> {
        match self.verdict {
            Verdict::Writer { index, .. } => Some(index),
            Verdict::NoWriter(_) => None,
        }
    }

    /// This round's alerts, split brain first.
    pub fn alerts(&self) -> Vec<Alert> {
        let mut alerts = match &self.verdict {
            Verdict::Writer { index, rivals } if !rivals.is_empty() => vec![Alert::SplitBrain {
                writer: *index,
                rivals: rivals.clone(),
            }],
            Verdict::NoWriter(NoWriter::Ambiguous { candidates }) => {
                match self.memory.writer.filter(|w| candidates.contains(w)) {
                    // The agreed writer is still writable and others are too.
                    Some(writer) => vec![Alert::SplitBrain {
                        writer,
                        rivals: candidates
                            .iter()
                            .copied()
                            .filter(|&c| c != writer)
                            .collect(),
                    }],
                    None => vec![Alert::Ambiguous {
                        candidates: candidates.clone(),
                    }],
                }
            }
            _ => Vec::new(),
        };
        for (index, server) in self.servers.iter().enumerate() {
            if server.role == Role::Excluded(Exclusion::WritableReplica) {
                alerts.push(Alert::WritableReplica { index });
            }
        }
        alerts
    }

    /// Indexes of the replicas that may take reads.
    pub fn usable_replicas(&self) -> impl Iterator<Item = usize> + '_ {
        self.servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.role == Role::Replica)
            .map(|(i, _)| i)
    }
}

/// Decides this round's roles from `observations` (index = server) and last round's memory.
pub fn decide(prev: &Memory, observations: &[Observation], limits: &Limits) -> Topology {
    let state = |i: usize| observations.get(i).and_then(|o| o.as_ref().ok());
    let candidates: Vec<usize> = (0..observations.len())
        .filter(|&i| state(i).is_some_and(ServerState::is_writer_candidate))
        .collect();
    let (memory, verdict) = writer_verdict(prev, &candidates, |i| state(i).is_some());
    let competing: BTreeSet<usize> = match &verdict {
        Verdict::Writer { index, .. } => {
            candidates.iter().copied().filter(|c| c != index).collect()
        }
        Verdict::NoWriter(_) => candidates.iter().copied().collect(),
    };
    let writer = match verdict {
        Verdict::Writer { index, .. } => Some(index),
        Verdict::NoWriter(_) => None,
    };
    let servers = (0..observations.len())
        .map(|i| view(i, observations, writer, &competing, limits))
        .collect();
    Topology {
        verdict,
        servers,
        memory,
    }
}

/// Rules 1 to 4 of the module docs.
fn writer_verdict(
    prev: &Memory,
    candidates: &[usize],
    answered: impl Fn(usize) -> bool,
) -> (Memory, Verdict) {
    let is_candidate = |i: usize| candidates.contains(&i);
    let mut memory = prev.clone();
    // A rival that answered and is no longer a candidate has been put right.
    memory.rivals.retain(|&r| !answered(r) || is_candidate(r));
    if let Some(w) = memory.writer {
        if answered(w) && !is_candidate(w) {
            // The writer stepped down: whatever competes now does so on equal terms.
            memory.writer = None;
            memory.rivals.clear();
        }
    }
    if let Some(w) = memory.writer.filter(|&w| is_candidate(w)) {
        let rivals: Vec<usize> = candidates.iter().copied().filter(|&c| c != w).collect();
        if rivals.is_empty() {
            return (memory, Verdict::Writer { index: w, rivals });
        }
        // Split brain: no writer at all, not even the agreed one (writes that land on
        // either side may be lost, so none are sent until one remains).
        memory.rivals.extend(rivals.iter().copied());
        let verdict = Verdict::NoWriter(NoWriter::Ambiguous {
            candidates: candidates.to_vec(),
        });
        return (memory, verdict);
    }
    match candidates {
        [only] if !memory.rivals.contains(only) => {
            memory.writer = Some(*only);
            let verdict = Verdict::Writer {
                index: *only,
                rivals: Vec::new(),
            };
            (memory, verdict)
        }
        [] => {
            let reason = match memory.writer {
                Some(writer) => NoWriter::Unreachable { writer },
                None => NoWriter::NoCandidate,
            };
            (memory, Verdict::NoWriter(reason))
        }
        several => {
            // Only rivals are writable while the agreed writer is unreachable.
            if let Some(writer) = memory.writer {
                if several.iter().all(|c| memory.rivals.contains(c)) {
                    return (memory, Verdict::NoWriter(NoWriter::Unreachable { writer }));
                }
            }
            let verdict = Verdict::NoWriter(NoWriter::Ambiguous {
                candidates: several.to_vec(),
            });
            (memory, verdict)
        }
    }
}

fn view(
    i: usize,
    observations: &[Observation],
    writer: Option<usize>,
    competing: &BTreeSet<usize>,
    limits: &Limits,
) -> ServerView {
    let state = match &observations[i] {
        Ok(state) => state,
        Err(failure) => {
            return ServerView {
                role: Role::Excluded(Exclusion::CheckFailed(*failure)),
                lag: None,
                position: None,
            }
        }
    };
    let excluded = |x: Exclusion, lag: Option<Duration>| ServerView {
        role: Role::Excluded(x),
        lag,
        position: Some(state.position.clone()),
    };
    if writer == Some(i) {
        return ServerView {
            role: Role::Writer,
            lag: Some(Duration::ZERO),
            position: Some(state.position.clone()),
        };
    }
    if competing.contains(&i) {
        return excluded(Exclusion::CompetingWriter, None);
    }
    if let Err(x) = own_replication(state) {
        let lag = state.replication.as_ref().and_then(|r| r.lag);
        return excluded(x, lag);
    }
    match chain_lag(i, observations, writer, competing) {
        Err(x) => excluded(x, None),
        Ok(lag) if lag > limits.max_replica_lag => {
            excluded(Exclusion::LagTooHigh { lag }, Some(lag))
        }
        Ok(lag) => ServerView {
            role: Role::Replica,
            lag: Some(lag),
            position: Some(state.position.clone()),
        },
    }
}

/// The server's own replication, before its sources are looked at; the first problem by
/// priority (the misconfiguration first: it raises an alert).
fn own_replication(state: &ServerState) -> Result<Duration, Exclusion> {
    let Some(r) = &state.replication else {
        return Err(Exclusion::NotReplicating);
    };
    if !state.read_only {
        return Err(Exclusion::WritableReplica);
    }
    if !r.sql_running {
        return Err(Exclusion::SqlThreadStopped);
    }
    match r.io {
        IoThread::Stopped => return Err(Exclusion::IoThreadStopped),
        IoThread::Connecting => return Err(Exclusion::IoThreadConnecting),
        IoThread::Running => {}
    }
    r.lag.ok_or(Exclusion::LagUnknown)
}

/// Lag of replica `i` plus that of each replica it replicates through, up to the writer, a
/// server with no replication configured (a writer stepping down), a server sluice does not
/// monitor, or one whose check failed (its replicas' own IO threads say whether the link
/// works). A relay with its threads stopped is broken, not a root: its replicas would
/// report no lag while they fall behind.
fn chain_lag(
    i: usize,
    observations: &[Observation],
    writer: Option<usize>,
    competing: &BTreeSet<usize>,
) -> Result<Duration, Exclusion> {
    let by_server_id = |id: u32| {
        observations
            .iter()
            .position(|o| o.as_ref().is_ok_and(|s| s.server_id == id))
    };
    let mut total = Duration::ZERO;
    let mut current = i;
    let mut visited = BTreeSet::from([i]);
    loop {
        let Ok(state) = &observations[current] else {
            return Ok(total);
        };
        let Some(r) = &state.replication else {
            return Ok(total);
        };
        if current != i {
            // A relay: its own link must work for ours to mean anything.
            total += own_replication_relay(state)?;
        } else {
            total += r.lag.unwrap_or_default();
        }
        let Some(source) = r.source_server_id.and_then(by_server_id) else {
            return Ok(total);
        };
        if competing.contains(&source) {
            return Err(Exclusion::FollowsCompetingWriter);
        }
        if writer == Some(source) {
            return Ok(total);
        }
        if !visited.insert(source) {
            return Err(Exclusion::SourceBroken);
        }
        current = source;
    }
}

/// A relay's own lag, or why its replicas are cut off from the writer.
fn own_replication_relay(state: &ServerState) -> Result<Duration, Exclusion> {
    match own_replication(state) {
        Ok(lag) => Ok(lag),
        // A relay's read_only does not change what its replicas have.
        Err(Exclusion::WritableReplica) => state
            .replication
            .as_ref()
            .filter(|r| r.sql_running && r.io == IoThread::Running)
            .and_then(|r| r.lag)
            .ok_or(Exclusion::SourceBroken),
        Err(_) => Err(Exclusion::SourceBroken),
    }
}
