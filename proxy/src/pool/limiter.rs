//! The adaptive concurrency limit behind `pool_size = auto`: pure logic, fed one [`Sample`]
//! per tick (completions and summed backend time), answering with a new limit when it moves.
//!
//! The target is the server's throughput knee: the smallest limit whose throughput is within
//! a few percent of the best, i.e. where Kleinrock's power (throughput / latency) peaks.
//! Above the knee extra statements only queue inside the server (latency grows, throughput
//! does not); below it the server idles.
//!
//! The limiter is a hill climber that runs controlled experiments, in the spirit of BBR's
//! probing and Vegas' "compare against what the path did a moment ago":
//! * **Hold**: measure throughput X and mean backend time R at the current limit.
//! * **Probe up** by `step`: after one settling tick, measure again. Keep the new limit only if
//!   X grew by at least `gain_up` (else back off: the extra slots only added latency). Each
//!   accepted step doubles the next one (slow start), so a cold pool reaches the knee in a
//!   few probes.
//! * **Probe down** by `step`: keep the smaller limit if X fell by at most `loss_down` (the
//!   same work with less queueing, so the power went up), or by no more than the noise while
//!   the power X/R did not fall; else restore.
//!
//! Up and down probes alternate after every hold, so the limit keeps re-finding the knee as
//! the load or the server's capacity change. A probe that finds nothing better doubles the
//! next hold (up to `max_hold_ticks`), so a limit sitting at the knee is rarely taxed by a
//! probe below it; a kept probe or a slowdown brings the hold back to `hold_ticks`. Probes
//! below a small knee are dear (at a knee of 2, a probe to 1 halves throughput while it
//! lasts): a down probe whose first tick already lost 1.5 x `far_below` is undone at once,
//! and one that lost more than `far_below` makes the next wait one extra hold, then two,
//! then three (a kept probe or a slowdown resets this). A sharp slowdown at an unchanged
//! limit (the server lost CPUs) skips the hold and probes down at once. Comparisons are always between
//! two adjacent measurements, so slow drift in the load does not accumulate; the asymmetric
//! thresholds are the hysteresis. A difference within twice the measurements' standard error
//! (from the spread of the per-tick rates) is treated as no difference, and without evidence
//! the smaller limit wins, so a noisy host makes the limiter conservative, not erratic.
//! Without demand (nobody queued and a slot spare) there is
//! nothing to learn: the limiter holds and reports idle.

use std::sync::Mutex;
use std::time::Duration;

use crate::stats::LimitReason;

/// What SHOW POOLS and `/metrics` show about the automatic limit.
#[derive(Clone, Debug, Default)]
pub struct LimitStatus {
    /// `pool_size = auto` is in force.
    pub(crate) auto: bool,
    /// The limiter's explanation of its last decision.
    pub reason: String,
}

/// The last [`LimitStatus`], shared between the `autosize` driver (which sets it every
/// tick) and its readers (SHOW POOLS, `/metrics`).
#[derive(Default)]
pub struct LimitState(Mutex<LimitStatus>);

impl LimitState {
    pub fn get(&self) -> LimitStatus {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub(crate) fn set(&self, status: LimitStatus) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }
}

/// What one tick saw at the slots.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    /// Wall time the tick covered.
    pub(crate) elapsed: Duration,
    /// Statements that finished on the backend.
    pub(crate) completions: u64,
    /// Their summed backend time (slot hold time per statement).
    pub(crate) busy: Duration,
    /// Someone queued for a slot, or every slot was taken, at some point in the tick.
    pub(crate) demand: bool,
}

/// Knobs of the search; the defaults suit 250 ms ticks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Ticks ignored after a change, while statements admitted under the old limit finish.
    pub(crate) settle_ticks: u32,
    /// Ticks per measurement (more when too few statements finished).
    pub(crate) measure_ticks: u32,
    /// Ticks measured at a limit before the next probe.
    pub(crate) hold_ticks: u32,
    /// Each probe that finds nothing better doubles the hold, up to this: a limit at the
    /// knee is not taxed by probes every few ticks, and any kept probe or slowdown resets it.
    pub(crate) max_hold_ticks: u32,
    /// A measurement needs at least this many completions (up to `max_measure_ticks`).
    pub(crate) min_completions: u64,
    pub(crate) max_measure_ticks: u32,
    /// An up probe must raise throughput by this fraction to be kept.
    pub(crate) gain_up: f64,
    /// A down probe may lower throughput by at most this fraction to be kept.
    pub(crate) loss_down: f64,
    /// Latency up by this fraction with throughput down by half of it, at the same limit,
    /// means the server slowed: probe down without waiting.
    pub(crate) slowdown: f64,
    /// A down probe that lost more than this fraction of throughput was far below the knee:
    /// the next down probes from the same limit are skipped (one more each time, up to
    /// `max_down_skips`), since at a small limit each costs a large share of throughput.
    pub(crate) far_below: f64,
    pub(crate) max_down_skips: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            settle_ticks: 1,
            measure_ticks: 3,
            hold_ticks: 4,
            max_hold_ticks: 24,
            min_completions: 40,
            max_measure_ticks: 16,
            gain_up: 0.04,
            loss_down: 0.03,
            slowdown: 0.25,
            far_below: 0.25,
            max_down_skips: 3,
        }
    }
}

/// A limit change: the new value, why, and the operator-facing explanation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    pub(crate) limit: u32,
    pub(crate) reason: LimitReason,
    pub(crate) detail: String,
}

/// Throughput and mean backend time over a measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Measure {
    /// Statements per second.
    x: f64,
    /// Mean backend seconds per statement.
    r: f64,
    /// Relative standard error of `x`, from the spread of the per-tick rates.
    noise: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    ticks: u32,
    completions: u64,
    busy_s: f64,
    elapsed_s: f64,
    /// Sum and sum of squares of the per-tick rates.
    rate_sum: f64,
    rate_sq: f64,
}

impl Acc {
    fn add(&mut self, s: &Sample) {
        self.ticks += 1;
        self.completions += s.completions;
        self.busy_s += s.busy.as_secs_f64();
        self.elapsed_s += s.elapsed.as_secs_f64();
        let secs = s.elapsed.as_secs_f64();
        if secs > 0.0 {
            let rate = s.completions as f64 / secs;
            self.rate_sum += rate;
            self.rate_sq += rate * rate;
        }
    }

    fn noise(&self) -> f64 {
        let n = f64::from(self.ticks);
        if n < 2.0 || self.rate_sum <= 0.0 {
            return 0.0;
        }
        let mean = self.rate_sum / n;
        let var = ((self.rate_sq - n * mean * mean) / (n - 1.0)).max(0.0);
        (var / n).sqrt() / mean
    }

    /// What was measured so far, however short.
    fn partial(&self) -> Option<Measure> {
        (self.completions > 0 && self.elapsed_s > 0.0).then(|| Measure {
            x: self.completions as f64 / self.elapsed_s,
            r: self.busy_s / self.completions as f64,
            noise: self.noise(),
        })
    }

    /// `Some` once the measurement is long and large enough.
    fn ready(&self, t: &Tuning, ticks: u32) -> Option<Measure> {
        let enough = self.completions >= t.min_completions || self.ticks >= t.max_measure_ticks;
        if self.ticks < ticks || !enough || self.completions == 0 || self.elapsed_s <= 0.0 {
            return None;
        }
        Some(Measure {
            x: self.completions as f64 / self.elapsed_s,
            r: self.busy_s / self.completions as f64,
            noise: self.noise(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Up,
    Down,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting out `left` ticks after a change, then holding.
    Settle { left: u32 },
    /// Measuring the current limit.
    Hold { acc: Acc },
    /// Trying `limit` (moved from `from`), compared against `base` measured at `from`.
    Probe {
        dir: Dir,
        from: u32,
        base: Measure,
        settle: u32,
        acc: Acc,
    },
}

/// The limiter's state. `observe` once per tick.
#[derive(Clone, Debug)]
pub(crate) struct Limiter {
    min: u32,
    max: u32,
    limit: u32,
    tuning: Tuning,
    phase: Phase,
    next: Dir,
    step: u32,
    /// Ticks of the current hold (`hold_ticks`, doubled by every fruitless probe).
    hold: u32,
    /// The last hold measurement and the limit it was taken at (slowdown detection).
    last_hold: Option<(u32, Measure)>,
    /// Down probes still to skip (see `Tuning::far_below`), and how many the next far-below
    /// restore will set.
    down_skips: u32,
    next_down_skips: u32,
    idle: bool,
    status: String,
}

fn pct(f: f64) -> String {
    format!("{:+.0}%", f * 100.0)
}

impl Limiter {
    /// Starts at `start` clamped into `[min, max]`.
    pub(crate) fn new(min: u32, max: u32, start: u32, tuning: Tuning) -> Limiter {
        let max = max.max(min).max(1);
        let min = min.clamp(1, max);
        let limit = start.clamp(min, max);
        Limiter {
            min,
            max,
            limit,
            hold: tuning.hold_ticks,
            tuning,
            phase: Phase::Hold {
                acc: Acc::default(),
            },
            next: Dir::Up,
            step: 1,
            last_hold: None,
            down_skips: 0,
            next_down_skips: 1,
            idle: false,
            status: format!("start at {limit}"),
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// What the limiter is doing, in an operator's words ("probe up: throughput +12% ...").
    pub(crate) fn status(&self) -> &str {
        &self.status
    }

    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.idle
    }

    /// New bounds (a config change). Clamps the limit and starts measuring afresh.
    pub(crate) fn set_bounds(&mut self, min: u32, max: u32) -> Option<Change> {
        let max = max.max(min).max(1);
        let min = min.clamp(1, max);
        if (min, max) == (self.min, self.max) {
            return None;
        }
        self.min = min;
        self.max = max;
        let clamped = self.limit.clamp(min, max);
        self.step = 1;
        self.phase = Phase::Settle {
            left: self.tuning.settle_ticks,
        };
        if clamped == self.limit {
            return None;
        }
        let detail = format!("bounds now {min}..{max}: {} -> {clamped}", self.limit);
        Some(self.set(clamped, LimitReason::Bounds, detail))
    }

    fn set(&mut self, limit: u32, reason: LimitReason, detail: String) -> Change {
        self.limit = limit;
        self.status = detail.clone();
        Change {
            limit,
            reason,
            detail,
        }
    }

    /// Feeds one tick; `Some` when the limit changes.
    pub(crate) fn observe(&mut self, s: Sample) -> Option<Change> {
        if !s.demand {
            // Nothing waits: any limit would do, and nothing can be learnt. A probe in
            // progress is abandoned where it stands (it was never a bottleneck).
            if !self.idle {
                self.idle = true;
                self.status = format!("idle: no statement queued, holding at {}", self.limit);
            }
            self.phase = Phase::Hold {
                acc: Acc::default(),
            };
            return None;
        }
        if self.idle {
            self.idle = false;
            self.status = format!("demand again: measuring at {}", self.limit);
            self.step = 1;
            self.reset_down_skips();
        }
        let t = self.tuning;
        match self.phase {
            Phase::Settle { left } => {
                self.phase = if left <= 1 {
                    Phase::Hold {
                        acc: Acc::default(),
                    }
                } else {
                    Phase::Settle { left: left - 1 }
                };
                None
            }
            Phase::Hold { mut acc } => {
                acc.add(&s);
                let Some(m) = acc.ready(&t, self.hold) else {
                    self.phase = Phase::Hold { acc };
                    return None;
                };
                let slowed = self
                    .last_hold
                    .filter(|(l, _)| *l == self.limit)
                    .map(|(_, b)| b);
                self.last_hold = Some((self.limit, m));
                let slowdown = matches!(slowed, Some(b)
                    if m.r > b.r * (1.0 + t.slowdown) && m.x < b.x * (1.0 - t.slowdown / 2.0));
                if slowdown {
                    self.step = 1;
                    self.hold = t.hold_ticks;
                    self.reset_down_skips();
                    return self.start_probe(Dir::Down, m);
                }
                if self.next == Dir::Down && self.down_skips > 0 {
                    self.down_skips -= 1;
                    self.status = format!(
                        "holding at {}: the last probe below it lost far too much ({} more holds before the next)",
                        self.limit, self.down_skips
                    );
                    self.phase = Phase::Hold {
                        acc: Acc::default(),
                    };
                    return None;
                }
                let dir = self.next;
                self.start_probe(dir, m)
            }
            Phase::Probe {
                dir,
                from,
                base,
                settle,
                mut acc,
            } => {
                if settle > 0 {
                    self.phase = Phase::Probe {
                        dir,
                        from,
                        base,
                        settle: settle - 1,
                        acc,
                    };
                    return None;
                }
                acc.add(&s);
                if dir == Dir::Down && acc.ticks == 1 {
                    // A loss this large in the first tick is no noise: restore now instead of
                    // paying for the whole measurement (at a knee of 2 it costs half the
                    // throughput while it lasts).
                    if let Some(m) = acc.partial() {
                        if m.x < base.x * (1.0 - 1.5 * t.far_below) {
                            return self.judge(dir, from, base, m);
                        }
                    }
                }
                let Some(m) = acc.ready(&t, t.measure_ticks) else {
                    self.phase = Phase::Probe {
                        dir,
                        from,
                        base,
                        settle,
                        acc,
                    };
                    return None;
                };
                self.judge(dir, from, base, m)
            }
        }
    }

    /// Moves the limit one step in `dir` (the other way at a bound), or holds again when
    /// `min == max`.
    fn start_probe(&mut self, dir: Dir, base: Measure) -> Option<Change> {
        let dir = match dir {
            Dir::Up if self.limit >= self.max => Dir::Down,
            Dir::Down if self.limit <= self.min => Dir::Up,
            d => d,
        };
        let to = match dir {
            Dir::Up => self.limit.saturating_add(self.step).min(self.max),
            Dir::Down => self.limit.saturating_sub(self.step).max(self.min),
        };
        if to == self.limit {
            self.phase = Phase::Hold {
                acc: Acc::default(),
            };
            return None;
        }
        let from = self.limit;
        self.phase = Phase::Probe {
            dir,
            from,
            base,
            settle: self.tuning.settle_ticks,
            acc: Acc::default(),
        };
        let (reason, word) = match dir {
            Dir::Up => (LimitReason::ProbeUp, "up"),
            Dir::Down => (LimitReason::ProbeDown, "down"),
        };
        let detail = format!(
            "probing {word}: {from} -> {to} (at {from}: {:.0} stmt/s, {:.1} ms backend time)",
            base.x,
            base.r * 1e3
        );
        Some(self.set(to, reason, detail))
    }

    fn reset_down_skips(&mut self) {
        self.down_skips = 0;
        self.next_down_skips = 1;
    }

    /// Keeps or reverts a probe that measured `m` against `base`.
    fn judge(&mut self, dir: Dir, from: u32, base: Measure, m: Measure) -> Option<Change> {
        let t = self.tuning;
        let gain = m.x / base.x - 1.0;
        let latency = m.r / base.r - 1.0;
        let to = self.limit;
        // On a busy host the throughput swings; a difference smaller than twice the combined
        // standard error is no evidence. An up probe must show a clear gain; a down probe is
        // undone by a clear loss, or by a loss within the noise that the power confirms.
        let noise = 2.0 * (base.noise.powi(2) + m.noise.powi(2)).sqrt();
        // Kleinrock's power (throughput per unit of backend time): the knee is where it peaks.
        let power =
            (m.x / m.r.max(f64::MIN_POSITIVE)) / (base.x / base.r.max(f64::MIN_POSITIVE)) - 1.0;
        let kept = match dir {
            Dir::Up => gain >= t.gain_up.max(noise),
            // A loss within `loss_down` is always fine. A larger one that the noise could
            // explain is kept only if the power did not fall: below the knee a smaller limit
            // loses throughput without making statements faster, and noise must not hide that.
            Dir::Down => gain >= -t.loss_down || (gain >= -noise && power >= 0.0),
        };
        if kept {
            self.reset_down_skips();
            let word = if dir == Dir::Up { "up" } else { "down" };
            self.status = format!(
                "probe {word}: throughput {} latency {} ({from} -> {to}), kept",
                pct(gain),
                pct(latency)
            );
            self.hold = t.hold_ticks;
            // Keep going the same way with a bigger stride: the knee is further along.
            self.step = self.step.saturating_mul(2).min((to / 2).max(1));
            self.next = dir;
            self.last_hold = Some((to, m));
            return self.start_probe(dir, m);
        }
        self.step = 1;
        self.hold = self
            .hold
            .saturating_mul(2)
            .min(t.max_hold_ticks.max(t.hold_ticks));
        if dir == Dir::Down && gain < -t.far_below {
            self.down_skips = self.next_down_skips;
            self.next_down_skips = (self.next_down_skips + 1).min(t.max_down_skips);
        }
        self.phase = Phase::Settle {
            left: self.tuning.settle_ticks,
        };
        let (reason, detail) = match dir {
            Dir::Up => {
                self.next = Dir::Down;
                let band = t.gain_up.max(noise) * 100.0;
                let what = if latency > 0.0 {
                    format!(
                        "latency {} for throughput {} (needs > +{band:.0}%)",
                        pct(latency),
                        pct(gain)
                    )
                } else {
                    format!("throughput only {} (needs > +{band:.0}%)", pct(gain))
                };
                (
                    LimitReason::BackOff,
                    format!("back off: {what}, {to} -> {from}"),
                )
            }
            Dir::Down => {
                self.next = Dir::Up;
                (
                    LimitReason::Restore,
                    format!(
                        "restore: throughput {} at {to} (beyond -{:.0}%), {to} -> {from}",
                        pct(gain),
                        t.loss_down.max(noise) * 100.0
                    ),
                )
            }
        };
        Some(self.set(from, reason, detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server with `cores` CPUs, `service` seconds per statement alone: throughput grows
    /// linearly up to the cores, then stays flat while latency grows (a hard knee), with a
    /// small deterministic noise.
    struct Server {
        cores: f64,
        service: f64,
        noise: u64,
    }

    impl Server {
        fn tick(&mut self, limit: u32) -> Sample {
            self.noise = self
                .noise
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let jitter = 1.0 + ((self.noise >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.04;
            let l = f64::from(limit);
            let x = l.min(self.cores) / self.service * jitter;
            let r = self.service * (l / self.cores).max(1.0);
            let completions = (x * 0.25).round() as u64;
            Sample {
                elapsed: Duration::from_millis(250),
                completions,
                busy: Duration::from_secs_f64(r * completions as f64),
                demand: true,
            }
        }
    }

    fn run(l: &mut Limiter, s: &mut Server, ticks: usize) -> Vec<u32> {
        (0..ticks)
            .map(|_| {
                let sample = s.tick(l.limit());
                l.observe(sample);
                assert!(l.limit() >= l.min && l.limit() <= l.max);
                l.limit()
            })
            .collect()
    }

    fn mean(v: &[u32]) -> f64 {
        v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64
    }

    #[test]
    fn converges_to_the_knee_from_below() {
        let mut s = Server {
            cores: 6.0,
            service: 0.004,
            noise: 1,
        };
        let mut l = Limiter::new(1, 64, 1, Tuning::default());
        let trace = run(&mut l, &mut s, 200);
        // Reaches the knee quickly (40 ticks = 10 s at 250 ms)...
        let first = trace.iter().position(|&x| x >= 6).unwrap();
        assert!(first < 40, "reached 6 after {first} ticks: {trace:?}");
        // ...and stays around it: probes make it wander by a step at most.
        let tail = &trace[100..];
        let m = mean(tail);
        assert!((5.5..=7.5).contains(&m), "mean {m}: {tail:?}");
        assert!(tail.iter().all(|&x| (4..=10).contains(&x)), "{tail:?}");
    }

    /// A shared host: every tick's throughput swings by up to ±25 % on top of the server's
    /// own curve. Probing down below the knee loses throughput without making statements
    /// faster, and the noise must not hide that.
    #[test]
    fn a_noisy_host_does_not_talk_it_below_the_knee() {
        let mut s = Server {
            cores: 2.0,
            service: 0.01,
            noise: 11,
        };
        let mut l = Limiter::new(1, 64, 1, Tuning::default());
        let mut rng = 12_345u64;
        let trace: Vec<u32> = (0..600)
            .map(|_| {
                let mut sample = s.tick(l.limit());
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let swing = 1.0 + ((rng >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.5;
                let done = (sample.completions as f64 * swing).round() as u64;
                // The same backend time per statement, more or fewer statements.
                sample.busy = sample
                    .busy
                    .mul_f64(done as f64 / sample.completions.max(1) as f64);
                sample.completions = done;
                l.observe(sample);
                l.limit()
            })
            .collect();
        let tail = &trace[100..];
        let below = tail.iter().filter(|&&x| x < 2).count();
        assert!(
            below * 5 <= tail.len(),
            "below the knee {below} of {} ticks: {tail:?}",
            tail.len()
        );
        assert!(mean(tail) <= 6.0, "mean {}: {tail:?}", mean(tail));
    }

    /// At a knee of 2, a probe down to 1 halves throughput while it lasts. Once the limit
    /// has settled, probing must cost only a few percent of what the knee itself delivers.
    #[test]
    fn probing_costs_little_throughput_at_a_small_knee() {
        let server = || Server {
            cores: 2.0,
            service: 0.01,
            noise: 5,
        };
        let mut s = server();
        let mut l = Limiter::new(1, 64, 1, Tuning::default());
        let mut auto = 0;
        for i in 0..1200 {
            let sample = s.tick(l.limit());
            if i >= 120 {
                auto += sample.completions;
            }
            l.observe(sample);
        }
        let mut s = server();
        let fixed: u64 = (0..1200).map(|_| s.tick(2).completions).skip(120).sum();
        let ratio = auto as f64 / fixed as f64;
        eprintln!("auto / fixed knee = {ratio:.3}");
        assert!(
            ratio >= 0.97,
            "auto did {ratio:.3} of the knee's throughput"
        );
    }

    #[test]
    fn comes_down_from_an_oversized_start() {
        let mut s = Server {
            cores: 4.0,
            service: 0.005,
            noise: 7,
        };
        let mut l = Limiter::new(1, 64, 40, Tuning::default());
        let trace = run(&mut l, &mut s, 400);
        let m = mean(&trace[300..]);
        assert!((3.5..=6.0).contains(&m), "mean {m}: {trace:?}");
    }

    #[test]
    fn follows_when_the_server_loses_capacity_and_gets_it_back() {
        let mut s = Server {
            cores: 8.0,
            service: 0.004,
            noise: 3,
        };
        let mut l = Limiter::new(1, 64, 1, Tuning::default());
        run(&mut l, &mut s, 160);
        assert!(l.limit() >= 7, "{}", l.limit());
        // Half the CPUs gone: the limit follows within 40 ticks (10 s).
        s.cores = 2.0;
        let trace = run(&mut l, &mut s, 120);
        let followed = trace.iter().position(|&x| x <= 3).unwrap();
        assert!(followed < 40, "took {followed} ticks: {trace:?}");
        let m = mean(&trace[60..]);
        assert!((1.8..=3.5).contains(&m), "mean {m}: {trace:?}");
        // And back up when capacity returns.
        s.cores = 8.0;
        let trace = run(&mut l, &mut s, 160);
        let m = mean(&trace[80..]);
        assert!((6.5..=10.0).contains(&m), "mean {m}: {trace:?}");
    }

    #[test]
    fn respects_bounds() {
        let mut s = Server {
            cores: 32.0,
            service: 0.002,
            noise: 5,
        };
        let mut l = Limiter::new(3, 5, 1, Tuning::default());
        assert_eq!(l.limit(), 3);
        let trace = run(&mut l, &mut s, 100);
        assert!(trace.iter().all(|&x| (3..=5).contains(&x)));
        // At the ceiling, with only the periodic down probes below it.
        assert!(mean(&trace[50..]) > 4.5, "{trace:?}");
        // Tighter bounds clamp at once and say why.
        while l.limit() != 5 {
            let sample = s.tick(l.limit());
            l.observe(sample);
        }
        let c = l.set_bounds(2, 4).unwrap();
        assert_eq!((c.limit, c.reason), (4, LimitReason::Bounds));
        // A server slower than the floor: the limit stays at min.
        s.cores = 1.0;
        let trace = run(&mut l, &mut s, 200);
        assert!(trace.iter().all(|&x| (2..=4).contains(&x)));
        assert!(mean(&trace[100..]) < 3.0);
    }

    #[test]
    fn holds_when_idle() {
        let mut l = Limiter::new(1, 64, 4, Tuning::default());
        for _ in 0..200 {
            let change = l.observe(Sample {
                elapsed: Duration::from_millis(250),
                completions: 30,
                busy: Duration::from_millis(60),
                demand: false,
            });
            assert_eq!(change, None);
        }
        assert_eq!(l.limit(), 4);
        assert!(l.is_idle());
        assert!(l.status().starts_with("idle"), "{}", l.status());
    }

    #[test]
    fn every_change_says_why() {
        let mut s = Server {
            cores: 4.0,
            service: 0.004,
            noise: 9,
        };
        let mut l = Limiter::new(1, 64, 1, Tuning::default());
        let mut reasons = std::collections::HashSet::new();
        for _ in 0..200 {
            let sample = s.tick(l.limit());
            if let Some(c) = l.observe(sample) {
                assert_eq!(c.limit, l.limit());
                assert!(!c.detail.is_empty());
                reasons.insert(c.reason);
            }
        }
        for r in [
            LimitReason::ProbeUp,
            LimitReason::ProbeDown,
            LimitReason::BackOff,
            LimitReason::Restore,
        ] {
            assert!(reasons.contains(&r), "{r} never happened: {reasons:?}");
        }
    }
}
