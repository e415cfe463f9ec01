//! Sockets: framing over TCP or a Unix socket (`stream`, which connects to a `config::Endpoint`),
//! the client-facing handshake (`client`), client TLS (`tls`), backend connections (`backend`)
//! the per-address login backoff (`auth_failures`), the server's latest greeting
//! (`server_info`), what each backend account may do about CONNECTION_ID() (`identity`) and
//! the one password check of every login (`password`), and the cheap re-poll of the
//! cancellations a session waits on beside its sockets (`latch`), and when a wait for a
//! backend's reply polls instead of sleeping (`busy_poll`), and what a client could read on a
//! backend connection besides its movable state (`visible`).
//! The account table read as auth_user for accounts from the server (`account_table`).
//! No pool policy lives here.

pub mod account_table;
pub mod auth_failures;
pub mod backend;
mod backend_login;
pub mod baseline;
pub mod busy_poll;
pub mod client;
pub mod handshake_state;
pub mod identity;
pub mod latch;
pub mod movable;
pub mod password;
pub mod server_info;
pub mod server_login;
pub mod sha2_login;
pub mod stmts;
pub mod stream;
pub mod tls;
pub mod visible;

pub use backend::{BackendConn, BackendTarget, PoolKey};
pub use stream::PacketStream;

use crate::protocol::{self, ErrPacket};

/// Errors of one connection (client or backend).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Protocol(#[from] protocol::Error),
    #[error("peer closed the connection")]
    Closed,
    #[error("peer closed the connection in the middle of a packet")]
    Truncated,
    #[error("timed out during {0}")]
    Timeout(&'static str),
    /// The MySQL server answered with an ERR packet (a server error is data, not a broken link,
    /// except during login).
    #[error("server error {}: {}", .0.code, String::from_utf8_lossy(&.0.message))]
    Server(ErrPacket),
    #[error("unexpected packet 0x{got:02x} during {during}")]
    Unexpected { during: &'static str, got: u8 },
    #[error("the backend asked for an authentication plugin sluice does not speak")]
    UnsupportedPlugin,
    /// The TLS handshake failed (certificate not trusted, wrong name, no common cipher).
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] std::io::Error),
    /// backend_tls requires TLS and the server does not offer it.
    #[error("the server does not offer TLS, and backend_tls requires it")]
    TlsUnavailable,
}

impl Error {
    /// Does this error leave the connection unusable?
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Error::Server(_))
    }
}
