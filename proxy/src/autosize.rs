//! The driver of `pool_size = auto`: every tick it reads the slots' window counters, feeds
//! them to the pure [`Limiter`], resizes the slots when the limit moves, and publishes the
//! limit and its reason for SHOW POOLS and `/metrics`.
//!
//! It runs for the proxy's whole life and only acts while the config in force says `auto`,
//! so `SET pool_size = auto` / `= 8` on the admin console switch it on and off live.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{Config, PoolSize};
use crate::context::Context;
use crate::pool::limiter::{Change, LimitReason, Limiter, Sample, Tuning};

/// One limiter decision per tick: short enough to reach the knee within seconds, long
/// enough for a few dozen statements of a typical OLTP mix to finish.
pub const TICK: Duration = Duration::from_millis(250);

/// What SHOW POOLS and `/metrics` show about the automatic limit.
#[derive(Clone, Debug, Default)]
pub struct LimitStatus {
    /// `pool_size = auto` is in force.
    pub auto: bool,
    /// The limiter's explanation of its last decision.
    pub reason: String,
}

/// Shared between the driver and the readers.
#[derive(Default)]
pub struct LimitState(Mutex<LimitStatus>);

impl LimitState {
    pub fn get(&self) -> LimitStatus {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set(&self, status: LimitStatus) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }
}

/// `[min, max]` for the limit: `max_pool_size`, and never more slots than backends allowed
/// (`max_open`: max_backend_connections in force).
pub fn bounds(config: &Config, max_open: u32) -> (u32, u32) {
    let max = config.max_pool_size.min(max_open).max(1);
    (config.min_pool_size.clamp(1, max), max)
}

/// Runs until shutdown.
pub async fn run(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut limiter: Option<Limiter> = None;
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = ctx.shutdown.cancelled() => return,
        }
        let now = Instant::now();
        let elapsed = now - last;
        last = now;
        let slots = ctx.pool.slots();
        let window = slots.take_window();
        let config = ctx.config();
        if config.pool_size != PoolSize::Auto {
            if limiter.take().is_some() {
                ctx.limit.set(LimitStatus::default());
            }
            continue;
        }
        let (min, max) = bounds(&config, ctx.pool.cap_for(config.max_backend_connections));
        let l = limiter.get_or_insert_with(|| {
            let l = Limiter::new(min, max, slots.size(), Tuning::default());
            apply(
                &ctx,
                &Change {
                    limit: l.limit(),
                    reason: LimitReason::Start,
                    detail: format!("auto: starting at {} (bounds {min}..{max})", l.limit()),
                },
            );
            l
        });
        if let Some(c) = l.set_bounds(min, max) {
            apply(&ctx, &c);
        }
        let sample = Sample {
            elapsed,
            completions: window.completions,
            busy: window.busy,
            demand: window.peak_waiting > 0 || window.peak_in_use >= slots.size(),
        };
        if let Some(c) = l.observe(sample) {
            apply(&ctx, &c);
        }
        ctx.limit.set(LimitStatus {
            auto: true,
            reason: l.status().to_string(),
        });
    }
}

fn apply(ctx: &Context, c: &Change) {
    ctx.pool.slots().resize(c.limit);
    ctx.stats.limit_changed(c.reason);
    tracing::debug!(limit = c.limit, reason = %c.reason, "{}", c.detail);
}
