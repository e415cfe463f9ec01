//! What the load is aimed at: the MySQL server ([`servers`], [`docker`]), an in-process sluice
//! ([`in_process`]) and the bare TCP relay that is the floor of any proxy's cost ([`relay_floor`]).

pub mod docker;
#[cfg(feature = "proxy")]
pub mod in_process;
#[cfg(feature = "proxy")]
pub mod relay_floor;
pub mod servers;
pub mod sluice_child;
