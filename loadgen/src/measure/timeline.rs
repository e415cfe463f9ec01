//! Rows sampled over time while load runs: experiment E's 250 ms samples (QPS, sluice's limit,
//! Threads_running) and the soak's minutes; and E's sampler.

#[cfg(feature = "proxy")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "proxy")]
use std::sync::Arc;
use std::time::Duration;
#[cfg(feature = "proxy")]
use std::time::Instant;

#[cfg(feature = "proxy")]
use anyhow::Result;

#[cfg(feature = "proxy")]
use super::client::Live;

/// E's sampling period (the limiter's own tick).
pub const SAMPLE: Duration = Duration::from_millis(250);

/// Experiment E: one sample of a configuration's run, every 250 ms.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TimelineRow {
    /// `auto` or `P=<n>`.
    pub config: String,
    /// Seconds since the first answered query.
    pub t_s: f64,
    /// Answered queries per second over the sample.
    pub qps: f64,
    /// sluice's concurrency limit (execution slots) at the sample.
    pub limit: u32,
    /// The server's Threads_running (the monitor's own query included).
    pub threads_running: Option<u64>,
    /// CPUs the server was pinned to at the sample (empty when not ours to pin).
    pub server_cpus: Option<usize>,
    /// Why the auto limit last moved (empty for fixed P).
    pub reason: String,
}

/// One row of `soak.csv`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SoakSample {
    pub minute: f64,
    pub rss_mib: f64,
    pub fds: u64,
    pub backends: u64,
    pub clients: u64,
    pub qps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

/// Samples every 250 ms until `stop`: QPS from the level's answered count, the proxy's limit, and
/// Threads_running over its own connection. Re-pins the server at the planned time.
/// Time zero is the first answered query. Returns the samples and when the re-pin happened.
#[cfg(feature = "proxy")]
#[allow(clippy::too_many_arguments)]
pub async fn sample(
    monitor: mysql_async::Opts,
    proxy: Option<Arc<sluice::context::Context>>,
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    repin: Option<(u32, Duration, Vec<usize>)>,
    mut cpus: Option<usize>,
    config: String,
) -> Result<(Vec<TimelineRow>, Option<f64>)> {
    use mysql_async::prelude::Queryable;
    let mut conn = crate::workload::connect(&monitor).await?;
    while live.answered.load(Ordering::Relaxed) == 0 && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let t0 = Instant::now();
    let mut last = (t0, live.answered.load(Ordering::Relaxed));
    let mut samples = Vec::new();
    let mut repinned = None;
    let mut tick = tokio::time::interval_at((t0 + SAMPLE).into(), SAMPLE);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let now = Instant::now();
        if let Some((pid, at, narrow)) = &repin {
            if repinned.is_none() && now - t0 >= *at {
                dbkit::affinity::pin_process(*pid, narrow)?;
                repinned = Some((now - t0).as_secs_f64());
                cpus = Some(narrow.len());
            }
        }
        let done = live.answered.load(Ordering::Relaxed);
        let qps = (done - last.1) as f64 / (now - last.0).as_secs_f64();
        last = (now, done);
        let running: Option<(String, u64)> = conn
            .query_first("SHOW GLOBAL STATUS LIKE 'Threads_running'")
            .await
            .ok()
            .flatten();
        let (limit, reason) = match &proxy {
            Some(ctx) => (ctx.pool.slots().size(), ctx.limit.get().reason),
            None => (0, String::new()),
        };
        samples.push(TimelineRow {
            config: config.clone(),
            t_s: (now - t0).as_secs_f64(),
            qps,
            limit,
            threads_running: running.map(|(_, v)| v),
            server_cpus: cpus,
            reason,
        });
    }
    let _ = conn.disconnect().await;
    Ok((samples, repinned))
}
