//! Whether the backend server is reachable: the one home of the up/down state, the last
//! connect error, and the flag that keeps a single reconnect loop running per backend.
//!
//! Statements that need a new backend connection while the server is down wait on `watch`
//! instead of each hammering the server with connects; the reconnect loop (`Pool::reconnect`)
//! is the only one that tries, with exponential backoff.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::conn;
use crate::protocol::codes;
use crate::stats::ConnectFailure;

/// First pause of the reconnect loop.
pub(crate) const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest pause. It bounds how long service takes to resume once the server accepts
/// connections again (the next attempt comes at most this long after, then its connect), so
/// it stays short: one refused connect a second costs the server nothing.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl ConnectFailure {
    /// A failure that retrying will not fix: the server answered and refused this login
    /// (account, database, character set, ...), or the protocol or TLS failed. The client
    /// hears it at once instead of waiting, and the backend is not marked down: the server
    /// is up, and one client's bad login must not make every other client wait.
    pub(crate) fn is_permanent(self) -> bool {
        matches!(
            self,
            ConnectFailure::AccessDenied
                | ConnectFailure::UnknownDatabase
                | ConnectFailure::ServerError
                | ConnectFailure::Protocol
                | ConnectFailure::Tls
        )
    }
}

/// Sorts a connect error into what the operator (and the wait policy) cares about.
pub(crate) fn classify(e: &conn::Error) -> ConnectFailure {
    use std::io::ErrorKind as K;
    match e {
        conn::Error::Io(io) if io.kind() == K::ConnectionRefused => ConnectFailure::Refused,
        conn::Error::Io(_) | conn::Error::Closed | conn::Error::Truncated => {
            ConnectFailure::Network
        }
        conn::Error::Timeout(_) => ConnectFailure::Timeout,
        // 1044 no access to the database, 1045 bad password, 1698 no such account for
        // this plugin, 1251/1275 auth protocol refused.
        conn::Error::Server(err) => {
            let is = |list: &[codes::ErrorCode]| list.iter().any(|c| c.code == err.code);
            if is(&[
                codes::DBACCESS_DENIED,
                codes::ACCESS_DENIED,
                codes::ACCESS_DENIED_NO_PASSWORD,
                codes::NOT_SUPPORTED_AUTH_MODE,
                codes::SERVER_IS_IN_SECURE_AUTH_MODE,
            ]) {
                ConnectFailure::AccessDenied
            } else if is(&[codes::BAD_DB]) {
                ConnectFailure::UnknownDatabase
            } else if is(&[
                // Too many connections, host blocked, shutting down, server still starting.
                // (An account's own max_user_connections, MySQL's 1203 as MariaDB's 1226, is
                // that account's alone: a permanent server error, as for MariaDB.)
                codes::CON_COUNT,
                codes::HOST_IS_BLOCKED,
                codes::SHUTDOWN,
                codes::CONNECTION_KILLED,
                codes::NEW_ABORTING_CONNECTION,
            ]) {
                ConnectFailure::ServerBusy
            } else {
                ConnectFailure::ServerError
            }
        }
        conn::Error::Tls(_) | conn::Error::TlsUnavailable => ConnectFailure::Tls,
        conn::Error::Protocol(_)
        | conn::Error::Unexpected { .. }
        | conn::Error::UnsupportedPlugin => ConnectFailure::Protocol,
    }
}

/// The last connect error, as SHOW SERVERS and the client ERR show it.
#[derive(Clone, Debug)]
pub struct LastError {
    pub(crate) kind: ConnectFailure,
    pub message: String,
    pub(crate) at: Instant,
}

/// A copy of the state for SHOW SERVERS and errors.
#[derive(Clone, Debug)]
pub struct OutageView {
    pub(crate) addr: String,
    pub up: bool,
    /// When the current outage began (`None` while up).
    pub(crate) down_since: Option<Instant>,
    pub last_error: Option<LastError>,
}

#[derive(Default)]
struct Inner {
    addr: String,
    down_since: Option<Instant>,
    last_error: Option<LastError>,
    reconnecting: bool,
}

pub(crate) struct Outage {
    inner: Mutex<Inner>,
    /// `true` while the backend is believed up; waiters watch it.
    up: watch::Sender<bool>,
}

impl Default for Outage {
    fn default() -> Self {
        Outage {
            inner: Mutex::default(),
            up: watch::channel(true).0,
        }
    }
}

impl Outage {
    pub(crate) fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    /// Records a failed connect. Returns `true` when the caller must start the reconnect
    /// loop (the backend just went down, or is down and nobody is reconnecting).
    pub(crate) fn failed(&self, addr: &str, kind: ConnectFailure, message: String) -> bool {
        let mut g = self.lock();
        let now = Instant::now();
        g.addr.clone_from(&addr.to_string());
        if kind.is_permanent() {
            // The server answered: it is up, this account or database is the problem.
            tracing::warn!(backend = %addr, %kind, "backend login failed, not retrying: {message}");
            g.last_error = Some(LastError {
                kind,
                message,
                at: now,
            });
            return false;
        }
        if g.down_since.is_none() {
            tracing::error!(backend = %addr, %kind, "backend is DOWN: {message}; reconnecting with backoff");
            g.down_since = Some(now);
            self.up.send_replace(false);
        }
        g.last_error = Some(LastError {
            kind,
            message,
            at: now,
        });
        !std::mem::replace(&mut g.reconnecting, true)
    }

    /// The reconnect loop's last attempt failed again (no log: once per state change).
    pub(crate) fn still_down(&self, kind: ConnectFailure, message: String) {
        self.lock().last_error = Some(LastError {
            kind,
            message,
            at: Instant::now(),
        });
    }

    /// The server answered; ends the reconnect loop's duty and wakes the waiters.
    pub(crate) fn back_up(&self) {
        let mut g = self.lock();
        g.reconnecting = false;
        if let Some(since) = g.down_since.take() {
            tracing::warn!(backend = %g.addr, outage = ?since.elapsed(), "backend is UP again");
            self.up.send_replace(true);
        }
    }

    /// The reconnect loop ends without an answer (shutdown).
    pub(crate) fn stop_reconnecting(&self) {
        self.lock().reconnecting = false;
    }

    pub(crate) fn view(&self) -> OutageView {
        let g = self.lock();
        OutageView {
            addr: g.addr.clone(),
            up: g.down_since.is_none(),
            down_since: g.down_since,
            last_error: g.last_error.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every mutation is a plain field store: a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The next pause: doubled, capped, and jittered down by up to a quarter so that several
/// sluice instances do not reconnect in lock-step.
pub(crate) fn next_backoff(current: Duration) -> (Duration, Duration) {
    let next = (current * 2).min(BACKOFF_MAX);
    let jitter = rand::random::<f64>() * 0.25;
    (current.mul_f64(1.0 - jitter), next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrPacket;

    #[test]
    fn one_reconnect_loop_per_outage_and_state_changes_once() {
        let o = Outage::default();
        assert!(o.is_up());
        assert!(o.failed("db:3306", ConnectFailure::Refused, "refused".into()));
        assert!(!o.is_up());
        // Other waiters fail too while the loop runs: no second loop.
        assert!(!o.failed("db:3306", ConnectFailure::Refused, "refused".into()));
        o.still_down(ConnectFailure::Timeout, "timed out".into());
        let v = o.view();
        assert!(!v.up && v.down_since.is_some());
        assert_eq!(v.last_error.unwrap().kind, ConnectFailure::Timeout);
        o.back_up();
        assert!(o.is_up());
        // A new outage starts a new loop.
        assert!(o.failed("db:3306", ConnectFailure::Network, "reset".into()));
    }

    #[test]
    fn permanent_failures_do_not_mark_the_backend_down() {
        let o = Outage::default();
        let denied =
            conn::Error::Server(ErrPacket::from_code(codes::ACCESS_DENIED, "Access denied"));
        let kind = classify(&denied);
        assert_eq!(kind, ConnectFailure::AccessDenied);
        assert!(kind.is_permanent());
        assert!(!o.failed("db:3306", kind, denied.to_string()));
        assert!(o.is_up());
        assert!(o.view().last_error.is_some());
        let busy = conn::Error::Server(ErrPacket::from_code(
            codes::CON_COUNT,
            "Too many connections",
        ));
        assert!(!classify(&busy).is_permanent());
        // One account at its max_user_connections: the server is up for the others.
        let account = conn::Error::Server(ErrPacket::from_code(
            codes::TOO_MANY_USER_CONNECTIONS,
            "User app already has more than 'max_user_connections' active connections",
        ));
        assert!(classify(&account).is_permanent());
        // The server answered: a refusal of this login's parameters is this client's alone.
        let charset = conn::Error::Server(ErrPacket::from_code(
            codes::WRONG_VALUE_FOR_VAR,
            "character_set_client",
        ));
        assert!(classify(&charset).is_permanent());
        assert!(!o.failed("db:3306", classify(&charset), charset.to_string()));
        assert!(o.is_up());
        let refused = conn::Error::Io(std::io::ErrorKind::ConnectionRefused.into());
        assert_eq!(classify(&refused), ConnectFailure::Refused);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_downward_jitter() {
        let mut d = BACKOFF_START;
        for _ in 0..10 {
            let (sleep, next) = next_backoff(d);
            assert!(sleep <= d && sleep >= d.mul_f64(0.75));
            assert!(next <= BACKOFF_MAX);
            d = next;
        }
        assert_eq!(d, BACKOFF_MAX);
    }
}
