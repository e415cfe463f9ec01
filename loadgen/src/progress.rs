//! The progress bar: experiment, level and time left. Its length is the planned seconds
//! of all levels; each level advances it as wall time passes. Plain log lines go to
//! stderr either way (through the bar when it is drawn, so they do not tear it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shared handle to the run's progress bar.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    done_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl Progress {
    /// A bar for `planned` seconds of levels; hidden when `visible` is false or stderr is
    /// not a terminal.
    pub fn new(planned: Duration, visible: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(
            Some(planned.as_millis() as u64),
            if visible {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        let style = ProgressStyle::with_template(
            "{spinner} {msg:40} [{bar:30}] {percent:>3}%  elapsed {elapsed}, about {eta} left",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar,
            done_ms: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Prints a line above the bar (or to stderr when the bar is hidden).
    pub fn log(&self, line: impl AsRef<str>) {
        if self.bar.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            self.bar.println(line.as_ref());
        }
    }

    /// Starts a level lasting `dur`; the returned guard advances the bar until dropped.
    pub fn level(&self, msg: String, dur: Duration) -> LevelTicker {
        self.bar.set_message(msg);
        let start = Instant::now();
        let bar = self.bar.clone();
        let base = self.done_ms.load(std::sync::atomic::Ordering::Relaxed);
        let cap = dur.as_millis() as u64;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let elapsed = (start.elapsed().as_millis() as u64).min(cap);
                bar.set_position(base + elapsed);
            }
        });
        LevelTicker {
            task,
            done_ms: self.done_ms.clone(),
            bar: self.bar.clone(),
            end: base + cap,
        }
    }

    /// Clears the bar at the end of the run.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Advances the bar during one level; on drop it jumps to the level's end.
pub struct LevelTicker {
    task: tokio::task::JoinHandle<()>,
    done_ms: Arc<std::sync::atomic::AtomicU64>,
    bar: ProgressBar,
    end: u64,
}

impl Drop for LevelTicker {
    fn drop(&mut self) {
        self.task.abort();
        self.done_ms
            .store(self.end, std::sync::atomic::Ordering::Relaxed);
        self.bar.set_position(self.end);
    }
}
