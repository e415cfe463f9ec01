//! sluice: a transparent MySQL connection-pooling proxy.
//!
//! Clients connect to sluice as if it were MySQL; sluice multiplexes their sessions onto a
//! small pool of backend connections, so the server sees at most `pool_size` statements at
//! once while every client queues fairly (FIFO) in front of it.
//!
//! # Layout
//! - [`protocol`]: pure MySQL wire format (no I/O).
//! - [`conn`]: sockets; client handshake and backend login.
//! - [`pool`]: execution slots and backend connections; the release/reset/close decision.
//! - [`session`]: the per-client loop, session state, pinning, replay and relay.
//! - [`classify`]: the only code that reads SQL text.
//! - [`config`]: the validated configuration (default < file < env < flags).
//! - [`app`]: `Proxy::bind`, accept loop, shutdown; [`autosize`] drives `pool_size = auto`.
//! - [`stats`]: counters and reason enums; [`registry`]: every live client session.
//! - [`topology`]: replication roles, GTID positions and replica choice (pure; not wired in yet).
//! - [`admin`], [`metrics`], [`latency`]: the admin console, `/metrics`, latency histograms;
//!   [`topology_report`]: what both say about the topology.

pub mod admin;
pub mod app;
pub mod autosize;
pub mod classify;
pub mod config;
pub mod conn;
pub mod context;
pub mod latency;
pub mod metrics;
pub mod pool;
pub mod protocol;
pub mod registry;
pub mod session;
pub mod stats;
pub mod topology;
pub mod topology_report;

pub use app::{Proxy, ProxyHandle, StartError};
pub use config::Config;
