//! The cap on open backend connections (`max_backend_connections`): a fixed number, or
//! `auto`, derived from the server's `@@max_connections`.
//!
//! Idle pinned connections cost the server little; what protects it is `pool_size`. So the
//! cap only has to keep sluice inside what the server accepts, less headroom for other
//! clients, monitoring and sluice's own control connections. The value is read on the first
//! backend connection sluice opens (at start, or at first contact when sluice started before
//! its server); until then MySQL's default is assumed.
//!
//! The same connection reads the server's CPU count where the server tells it (MariaDB's
//! `@@thread_pool_size`, which is its CPU count unless set by hand), for `server_cpus = auto`:
//! pipelining needs it to tell when the server runs more statements than it has CPUs.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Pool;
use crate::config::BackendLimit;
use crate::conn::{self, BackendConn};
use crate::protocol::request::query as query_payload;
use crate::protocol::{buf::Reader, ResponseKind, ResponseTracker};

/// MySQL's and MariaDB's default `max_connections`, assumed until the server says otherwise.
pub(crate) const ASSUMED_SERVER_MAX: u32 = 151;
/// After a failed read, the next new connection tries again only after this.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Connections `auto` leaves to everyone but sluice: a tenth, at least 10.
pub(crate) fn headroom(server_max: u32) -> u32 {
    (server_max / 10).max(10)
}

/// `max_backend_connections = auto` for a server with `server_max` connections.
pub(crate) fn derived_cap(server_max: u32) -> u32 {
    server_max.saturating_sub(headroom(server_max)).max(1)
}

/// Whether the server's limit is known, being read, or failed to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Learned {
    #[default]
    Unknown,
    Reading,
    Known(u32),
    Failed(Instant),
}

impl Pool {
    /// max_backend_connections in force (auto resolved).
    pub fn max_open(&self) -> u32 {
        self.shared.max_open.load(Ordering::Relaxed)
    }

    /// The server's max_connections, once read.
    pub(crate) fn server_max_connections(&self) -> Option<u32> {
        match *self.learned() {
            Learned::Known(n) => Some(n),
            _ => None,
        }
    }

    /// The server's max_connections when the cap in force was derived from it.
    pub(crate) fn cap_from_server(&self) -> Option<u32> {
        match self.configured_limit() {
            BackendLimit::Auto => self.server_max_connections(),
            BackendLimit::Fixed(_) => None,
        }
    }

    /// The setting as configured (`auto` or a number).
    pub(crate) fn configured_limit(&self) -> BackendLimit {
        *self.shared.limit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `limit` resolves to against this server.
    pub(crate) fn cap_for(&self, limit: BackendLimit) -> u32 {
        match limit {
            BackendLimit::Fixed(n) => n,
            BackendLimit::Auto => {
                derived_cap(self.server_max_connections().unwrap_or(ASSUMED_SERVER_MAX))
            }
        }
    }

    /// Sets the configured limit and recomputes the cap; wakes whoever waits for room.
    pub(super) fn set_limit(&self, limit: BackendLimit) {
        *self.shared.limit.lock().unwrap_or_else(|p| p.into_inner()) = limit;
        self.refresh_cap();
    }

    fn refresh_cap(&self) {
        let cap = self.cap_for(self.configured_limit());
        self.shared.max_open.store(cap, Ordering::Relaxed);
        self.shared.places.freed.notify_waiters();
        self.shared.freed.notify_waiters();
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.shared
            .learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Reads `@@max_connections` on a new connection unless it is known (or being read).
    /// An I/O error is returned (the connection is then unusable); a refusal is only logged.
    pub(super) async fn learn_limit(&self, conn: &mut BackendConn) -> Result<(), conn::Error> {
        {
            let mut learned = self.learned();
            match *learned {
                Learned::Known(_) | Learned::Reading => return Ok(()),
                Learned::Failed(at) if at.elapsed() < RETRY_AFTER => return Ok(()),
                _ => *learned = Learned::Reading,
            }
        }
        let read = read_number(conn, b"SELECT @@GLOBAL.max_connections").await;
        let value = match &read {
            Ok(Some(n)) if *n > 0 => Some(*n),
            _ => None,
        };
        *self.learned() = value.map_or(Learned::Failed(Instant::now()), Learned::Known);
        match value {
            Some(n) => {
                self.refresh_cap();
                let limit = self.configured_limit();
                tracing::info!(
                    server_max_connections = n,
                    max_backend_connections = %limit,
                    in_force = self.max_open(),
                    pinned_cap = self.pin_cap(),
                    "read the backend's max_connections"
                );
                if limit == BackendLimit::Auto && self.pin_cap() == 0 {
                    tracing::warn!(
                        server_max_connections = n,
                        "the server's max_connections leaves no backend connection for pinned \
                         sessions after pool_size; raise it, or set max_backend_connections"
                    );
                }
            }
            None => tracing::warn!(
                "cannot read the backend's max_connections ({read:?}); max_backend_connections \
                 = auto assumes {ASSUMED_SERVER_MAX}"
            ),
        }
        read?;
        // MySQL has no such variable and answers 1193: the CPUs stay unknown there.
        let cpus = read_number(conn, b"SELECT @@GLOBAL.thread_pool_size").await?;
        if let Some(cpus) = cpus.filter(|&n| n > 0) {
            tracing::info!(
                server_cpus = cpus,
                "read the backend's CPU count (thread_pool_size)"
            );
            self.slots().set_reported_cpus(cpus);
        }
        Ok(())
    }
}

/// Runs `sql`, a one-value SELECT, on `conn`: the value, or `None` if the server refused the
/// query or answered something that is not a number.
async fn read_number(conn: &mut BackendConn, sql: &[u8]) -> Result<Option<u32>, conn::Error> {
    conn.stream.queue_packet(0, &query_payload(sql));
    conn.stream.flush(None).await?;
    let mut tracker = ResponseTracker::new(ResponseKind::Query, conn.caps);
    let mut value = None;
    while !tracker.is_done() {
        let span = conn.stream.expect_packet().await?;
        let fed = {
            let payload = conn.stream.payload(&span);
            let before = tracker.summary().rows;
            let fed = tracker.feed(&payload);
            if fed.is_ok() && before == 0 && tracker.summary().rows == 1 {
                value = first_number(&payload);
            }
            fed
        };
        conn.stream.consume(&span);
        fed?;
    }
    Ok(value.filter(|_| tracker.summary().error.is_none()))
}

/// The first column of a text-protocol row, as a number.
fn first_number(row: &[u8]) -> Option<u32> {
    let text = Reader::new(row).lenenc_bytes().ok()?;
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_leaves_a_tenth_and_at_least_ten() {
        assert_eq!(derived_cap(2000), 1800);
        assert_eq!(derived_cap(151), 136);
        assert_eq!(derived_cap(50), 40);
        assert_eq!(derived_cap(10), 1);
        assert_eq!(derived_cap(100_000), 90_000);
    }

    #[test]
    fn a_text_row_yields_its_first_number() {
        assert_eq!(first_number(b"\x042000"), Some(2000));
        assert_eq!(first_number(b"\x03abc"), None);
        assert_eq!(first_number(b"\xfb"), None);
        assert_eq!(first_number(b""), None);
    }
}
