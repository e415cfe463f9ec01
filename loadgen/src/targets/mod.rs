//! What the load is aimed at: the MySQL server ([`servers`], [`docker`]), an in-process sluice
//! ([`in_process`]), and the relays the overhead experiment runs as processes of their own
//! ([`relays`]: the bare tokio relay of [`relay_floor`], [`haproxy`], the sluice binary of
//! [`sluice_child`], each a [`process::RelayProcess`]), and what the sysbench experiment runs
//! its load through ([`sysbench_targets`]).

pub mod docker;
pub mod haproxy;
#[cfg(feature = "proxy")]
pub mod in_process;
pub mod process;
pub mod relay_floor;
pub mod relays;
pub mod servers;
pub mod sluice_child;
pub mod sysbench_targets;
