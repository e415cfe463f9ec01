//! The client-facing handshake: greeting, capability negotiation, the optional switch to TLS
//! and authentication against sluice's own user list (mysql_native_password and
//! caching_sha2_password, fast and full auth: `sha2_login`) or against the server's own
//! accounts (`server_login`, `accounts`), and COM_CHANGE_USER's re-authentication.
//! Listed passwords are checked by `password::verify`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;

use super::auth_failures::BackoffPolicy;
use super::password::{self, Proof};
use super::server_info::ServerInfo;
use super::server_login::{plugin_name, Principal};
use super::{Error, PacketStream};
use crate::accounts::Refusal;
use crate::config::{Config, Secret, UserConfig};
use crate::protocol::charset;
use crate::protocol::handshake_response::is_ssl_request;
use crate::protocol::{
    auth, codes, flags, AuthSwitchRequest, Capabilities, ChangeUser, ErrPacket, Handshake,
    HandshakeResponse, StatusFlags,
};
use crate::stats::ClientCloseReason;

pub use super::handshake_state::HandshakeContext;

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
    /// The session's wait_timeout as the server starts it: its global `wait_timeout`, or
    /// `interactive_timeout` for a client that logs in with CLIENT_INTERACTIVE; `None`
    /// while no backend has read them.
    pub idle_timeout: Option<std::time::Duration>,
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
        config: &Arc<Config>,
    ) -> Result<ClientHello, HandshakeError> {
        let server = self.server_info();
        let mut offered = offered_caps(server.caps);
        if self.tls.is_some() {
            offered |= Capabilities::CLIENT_SSL;
        }
        let nonce = auth::random_nonce();
        let default_plugin = plugin_name(config.default_auth_plugin);
        let greeting = self.greeting(&server, offered, connection_id, nonce, default_plugin);
        stream.send_packet(0, &greeting).await?;

        let (payload, mut seq) = self.read_response(stream).await?;
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
        let principal = self.principal(&response.user, config).await;
        let peer_ip = stream.peer_addr().map(|a| a.ip());
        let want_plugin = principal.plugin(config, peer_ip);
        let mut client_plugin = response
            .auth_plugin
            .clone()
            .unwrap_or_else(|| auth::NATIVE.as_bytes().to_vec());

        let mut nonce = nonce.to_vec();
        let mut auth_response = response.auth_response.clone();
        if client_plugin != want_plugin.as_bytes() {
            nonce = auth::random_nonce().to_vec();
            auth_response = switch_plugin(stream, &mut seq, want_plugin, &nonce).await?;
            client_plugin = want_plugin.as_bytes().to_vec();
        }
        let used_password = !auth_response.is_empty();
        if let Some(ip) = peer_ip {
            self.backoff(ip, config).await;
        }
        let login = Login {
            plugin: &client_plugin,
            nonce: &nonce,
            response: &auth_response,
        };
        let verdict = self
            .authenticate(stream, &mut seq, principal, login, config)
            .await?;
        if let Some(ip) = peer_ip {
            self.record_verdict(ip, &verdict);
        }
        let user = match verdict {
            Ok(user) => user,
            Err(refusal) => {
                let host = peer_ip.map(|ip| ip.to_string()).unwrap_or_default();
                send_err(
                    stream,
                    seq,
                    &refusal.packet(&response.user, &host, used_password),
                )
                .await;
                return Err(HandshakeError::Rejected(RejectReason::AccessDenied));
            }
        };
        if let Some(err) = charset::refusal(u16::from(response.collation)) {
            send_err(stream, seq, &err).await;
            return Err(HandshakeError::Rejected(RejectReason::ClientCharset));
        }
        let interactive = caps.contains(Capabilities::CLIENT_INTERACTIVE);
        Ok(ClientHello {
            idle_timeout: server.idle.map(|t| t.for_login(interactive)),
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

    /// The HandshakeV10 packet a client is greeted with.
    fn greeting(
        &self,
        server: &ServerInfo,
        offered: Capabilities,
        connection_id: u32,
        nonce: [u8; 20],
        plugin: &str,
    ) -> BytesMut {
        let greeting = Handshake {
            server_version: self.version_of(server),
            connection_id,
            nonce,
            capabilities: offered,
            collation: server.collation,
            status: server.status & StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            mariadb_caps: server.mariadb_caps & flags::mariadb_caps::RELAYED,
            auth_plugin: plugin.as_bytes().to_vec(),
        };
        let mut out = BytesMut::new();
        greeting.encode(&mut out);
        out
    }

    /// The client's HandshakeResponse, read inside TLS when it asks for it with an
    /// SSLRequest first; the sequence id of sluice's next packet.
    async fn read_response(
        &self,
        stream: &mut PacketStream,
    ) -> Result<(Vec<u8>, u8), HandshakeError> {
        let span = stream.expect_packet().await?;
        let payload = stream.payload(&span).into_owned();
        let seq = span.last_seq.wrapping_add(1);
        stream.consume(&span);
        if !is_ssl_request(&payload) {
            if span.first_seq != 1 {
                return Err(self.reject(stream, seq, RejectReason::BadHandshake).await);
            }
            return Ok((payload, seq));
        }
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
        let payload = stream.payload(&span).into_owned();
        let seq = span.last_seq.wrapping_add(1);
        stream.consume(&span);
        if span.first_seq != 2 {
            return Err(self.reject(stream, seq, RejectReason::BadHandshake).await);
        }
        Ok((payload, seq))
    }

    /// Checks the client's proof for `principal`: a listed user's password, or a server
    /// account (`server_login`). `Err` inside: the refusal the client gets.
    async fn authenticate(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        principal: Principal,
        login: Login<'_>,
        config: &Arc<Config>,
    ) -> Result<Result<UserConfig, Refusal>, Error> {
        let Login {
            plugin,
            nonce,
            response,
        } = login;
        match principal {
            Principal::Listed(u) if plugin == auth::CACHING_SHA2.as_bytes() => {
                let ok = self.verify_sha2(stream, seq, &u, nonce, response).await?;
                Ok(if ok {
                    Ok(u)
                } else {
                    Err(Refusal::AccessDenied)
                })
            }
            Principal::Listed(u) => Ok(listed_native(u, nonce, response, config)),
            Principal::Server { name, account } => {
                self.server_login(
                    stream,
                    seq,
                    (name, account),
                    plugin,
                    nonce,
                    response,
                    config,
                )
                .await
            }
            Principal::Unknown => Ok(Err(Refusal::AccessDenied)),
            Principal::Unavailable(e) => Ok(Err(Refusal::Unavailable(e))),
        }
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

    /// A login's verdict for the backoff: a wrong guess counts, a success clears the
    /// address, and a refusal for the account's state or configuration (locked, expired, a
    /// plugin sluice cannot verify, an unreadable table) does neither, so it cannot be used
    /// to clear a count of wrong guesses.
    fn record_verdict(&self, ip: IpAddr, verdict: &Result<UserConfig, Refusal>) {
        match verdict {
            Ok(_) => self.record_login(ip, true),
            Err(r) if r.is_failed_guess() => self.record_login(ip, false),
            Err(_) => {}
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

    /// COM_CHANGE_USER's authentication against sluice's user list or the server's
    /// accounts, with the login's `scramble`: as the server does, it stays. A native-password
    /// client answers with it in the request itself (Connector/C ignores a new one in a
    /// switch), and any other plugin is switched to the account's over that same scramble.
    /// The backoff and the failure count are the login's: a client must not get unlimited
    /// fast guesses over one connection.
    pub async fn change_user(
        &self,
        stream: &mut PacketStream,
        config: &Arc<Config>,
        req: &ChangeUser,
        scramble: &[u8],
    ) -> Result<Reauth, Error> {
        let principal = self.principal(&req.user, config).await;
        let peer_ip = stream.peer_addr().map(|a| a.ip());
        // A listed user is checked with mysql_native_password (sluice's way since the list
        // began); a server account with its own plugin.
        let want = match &principal {
            Principal::Server { .. } => principal.plugin(config, peer_ip),
            _ => auth::NATIVE,
        };
        let native = auth::NATIVE.as_bytes();
        let (response, mut seq) = if req.auth_plugin.as_deref().unwrap_or(native) == want.as_bytes()
        {
            (req.auth_response.clone(), 1)
        } else {
            let mut data = scramble.to_vec();
            data.push(0);
            let mut out = BytesMut::new();
            AuthSwitchRequest {
                plugin: want.as_bytes().to_vec(),
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
        if let Some(ip) = peer_ip {
            self.backoff(ip, config).await;
        }
        let login = Login {
            plugin: want.as_bytes(),
            nonce: scramble,
            response: &response,
        };
        let verdict = self
            .authenticate(stream, &mut seq, principal, login, config)
            .await?;
        if let Some(ip) = peer_ip {
            self.record_verdict(ip, &verdict);
        }
        let user = match verdict {
            Ok(user) => user,
            Err(refusal) => {
                let host = peer_ip.map(|ip| ip.to_string()).unwrap_or_default();
                return Ok(Reauth::Refused {
                    err: refusal.packet(&req.user, &host, !response.is_empty()),
                    seq,
                    reason: RejectReason::AccessDenied,
                });
            }
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

/// What the client answered with: its plugin, over which nonce, and the answer.
#[derive(Clone, Copy)]
struct Login<'a> {
    plugin: &'a [u8],
    nonce: &'a [u8],
    response: &'a [u8],
}

/// A listed user's native answer. A `*<40 hex>` password with no backend password of its
/// own logs in to the backend with the SHA1(password) the answer gives back.
fn listed_native(
    mut user: UserConfig,
    nonce: &[u8],
    response: &[u8],
    config: &Config,
) -> Result<UserConfig, Refusal> {
    let proof = Proof::Native { nonce, response };
    if !password::verify(&user.password, proof) {
        return Err(Refusal::AccessDenied);
    }
    let pass_through = user.backend_password.is_none() && config.backend_password.is_none();
    if pass_through && user.password.is_native_hash() {
        if let Some(stage1) = auth::native_recover_stage1(nonce, user.password.expose(), response) {
            user.password = Secret::native_stage1(stage1);
        }
    }
    Ok(user)
}

/// Asks the client to answer `nonce` with `plugin` instead (AuthSwitchRequest); its answer.
async fn switch_plugin(
    stream: &mut PacketStream,
    seq: &mut u8,
    plugin: &str,
    nonce: &[u8],
) -> Result<Vec<u8>, Error> {
    let mut data = nonce.to_vec();
    data.push(0);
    let switch = AuthSwitchRequest {
        plugin: plugin.as_bytes().to_vec(),
        data,
    };
    let mut out = BytesMut::new();
    switch.encode(&mut out);
    stream.send_packet(*seq, &out).await?;
    let span = stream.expect_packet().await?;
    let answer = stream.payload(&span).into_owned();
    *seq = span.last_seq.wrapping_add(1);
    stream.consume(&span);
    Ok(answer)
}

/// Best effort: the client may already be gone.
pub async fn send_err(stream: &mut PacketStream, seq: u8, err: &ErrPacket) {
    let mut out = BytesMut::new();
    err.encode(&mut out);
    let _ = stream.send_packet(seq, &out).await;
}
