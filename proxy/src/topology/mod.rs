//! Replication topology: who is the writer, which replicas may take reads, and which replica
//! takes a given read (for the read/write split, read-your-writes and safe failover). `app`
//! starts the monitor when the config names several servers or turns the split on
//! (`Config::uses_topology`); the shared `Context` holds the latest snapshot (with one server
//! and no split, a fixed one naming it the writer), and every session routes each statement
//! through [`route::route`]. SHOW SERVERS and `/metrics` read the same snapshot through
//! `topology_report`. The routing settings' value types live in `config` (`config/replicas.rs`).
//!
//! # How it is used
//! 1. [`task::spawn`] runs the monitor loop: every `monitor_interval` it checks each
//!    configured server over its own monitor connection ([`monitor::observe`]), decides the
//!    roles with [`roles::decide`] (carrying [`roles::Memory`] between rounds), logs
//!    [`Topology::alerts`] and writer changes once per transition, and publishes a
//!    [`task::Snapshot`] on a `tokio::sync::watch` channel.
//! 2. For each statement the session calls [`route::route`] with the classifier's
//!    [`ReadSafety`](crate::classify::ReadSafety), its own facts (pinned, transaction, last
//!    write GTID from [`crate::protocol::last_write_gtid`] parsed with
//!    [`GtidPosition::parse`], the `sluice:min_gtid` token parsed with
//!    [`GtidPosition::parse_any`]), the routing settings, the latest snapshot's
//!    [`Topology`] and the pool's queue lengths; the [`Route`] says writer, which replica,
//!    wait on a replica first ([`wait::gtid_wait_statement`]), or wait for a writer.
//!
//! Everything here except [`monitor`]'s two queries is pure, so the rules are unit-tested
//! table by table.
//!
//! # Layout
//! - [`gtid`], `gtid_set`, `gtid_error`: typed GTID positions (MariaDB lists, MySQL sets),
//!   `covers`, and why a text was refused.
//! - [`observation`]: what a check saw on one server ([`ServerState`]) or why it failed.
//! - [`roles`]: the writer verdict (split brain handling) and each server's role.
//! - [`choose`]: the replica for one read.
//! - [`route`]: where one statement goes (every routing rule).
//! - [`wait`]: the read-your-writes wait statements (MASTER_GTID_WAIT,
//!   WAIT_FOR_EXECUTED_GTID_SET).
//! - [`monitor`]: the check's queries over a [`monitor::TextQuery`] connection.
//! - [`task`]: the monitor loop and the published [`task::Snapshot`].

pub mod choose;
pub mod gtid;
mod gtid_error;
mod gtid_set;
pub mod monitor;
pub mod observation;
pub mod roles;
pub mod route;
pub mod task;
pub mod wait;

pub use choose::{choose_replica, Candidate};
pub use gtid::{GtidError, GtidPosition, GtidSet, MariaDbGtid, MariaDbPosition};
pub use observation::{CheckFailure, IoThread, Observation, ReplicaStatus, ServerState};
pub use roles::{
    decide, Alert, Exclusion, Limits, Memory, NoWriter, Role, ServerView, Topology, Verdict,
};
pub use route::{
    route, route_wished, MinGtid, Override, PrimaryReads, ReadWriteSplit, ReadYourWrites, Route,
    RouteConfig, RouteInput, RouteTarget, SessionFacts, ToWriter, Transaction,
};

pub use crate::protocol::handshake::Flavor;

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
