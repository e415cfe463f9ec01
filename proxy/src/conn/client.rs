//! The client-facing handshake: greeting, capability negotiation, the optional switch to TLS
//! and authentication against sluice's own user list (mysql_native_password and
//! caching_sha2_password, fast and full auth), and COM_CHANGE_USER's re-authentication.
//! Passwords are checked by `password::verify`.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use tokio_rustls::TlsAcceptor;

use super::auth_failures::{AuthFailures, BackoffPolicy};
use super::password::{self, Proof};
use super::server_info::{ServerInfo, ServerInfoCell};
use super::{Error, PacketStream};
use crate::config::{AuthPluginName, Config, UserConfig};
use crate::protocol::auth_switch::{FAST_AUTH_OK, PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY};
use crate::protocol::charset;
use crate::protocol::handshake_response::is_ssl_request;
use crate::protocol::{
    auth, codes, flags, AuthMoreData, AuthSwitchRequest, Capabilities, ChangeUser, ErrPacket,
    Handshake, HandshakeResponse, StatusFlags,
};
use crate::stats::ClientCloseReason;

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
}

/// A client that passed authentication.
pub struct ClientHello {
    pub caps: Capabilities,
    pub collation: u8,
    pub user: UserConfig,
    pub database: Option<Vec<u8>>,
    pub attrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Sequence id for the final OK/ERR of the handshake.
    pub next_seq: u8,
    /// The scramble the login was verified against. COM_CHANGE_USER reuses it, as the
    /// server does: Connector/C answers its first round with this one, not a new one.
    pub scramble: Vec<u8>,
    /// The status a new session on the server starts with: whether it is in autocommit mode
    /// (the global `autocommit`) and has NO_BACKSLASH_ESCAPES (the global `sql_mode`).
    pub fresh_status: StatusFlags,
}

/// Why a handshake did not produce a client.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Conn(#[from] Error),
    /// An ERR was sent to the client already; close.
    #[error("handshake rejected: {0}")]
    Rejected(RejectReason),
}

impl HandshakeError {
    /// How the session that never started is counted.
    pub fn close_reason(&self) -> ClientCloseReason {
        match self {
            HandshakeError::Rejected(RejectReason::AccessDenied) => ClientCloseReason::AuthFailed,
            _ => ClientCloseReason::HandshakeFailed,
        }
    }
}

/// Why sluice refused a login (or a COM_CHANGE_USER) with an ERR packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// CLIENT_SSL asked for, and `tls_cert`/`tls_key` are not set.
    TlsNotConfigured,
    /// Out-of-order or undecodable handshake packets.
    BadHandshake,
    /// No CLIENT_PROTOCOL_41.
    ClientTooOld,
    /// A plain connection under `require_secure_transport`.
    InsecureTransport,
    /// Unknown user or wrong password.
    AccessDenied,
    /// A client character set the backend cannot parse statements in.
    ClientCharset,
}

impl std::fmt::Display for RejectReason {
    /// Lower-case words: the TLS, handshake and protocol ones go into the client's message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RejectReason::TlsNotConfigured => "TLS is not configured",
            RejectReason::BadHandshake => "bad handshake",
            RejectReason::ClientTooOld => "client too old",
            RejectReason::InsecureTransport => "insecure transport",
            RejectReason::AccessDenied => "access denied",
            RejectReason::ClientCharset => "client character set",
        })
    }
}

/// The end of a COM_CHANGE_USER's authentication.
pub enum Reauth {
    /// The new user, and the sequence id of the OK (or ERR) that ends the command.
    Accepted { user: UserConfig, seq: u8 },
    /// The session stays as it was; the ERR for the client, sent by the session.
    Refused {
        err: ErrPacket,
        seq: u8,
        reason: RejectReason,
    },
}

/// Capabilities sluice offers, narrowed to what a relayed backend can honour.
fn offered_caps(backend: Capabilities) -> Capabilities {
    let shaping = flags::shaping_mask();
    // A shaping capability the backend lacks cannot be offered: its responses would not
    // match. Session tracking is the exception: sluice keeps or strips that itself.
    let missing = shaping & !(backend | Capabilities::CLIENT_SESSION_TRACK);
    // A MariaDB server clears CLIENT_LONG_PASSWORD ("CLIENT_MYSQL") to say its extended
    // capabilities follow; sluice presents it the same way.
    let mysql = backend & Capabilities::CLIENT_LONG_PASSWORD;
    flags::server_capabilities() & !missing & !(Capabilities::CLIENT_LONG_PASSWORD & !mysql)
}

impl HandshakeContext {
    /// The RSA key pair, generated on first use on the blocking pool: generation takes a
    /// noticeable time, and on the session's own thread (the only one with
    /// `worker_threads = 1`) it would hold up every other client meanwhile. Two logins that
    /// race both generate; the first key stored is the one every client gets.
    async fn rsa_key(&self) -> &auth::RsaKeyPair {
        if let Some(key) = self.rsa.get() {
            return key;
        }
        let generated = tokio::task::spawn_blocking(auth::RsaKeyPair::generate)
            .await
            .unwrap_or_else(|_| auth::RsaKeyPair::generate());
        self.rsa.get_or_init(|| generated)
    }

    /// The greeting clients get now: the backend's latest, or a stand-in before it answered.
    pub fn server_info(&self) -> Arc<ServerInfo> {
        self.server
            .get()
            .unwrap_or_else(|| Arc::new(ServerInfo::fallback()))
    }

    /// The version string clients see.
    pub fn server_version(&self) -> Vec<u8> {
        self.version_of(&self.server_info())
    }

    fn version_of(&self, server: &ServerInfo) -> Vec<u8> {
        self.version_override
            .clone()
            .unwrap_or_else(|| server.version.clone())
    }

    /// Capabilities offered to clients (without CLIENT_SSL).
    pub fn offered(&self) -> Capabilities {
        offered_caps(self.server_info().caps)
    }

    /// Runs the handshake on a freshly accepted client. On failure the client has been sent an
    /// ERR packet where the protocol allows one.
    pub async fn accept(
        &self,
        stream: &mut PacketStream,
        connection_id: u32,
        config: &Config,
    ) -> Result<ClientHello, HandshakeError> {
        let server = self.server_info();
        let mut offered = offered_caps(server.caps);
        if self.tls.is_some() {
            offered |= Capabilities::CLIENT_SSL;
        }
        let nonce = auth::random_nonce();
        let default_plugin = plugin_name(config.default_auth_plugin);
        let greeting = Handshake {
            server_version: self.version_of(&server),
            connection_id,
            nonce,
            capabilities: offered,
            collation: server.collation,
            status: server.status & StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            mariadb_caps: server.mariadb_caps & flags::mariadb_caps::RELAYED,
            auth_plugin: default_plugin.as_bytes().to_vec(),
        };
        let mut out = BytesMut::new();
        greeting.encode(&mut out);
        stream.send_packet(0, &out).await?;

        let span = stream.expect_packet().await?;
        let mut payload = stream.payload(&span).into_owned();
        let mut seq = span.last_seq.wrapping_add(1);
        stream.consume(&span);
        if is_ssl_request(&payload) {
            let Some(acceptor) = &self.tls else {
                return Err(self
                    .reject(stream, seq, RejectReason::TlsNotConfigured)
                    .await);
            };
            if span.first_seq != 1 {
                return Err(self.reject(stream, seq, RejectReason::BadHandshake).await);
            }
            stream.upgrade_server_tls(acceptor).await?;
            // The real HandshakeResponse follows inside TLS, continuing the sequence.
            let span = stream.expect_packet().await?;
            payload = stream.payload(&span).into_owned();
            seq = span.last_seq.wrapping_add(1);
            stream.consume(&span);
            if span.first_seq != 2 {
                return Err(self.reject(stream, seq, RejectReason::BadHandshake).await);
            }
        } else if span.first_seq != 1 {
            return Err(self.reject(stream, seq, RejectReason::BadHandshake).await);
        }
        let response = match HandshakeResponse::decode(&payload) {
            Ok(r) => r,
            Err(_) => return Err(self.reject(stream, seq, RejectReason::BadHandshake).await),
        };
        if !response
            .capabilities
            .contains(Capabilities::CLIENT_PROTOCOL_41)
        {
            return Err(self.reject(stream, seq, RejectReason::ClientTooOld).await);
        }
        if config.require_secure_transport && !stream.is_secure() {
            let err = ErrPacket::from_code(
                codes::SECURE_TRANSPORT_REQUIRED,
                &b"Connections using insecure transport are prohibited while --require_secure_transport=ON."[..],
            );
            send_err(stream, seq, &err).await;
            return Err(HandshakeError::Rejected(RejectReason::InsecureTransport));
        }
        // CLIENT_SSL describes this hop only; it must not reach backend pool keys.
        let caps = response.capabilities & offered & !Capabilities::CLIENT_SSL;
        let user = config.find_user(&response.user).cloned();
        let want_plugin = user
            .as_ref()
            .and_then(|u| u.auth_plugin)
            .map(plugin_name)
            .unwrap_or(default_plugin);
        let client_plugin = response
            .auth_plugin
            .clone()
            .unwrap_or_else(|| auth::NATIVE.as_bytes().to_vec());

        let mut nonce = nonce.to_vec();
        let mut auth_response = response.auth_response.clone();
        if client_plugin != want_plugin.as_bytes() {
            nonce = auth::random_nonce().to_vec();
            let mut data = nonce.clone();
            data.push(0);
            let switch = AuthSwitchRequest {
                plugin: want_plugin.as_bytes().to_vec(),
                data,
            };
            let mut out = BytesMut::new();
            switch.encode(&mut out);
            stream.send_packet(seq, &out).await?;
            let span = stream.expect_packet().await?;
            auth_response = stream.payload(&span).into_owned();
            seq = span.last_seq.wrapping_add(1);
            stream.consume(&span);
        }
        let used_password = !auth_response.is_empty();
        let peer_ip = stream.peer_addr().map(|a| a.ip());
        if let Some(ip) = peer_ip {
            self.backoff(ip, config).await;
        }
        let verified = match &user {
            None => false,
            Some(u) if want_plugin == auth::CACHING_SHA2 => {
                self.verify_sha2(stream, &mut seq, u, &nonce, &auth_response)
                    .await?
            }
            Some(u) => password::verify(
                &u.password,
                Proof::Native {
                    nonce: &nonce,
                    response: &auth_response,
                },
            ),
        };
        if let Some(ip) = peer_ip {
            self.record_login(ip, verified);
        }
        let Some(user) = user.filter(|_| verified) else {
            let host = peer_ip.map(|ip| ip.to_string()).unwrap_or_default();
            let err = password::access_denied(&response.user, &host, used_password);
            send_err(stream, seq, &err).await;
            return Err(HandshakeError::Rejected(RejectReason::AccessDenied));
        };
        if let Some(err) = charset::refusal(u16::from(response.collation)) {
            send_err(stream, seq, &err).await;
            return Err(HandshakeError::Rejected(RejectReason::ClientCharset));
        }
        Ok(ClientHello {
            fresh_status: server.status
                & (StatusFlags::SERVER_STATUS_AUTOCOMMIT
                    | StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES),
            scramble: nonce,
            caps,
            collation: response.collation,
            user,
            database: response.database.filter(|d| !d.is_empty()),
            attrs: response.connect_attrs,
            next_seq: seq,
        })
    }

    /// Waits before verifying a login from an address with recent failures. It runs before
    /// any verdict is sent (caching_sha2's fast-auth reply included), so success and failure
    /// take equally long. Capped at half the login timeout so the answer still arrives.
    pub async fn backoff(&self, ip: IpAddr, config: &Config) {
        let policy = BackoffPolicy {
            threshold: config.auth_failure_threshold,
            max_delay: config.auth_failure_max_delay,
        };
        let delay = self
            .auth_failures
            .delay_for(ip, policy, Instant::now())
            .min(config.client_login_timeout / 2);
        if !delay.is_zero() {
            tracing::info!(%ip, ?delay, "slowing down a login after repeated failures");
            tokio::time::sleep(delay).await;
        }
    }

    /// Counts a failed login from `ip`, or clears it after a successful one.
    pub fn record_login(&self, ip: IpAddr, verified: bool) {
        if verified {
            self.auth_failures.succeeded(ip);
        } else {
            self.auth_failures.failed(ip, Instant::now());
        }
    }

    /// caching_sha2_password: the fast path when the scramble matches a cached user, otherwise
    /// full authentication: over TLS the client sends the password in clear (NUL-terminated);
    /// without TLS it must fetch the RSA key and send it encrypted.
    async fn verify_sha2(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        user: &UserConfig,
        nonce: &[u8],
        response: &[u8],
    ) -> Result<bool, Error> {
        let scramble = Proof::Sha2 { nonce, response };
        // Full authentication cannot succeed against a native hash, and an empty password
        // has none: the scramble decides.
        if user.password.is_native_hash() || user.password.expose().is_empty() {
            return Ok(password::verify(&user.password, scramble));
        }
        let cached = self
            .sha2_cache
            .lock()
            .map(|c| c.contains(&user.name))
            .unwrap_or(false);
        if cached && password::verify(&user.password, scramble) {
            let mut out = BytesMut::new();
            AuthMoreData(vec![FAST_AUTH_OK]).encode(&mut out);
            *seq = stream.send_packet(*seq, &out).await?;
            return Ok(true);
        }
        // Full authentication: ask for the password, offering our RSA public key.
        let mut out = BytesMut::new();
        AuthMoreData(vec![PERFORM_FULL_AUTH]).encode(&mut out);
        *seq = stream.send_packet(*seq, &out).await?;
        let span = stream.expect_packet().await?;
        let mut reply = stream.payload(&span).into_owned();
        *seq = span.last_seq.wrapping_add(1);
        stream.consume(&span);
        if reply == [REQUEST_PUBLIC_KEY] {
            let key = self.rsa_key().await;
            let mut out = BytesMut::new();
            AuthMoreData(key.public_pem()).encode(&mut out);
            *seq = stream.send_packet(*seq, &out).await?;
            let span = stream.expect_packet().await?;
            reply = stream.payload(&span).into_owned();
            *seq = span.last_seq.wrapping_add(1);
            stream.consume(&span);
            let ok = match key.decrypt_password(&reply, nonce) {
                Ok(mut clear) => {
                    if clear.last() == Some(&0) {
                        clear.pop();
                    }
                    password::verify(&user.password, Proof::Cleartext(&clear))
                }
                Err(_) => false,
            };
            if ok {
                if let Ok(mut c) = self.sha2_cache.lock() {
                    c.insert(user.name.clone());
                }
            }
            return Ok(ok);
        }
        // A cleartext password over an unencrypted connection is refused, as MySQL does.
        if !stream.is_secure() {
            return Ok(false);
        }
        if reply.last() == Some(&0) {
            reply.pop();
        }
        let ok = password::verify(&user.password, Proof::Cleartext(&reply));
        if ok {
            if let Ok(mut c) = self.sha2_cache.lock() {
                c.insert(user.name.clone());
            }
        }
        Ok(ok)
    }

    /// A malformed or unsupported handshake: ER_HANDSHAKE_ERROR naming `why`.
    async fn reject(
        &self,
        stream: &mut PacketStream,
        seq: u8,
        why: RejectReason,
    ) -> HandshakeError {
        let msg = format!("Bad handshake: {why}. Connect with a MySQL 4.1+ protocol client.");
        send_err(stream, seq, &ErrPacket::from_code(codes::HANDSHAKE, msg)).await;
        HandshakeError::Rejected(why)
    }

    /// COM_CHANGE_USER's authentication against sluice's user list, with the login's
    /// `scramble`: as the server does, it stays. A native-password client answers with it in
    /// the request itself (Connector/C ignores a new one in a switch), and any other plugin
    /// is switched to native over that same scramble. The backoff and the failure count are
    /// the login's: a client must not get unlimited fast guesses over one connection.
    pub async fn change_user(
        &self,
        stream: &mut PacketStream,
        config: &Config,
        req: &ChangeUser,
        scramble: &[u8],
    ) -> Result<Reauth, Error> {
        let user = config.find_user(&req.user).cloned();
        let native = auth::NATIVE.as_bytes();
        let (response, seq) = if req.auth_plugin.as_deref().unwrap_or(native) == native {
            (req.auth_response.clone(), 1)
        } else {
            let mut data = scramble.to_vec();
            data.push(0);
            let mut out = BytesMut::new();
            AuthSwitchRequest {
                plugin: native.to_vec(),
                data,
            }
            .encode(&mut out);
            let seq = stream.send_packet(1, &out).await?;
            let span = stream.expect_packet().await?;
            let response = stream.payload(&span).into_owned();
            let seq = span.last_seq.wrapping_add(1).max(seq);
            stream.consume(&span);
            (response, seq)
        };
        let peer_ip = stream.peer_addr().map(|a| a.ip());
        if let Some(ip) = peer_ip {
            self.backoff(ip, config).await;
        }
        let proof = Proof::Native {
            nonce: scramble,
            response: &response,
        };
        let verified = user
            .as_ref()
            .is_some_and(|u| password::verify(&u.password, proof));
        if let Some(ip) = peer_ip {
            self.record_login(ip, verified);
        }
        let Some(user) = user.filter(|_| verified) else {
            let host = peer_ip.map(|ip| ip.to_string()).unwrap_or_default();
            return Ok(Reauth::Refused {
                err: password::access_denied(&req.user, &host, !response.is_empty()),
                seq,
                reason: RejectReason::AccessDenied,
            });
        };
        if let Some(err) = req.collation.and_then(charset::refusal) {
            return Ok(Reauth::Refused {
                err,
                seq,
                reason: RejectReason::ClientCharset,
            });
        }
        Ok(Reauth::Accepted { user, seq })
    }
}

fn plugin_name(p: AuthPluginName) -> &'static str {
    match p {
        AuthPluginName::Native => auth::NATIVE,
        AuthPluginName::CachingSha2 => auth::CACHING_SHA2,
    }
}

/// Best effort: the client may already be gone.
pub async fn send_err(stream: &mut PacketStream, seq: u8, err: &ErrPacket) {
    let mut out = BytesMut::new();
    err.encode(&mut out);
    let _ = stream.send_packet(seq, &out).await;
}
