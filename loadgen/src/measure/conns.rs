//! Opening, closing and keeping the load connections between levels.

use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use mysql_async::{Conn, Opts};

use crate::workload::connect;

/// Opens `n` connections, a few dozen at a time.
pub async fn open_conns(opts: &Opts, n: usize) -> Result<Vec<Conn>> {
    stream::iter(0..n)
        .map(|_| connect(opts))
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// Closes connections politely (a dropped `Conn` leaves "Aborted connection" noise).
pub async fn close_conns(conns: Vec<Conn>) {
    stream::iter(conns)
        .for_each_concurrent(64, |c| async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.disconnect()).await;
        })
        .await;
}

/// Idle load connections kept between levels of one target, so a sweep does not reconnect
/// hundreds of clients per level. Each level first trims or tops it up to exactly the
/// count it needs, so the server never sees spare connections during a window.
#[derive(Default)]
pub struct ConnCache {
    conns: Vec<Conn>,
}

impl ConnCache {
    /// Exactly `n` connections: cached ones first (closing the surplus), then new ones.
    pub async fn take(&mut self, opts: &Opts, n: usize) -> Result<Vec<Conn>> {
        if self.conns.len() > n {
            let surplus = self.conns.split_off(n);
            close_conns(surplus).await;
        }
        let missing = n - self.conns.len();
        let fresh = open_conns(opts, missing)
            .await
            .with_context(|| format!("opening {missing} connections"))?;
        let mut conns = std::mem::take(&mut self.conns);
        conns.extend(fresh);
        Ok(conns)
    }

    /// Keeps `conns` for the next level.
    pub fn put_back(&mut self, conns: Vec<Conn>) {
        self.conns = conns;
    }

    /// Closes every cached connection.
    pub async fn close(&mut self) {
        close_conns(std::mem::take(&mut self.conns)).await;
    }
}
