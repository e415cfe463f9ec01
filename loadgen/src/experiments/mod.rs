//! The experiments, one to a file, each a type implementing [`run::Experiment`]: calibration,
//! A (the curve; B is read from it), C (the in-process pool), the open loop, the proxy rows,
//! overhead, D (idle connections), S (sessions), E (`pool_size = auto`), F (admission control)
//! and the soak. [`for_command`] lists what a subcommand runs, in order.

pub mod calibrate;
pub mod curve;
pub mod idle;
pub mod open_loop;
pub mod pool;
pub mod run;
pub mod seed;
pub mod skip;
pub mod soak;

#[cfg(feature = "proxy")]
pub mod adaptive;
#[cfg(feature = "proxy")]
pub mod admission;
#[cfg(feature = "proxy")]
pub mod overhead;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "proxy")]
pub mod sessions;

use std::time::Duration;

use crate::cli::Command;
use crate::settings::Settings;
use calibrate::Calibrate;
use curve::Curve;
use idle::Idle;
use open_loop::OpenLoop;
use pool::Pool;
use run::Experiment;
use seed::Seed;
use soak::Soak;

/// What `command` runs, in order. Everything but `overhead` first prepares the table.
pub fn for_command(command: &Command) -> Vec<Box<dyn Experiment>> {
    let mut list: Vec<Box<dyn Experiment>> = Vec::new();
    if !matches!(command, Command::Overhead) {
        list.push(Box::new(Seed));
    }
    match command {
        Command::Seed => {}
        Command::Calibrate => list.push(Box::new(Calibrate)),
        Command::Curve => list.extend([boxed(Calibrate), boxed(Curve)]),
        Command::Pool => list.extend([boxed(Calibrate), boxed(Pool)]),
        Command::Open => list.extend([boxed(Calibrate), boxed(OpenLoop { after_curve: false })]),
        Command::Proxy => list.push(proxy()),
        Command::Overhead => list.push(overhead()),
        Command::Idle => list.push(Box::new(Idle)),
        Command::Sessions => list.push(sessions()),
        Command::Adaptive => list.extend([boxed(Calibrate), adaptive()]),
        Command::Admission => list.extend([boxed(Calibrate), admission()]),
        Command::Soak { short } => list.push(Box::new(Soak { short: *short })),
        Command::Bench { .. } => list.extend([
            boxed(Calibrate),
            boxed(Curve),
            boxed(Pool),
            boxed(OpenLoop { after_curve: true }),
            proxy(),
            sessions(),
            adaptive(),
            admission(),
        ]),
    }
    list
}

/// The planned measuring time of `list`, for the progress bar.
pub fn planned(list: &[Box<dyn Experiment>], s: &Settings) -> Duration {
    list.iter().map(|e| e.plan(s).measured).sum()
}

fn boxed(e: impl Experiment + 'static) -> Box<dyn Experiment> {
    Box::new(e)
}

#[cfg(feature = "proxy")]
fn proxy() -> Box<dyn Experiment> {
    Box::new(proxy::Proxy)
}

#[cfg(feature = "proxy")]
fn overhead() -> Box<dyn Experiment> {
    Box::new(overhead::Overhead)
}

#[cfg(feature = "proxy")]
fn sessions() -> Box<dyn Experiment> {
    Box::new(sessions::Sessions)
}

#[cfg(feature = "proxy")]
fn adaptive() -> Box<dyn Experiment> {
    Box::new(adaptive::Adaptive)
}

#[cfg(feature = "proxy")]
fn admission() -> Box<dyn Experiment> {
    Box::new(admission::Admission)
}

#[cfg(not(feature = "proxy"))]
fn proxy() -> Box<dyn Experiment> {
    skip::Skip::log("proxy experiment")
}

#[cfg(not(feature = "proxy"))]
fn overhead() -> Box<dyn Experiment> {
    skip::Skip::fail("`overhead`")
}

#[cfg(not(feature = "proxy"))]
fn sessions() -> Box<dyn Experiment> {
    skip::Skip::log("experiment S")
}

#[cfg(not(feature = "proxy"))]
fn adaptive() -> Box<dyn Experiment> {
    skip::Skip::log("experiment E")
}

#[cfg(not(feature = "proxy"))]
fn admission() -> Box<dyn Experiment> {
    skip::Skip::log("experiment F")
}
