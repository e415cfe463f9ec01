//! Busy polling: the one home of *when* a wait for a backend's reply polls the socket
//! instead of sleeping (`backend_busy_poll`).
//!
//! Why: a process that sleeps in `epoll_wait` while its CPU has nothing else to run lets the
//! CPU idle, and on a virtual machine an idle vCPU is halted and handed back to the host. The
//! reply's wake-up then costs more than the whole relay, and a lone client's latency is
//! mostly wake-ups (docs/benchmarks.md has what the relay-cost runs found). HAProxy's
//! `busy-polling` and Linux's `SO_BUSY_POLL` make the same trade everywhere and always; sluice
//! makes it only where it pays:
//! - only for a reply's first bytes (`session::relay`): then the client is waiting for nothing
//!   but this, and a server that has started answering goes on without being waited for;
//! - only while this is the one command in the process being handled ([`Busy::alone`]). With
//!   more, the process has work between its wake-ups anyway, and polling would take the CPU
//!   from them (and from clients on the same host);
//! - for at most `backend_busy_poll`, yielding to every other task between polls;
//! - and only while polling has been measured quicker than sleeping on that backend
//!   connection ([`History`]), so a distant or slow server costs almost nothing, and neither
//!   does a host where polling slows the server down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{Error, PacketStream};
use crate::stats::BusyPollStats;

/// Commands the process is handling now (from the command's read to its answer's end).
#[derive(Default)]
pub struct Busy(AtomicUsize);

impl Busy {
    /// Counts one command until the guard drops (also when its future is dropped).
    pub fn enter(&self) -> BusyGuard<'_> {
        self.0.fetch_add(1, Ordering::Relaxed);
        BusyGuard(&self.0)
    }

    /// True while exactly one command (the caller's own) is being handled.
    pub fn alone(&self) -> bool {
        self.0.load(Ordering::Relaxed) <= 1
    }
}

pub struct BusyGuard<'a>(&'a AtomicUsize);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Per backend connection: how long its replies took lately when the wait polled and when
/// it slept (from the wait's start to the first bytes, averaged over about the last 8 of
/// each). A wait polls while that has been the quicker, and every 16th wait goes the other
/// way, so that both averages stay current. Polling can lose: a server too slow or too far
/// for the budget is polled for nothing and then slept for anyway, and where the polling
/// CPU competes with the server's (one physical CPU under both vCPUs, say) it may slow the
/// reply down. The measurement catches each, whatever the cause, and polling comes back
/// once it wins again.
/// The owner is the one session holding the connection, so no atomics.
#[derive(Debug, Default, Clone, Copy)]
pub struct History {
    /// Averages in µs (0: none yet).
    polled: u32,
    slept: u32,
    waits: u8,
    /// The last wait went the way not preferred.
    probe: bool,
}

/// How one wait goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Poll,
    Sleep,
}

/// A sample longer than this counts as this: the host's rare multi-millisecond stalls hit
/// both ways of waiting, and one of them would outweigh a hundred ordinary replies.
const SAMPLE_CAP_US: u32 = 2_000;

impl History {
    /// How this wait goes: the way measured quicker lately (polling until both are known),
    /// the other way every 16th wait.
    pub fn mode(&mut self) -> Mode {
        self.waits = self.waits.wrapping_add(1);
        let poll = self.polled == 0 || self.slept == 0 || self.polled <= self.slept;
        self.probe = self.waits.is_multiple_of(16);
        if poll != self.probe {
            Mode::Poll
        } else {
            Mode::Sleep
        }
    }

    /// A reply that took `took` waiting the `mode` way. A probe's sample weighs half, so that
    /// a way that has become quicker wins within a few probes.
    pub fn record(&mut self, mode: Mode, took: Duration) {
        let us = u32::try_from(took.as_micros())
            .unwrap_or(u32::MAX)
            .clamp(1, SAMPLE_CAP_US);
        let avg = match mode {
            Mode::Poll => &mut self.polled,
            Mode::Sleep => &mut self.slept,
        };
        *avg = match (*avg, self.probe) {
            (0, _) => us,
            (a, true) => (a + us) / 2,
            (a, false) => (a * 7 + us) / 8,
        };
    }
}

/// What a relay needs to poll its reply's first bytes.
#[derive(Clone, Copy)]
pub struct BusyPoll<'a> {
    /// `backend_busy_poll` (zero: never).
    pub budget: Duration,
    pub busy: &'a Busy,
    pub stats: &'a BusyPollStats,
}

impl BusyPoll<'_> {
    /// Waits for more of the backend's reply (`PacketStream::fill`), polling first when the
    /// rules above allow. False on EOF.
    pub async fn fill(
        self,
        stream: &mut PacketStream,
        history: &mut History,
    ) -> Result<bool, Error> {
        if self.budget.is_zero() || !self.busy.alone() {
            return stream.fill().await;
        }
        let start = Instant::now();
        let mode = history.mode();
        if mode == Mode::Poll {
            let until = start + self.budget;
            let polled = stream
                .fill_polling(|| self.busy.alone() && Instant::now() < until)
                .await?;
            if let Some(more) = polled {
                history.record(Mode::Poll, start.elapsed());
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(more);
            }
            if Instant::now() < until {
                // Another command arrived: this wait says nothing about polling.
                return stream.fill().await;
            }
            self.stats.misses.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
        }
        // A sleeping wait (or the rest of a missed poll) is measured the same way.
        let more = stream.fill().await?;
        history.record(mode, start.elapsed());
        Ok(more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1000.0)
    }

    /// The modes of the next `n` waits, each recorded as taking `poll` or `sleep` ms.
    fn run(h: &mut History, n: usize, poll: f64, sleep: f64) -> Vec<Mode> {
        (0..n)
            .map(|_| {
                let m = h.mode();
                h.record(m, ms(if m == Mode::Poll { poll } else { sleep }));
                m
            })
            .collect()
    }

    fn polls(modes: &[Mode]) -> usize {
        modes.iter().filter(|m| **m == Mode::Poll).count()
    }

    #[test]
    fn waits_poll_while_polling_is_quicker_and_sleep_while_sleeping_is() {
        let mut h = History::default();
        let first = run(&mut h, 64, 0.09, 0.15);
        assert_eq!(first[0], Mode::Poll, "polling until sleeping is measured");
        assert_eq!(
            polls(&first),
            60,
            "quicker polled: all but every 16th wait poll"
        );
        // The host changes: polled replies now take longer than slept ones.
        let after = run(&mut h, 64, 0.40, 0.15);
        assert!(
            polls(&after) <= 6,
            "sleeping wins within a few waits: {} polls",
            polls(&after)
        );
        let later = run(&mut h, 64, 0.40, 0.15);
        assert_eq!(polls(&later), 4, "then only every 16th wait polls");
        // And back: polling pays again.
        let back = run(&mut h, 64, 0.09, 0.15);
        assert!(
            polls(&back[48..]) >= 15,
            "polling is back within 3 probes: {back:?}"
        );
    }

    #[test]
    fn a_multi_millisecond_stall_counts_as_two_milliseconds() {
        let mut h = History::default();
        run(&mut h, 33, 0.09, 0.15);
        assert_eq!(h.mode(), Mode::Poll);
        h.record(Mode::Poll, Duration::from_secs(1));
        assert!(
            h.polled <= 90 + 2000 / 8,
            "one stall of a second weighs as 2ms: {}",
            h.polled
        );
        assert_eq!(
            h.mode(),
            Mode::Sleep,
            "and it can tip the choice only for a while"
        );
    }

    #[test]
    fn alone_counts_every_command_until_its_guard_drops() {
        let busy = Busy::default();
        assert!(busy.alone());
        let a = busy.enter();
        assert!(busy.alone(), "its own command only");
        let b = busy.enter();
        assert!(!busy.alone());
        drop(a);
        assert!(busy.alone());
        drop(b);
        assert_eq!(busy.0.load(Ordering::Relaxed), 0);
    }
}
