//! Measuring load: one level ([`level`]: spawn, measure, merge) of clients ([`client`]) on
//! connections kept between levels ([`conns`]), the monitor's queries ([`monitor`]), the
//! statistics over the samples ([`stats`]), what loadgen, an in-process proxy or another
//! process cost ([`resources`]), and the counts that repeat where timings drift: a relay's
//! syscalls ([`syscalls`]) and instructions ([`callgrind`]) per query.

pub mod calibration;
pub mod callgrind;
pub mod client;
pub mod conns;
pub mod level;
pub mod monitor;
pub mod resources;
pub mod stats;
pub mod sysbench;
pub mod sysbench_output;
pub mod syscalls;
pub mod timeline;
