//! What the server side of every client handshake shares: the greeting to present, the TLS
//! acceptor, the RSA key of caching_sha2 full authentication, the login backoff, and the
//! directory of the server's accounts. Its methods live with the steps that use them
//! (`client`, `sha2_login`, `server_login`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio_rustls::TlsAcceptor;

use super::auth_failures::AuthFailures;
use super::server_info::ServerInfoCell;
use crate::protocol::auth;

/// What the server side of the handshake needs that does not change per client.
pub struct HandshakeContext {
    /// The backend's latest greeting, which clients are greeted with.
    pub server: Arc<ServerInfoCell>,
    /// `server_version` from the config at start (it is not live).
    pub version_override: Option<Vec<u8>>,
    /// Generated on first use: key generation is slow and most deployments never need it.
    pub rsa: std::sync::OnceLock<auth::RsaKeyPair>,
    /// Users that completed a caching_sha2 full authentication since start-up; like MySQL's
    /// cache, they may use the fast path afterwards.
    pub sha2_cache: Mutex<HashSet<String>>,
    /// Client TLS, when `tls_cert`/`tls_key` are set: CLIENT_SSL is offered only then.
    pub tls: Option<TlsAcceptor>,
    /// Consecutive failed logins per client address (the login backoff).
    pub auth_failures: AuthFailures,
    /// The server's accounts (`auth_source = server | both`), and the credentials their
    /// logins proved.
    pub accounts: Arc<crate::accounts::Directory>,
}
