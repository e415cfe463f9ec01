//! The floor for the overhead experiment: a bare TCP relay that copies bytes both ways and
//! does nothing else, on the same kind of runtime as the in-process sluice.
//!
//! Any proxy in front of MySQL pays for two extra loopback hops per query: a socket read and
//! a write each way, and the kernel's wake-up of whoever waits on the other end. On a
//! virtual machine those hops alone can cost more than a proxy's own logic. Measuring this
//! relay in the same run splits sluice's overhead into what any relay pays here and what
//! sluice adds on top (framing, pooling, session state).

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};

use crate::measure::resources::PROXY_THREAD_PREFIX;

/// A running bare relay; stops when dropped.
pub struct RelayFloor {
    rt: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
}

impl RelayFloor {
    /// Relays every connection to `backend` (`host:port`). Its threads carry the proxy
    /// prefix so their CPU is measured like sluice's; `cpus` only sizes the runtime, the
    /// threads inherit loadgen's pinning.
    pub async fn start(backend: &str, cpus: &[usize]) -> Result<RelayFloor> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cpus.len().max(1))
            .thread_name(format!("{PROXY_THREAD_PREFIX}floor"))
            .enable_all()
            .build()
            .context("building the relay runtime")?;
        let listener = rt
            .spawn(TcpListener::bind("127.0.0.1:0"))
            .await
            .context("the relay bind task panicked")?
            .context("binding the relay")?;
        let addr = listener.local_addr()?;
        let backend = backend.to_string();
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let backend = backend.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&backend).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (mut c, mut s) = (client, server);
                        let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
                    }
                });
            }
        });
        Ok(RelayFloor { rt: Some(rt), addr })
    }

    /// Where clients connect instead of the server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RelayFloor {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
