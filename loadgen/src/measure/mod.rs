//! Measuring load: one level ([`level`]: spawn, measure, merge) of clients ([`client`]) on
//! connections kept between levels ([`conns`]), the monitor's queries ([`monitor`]), the
//! statistics over the samples ([`stats`]) and what loadgen and an in-process proxy cost
//! ([`resources`]).

pub mod calibration;
pub mod client;
pub mod conns;
pub mod level;
pub mod monitor;
pub mod resources;
pub mod stats;
pub mod timeline;
