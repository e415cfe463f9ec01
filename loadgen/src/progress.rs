//! The progress display: a header with the whole run's elapsed and estimated remaining time
//! (from the plan of every experiment, re-planned once the calibration has measured the
//! query), and below it the current level's bar. Plain log lines go to stderr either way
//! (through the bars when they are drawn, so they do not tear them).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shared handle to the run's progress display.
#[derive(Clone)]
pub struct Progress {
    multi: MultiProgress,
    header: ProgressBar,
    bar: ProgressBar,
    state: Arc<Mutex<RunState>>,
}

/// Where the run is in its plan.
struct RunState {
    /// Each experiment's name and planned time, in run order.
    steps: Vec<(String, Duration)>,
    /// Planned time before the first experiment (the server start).
    before: Duration,
    started: Instant,
    /// The experiment running now (None before the first), and since when.
    current: Option<(usize, Instant)>,
}

impl Progress {
    /// A display for `steps` (name, planned time) after `before` (the server start); hidden
    /// when `visible` is false or stderr is not a terminal.
    pub fn new(before: Duration, steps: Vec<(String, Duration)>, visible: bool) -> Progress {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let bar = multi.add(ProgressBar::new(1));
        bar.set_style(
            ProgressStyle::with_template("  {msg:40} [{bar:30}] {percent:>3}%")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let state = Arc::new(Mutex::new(RunState {
            steps,
            before,
            started: Instant::now(),
            current: None,
        }));
        let me = Progress {
            multi,
            header,
            bar,
            state,
        };
        if !me.header.is_hidden() {
            let tick = me.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_millis(250));
                while !tick.header.is_finished() {
                    every.tick().await;
                    tick.header.set_message(tick.headline());
                    tick.header.tick();
                }
            });
        }
        me
    }

    /// Prints a line above the display (or to stderr when it is hidden).
    pub fn log(&self, line: impl AsRef<str>) {
        if self.header.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            let _ = self.multi.println(line.as_ref());
        }
    }

    /// Experiment `i` of the plan starts now.
    pub fn start_step(&self, i: usize) {
        self.with_state(|s| s.current = Some((i, Instant::now())));
    }

    /// New planned times for every experiment (same order), e.g. once the query's cost is
    /// measured.
    pub fn replan(&self, planned: &[Duration]) {
        self.with_state(|s| {
            for (step, &p) in s.steps.iter_mut().zip(planned) {
                step.1 = p;
            }
        });
    }

    /// Estimated time left in the whole run.
    pub fn remaining(&self) -> Duration {
        self.with_state(|s| {
            let planned: Vec<Duration> = s.steps.iter().map(|(_, d)| *d).collect();
            match s.current {
                Some((i, since)) => remaining(&planned, i, since.elapsed()),
                None => {
                    s.before.saturating_sub(s.started.elapsed()) + planned.iter().sum::<Duration>()
                }
            }
        })
    }

    /// The header: which experiment, how long so far, about how long to go.
    fn headline(&self) -> String {
        let left = self.remaining();
        self.with_state(|s| {
            let elapsed = s.started.elapsed();
            let step = match s.current {
                Some((i, _)) => format!(
                    "{}/{} {}",
                    i + 1,
                    s.steps.len(),
                    s.steps.get(i).map_or("", |(n, _)| n.as_str())
                ),
                None => "starting the server".into(),
            };
            format!(
                "run: {step} | {} elapsed, about {} left (of {} planned)",
                human(elapsed),
                human(left),
                human(elapsed + left)
            )
        })
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut RunState) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s)
    }

    /// Starts a level lasting `dur`; the returned guard advances its bar until dropped.
    pub fn level(&self, msg: String, dur: Duration) -> LevelTicker {
        let cap = dur.as_millis().max(1) as u64;
        self.bar.set_length(cap);
        self.bar.set_position(0);
        self.bar.set_message(msg);
        let start = Instant::now();
        let bar = self.bar.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                bar.set_position((start.elapsed().as_millis() as u64).min(cap));
            }
        });
        LevelTicker {
            task,
            bar: self.bar.clone(),
            end: cap,
        }
    }

    /// Clears the display at the end of the run.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        self.header.finish_and_clear();
    }
}

/// Time left when experiment `current` of `planned` has run for `in_current`: what is left
/// of its plan (nothing once it overran) plus every later experiment's.
pub fn remaining(planned: &[Duration], current: usize, in_current: Duration) -> Duration {
    let now = planned
        .get(current)
        .map_or(Duration::ZERO, |p| p.saturating_sub(in_current));
    now + planned.iter().skip(current + 1).sum::<Duration>()
}

/// `1 h 02 min`, `6 min 05 s` or `42 s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s / 60 % 60),
    }
}

/// Advances the level bar during one level; on drop it jumps to the level's end.
pub struct LevelTicker {
    task: tokio::task::JoinHandle<()>,
    bar: ProgressBar,
    end: u64,
}

impl Drop for LevelTicker {
    fn drop(&mut self) {
        self.task.abort();
        self.bar.set_position(self.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_counts_the_rest_of_the_current_step_and_every_later_one() {
        let s = Duration::from_secs;
        let plan = [s(10), s(100), s(30)];
        assert_eq!(remaining(&plan, 0, s(4)), s(136));
        assert_eq!(remaining(&plan, 1, s(40)), s(90));
        // An experiment that overran its plan leaves only the later ones.
        assert_eq!(remaining(&plan, 1, s(500)), s(30));
        assert_eq!(remaining(&plan, 2, s(30)), s(0));
        assert_eq!(remaining(&plan, 7, s(1)), s(0));
    }

    #[test]
    fn durations_read_as_minutes_and_seconds() {
        assert_eq!(human(Duration::from_secs(42)), "42 s");
        assert_eq!(human(Duration::from_secs(365)), "6 min 05 s");
        assert_eq!(human(Duration::from_secs(3720)), "1 h 02 min");
    }

    #[tokio::test]
    async fn a_hidden_display_still_tracks_the_plan() {
        let s = Duration::from_secs;
        let p = Progress::new(s(5), vec![("a".into(), s(10)), ("b".into(), s(20))], false);
        assert!(p.remaining() > s(34) && p.remaining() <= s(35));
        p.start_step(1);
        assert!(p.remaining() > s(19) && p.remaining() <= s(20));
        p.replan(&[s(10), s(60)]);
        assert!(p.remaining() > s(59));
        assert!(p.headline().starts_with("run: 2/2 b |"), "{}", p.headline());
        p.finish();
    }
}
