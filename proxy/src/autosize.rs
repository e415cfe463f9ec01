//! The driver of `pool_size = auto`: every tick it reads the slots' window counters, feeds
//! them to the pure [`Limiter`], resizes the slots when the limit moves, and publishes the
//! limit and its reason for SHOW POOLS and `/metrics`.
//!
//! It runs for the proxy's whole life and only acts while the config in force says `auto`,
//! so `SET pool_size = auto` / `= 8` on the admin console switch it on and off live.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::PoolSize;
use crate::context::Context;
use crate::pool::limiter::{Change, LimitStatus, Limiter, Sample, Tuning};
use crate::stats::LimitReason;

/// One limiter decision per tick: short enough to reach the knee within seconds, long
/// enough for a few dozen statements of a typical OLTP mix to finish.
pub const TICK: Duration = Duration::from_millis(250);

/// Runs until shutdown, for server `index`'s pool (each server has its own limiter).
/// Server 0's status is the one `Context::limit` publishes.
pub async fn run(ctx: Arc<Context>, index: usize) {
    let Some(pool) = ctx.pool_for(index).cloned() else {
        return;
    };
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
        let slots = pool.slots();
        let window = slots.take_window();
        let config = ctx.config();
        if config.pool_size != PoolSize::Auto {
            if limiter.take().is_some() && index == 0 {
                ctx.limit.set(LimitStatus::default());
            }
            continue;
        }
        let (min, max) = config.pool_bounds(pool.cap_for(config.max_backend_connections));
        let l = limiter.get_or_insert_with(|| {
            let l = Limiter::new(min, max, slots.size(), Tuning::default());
            apply(
                &ctx,
                &pool,
                &Change {
                    limit: l.limit(),
                    reason: LimitReason::Start,
                    detail: format!("auto: starting at {} (bounds {min}..{max})", l.limit()),
                },
            );
            l
        });
        if let Some(c) = l.set_bounds(min, max) {
            apply(&ctx, &pool, &c);
        }
        let sample = Sample {
            elapsed,
            completions: window.completions,
            busy: window.busy,
            demand: window.peak_waiting > 0 || window.peak_in_use >= slots.size(),
        };
        if let Some(c) = l.observe(sample) {
            apply(&ctx, &pool, &c);
        }
        if index == 0 {
            ctx.limit.set(LimitStatus {
                auto: true,
                reason: l.status().to_string(),
            });
        }
    }
}

fn apply(ctx: &Context, pool: &crate::pool::Pool, c: &Change) {
    pool.slots().resize(c.limit);
    ctx.stats.limit_changed(c.reason);
    tracing::debug!(limit = c.limit, reason = %c.reason, "{}", c.detail);
}
