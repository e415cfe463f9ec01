//! An in-process sluice for the proxy and overhead experiments.
//!
//! It runs on its own tokio runtime whose threads are named `sluice-*`, so its CPU time
//! is measured apart from loadgen's (see [`crate::measure::resources`]). Its threads inherit
//! loadgen's CPU pinning: the proxy sits next to the clients, as a sidecar would, and the
//! server keeps its cores to itself.

use std::net::SocketAddr;

use anyhow::{Context, Result};

/// A running in-process sluice.
pub struct InProcessProxy {
    rt: Option<tokio::runtime::Runtime>,
    handle: Option<sluice::ProxyHandle>,
    addr: SocketAddr,
}

impl InProcessProxy {
    /// Starts sluice in front of `backend` (`host:port`) with `pool` execution slots;
    /// `server_cpus` as in [`InProcessProxy::start_with`].
    pub async fn start(
        backend: &str,
        pool: usize,
        cpus: &[usize],
        server_cpus: Option<u32>,
    ) -> Result<InProcessProxy> {
        InProcessProxy::start_with(backend, cpus, server_cpus, |cfg| {
            cfg.pool_size = sluice::config::PoolSize::Fixed(pool as u32);
            cfg.max_backend_connections = cfg.max_backend_connections.max(pool as u32);
        })
        .await
    }

    /// Starts sluice with the bench user's config adjusted by `tune`. `server_cpus`: the
    /// server's CPU count when loadgen pinned it (`Run::server_cpu_count`), else `auto`.
    pub async fn start_with(
        backend: &str,
        cpus: &[usize],
        server_cpus: Option<u32>,
        tune: impl FnOnce(&mut sluice::Config),
    ) -> Result<InProcessProxy> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cpus.len().max(1))
            .thread_name("sluice-w")
            .enable_all()
            .build()
            .context("building the sluice runtime")?;
        let mut cfg = sluice::Config::for_backend(backend.to_string(), "bench", "bench");
        // Stopped only once its level is measured: statements still queued then belong to
        // clients that gave up at the window's close, so there is nothing to drain.
        cfg.shutdown_timeout = std::time::Duration::ZERO;
        if let Some(n) = server_cpus {
            cfg.server_cpus = sluice::config::ServerCpus::Fixed(n);
        }
        tune(&mut cfg);
        let handle = rt
            .spawn(async move { sluice::Proxy::bind(cfg).await })
            .await
            .context("the sluice start task panicked")?
            .map_err(|e| anyhow::anyhow!("starting sluice: {e}"))?;
        let addr = handle.local_addr();
        Ok(InProcessProxy {
            rt: Some(rt),
            handle: Some(handle),
            addr,
        })
    }

    /// Where clients connect, as the bench user.
    pub fn url(&self) -> String {
        format!("mysql://bench:bench@{}/bench", self.addr)
    }

    /// The running proxy's shared state (its pool limit, for timelines).
    pub fn context(&self) -> Option<std::sync::Arc<sluice::context::Context>> {
        self.handle.as_ref().map(|h| h.context().clone())
    }

    /// Shutdown without a drain (see `start_with`), then the runtime goes away.
    pub async fn stop(mut self) {
        if let (Some(rt), Some(handle)) = (self.rt.as_ref(), self.handle.take()) {
            let _ = rt.spawn(handle.shutdown()).await;
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for InProcessProxy {
    fn drop(&mut self) {
        // Dropping a runtime inside async code panics; let it go in the background.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
