//! The experiments, one to a file, each a type implementing [`run::Experiment`]: calibration,
//! A (the curve; B is read from it), C (the in-process pool), the open loop, the proxy rows,
//! overhead, sysbench, D (idle connections), S (sessions), E (`pool_size = auto`), F
//! (admission control) and the soak. [`for_command`] lists what a subcommand runs, in order:
//! `bench` runs the original study's experiments, the open loop and the proxy rows; `bench
//! --all` adds the rest.

pub mod calibrate;
pub mod curve;
pub mod idle;
pub mod open_loop;
pub mod overhead;
pub mod overhead_cost;
pub mod pool;
pub mod run;
pub mod seed;
pub mod skip;
pub mod soak;
pub mod sysbench;
pub mod sysbench_setup;

#[cfg(feature = "proxy")]
pub mod adaptive;
#[cfg(feature = "proxy")]
pub mod admission;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "proxy")]
pub mod sessions;

use std::time::Duration;

use crate::cli::Command;
use crate::progress::human;
use crate::settings::Settings;
use calibrate::Calibrate;
use curve::Curve;
use idle::Idle;
use open_loop::OpenLoop;
use pool::Pool;
use run::{Experiment, Plan};
use seed::Seed;
use soak::Soak;

/// What `command` runs, in order. Everything but `overhead` first prepares the table.
pub fn for_command(command: &Command) -> Vec<Box<dyn Experiment>> {
    let mut list: Vec<Box<dyn Experiment>> = Vec::new();
    if !matches!(command, Command::Overhead | Command::Sysbench) {
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
        Command::Sysbench => list.push(Box::new(sysbench::Sysbench)),
        Command::Idle => list.push(Box::new(Idle)),
        Command::Sessions => list.push(sessions()),
        Command::Adaptive => list.extend([boxed(Calibrate), adaptive()]),
        Command::Admission => list.extend([boxed(Calibrate), admission()]),
        Command::Soak { short, minutes } => list.push(Box::new(Soak {
            minutes: minutes.unwrap_or(if *short { 10 } else { 30 }),
        })),
        Command::Report { .. } | Command::Relay { .. } => list.clear(),
        Command::Bench { all, .. } => {
            // The original study's A, B (read from A) and C, the open loop and the proxy rows.
            list.extend([
                boxed(Calibrate),
                boxed(Curve),
                boxed(Pool),
                boxed(OpenLoop { after_curve: true }),
                proxy(),
            ]);
            if *all {
                // D before E: E re-pins the server. Overhead (`SELECT 1`), then sysbench, last.
                list.extend([
                    sessions(),
                    boxed(Idle),
                    adaptive(),
                    admission(),
                    overhead(),
                    Box::new(sysbench::Sysbench),
                ]);
            }
        }
    }
    list
}

/// The serial query time a plan assumes until the calibration measures it: the slowest this
/// benchmark is planned for (a small two-core host).
pub const ASSUMED_QUERY: Duration = Duration::from_millis(10);

/// Starting a local server: mariadb-install-db and the server's start, with room to spare.
pub const SERVER_START: Duration = Duration::from_secs(5);

/// Each experiment's plan when one serial query takes `query`.
pub fn plans(list: &[Box<dyn Experiment>], s: &Settings, query: Duration) -> Vec<Plan> {
    list.iter().map(|e| e.plan(s, query)).collect()
}

/// The plan as printed at start: one line per experiment and the total, server start
/// included.
pub fn describe(list: &[Box<dyn Experiment>], s: &Settings, query: Duration) -> Vec<String> {
    let plans = plans(list, s, query);
    let mut lines = vec![match s.command {
        // sysbench's runs have lengths of their own, and no query cost to assume.
        Command::Sysbench => format!(
            "plan: sysbench runs of {} s, each after a {} s warm-up run:",
            s.sysbench.time_s, s.sysbench.warmup_s
        ),
        _ => format!(
            "plan at {:.1} ms per query (assumed until the calibration measures it), {} s windows after {} s warm-ups:",
            query.as_secs_f64() * 1e3,
            s.window.as_secs_f64(),
            s.warmup.as_secs_f64()
        ),
    }];
    lines.push(format!(
        "  {:<24} {:>11}",
        "server start",
        human(SERVER_START)
    ));
    for (e, p) in list.iter().zip(&plans) {
        let detail = match p.levels {
            0 => String::new(),
            n => format!(
                "  ({n} level{}: {} measured + {} setup and drains)",
                if n == 1 { "" } else { "s" },
                human(p.measured),
                human(p.fixed)
            ),
        };
        lines.push(format!(
            "  {:<24} {:>11}{detail}",
            e.name(),
            human(p.total())
        ));
    }
    let total = plans.iter().fold(Plan::default(), |a, p| a.then(*p));
    lines.push(format!(
        "  {:<24} {:>11}  ({} levels: {} measured + {} setup, drains, seeding and calibration)",
        "planned total",
        human(SERVER_START + total.total()),
        total.levels,
        human(total.measured),
        human(SERVER_START + total.fixed)
    ));
    lines
}

fn boxed(e: impl Experiment + 'static) -> Box<dyn Experiment> {
    Box::new(e)
}

#[cfg(feature = "proxy")]
fn proxy() -> Box<dyn Experiment> {
    Box::new(proxy::Proxy)
}

/// Overhead runs the sluice binary, not the in-process library: it needs no feature.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(command: Command) -> Vec<&'static str> {
        for_command(&command).iter().map(|e| e.name()).collect()
    }

    #[test]
    fn bench_runs_the_seed_experiments_and_all_adds_the_rest() {
        let base = [
            "seed",
            "calibration",
            "A (curve)",
            "C (pool)",
            "open loop",
            "proxy",
        ];
        let bench = names(Command::Bench {
            quick: false,
            all: false,
        });
        assert_eq!(bench, base);
        let all = names(Command::Bench {
            quick: true,
            all: true,
        });
        assert_eq!(all[..base.len()], base);
        assert_eq!(
            all[base.len()..],
            [
                "S (sessions)",
                "D (idle connections)",
                "E (pool_size = auto)",
                "F (admission control)",
                "overhead",
                "sysbench"
            ]
        );
        assert_eq!(names(Command::Overhead), ["overhead"]);
        assert_eq!(names(Command::Sysbench), ["sysbench"]);
        assert!(names(Command::Report { dir: "x".into() }).is_empty());
    }

    fn settings(args: &[&str]) -> Settings {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(args).unwrap();
        Settings::from_cli(cli, vec![0, 1]).unwrap()
    }

    fn planned(args: &[&str], query: Duration) -> Duration {
        let s = settings(args);
        let list = for_command(&s.command);
        SERVER_START
            + plans(&list, &s, query)
                .iter()
                .map(|p| p.total())
                .sum::<Duration>()
    }

    #[test]
    fn overheads_plan_follows_its_relays() {
        use crate::targets::relays::Relay;
        let one = |args: &[&str]| {
            let s = settings(args);
            let list = for_command(&s.command);
            plans(&list, &s, ASSUMED_QUERY).remove(0)
        };
        // Direct and every relay but digests off at 1 client, direct and all but the two
        // busy-polling rows at 64 ([`Relay::runs_at`]); a syscall window after each relay's.
        let plan = one(&["loadgen", "overhead"]);
        let (at_one, at_many) = (Relay::ALL.len() - 1, Relay::ALL.len() - 2);
        assert_eq!(plan.levels as usize, (1 + at_one) + (1 + at_many));
        let (timed, direct_setup, relay_setup, syscalls) = (10, 1.0, 1.5, 3.0);
        let relays = (at_one + at_many) as u64;
        let want = (2 + relays) as f64 * timed as f64
            + 2.0 * direct_setup
            + relays as f64 * (relay_setup + syscalls);
        assert_eq!(plan.total(), Duration::from_secs_f64(want), "{plan:?}");
        let rounds = one(&["loadgen", "overhead", "--overhead-rounds", "3"]);
        assert_eq!(rounds.total(), plan.total() * 3);
        let costs = one(&["loadgen", "overhead", "--cost-counts"]);
        eprintln!(
            "overhead planned {} s, --cost-counts {} s more; bench --all {} s",
            plan.total().as_secs_f64(),
            (costs.total() - plan.total()).as_secs_f64(),
            planned(&["loadgen", "bench", "--all"], ASSUMED_QUERY).as_secs_f64()
        );
        // Under callgrind, every relay once more but the two busy-polling rows
        // ([`Relay::counts_instructions`]).
        let counted = Relay::ALL
            .iter()
            .filter(|r| r.counts_instructions())
            .count();
        assert_eq!(counted, Relay::ALL.len() - 2);
        assert!(costs.total() > plan.total() + Duration::from_secs(20 * counted as u64));
    }

    #[test]
    fn sysbenchs_plan_counts_every_run() {
        let plan = |args: &[&str]| {
            let s = settings(args);
            let list = for_command(&s.command);
            assert_eq!(list.len(), 1, "sysbench runs alone, without seeding");
            (
                plans(&list, &s, ASSUMED_QUERY).remove(0),
                describe(&list, &s, ASSUMED_QUERY),
            )
        };
        // 3 rounds x 3 workloads x 4 thread counts x 3 targets, each a 5 s warm-up and a 10 s run.
        let (full, lines) = plan(&["loadgen", "sysbench"]);
        assert_eq!(full.levels, 108);
        assert_eq!(full.measured, Duration::from_secs(108 * 15));
        eprintln!("sysbench planned {}", human(full.total()));
        assert!(full.total() < Duration::from_secs(40 * 60), "{full:?}");
        assert_eq!(
            lines[0],
            "plan: sysbench runs of 10 s, each after a 5 s warm-up run:"
        );
        let (small, _) = plan(&[
            "loadgen",
            "sysbench",
            "--sysbench-rounds",
            "1",
            "--sysbench-threads",
            "16",
            "--sysbench-workloads",
            "oltp_point_select",
            "--sysbench-warmup",
            "0",
            "--sysbench-time",
            "2",
            "--sysbench-table-size",
            "1000",
        ]);
        assert_eq!(small.levels, 3);
        assert_eq!(small.measured, Duration::from_secs(6));
        assert!(small.total() < Duration::from_secs(20), "{small:?}");
    }

    #[test]
    fn the_default_bench_fits_eight_minutes_at_ten_ms_a_query() {
        // The README promises 8 minutes on 2 cores at 10 ms a query; plan for a minute less.
        let bench = planned(&["loadgen", "bench"], ASSUMED_QUERY);
        assert!(bench <= Duration::from_secs(7 * 60), "{bench:?}");
        // 30 levels of 2 s warm-up + 8 s window are most of it.
        assert!(bench >= Duration::from_secs(300), "{bench:?}");
        let all = planned(&["loadgen", "bench", "--all"], ASSUMED_QUERY);
        assert!(all > bench + Duration::from_secs(300), "{all:?}");
        let quick = planned(&["loadgen", "bench", "--quick"], ASSUMED_QUERY);
        assert!(quick <= Duration::from_secs(120), "{quick:?}");
        let lines = describe(
            &for_command(&settings(&["loadgen", "bench"]).command),
            &settings(&["loadgen", "bench"]),
            ASSUMED_QUERY,
        );
        assert!(
            lines[0].starts_with("plan at 10.0 ms per query"),
            "{lines:?}"
        );
        assert!(lines.last().unwrap().contains("planned total"), "{lines:?}");
        assert_eq!(lines.len(), 2 + 6 + 1, "{lines:?}");
    }
}
