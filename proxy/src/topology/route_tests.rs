//! Table tests for [`route`]: one row per rule of the module docs.

use std::time::Duration;

use super::*;
use crate::topology::observation::CheckFailure;
use crate::topology::roles::{Exclusion, Memory, ServerView};

const SAFE: ReadSafety = ReadSafety::ReplicaSafe;
const FOR_UPDATE: ReadSafety = ReadSafety::WriterOnly(WriterOnly::LockingRead);

fn pos(text: &str) -> GtidPosition {
    GtidPosition::parse_any(text).unwrap()
}

fn server(role: Role, lag_s: u64, position: &str) -> ServerView {
    ServerView {
        role,
        lag: Some(Duration::from_secs(lag_s)),
        position: Some(pos(position)),
    }
}

/// Server 0 is the writer at 0-1-50; 1 and 2 are replicas at 0-1-40 and 0-1-50 with lag 0.
fn cluster() -> Topology {
    Topology {
        verdict: Verdict::Writer {
            index: 0,
            rivals: Vec::new(),
        },
        servers: vec![
            server(Role::Writer, 0, "0-1-50"),
            server(Role::Replica, 0, "0-1-40"),
            server(Role::Replica, 0, "0-1-50"),
        ],
        memory: Memory::default(),
    }
}

fn with_servers(servers: Vec<ServerView>) -> Topology {
    Topology {
        servers,
        ..cluster()
    }
}

fn no_writer(mut t: Topology) -> Topology {
    t.verdict = Verdict::NoWriter(NoWriter::NoCandidate);
    t.servers[0].role = Role::Excluded(Exclusion::CheckFailed(CheckFailure::Unreachable));
    t
}

fn config(rww: ReadYourWrites, primary: PrimaryReads) -> RouteConfig {
    RouteConfig {
        read_write_split: ReadWriteSplit::On,
        primary_reads: primary,
        read_your_writes: rww,
        gtid_wait_timeout: Duration::from_millis(100),
    }
}

fn facts<'a>(last_write: Option<&'a GtidPosition>, min_gtid: MinGtid<'a>) -> SessionFacts<'a> {
    SessionFacts {
        pinned: false,
        transaction: Transaction::None,
        last_write,
        min_gtid,
    }
}

struct Row<'a> {
    name: &'static str,
    statement: ReadSafety,
    session: SessionFacts<'a>,
    config: RouteConfig,
    topology: Topology,
    queued: Vec<usize>,
    want: Route,
}

fn writer(why: ToWriter) -> Route {
    Route::Writer { index: 0, why }
}

#[test]
fn every_routing_rule() {
    use PrimaryReads::{Always, Fallback, Never};
    use ReadYourWrites::{Off, Session, Wait};
    let w45 = pos("0-1-45");
    let w60 = pos("0-1-60");
    let token45 = pos("0-1-45");
    let t123 = pos("1-2-3");
    let plain = facts(None, MinGtid::None);
    let on = config(Session, Fallback);
    let excluded = |x: Exclusion| ServerView {
        role: Role::Excluded(x),
        lag: None,
        position: None,
    };
    let row = |name, statement, session, config, topology, queued: &[usize], want| Row {
        name,
        statement,
        session,
        config,
        topology,
        queued: queued.to_vec(),
        want,
    };
    let rows = vec![
        row(
            "split off sends reads to the writer",
            SAFE,
            plain,
            RouteConfig::default(),
            cluster(),
            &[],
            writer(ToWriter::SplitOff),
        ),
        row(
            "a pinned session stays on the writer",
            SAFE,
            SessionFacts {
                pinned: true,
                ..plain
            },
            on,
            cluster(),
            &[],
            writer(ToWriter::Pinned),
        ),
        row(
            "a read-write transaction stays on the writer",
            SAFE,
            SessionFacts {
                transaction: Transaction::ReadWrite,
                ..plain
            },
            on,
            cluster(),
            &[],
            writer(ToWriter::InTransaction),
        ),
        row(
            "a READ ONLY transaction stays where it runs",
            FOR_UPDATE,
            SessionFacts {
                transaction: Transaction::ReadOnly { index: 2 },
                ..plain
            },
            on,
            cluster(),
            &[],
            Route::Held { index: 2 },
        ),
        row(
            "an unsafe statement goes to the writer",
            FOR_UPDATE,
            plain,
            on,
            cluster(),
            &[],
            writer(ToWriter::NotSafe(WriterOnly::LockingRead)),
        ),
        row(
            "writes go to the writer",
            ReadSafety::WriterOnly(WriterOnly::NotARead),
            plain,
            on,
            cluster(),
            &[],
            writer(ToWriter::NotSafe(WriterOnly::NotARead)),
        ),
        row(
            "a read takes the shortest queue",
            SAFE,
            plain,
            on,
            cluster(),
            &[0, 3, 1],
            Route::Replica { index: 2 },
        ),
        row(
            "then the lowest lag",
            SAFE,
            plain,
            on,
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                server(Role::Replica, 1, "0-1-50"),
                server(Role::Replica, 0, "0-1-50"),
            ]),
            &[0, 1, 1],
            Route::Replica { index: 2 },
        ),
        row(
            "START TRANSACTION READ ONLY goes to a replica",
            ReadSafety::ReadOnlyBegin,
            plain,
            on,
            cluster(),
            &[0, 0, 4],
            Route::Replica { index: 1 },
        ),
        row(
            "excluded replicas take no reads: the writer does",
            SAFE,
            plain,
            on,
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                excluded(Exclusion::LagUnknown),
                excluded(Exclusion::LagTooHigh {
                    lag: Duration::from_secs(9),
                }),
            ]),
            &[],
            writer(ToWriter::NoReplica),
        ),
        row(
            "stopped threads and failed checks exclude too",
            SAFE,
            plain,
            on,
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                excluded(Exclusion::SqlThreadStopped),
                excluded(Exclusion::CheckFailed(CheckFailure::Timeout)),
            ]),
            &[],
            writer(ToWriter::NoReplica),
        ),
        row(
            "primary_reads=never: no replica means wait",
            SAFE,
            plain,
            config(Session, Never),
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                excluded(Exclusion::LagUnknown),
            ]),
            &[],
            Route::NoReplica,
        ),
        row(
            "primary_reads=always: the idle writer competes",
            SAFE,
            plain,
            config(Session, Always),
            cluster(),
            &[0, 2, 2],
            writer(ToWriter::PrimaryReads),
        ),
        row(
            "primary_reads=always: a shorter replica queue still wins",
            SAFE,
            plain,
            config(Session, Always),
            cluster(),
            &[5, 2, 0],
            Route::Replica { index: 2 },
        ),
        row(
            "read-your-writes: only a replica that has the write",
            SAFE,
            facts(Some(&w45), MinGtid::None),
            on,
            cluster(),
            &[0, 0, 7],
            Route::Replica { index: 2 },
        ),
        row(
            "read-your-writes: none has it, the writer does",
            SAFE,
            facts(Some(&w60), MinGtid::None),
            on,
            cluster(),
            &[],
            writer(ToWriter::ReadYourWritesFallback),
        ),
        row(
            "read-your-writes beats primary_reads=never",
            SAFE,
            facts(Some(&w60), MinGtid::None),
            config(Session, Never),
            cluster(),
            &[],
            writer(ToWriter::ReadYourWritesFallback),
        ),
        row(
            "read-your-writes=off ignores the session's write",
            SAFE,
            facts(Some(&w60), MinGtid::None),
            config(Off, Fallback),
            cluster(),
            &[0, 0, 1],
            Route::Replica { index: 1 },
        ),
        row(
            "a token counts in every mode",
            SAFE,
            facts(None, MinGtid::At(&token45)),
            config(Off, Fallback),
            cluster(),
            &[0, 0, 1],
            Route::Replica { index: 2 },
        ),
        row(
            "a token and the session's write must both be covered",
            SAFE,
            facts(Some(&w45), MinGtid::At(&w60)),
            on,
            cluster(),
            &[],
            writer(ToWriter::ReadYourWritesFallback),
        ),
        row(
            "an unreadable token sends the read to the writer",
            SAFE,
            facts(None, MinGtid::Unreadable),
            on,
            cluster(),
            &[],
            writer(ToWriter::UnreadableToken),
        ),
        row(
            "an unknown position never covers a requirement",
            SAFE,
            facts(Some(&w45), MinGtid::None),
            on,
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                ServerView {
                    role: Role::Replica,
                    lag: Some(Duration::ZERO),
                    position: None,
                },
            ]),
            &[],
            writer(ToWriter::ReadYourWritesFallback),
        ),
        row(
            "wait: a close replica waits for the write",
            SAFE,
            facts(Some(&w60), MinGtid::None),
            config(Wait, Fallback),
            cluster(),
            &[0, 1, 0],
            Route::WaitOnReplica {
                index: 2,
                until: pos("0-1-60"),
            },
        ),
        row(
            "wait: a lagging replica is not asked to",
            SAFE,
            facts(Some(&w60), MinGtid::None),
            config(Wait, Fallback),
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                server(Role::Replica, 2, "0-1-40"),
            ]),
            &[],
            writer(ToWriter::ReadYourWritesFallback),
        ),
        row(
            "wait: the wait covers the write and the token",
            SAFE,
            facts(Some(&w60), MinGtid::At(&t123)),
            config(Wait, Fallback),
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                server(Role::Replica, 0, "0-1-40"),
            ]),
            &[],
            Route::WaitOnReplica {
                index: 1,
                until: pos("0-1-60,1-2-3"),
            },
        ),
        row(
            "no writer: writes wait",
            FOR_UPDATE,
            plain,
            on,
            no_writer(cluster()),
            &[],
            Route::NoWriter {
                why: ToWriter::NotSafe(WriterOnly::LockingRead),
                state: NoWriter::NoCandidate,
            },
        ),
        row(
            "no writer: reads still go to replicas",
            SAFE,
            plain,
            on,
            no_writer(cluster()),
            &[0, 1, 0],
            Route::Replica { index: 2 },
        ),
        row(
            "no writer and no replica: reads wait too",
            SAFE,
            plain,
            on,
            no_writer(with_servers(vec![server(Role::Writer, 0, "0-1-50")])),
            &[],
            Route::NoWriter {
                why: ToWriter::NoReplica,
                state: NoWriter::NoCandidate,
            },
        ),
        row(
            "split off with no writer: everything waits",
            SAFE,
            plain,
            RouteConfig::default(),
            no_writer(cluster()),
            &[],
            Route::NoWriter {
                why: ToWriter::SplitOff,
                state: NoWriter::NoCandidate,
            },
        ),
    ];
    for r in rows {
        let input = RouteInput {
            statement: r.statement,
            session: r.session,
            config: &r.config,
            topology: &r.topology,
            queued: &r.queued,
            tie_break: 0,
        };
        assert_eq!(route(&input), r.want, "{}", r.name);
    }
}

#[test]
fn equal_replicas_share_the_reads() {
    let t = cluster();
    let c = config(ReadYourWrites::Session, PrimaryReads::Fallback);
    let mut counts = [0usize; 3];
    for tie_break in 0..100 {
        let input = RouteInput {
            statement: SAFE,
            session: facts(None, MinGtid::None),
            config: &c,
            topology: &t,
            queued: &[],
            tie_break,
        };
        match route(&input) {
            Route::Replica { index } => counts[index] += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(counts, [0, 50, 50]);
}

#[test]
fn labels_are_distinct() {
    let all = [
        ToWriter::SplitOff,
        ToWriter::Pinned,
        ToWriter::InTransaction,
        ToWriter::NotSafe(WriterOnly::Lock),
        ToWriter::ReadYourWritesFallback,
        ToWriter::NoReplica,
        ToWriter::PrimaryReads,
        ToWriter::UnreadableToken,
        ToWriter::Rule,
    ];
    let labels: std::collections::BTreeSet<&str> = all.iter().map(ToWriter::label).collect();
    assert_eq!(labels.len(), all.len());
}

/// One row per rule of "A query rule's wish": the route, and whether the wish was followed.
#[test]
fn a_rules_wish_changes_only_what_correctness_leaves_free() {
    use RouteTarget::{Replica, Server, Writer};
    let w45 = pos("0-1-45");
    let plain = facts(None, MinGtid::None);
    let split_off = RouteConfig::default();
    let on = config(ReadYourWrites::Session, PrimaryReads::Fallback);
    let in_tx = SessionFacts {
        transaction: Transaction::ReadWrite,
        ..plain
    };
    let pinned = SessionFacts {
        pinned: true,
        ..plain
    };
    let read_only_on_1 = SessionFacts {
        transaction: Transaction::ReadOnly { index: 1 },
        ..plain
    };
    let wrote_45 = facts(Some(&w45), MinGtid::None);
    let unreadable = facts(None, MinGtid::Unreadable);
    type Case<'a> = (
        &'static str,
        RouteTarget,
        ReadSafety,
        SessionFacts<'a>,
        RouteConfig,
        Topology,
        Route,
        Result<(), Override>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "writer: always followed",
            Writer,
            SAFE,
            plain,
            on,
            cluster(),
            writer(ToWriter::Rule),
            Ok(()),
        ),
        (
            "writer: a write too",
            Writer,
            FOR_UPDATE,
            in_tx,
            on,
            cluster(),
            writer(ToWriter::Rule),
            Ok(()),
        ),
        (
            "writer: with none, it waits for one",
            Writer,
            SAFE,
            plain,
            on,
            no_writer(cluster()),
            Route::NoWriter {
                why: ToWriter::Rule,
                state: NoWriter::NoCandidate,
            },
            Ok(()),
        ),
        (
            "replica: with the split off too",
            Replica,
            SAFE,
            plain,
            split_off,
            cluster(),
            Route::Replica { index: 1 },
            Ok(()),
        ),
        (
            "replica: in a transaction, overridden",
            Replica,
            SAFE,
            in_tx,
            on,
            cluster(),
            writer(ToWriter::InTransaction),
            Err(Override::Transaction),
        ),
        (
            "replica: pinned, overridden",
            Replica,
            SAFE,
            pinned,
            on,
            cluster(),
            writer(ToWriter::Pinned),
            Err(Override::Pinned),
        ),
        (
            "replica: a locking read, overridden",
            Replica,
            FOR_UPDATE,
            plain,
            on,
            cluster(),
            writer(ToWriter::NotSafe(WriterOnly::LockingRead)),
            Err(Override::NotReplicaSafe),
        ),
        (
            "replica: split off and a write, overridden to the writer",
            Replica,
            ReadSafety::default(),
            plain,
            split_off,
            cluster(),
            writer(ToWriter::SplitOff),
            Err(Override::NotReplicaSafe),
        ),
        (
            "replica: only one that has the session's write",
            Replica,
            SAFE,
            wrote_45,
            on,
            cluster(),
            Route::Replica { index: 2 },
            Ok(()),
        ),
        (
            "replica: none usable, to the writer",
            Replica,
            SAFE,
            plain,
            on,
            with_servers(vec![server(Role::Writer, 0, "0-1-50")]),
            writer(ToWriter::NoReplica),
            Err(Override::NoReplica),
        ),
        (
            "replica: an unreadable token, to the writer",
            Replica,
            SAFE,
            unreadable,
            on,
            cluster(),
            writer(ToWriter::UnreadableToken),
            Err(Override::UnreadableToken),
        ),
        (
            "server: a named replica",
            Server(1),
            SAFE,
            plain,
            on,
            cluster(),
            Route::Replica { index: 1 },
            Ok(()),
        ),
        (
            "server: the writer by name",
            Server(0),
            SAFE,
            plain,
            on,
            cluster(),
            writer(ToWriter::Rule),
            Ok(()),
        ),
        (
            "server: a replica without the session's write",
            Server(1),
            SAFE,
            wrote_45,
            on,
            cluster(),
            Route::Replica { index: 2 },
            Err(Override::NoReplica),
        ),
        (
            "server: an excluded replica",
            Server(2),
            SAFE,
            plain,
            on,
            with_servers(vec![
                server(Role::Writer, 0, "0-1-50"),
                server(Role::Replica, 0, "0-1-50"),
                ServerView {
                    role: Role::Excluded(Exclusion::CheckFailed(CheckFailure::Unreachable)),
                    lag: None,
                    position: None,
                },
            ]),
            Route::Replica { index: 1 },
            Err(Override::NoReplica),
        ),
        (
            "held read-only transaction: a replica wish fits",
            Replica,
            SAFE,
            read_only_on_1,
            on,
            cluster(),
            Route::Held { index: 1 },
            Ok(()),
        ),
        (
            "held read-only transaction: a writer wish is overridden",
            Writer,
            SAFE,
            read_only_on_1,
            on,
            cluster(),
            Route::Held { index: 1 },
            Err(Override::Transaction),
        ),
        (
            "held read-only transaction: another server is overridden",
            Server(2),
            SAFE,
            read_only_on_1,
            on,
            cluster(),
            Route::Held { index: 1 },
            Err(Override::Transaction),
        ),
    ];
    for (name, wish, statement, session, config, topology, want, outcome) in cases {
        let input = RouteInput {
            statement,
            session,
            config: &config,
            topology: &topology,
            queued: &[],
            tie_break: 0,
        };
        assert_eq!(route_wished(&input, wish), (want, outcome), "{name}");
    }
}
