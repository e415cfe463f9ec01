//! Replication topology: who is the writer, which replicas may take reads, and which replica
//! takes a given read. Groundwork for issue 15 (read/write split, read-your-writes, safe
//! failover); nothing in the session, pool or config uses it yet.
//!
//! # How it will be used
//! A monitor task per sluice instance opens one [`BackendConn`](crate::conn::BackendConn)
//! per configured server with the `monitor_user` credentials and, every `monitor_interval`:
//! 1. runs [`monitor::observe`] on each (a failed connect becomes
//!    `Err(`[`monitor::failure_of`]`(..))`), giving one [`Observation`] per server;
//! 2. calls [`roles::decide`] with the observations and the previous round's
//!    [`roles::Memory`], and publishes the [`Topology`] (e.g. in an `ArcSwap`) for the
//!    sessions, SHOW SERVERS (roles, lag, position, the [`Exclusion`] as text) and
//!    /metrics, and logs [`Topology::alerts`] (split brain, ambiguity, writable replicas);
//! 3. the router sends writes to [`Topology::writer`] (or queues them while there is none)
//!    and picks a replica for a read with [`choose::choose_replica`], passing the
//!    session's required position: the union ([`GtidPosition::include`]) of the GTIDs its
//!    writes reported ([`crate::protocol::last_write_gtid`], parsed with
//!    [`GtidPosition::parse`]) and any `sluice:min_gtid` token.
//!
//! Everything here except [`monitor`]'s two queries is pure, so the rules are unit-tested
//! table by table.
//!
//! # Layout
//! - [`gtid`], `gtid_set`: typed GTID positions (MariaDB lists, MySQL sets) and `covers`.
//! - [`observation`]: what a check saw on one server ([`ServerState`]) or why it failed.
//! - [`roles`]: the writer verdict (split brain handling) and each server's role.
//! - [`choose`]: the replica for one read.
//! - [`monitor`]: the check's queries over a [`monitor::TextQuery`] connection.

pub mod choose;
pub mod gtid;
mod gtid_set;
pub mod monitor;
pub mod observation;
pub mod roles;

pub use choose::{choose_replica, Candidate};
pub use gtid::{GtidError, GtidPosition, GtidSet, MariaDbGtid, MariaDbPosition};
pub use observation::{CheckFailure, IoThread, Observation, ReplicaStatus, ServerState};
pub use roles::{decide, Alert, Exclusion, Limits, Memory, NoWriter, Role, Topology, Verdict};

/// Which server family a backend is; their replication variables and GTIDs differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql,
}

impl Flavor {
    /// From the greeting's version string (MariaDB's says so, e.g.
    /// `5.5.5-10.11.19-MariaDB-0+deb12u1`).
    pub fn from_version(version: &[u8]) -> Flavor {
        if version
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"MariaDB"))
        {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        }
    }
}

#[cfg(test)]
mod roles_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavour_from_the_greeting() {
        assert_eq!(
            Flavor::from_version(b"5.5.5-10.11.19-MariaDB-0+deb12u1"),
            Flavor::MariaDb
        );
        assert_eq!(Flavor::from_version(b"8.0.36"), Flavor::MySql);
        assert_eq!(Flavor::from_version(b""), Flavor::MySql);
    }
}
