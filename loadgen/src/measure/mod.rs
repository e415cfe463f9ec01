//! Measuring load: one level's clients and their merge ([`level`]), the statistics over its
//! samples ([`stats`]), and what loadgen and an in-process proxy cost ([`resources`]).

pub mod level;
pub mod resources;
pub mod stats;
