//! What SHOW SERVERS and /metrics say about the replication topology: one report per
//! configured server (role, lag, GTID position, why it is excluded) and the alerts an
//! operator must act on (split brain, no writer), with stable labels for metrics and
//! sentences for people. Pure: a monitor [`Snapshot`] in, reports out; both consumers
//! format the same reports, so the console and the metrics never disagree.

use std::time::Duration;

use crate::topology::task::Snapshot;
use crate::topology::{Alert, CheckFailure, Exclusion, NoWriter, Role, Verdict};

/// One configured server as the last monitor round saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    /// Position in the configured `servers` list.
    pub index: usize,
    /// As configured (`host:port` or a Unix socket path).
    pub address: String,
    pub role: Role,
    /// Whether the last check answered (`up`), failed (`down`), or no round has finished yet
    /// (`unknown`).
    pub state: CheckState,
    /// Lag along its chain of sources; zero for the writer, `None` when unknown.
    pub lag: Option<Duration>,
    /// What it has applied (MariaDB `gtid_slave_pos`/`gtid_binlog_pos`, MySQL
    /// `gtid_executed`), if the check read it.
    pub position: Option<String>,
}

/// Did the monitor reach the server?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Up,
    Down,
    /// Before the first monitor round.
    Unknown,
    /// One server and read_write_split off: no monitor runs, the server is the writer.
    Unmonitored,
}

impl CheckState {
    pub fn label(self) -> &'static str {
        match self {
            CheckState::Up => "up",
            CheckState::Down => "down",
            CheckState::Unknown => "unknown",
            CheckState::Unmonitored => "unmonitored",
        }
    }
}

impl ServerReport {
    /// Why it takes no statements, if it takes none.
    pub fn excluded(&self) -> Option<Exclusion> {
        match self.role {
            Role::Excluded(why) => Some(why),
            Role::Writer | Role::Replica => None,
        }
    }
}

/// The reports in configured order; `addresses[i]` names server `i` (missing names show as
/// `server <i>`). `monitored`: whether a monitor runs (`Config::uses_topology`); without
/// one the snapshot is the fixed single writer.
pub fn servers(snapshot: &Snapshot, addresses: &[String], monitored: bool) -> Vec<ServerReport> {
    snapshot
        .topology
        .servers
        .iter()
        .enumerate()
        .map(|(index, view)| ServerReport {
            index,
            address: addresses
                .get(index)
                .cloned()
                .unwrap_or_else(|| format!("server {index}")),
            role: view.role,
            state: match view.role {
                _ if !monitored => CheckState::Unmonitored,
                _ if snapshot.round == 0 => CheckState::Unknown,
                Role::Excluded(Exclusion::CheckFailed(_)) => CheckState::Down,
                _ => CheckState::Up,
            },
            lag: view.lag,
            position: view.position.as_ref().map(|p| p.to_string()),
        })
        .collect()
}

/// `writer`, `replica` or `excluded`.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::Writer => "writer",
        Role::Replica => "replica",
        Role::Excluded(_) => "excluded",
    }
}

/// Every role label, for metrics that show each one (0 or 1).
pub const ROLE_LABELS: [&str; 3] = ["writer", "replica", "excluded"];

/// A stable label for an exclusion (metrics); its `Display` is the sentence.
pub fn exclusion_label(why: Exclusion) -> &'static str {
    match why {
        Exclusion::CheckFailed(CheckFailure::Unreachable) => "check_failed_unreachable",
        Exclusion::CheckFailed(CheckFailure::Timeout) => "check_failed_timeout",
        Exclusion::CheckFailed(CheckFailure::Lost) => "check_failed_lost",
        Exclusion::CheckFailed(CheckFailure::Refused { .. }) => "check_failed_refused",
        Exclusion::CheckFailed(CheckFailure::Malformed(_)) => "check_failed_malformed",
        Exclusion::CompetingWriter => "competing_writer",
        Exclusion::WritableReplica => "writable_replica",
        Exclusion::NotReplicating => "not_replicating",
        Exclusion::SqlThreadStopped => "sql_thread_stopped",
        Exclusion::IoThreadStopped => "io_thread_stopped",
        Exclusion::IoThreadConnecting => "io_thread_connecting",
        Exclusion::LagUnknown => "lag_unknown",
        Exclusion::LagTooHigh { .. } => "lag_too_high",
        Exclusion::FollowsCompetingWriter => "follows_competing_writer",
        Exclusion::SourceBroken => "source_broken",
    }
}

/// Something an operator must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertReport {
    /// Stable label: `split_brain`, `ambiguous_writers`, `writable_replica`, `no_writer`,
    /// `monitor_starting`.
    pub kind: &'static str,
    /// The server it is about, when it is about one.
    pub server: Option<usize>,
    /// The sentence SHOW SERVERS shows.
    pub text: String,
}

/// Every alert kind, for metrics that show each one (0 when absent).
pub const ALERT_KINDS: [&str; 5] = [
    "split_brain",
    "ambiguous_writers",
    "writable_replica",
    "no_writer",
    "monitor_starting",
];

/// This round's alerts: the topology's own (split brain first), then "no writer" when
/// writes wait, or "monitor starting" before the first round. None without a monitor.
pub fn alerts(snapshot: &Snapshot, monitored: bool) -> Vec<AlertReport> {
    if !monitored {
        return Vec::new();
    }
    if snapshot.round == 0 {
        return vec![AlertReport {
            kind: "monitor_starting",
            server: None,
            text: "no monitor round has finished yet: roles are unknown, writes wait".into(),
        }];
    }
    let topology = &snapshot.topology;
    let mut out: Vec<AlertReport> = topology.alerts().iter().map(alert).collect();
    if let Verdict::NoWriter(why) = &topology.verdict {
        let text = match why {
            NoWriter::Unreachable { writer } => {
                format!("no writer: server {writer} (the writer) is unreachable; writes wait up to writer_wait_timeout, then fail as read-only")
            }
            NoWriter::NoCandidate => "no writer: no server is writable and replicating from nobody (a switchover in progress?); writes wait up to writer_wait_timeout, then fail as read-only".into(),
            NoWriter::Ambiguous { candidates } => format!(
                "no writer: servers {candidates:?} are all writable (split brain); no writes until only one is"
            ),
        };
        out.push(AlertReport {
            kind: "no_writer",
            server: None,
            text,
        });
    }
    out
}

fn alert(a: &Alert) -> AlertReport {
    match a {
        Alert::SplitBrain { writer, rivals } => AlertReport {
            kind: "split_brain",
            server: rivals.first().copied().filter(|_| rivals.len() == 1),
            text: format!(
                "split brain: servers {rivals:?} are writable and replicate from nobody while server {writer} is the writer; they get no reads or writes (sluice does not guess: fix read_only or replication)"
            ),
        },
        Alert::Ambiguous { candidates } => AlertReport {
            kind: "ambiguous_writers",
            server: None,
            text: format!(
                "split brain: servers {candidates:?} are all writable and replicate from nobody; no writes until only one is (sluice does not guess)"
            ),
        },
        Alert::WritableReplica { index } => AlertReport {
            kind: "writable_replica",
            server: Some(*index),
            text: format!(
                "server {index} replicates with read_only=OFF; it gets no reads or writes (SET GLOBAL read_only=ON on it)"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::topology::{
        decide, GtidPosition, IoThread, Limits, Memory, Observation, ReplicaStatus, ServerState,
    };

    fn state(id: u32, read_only: bool, replication: Option<ReplicaStatus>) -> Observation {
        Ok(ServerState {
            server_id: id,
            read_only,
            replication,
            position: GtidPosition::parse_any(&format!("0-1-{id}")).unwrap(),
        })
    }

    fn replica_of(source: u32, lag: Option<u64>) -> Option<ReplicaStatus> {
        Some(ReplicaStatus {
            io: IoThread::Running,
            sql_running: true,
            lag: lag.map(Duration::from_secs),
            source_host: "db".into(),
            source_port: 3306,
            source_server_id: Some(source),
            last_io_errno: 0,
            last_sql_errno: 0,
        })
    }

    fn snapshot(observations: &[Observation]) -> Snapshot {
        let limits = Limits {
            max_replica_lag: Duration::from_secs(5),
        };
        Snapshot {
            topology: decide(&Memory::default(), observations, &limits),
            flavors: vec![None; observations.len()],
            round: 1,
            at: Instant::now(),
        }
    }

    fn names() -> Vec<String> {
        vec!["db1:3306".into(), "db2:3306".into(), "db3:3306".into()]
    }

    #[test]
    fn reports_roles_lag_positions_and_exclusions() {
        let s = snapshot(&[
            state(1, false, None),
            state(2, true, replica_of(1, Some(1))),
            state(3, true, replica_of(1, None)),
        ]);
        let r = servers(&s, &names(), true);
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].role, r[0].state, r[0].address.as_str()),
            (Role::Writer, CheckState::Up, "db1:3306")
        );
        assert_eq!(r[0].position.as_deref(), Some("0-1-1"));
        assert_eq!(
            (role_label(r[1].role), r[1].lag),
            ("replica", Some(Duration::from_secs(1)))
        );
        assert_eq!(r[2].excluded(), Some(Exclusion::LagUnknown));
        assert_eq!(role_label(r[2].role), "excluded");
        assert_eq!(exclusion_label(Exclusion::LagUnknown), "lag_unknown");
        assert!(alerts(&s, true).is_empty(), "{:?}", alerts(&s, true));
    }

    #[test]
    fn a_failed_check_is_down_and_a_missing_writer_is_an_alert() {
        let s = snapshot(&[
            Err(CheckFailure::Unreachable),
            state(2, true, replica_of(1, Some(0))),
        ]);
        let r = servers(&s, &names()[..1], true);
        assert_eq!(r[0].state, CheckState::Down);
        assert_eq!(
            exclusion_label(r[0].excluded().unwrap()),
            "check_failed_unreachable"
        );
        assert_eq!(r[1].address, "server 1");
        let a = alerts(&s, true);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].kind, "no_writer");
        assert!(a[0].text.contains("writer_wait_timeout"), "{}", a[0].text);
    }

    #[test]
    fn two_writable_servers_raise_a_split_brain_alert() {
        let s = snapshot(&[state(1, false, None), state(2, false, None)]);
        let kinds: Vec<&str> = alerts(&s, true).iter().map(|a| a.kind).collect();
        assert!(kinds.contains(&"ambiguous_writers"), "{kinds:?}");
        assert!(kinds.contains(&"no_writer"), "{kinds:?}");
        for k in kinds {
            assert!(ALERT_KINDS.contains(&k));
        }
    }

    #[test]
    fn a_writable_replica_is_named_in_its_alert() {
        let s = snapshot(&[
            state(1, false, None),
            state(2, false, replica_of(1, Some(0))),
        ]);
        let a = alerts(&s, true);
        assert_eq!(a[0].kind, "writable_replica");
        assert_eq!(a[0].server, Some(1));
    }

    #[test]
    fn before_the_first_round_everything_is_unknown() {
        let s = Snapshot::unknown(2);
        let r = servers(&s, &names(), true);
        assert!(r.iter().all(|r| r.state == CheckState::Unknown));
        assert_eq!(alerts(&s, true)[0].kind, "monitor_starting");
    }

    #[test]
    fn without_a_monitor_the_one_server_is_the_unmonitored_writer() {
        let s = Snapshot::single_writer();
        let r = servers(&s, &names()[..1], false);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].role, r[0].state),
            (Role::Writer, CheckState::Unmonitored)
        );
        assert!(alerts(&s, false).is_empty());
    }
}
