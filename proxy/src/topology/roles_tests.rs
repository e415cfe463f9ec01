//! Table-driven tests of [`super::roles::decide`]: single rounds, then sequences of rounds
//! that carry memory (failover, a returning old primary, split brain, flapping checks).

use std::time::Duration;

use super::gtid::GtidPosition;
use super::observation::{CheckFailure, IoThread, Observation, ReplicaStatus, ServerState};
use super::roles::{decide, Alert, Exclusion, Limits, Memory, NoWriter, Role, Verdict};

const LIMITS: Limits = Limits {
    max_replica_lag: Duration::from_secs(5),
};

fn state(id: u32, read_only: bool, replication: Option<ReplicaStatus>) -> ServerState {
    ServerState {
        server_id: id,
        read_only,
        replication,
        position: GtidPosition::parse_any(&format!("0-1-{id}")).unwrap(),
    }
}

fn status(source: u32, lag: Option<u64>) -> ReplicaStatus {
    ReplicaStatus {
        io: IoThread::Running,
        sql_running: true,
        lag: lag.map(Duration::from_secs),
        source_host: "db".into(),
        source_port: 3306,
        source_server_id: Some(source),
        last_io_errno: 0,
        last_sql_errno: 0,
    }
}

/// Writable, replicating from nobody.
fn w(id: u32) -> Observation {
    Ok(state(id, false, None))
}

/// A healthy read-only replica of `source` with `lag` seconds.
fn r(id: u32, source: u32, lag: u64) -> Observation {
    Ok(state(id, true, Some(status(source, Some(lag)))))
}

/// A replica changed by `f`.
fn r_with(id: u32, source: u32, f: impl FnOnce(&mut ServerState)) -> Observation {
    let mut s = state(id, true, Some(status(source, Some(0))));
    f(&mut s);
    Ok(s)
}

fn down() -> Observation {
    Err(CheckFailure::Unreachable)
}

fn x(e: Exclusion) -> Role {
    Role::Excluded(e)
}

fn writer(index: usize, rivals: &[usize]) -> Verdict {
    Verdict::Writer {
        index,
        rivals: rivals.to_vec(),
    }
}

fn none(reason: NoWriter) -> Verdict {
    Verdict::NoWriter(reason)
}

fn roles(t: &super::Topology) -> Vec<Role> {
    t.servers.iter().map(|s| s.role).collect()
}

#[test]
fn single_rounds() {
    use Exclusion::*;
    use Role::{Replica, Writer};
    let io = |io: IoThread| move |s: &mut ServerState| s.replication.as_mut().unwrap().io = io;
    let cases: Vec<(&str, Vec<Observation>, Verdict, Vec<Role>)> = vec![
        (
            "a primary and two healthy replicas",
            vec![w(1), r(2, 1, 0), r(3, 1, 5)],
            writer(0, &[]),
            vec![Writer, Replica, Replica],
        ),
        (
            "NULL lag is unknown, never zero",
            vec![
                w(1),
                r_with(2, 1, |s| s.replication.as_mut().unwrap().lag = None),
            ],
            writer(0, &[]),
            vec![Writer, x(LagUnknown)],
        ),
        (
            "lag over max_replica_lag",
            vec![w(1), r(2, 1, 6)],
            writer(0, &[]),
            vec![
                Writer,
                x(LagTooHigh {
                    lag: Duration::from_secs(6),
                }),
            ],
        ),
        (
            "threads stopped or not connected",
            vec![
                w(1),
                r_with(2, 1, |s| {
                    s.replication.as_mut().unwrap().sql_running = false
                }),
                r_with(3, 1, io(IoThread::Stopped)),
                r_with(4, 1, io(IoThread::Connecting)),
            ],
            writer(0, &[]),
            vec![
                Writer,
                x(SqlThreadStopped),
                x(IoThreadStopped),
                x(IoThreadConnecting),
            ],
        ),
        (
            "a failed check excludes, whatever it was",
            vec![w(1), down(), Err(CheckFailure::Refused { code: 1227 })],
            writer(0, &[]),
            vec![
                Writer,
                x(CheckFailed(CheckFailure::Unreachable)),
                x(CheckFailed(CheckFailure::Refused { code: 1227 })),
            ],
        ),
        (
            "SET GLOBAL read_only=0 on a replica: no writes, no reads, not a writer",
            vec![w(1), r_with(2, 1, |s| s.read_only = false), r(3, 1, 0)],
            writer(0, &[]),
            vec![Writer, x(WritableReplica), Replica],
        ),
        (
            "read-only and replicating from nobody",
            vec![w(1), Ok(state(2, true, None))],
            writer(0, &[]),
            vec![Writer, x(NotReplicating)],
        ),
        (
            "promoted with STOP SLAVE only (threads stopped, read_only=OFF) is the writer",
            vec![
                r_with(1, 9, |s| {
                    s.read_only = false;
                    let r = s.replication.as_mut().unwrap();
                    (r.io, r.sql_running) = (IoThread::Stopped, false);
                }),
                r(2, 1, 0),
            ],
            writer(0, &[]),
            vec![Writer, Replica],
        ),
        (
            "two writers at start: ambiguous, their replicas too",
            vec![w(1), w(2), r(3, 1, 0), r(4, 2, 0), r(5, 9, 0)],
            none(NoWriter::Ambiguous {
                candidates: vec![0, 1],
            }),
            vec![
                x(CompetingWriter),
                x(CompetingWriter),
                x(FollowsCompetingWriter),
                x(FollowsCompetingWriter),
                Replica,
            ],
        ),
        (
            "nobody writable: a switchover in progress keeps reads going",
            vec![Ok(state(1, true, None)), r(2, 1, 0), r(3, 1, 0)],
            none(NoWriter::NoCandidate),
            vec![x(NotReplicating), Replica, Replica],
        ),
        (
            "nothing answered",
            vec![down(), down()],
            none(NoWriter::NoCandidate),
            vec![
                x(CheckFailed(CheckFailure::Unreachable)),
                x(CheckFailed(CheckFailure::Unreachable)),
            ],
        ),
        (
            "a chain: lag adds up along the relays",
            vec![w(1), r(2, 1, 2), r(3, 2, 2), r(4, 3, 2)],
            writer(0, &[]),
            vec![
                Writer,
                Replica,
                Replica,
                x(LagTooHigh {
                    lag: Duration::from_secs(6),
                }),
            ],
        ),
        (
            "a chain through a broken relay",
            vec![
                w(1),
                r_with(2, 1, |s| s.replication.as_mut().unwrap().lag = None),
                r(3, 2, 0),
            ],
            writer(0, &[]),
            vec![Writer, x(LagUnknown), x(SourceBroken)],
        ),
        (
            "a writable relay still carries the writer's data",
            vec![w(1), r_with(2, 1, |s| s.read_only = false), r(3, 2, 1)],
            writer(0, &[]),
            vec![Writer, x(WritableReplica), Replica],
        ),
        (
            "a relay with both threads stopped is broken, not a root",
            vec![
                w(1),
                r_with(2, 1, |s| {
                    let r = s.replication.as_mut().unwrap();
                    (r.io, r.sql_running, r.lag) = (IoThread::Stopped, false, None);
                }),
                r(3, 2, 0),
            ],
            writer(0, &[]),
            vec![Writer, x(SqlThreadStopped), x(SourceBroken)],
        ),
        (
            "a replication loop",
            vec![r(1, 2, 0), r(2, 1, 0)],
            none(NoWriter::NoCandidate),
            vec![x(SourceBroken), x(SourceBroken)],
        ),
        (
            "a source sluice does not monitor, or an unreachable one: own lag only",
            vec![w(1), r(2, 77, 1), r(3, 4, 1), down()],
            writer(0, &[]),
            vec![
                Writer,
                Replica,
                Replica,
                x(CheckFailed(CheckFailure::Unreachable)),
            ],
        ),
    ];
    for (name, observations, verdict, want) in cases {
        let t = decide(&Memory::default(), &observations, &LIMITS);
        assert_eq!(t.verdict, verdict, "{name}");
        assert_eq!(roles(&t), want, "{name}");
    }
}

#[test]
fn views_carry_lag_and_position() {
    let t = decide(
        &Memory::default(),
        &[w(1), r(2, 1, 2), r(3, 2, 2), down()],
        &LIMITS,
    );
    let lags: Vec<Option<Duration>> = t.servers.iter().map(|s| s.lag).collect();
    let s = Duration::from_secs;
    assert_eq!(lags, vec![Some(s(0)), Some(s(2)), Some(s(4)), None]);
    assert_eq!(
        t.servers[2]
            .position
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("0-1-3")
    );
    assert_eq!(t.servers[3].position, None);
    assert_eq!(t.writer(), Some(0));
    assert_eq!(t.usable_replicas().collect::<Vec<_>>(), vec![1, 2]);
}

/// Runs rounds in order, carrying memory, and checks each round's verdict and roles.
fn run(name: &str, rounds: Vec<(Vec<Observation>, Verdict, Vec<Role>)>) {
    let mut memory = Memory::default();
    for (i, (observations, verdict, want)) in rounds.into_iter().enumerate() {
        let t = decide(&memory, &observations, &LIMITS);
        assert_eq!(t.verdict, verdict, "{name}, round {i}");
        assert_eq!(roles(&t), want, "{name}, round {i}");
        memory = t.memory;
    }
}

#[test]
fn failover_then_the_old_primary_returns_writable() {
    use Exclusion::*;
    use Role::{Replica, Writer};
    let gone = x(CheckFailed(CheckFailure::Unreachable));
    let connecting = |id| {
        r_with(id, 1, |s| {
            let r = s.replication.as_mut().unwrap();
            (r.io, r.lag) = (IoThread::Connecting, None);
        })
    };
    run(
        "failover",
        vec![
            (
                vec![w(1), r(2, 1, 0), r(3, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica, Replica],
            ),
            // The primary dies: writes wait, the replicas lose their source.
            (
                vec![down(), connecting(2), connecting(3)],
                none(NoWriter::Unreachable { writer: 0 }),
                vec![gone, x(IoThreadConnecting), x(IoThreadConnecting)],
            ),
            // The operator promotes server 1 and repoints server 2: followed.
            (
                vec![down(), w(2), r(3, 2, 0)],
                writer(1, &[]),
                vec![gone, Writer, Replica],
            ),
            // The old primary comes back writable: split brain, no writer at all (lead's rule).
            (
                vec![w(1), w(2), r(3, 2, 0)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![
                    x(CompetingWriter),
                    x(CompetingWriter),
                    x(FollowsCompetingWriter),
                ],
            ),
            // The new writer fails a check: the rival is NOT promoted.
            (
                vec![w(1), down(), connecting(3)],
                none(NoWriter::Unreachable { writer: 1 }),
                vec![x(CompetingWriter), gone, x(IoThreadConnecting)],
            ),
            (
                vec![w(1), w(2), r(3, 2, 0)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![
                    x(CompetingWriter),
                    x(CompetingWriter),
                    x(FollowsCompetingWriter),
                ],
            ),
            // The operator makes the old primary a replica: the alert clears.
            (
                vec![r(1, 2, 0), w(2), r(3, 2, 0)],
                writer(1, &[]),
                vec![Replica, Writer, Replica],
            ),
        ],
    );
}

#[test]
fn a_rival_is_cleared_by_being_fixed_or_by_the_writer_stepping_down() {
    use Exclusion::*;
    use Role::{Replica, Writer};
    run(
        "promote before demote",
        vec![
            (
                vec![w(1), r(2, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica],
            ),
            // Server 1 was promoted before server 0 was demoted: split brain, no writer.
            (
                vec![w(1), w(2)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![x(CompetingWriter), x(CompetingWriter)],
            ),
            // Then 0 goes read-only: 1 is the only candidate left, and 0 stepped down.
            (
                vec![Ok(state(1, true, None)), w(2)],
                writer(1, &[]),
                vec![x(NotReplicating), Writer],
            ),
        ],
    );
    run(
        "a rival unreachable stays a rival",
        vec![
            (
                vec![w(1), r(2, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica],
            ),
            (
                vec![w(1), w(2)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![x(CompetingWriter), x(CompetingWriter)],
            ),
            (
                vec![w(1), down()],
                writer(0, &[]),
                vec![Writer, x(CheckFailed(CheckFailure::Unreachable))],
            ),
            // Back, still writable: still competing.
            (
                vec![w(1), w(2)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![x(CompetingWriter), x(CompetingWriter)],
            ),
            // Fixed (read-only, replicating): a replica again.
            (
                vec![w(1), r(2, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica],
            ),
            // A later return to writable is a new split brain, not a new writer.
            (
                vec![w(1), w(2)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![x(CompetingWriter), x(CompetingWriter)],
            ),
        ],
    );
}

#[test]
fn ambiguity_resolves_only_when_one_candidate_is_left() {
    use Exclusion::*;
    use Role::{Replica, Writer};
    run(
        "started during a split brain",
        vec![
            (
                vec![w(1), w(2), r(3, 1, 0)],
                none(NoWriter::Ambiguous {
                    candidates: vec![0, 1],
                }),
                vec![
                    x(CompetingWriter),
                    x(CompetingWriter),
                    x(FollowsCompetingWriter),
                ],
            ),
            (
                vec![w(1), r(2, 1, 0), r(3, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica, Replica],
            ),
        ],
    );
    let mut memory = Memory::default();
    for observations in [
        vec![w(1), r(2, 1, 0), r(3, 1, 0)],
        vec![w(1), w(2), r(3, 1, 0)],
    ] {
        memory = decide(&memory, &observations, &LIMITS).memory;
    }
    // Server 0 (the writer) dies, server 1 is a rival, server 2 is promoted: still ambiguous.
    let t = decide(&memory, &[down(), w(2), w(3)], &LIMITS);
    assert_eq!(
        t.verdict,
        none(NoWriter::Ambiguous {
            candidates: vec![1, 2]
        })
    );
}

#[test]
fn a_check_that_flaps_does_not_move_the_writer() {
    use Role::{Replica, Writer};
    let gone = x(Exclusion::CheckFailed(CheckFailure::Timeout));
    run(
        "flapping",
        vec![
            (
                vec![w(1), r(2, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica],
            ),
            (
                vec![Err(CheckFailure::Timeout), r(2, 1, 0)],
                none(NoWriter::Unreachable { writer: 0 }),
                vec![gone, Replica],
            ),
            (
                vec![w(1), r(2, 1, 0)],
                writer(0, &[]),
                vec![Writer, Replica],
            ),
        ],
    );
}

#[test]
fn alerts_and_reasons() {
    let t = decide(&Memory::default(), &[w(1), w(2), r(3, 1, 0)], &LIMITS);
    assert_eq!(
        t.alerts(),
        vec![Alert::Ambiguous {
            candidates: vec![0, 1]
        }]
    );
    let memory = decide(&Memory::default(), &[w(1), r(2, 1, 0), r(3, 1, 0)], &LIMITS).memory;
    let writable = r_with(3, 1, |s| s.read_only = false);
    let t = decide(&memory, &[w(1), w(2), writable], &LIMITS);
    assert_eq!(
        t.alerts(),
        vec![
            Alert::SplitBrain {
                writer: 0,
                rivals: vec![1]
            },
            Alert::WritableReplica { index: 2 }
        ]
    );
    assert!(decide(&memory, &[w(1), r(2, 1, 0)], &LIMITS)
        .alerts()
        .is_empty());
    let shown = Exclusion::LagTooHigh {
        lag: Duration::from_secs(7),
    }
    .to_string();
    assert_eq!(shown, "lag 7 s over max_replica_lag");
    let shown = Exclusion::CheckFailed(CheckFailure::Refused { code: 1227 }).to_string();
    assert_eq!(
        shown,
        "monitor check failed: server refused the check (1227)"
    );
}
