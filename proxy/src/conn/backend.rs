//! A connection from sluice to the MySQL server: connect, log in, enable session tracking, and
//! run the small commands the pool itself needs (ping, reset, state replay).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::stmts::BackendStmts;
use super::{Error, PacketStream};
use crate::config::{Endpoint, Secret};
use crate::protocol::{
    request, Capabilities, ErrPacket, Handshake, OkPacket, PrepareOk, ResponseKind,
    ResponseTracker, SslRequest,
};

/// Session tracking makes every OK report schema and system-variable changes, which is what
/// lets sluice move sessions between backends instead of pinning them.
/// MariaDB reports a write's GTID as the `last_gtid` variable, which `'*'` includes.
const ENABLE_TRACKING: &[u8] = b"SET SESSION session_track_schema=ON, \
session_track_state_change=ON, session_track_system_variables='*'";
/// MySQL has no `last_gtid`: its OKs carry the write's GTID only with
/// `session_track_gtids=OWN_GTID`, which read-your-writes needs. MariaDB refuses the variable.
const ENABLE_TRACKING_MYSQL: &[u8] = b"SET SESSION session_track_schema=ON, \
session_track_state_change=ON, session_track_system_variables='*', \
session_track_gtids=OWN_GTID";

fn is_mariadb(version: &[u8]) -> bool {
    version
        .windows(7)
        .any(|w| w.eq_ignore_ascii_case(b"MariaDB"))
}

/// The tracker statement for a server with this greeting version.
fn tracking_sql(version: &[u8]) -> &'static [u8] {
    if is_mariadb(version) {
        ENABLE_TRACKING
    } else {
        ENABLE_TRACKING_MYSQL
    }
}

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

/// Where and as whom backend connections are opened.
#[derive(Clone)]
pub struct BackendTarget {
    pub addr: Endpoint,
    pub user: String,
    /// A password, or SHA1(password) recovered from a server account's native login.
    pub password: Secret,
    pub connect_timeout: Duration,
    pub max_payload: usize,
    /// `None`: backend_tls is disabled.
    pub tls: Option<Arc<super::tls::BackendTls>>,
    /// Whether each account may set pseudo_thread_id (probed at its first login).
    pub identity: Arc<super::identity::IdentityModes>,
    /// For a server account: where its newest login's credential is, read at each connect
    /// (after an ALTER USER, sessions that logged in with the old password open their new
    /// backends with the new one). `None`: `password` is all there is.
    pub credentials: Option<Arc<crate::accounts::Directory>>,
}

impl std::fmt::Debug for BackendTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.user, self.addr)
    }
}

/// Idle backends are grouped by what makes them interchangeable on the wire: the backend
/// account, the protocol-shaping capabilities and the handshake collation; and by the
/// server's globals their session values came from (`pool::globals`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub user: Arc<str>,
    pub caps: u32,
    pub collation: u8,
    /// The generation of the server's globals a backend opened under, or a session logged
    /// in under (`pool::globals::Globals`).
    pub globals: u64,
}

pub use super::movable::{is_one_shot_variable, is_tracker_variable, replay_score, MovableState};

/// Why a backend may not simply go back to the idle list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Only movable state: can serve anyone.
    Clean,
    /// Carries state another client must not see (user variables, temporary tables, locks, an
    /// open transaction, prepared statements): reset before reuse.
    Dirty,
    /// In an unknown protocol state (half-read response, I/O error): close.
    Broken,
}

/// A backend connection: one pointer to its [`BackendParts`]. The pool moves it on every
/// checkout and check-in (the idle list, the plan, the guard, the session), and each move of
/// the whole connection would be a memcpy of several hundred bytes, several times a
/// statement, against nothing for a pointer.
pub struct BackendConn(Box<BackendParts>);

impl std::ops::Deref for BackendConn {
    type Target = BackendParts;
    fn deref(&self) -> &BackendParts {
        &self.0
    }
}

impl std::ops::DerefMut for BackendConn {
    fn deref_mut(&mut self) -> &mut BackendParts {
        &mut self.0
    }
}

/// What a [`BackendConn`] holds.
pub struct BackendParts {
    pub stream: PacketStream,
    /// sluice-wide id, for SHOW SERVERS and logs.
    pub id: u64,
    /// The server's own connection id (what KILL takes).
    pub thread_id: u32,
    /// Capabilities negotiated with the server.
    pub caps: Capabilities,
    pub key: PoolKey,
    pub state: MovableState,
    pub health: Health,
    pub created: Instant,
    pub last_used: Instant,
    pub statements: u64,
    /// The id CONNECTION_ID() currently returns here (`pseudo_thread_id`); starts as the
    /// server's own thread id.
    pub pseudo_id: u32,
    /// LAST_INSERT_ID(), the diagnostics area, and whose ROW_COUNT() the server holds here.
    pub visible: super::visible::Visible,
    /// The session's trackers and parse values as the server started it.
    pub baseline: Arc<super::baseline::Baseline>,
    /// What the server's greeting said (the client handshake presents the latest).
    pub server: super::server_info::ServerInfo,
    /// Prepared statements held on this connection (shared by every client it serves).
    pub stmts: BackendStmts,
    /// Whether waits for this connection's replies busy-poll (`busy_poll`).
    pub polls: super::busy_poll::History,
}

/// Capabilities sluice always asks a backend for, on top of the client's shaping ones.
fn base_caps() -> Capabilities {
    Capabilities::CLIENT_LONG_PASSWORD
        | Capabilities::CLIENT_LONG_FLAG
        | Capabilities::CLIENT_PROTOCOL_41
        | Capabilities::CLIENT_TRANSACTIONS
        | Capabilities::CLIENT_SECURE_CONNECTION
        | Capabilities::CLIENT_PLUGIN_AUTH
        | Capabilities::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | Capabilities::CLIENT_CONNECT_ATTRS
        | Capabilities::CLIENT_SESSION_TRACK
}

impl BackendConn {
    /// Opens and logs in a new backend connection for `key`.
    pub async fn connect(target: &BackendTarget, key: PoolKey) -> Result<BackendConn, Error> {
        tokio::time::timeout(target.connect_timeout, Self::connect_inner(target, key))
            .await
            .map_err(|_| Error::Timeout("backend connect"))?
    }

    async fn connect_inner(target: &BackendTarget, key: PoolKey) -> Result<BackendConn, Error> {
        let mut stream = PacketStream::connect(
            &target.addr,
            target.max_payload,
            super::stream::BACKEND_READ_CHUNK,
        )
        .await?;
        let span = stream.expect_packet().await?;
        let greeting = stream.payload(&span).into_owned();
        let seq = span.last_seq;
        stream.consume(&span);
        if greeting.first() == Some(&0xFF) {
            return Err(Error::Server(ErrPacket::decode(
                &greeting,
                Capabilities::empty(),
            )?));
        }
        let hs = Handshake::decode(&greeting)?;
        let wanted = base_caps() | Capabilities::from_bits_truncate(key.caps);
        let mut caps = wanted & hs.capabilities;
        let mut seq = seq.wrapping_add(1);
        if let Some(tls) = &target.tls {
            if hs.capabilities.contains(Capabilities::CLIENT_SSL) {
                caps |= Capabilities::CLIENT_SSL;
                let request = SslRequest {
                    capabilities: caps,
                    max_packet: 1 << 30,
                    collation: key.collation,
                };
                let mut out = BytesMut::new();
                request.encode(&mut out);
                seq = stream.send_packet(seq, &out).await?;
                stream
                    .upgrade_client_tls(&tls.connector, tls.server_name.clone())
                    .await?;
            } else if tls.mode.requires_tls() {
                return Err(Error::TlsUnavailable);
            }
        }
        let mut conn = BackendConn(Box::new(BackendParts {
            stream,
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
            thread_id: hs.connection_id,
            caps,
            key,
            state: MovableState {
                multi_statements: caps.contains(Capabilities::CLIENT_MULTI_STATEMENTS),
                ..MovableState::default()
            },
            health: Health::Clean,
            created: Instant::now(),
            last_used: Instant::now(),
            statements: 0,
            pseudo_id: hs.connection_id,
            visible: super::visible::Visible::fresh(),
            baseline: Arc::new(super::baseline::Baseline::unknown()),
            server: super::server_info::ServerInfo::from_handshake(&hs),
            stmts: BackendStmts::default(),
            polls: Default::default(),
        }));
        conn.login(&hs, seq, target).await?;
        // The account's first login also finds out whether it may set pseudo_thread_id, in
        // the same round trip.
        let tracking = request::query(tracking_sql(&conn.server.version));
        let probe = probe_sql(conn.thread_id);
        let probing = target.identity.mode(&target.user).is_none();
        let mut cmds: Vec<&[u8]> = vec![&tracking];
        if probing {
            cmds.push(&probe);
        }
        // The session as the server starts it, read before tracking changes it, in the
        // same round trip.
        let mariadb = is_mariadb(&conn.server.version);
        conn.stream
            .queue_packet(0, &request::query(super::baseline::query(mariadb)));
        let results = conn.run_pipeline_after(&cmds, true).await?;
        conn.server.idle = conn.baseline.idle;
        let mut results = results.into_iter();
        if let Some(Err(err)) = results.next() {
            return Err(Error::Server(err));
        }
        if let Some(found) = results.next() {
            use super::identity::IdentityMode as M;
            let (mode, refusal) = match &found {
                Ok(_) => (M::PseudoThreadId, None),
                Err(e) => (
                    M::Rewrite,
                    Some(format!(
                        "{} {}",
                        e.code,
                        String::from_utf8_lossy(&e.message)
                    )),
                ),
            };
            target
                .identity
                .record(&target.user, mode, &conn.server, refusal.as_deref());
        }
        Ok(conn)
    }

    /// Sends one command whose answer is a single OK or ERR packet (COM_PING, COM_INIT_DB,
    /// COM_RESET_CONNECTION, a SET) and returns it. Tracked state in the OK is applied.
    pub async fn run_simple(
        &mut self,
        payload: &[u8],
    ) -> Result<Result<OkPacket, ErrPacket>, Error> {
        let mut results = self.run_pipeline(&[payload]).await?;
        Ok(results.pop().unwrap_or_else(|| {
            Err(ErrPacket::from_code(
                crate::protocol::codes::BACKEND_LOST,
                "no response",
            ))
        }))
    }

    /// Sends several single-answer commands in one write and reads all their answers: one round
    /// trip for a whole state replay.
    pub async fn run_pipeline(
        &mut self,
        payloads: &[&[u8]],
    ) -> Result<Vec<Result<OkPacket, ErrPacket>>, Error> {
        self.run_pipeline_after(payloads, false).await
    }

    /// `run_pipeline`, behind a query already queued whose small text result comes first
    /// (`baseline_first`: the baseline query at login, whose answer it records).
    async fn run_pipeline_after(
        &mut self,
        payloads: &[&[u8]],
        baseline_first: bool,
    ) -> Result<Vec<Result<OkPacket, ErrPacket>>, Error> {
        for p in payloads {
            self.stream.queue_packet(0, p);
        }
        self.stream.flush(None).await?;
        if baseline_first {
            let read = self.read_rows().await?;
            self.baseline = Arc::new(match read {
                Ok(result) => super::baseline::Baseline::from_result(&result),
                Err(_) => super::baseline::Baseline::unknown(),
            });
        }
        self.read_answers(payloads.len()).await
    }

    /// The answers to `n` single-answer commands sent already, in order (tracked state in
    /// the OKs applied).
    pub(super) async fn read_answers(
        &mut self,
        n: usize,
    ) -> Result<Vec<Result<OkPacket, ErrPacket>>, Error> {
        let mut results = Vec::with_capacity(n);
        for _ in 0..n {
            let span = self.stream.expect_packet().await?;
            let payload = self.stream.payload(&span).into_owned();
            self.stream.consume(&span);
            match payload.first().copied() {
                // COM_SET_OPTION answers with an EOF when DEPRECATE_EOF is off.
                Some(0xFE) if crate::protocol::eof::is_eof(&payload) => {
                    let eof = crate::protocol::EofPacket::decode(&payload)?;
                    results.push(Ok(OkPacket::new(eof.status)));
                }
                Some(0x00) | Some(0xFE) => {
                    let ok = OkPacket::decode(&payload, self.caps)?;
                    self.state.apply(&ok.session_state);
                    self.visible.ran_own(ok.warnings > 0);
                    results.push(Ok(ok));
                }
                Some(0xFF) => {
                    self.visible.ran_own(true);
                    results.push(Err(ErrPacket::decode(&payload, self.caps)?))
                }
                Some(other) => {
                    self.health = Health::Broken;
                    return Err(Error::Unexpected {
                        during: "simple command",
                        got: other,
                    });
                }
                None => return Err(Error::Truncated),
            }
        }
        Ok(results)
    }

    /// COM_PING; used by health checks.
    pub async fn ping(&mut self) -> Result<(), Error> {
        match self.run_simple(&request::ping()).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Server(e)),
        }
    }

    /// COM_RESET_CONNECTION, then tracking again (the reset turns it off). Leaves the backend
    /// with no transaction, no user variables, no temporary tables, no locks, no prepared
    /// statements, and baseline session variables.
    pub async fn reset(&mut self) -> Result<(), Error> {
        let baseline = self.caps.contains(Capabilities::CLIENT_MULTI_STATEMENTS);
        let tracking = request::query(tracking_sql(&self.server.version));
        // The reset may or may not restore the option; setting it again is harmless.
        let option = request::set_option(baseline);
        let reset = request::reset_connection();
        let mut cmds: Vec<&[u8]> = vec![&reset, &tracking];
        if self.state.multi_statements != baseline {
            cmds.push(&option);
        }
        let results = self.run_pipeline(&cmds).await?;
        for r in results {
            if let Err(e) = r {
                return Err(Error::Server(e));
            }
        }
        self.state.vars.clear();
        self.state.multi_statements = baseline;
        self.stmts.clear();
        self.pseudo_id = self.thread_id;
        self.visible = super::visible::Visible::fresh();
        self.health = Health::Clean;
        Ok(())
    }

    /// Prepares `sql` for sluice's own use: the response is read and consumed, never
    /// forwarded. `Ok(Err(_))` is the server's refusal, to be shown to the client.
    pub async fn prepare_internal(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<PrepareOk, ErrPacket>, Error> {
        self.stream.queue_packet(0, &request::stmt_prepare(sql));
        self.stream.flush(None).await?;
        self.read_prepare().await
    }

    /// The answer to a COM_STMT_PREPARE sent already (`prepare_internal`'s second half).
    pub(super) async fn read_prepare(&mut self) -> Result<Result<PrepareOk, ErrPacket>, Error> {
        let mut tracker = ResponseTracker::new(ResponseKind::Prepare, self.caps);
        while !tracker.is_done() {
            let span = self.stream.expect_packet().await?;
            let feed = tracker.feed(&self.stream.payload(&span));
            self.stream.consume(&span);
            feed?;
        }
        let summary = tracker.into_summary();
        // A PREPARE leaves ROW_COUNT() and FOUND_ROWS() as they were; its conditions stay.
        if summary.any_warnings || summary.error.is_some() {
            self.visible.diagnostics = super::visible::Diagnostics::Foreign;
        }
        match (summary.prepare_ok, summary.error) {
            (Some(ok), _) => Ok(Ok(ok)),
            (None, Some(err)) => Ok(Err(err)),
            (None, None) => Err(Error::Unexpected {
                during: "internal prepare",
                got: 0,
            }),
        }
    }

    /// Runs `sql` for sluice's own use (the topology monitor) and reads its small text
    /// result whole; the response is consumed, never forwarded. `Ok(Err(_))` is the server's
    /// refusal. A response that cannot be read leaves the connection Broken.
    pub async fn query_rows(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<crate::protocol::TextResult, ErrPacket>, Error> {
        self.stream.queue_packet(0, &request::query(sql));
        self.stream.flush(None).await?;
        self.read_rows().await
    }

    /// The small text result of a query sent already (`query_rows`' second half).
    async fn read_rows(&mut self) -> Result<Result<crate::protocol::TextResult, ErrPacket>, Error> {
        use crate::protocol::text_result::Step;
        let mut reader = crate::protocol::TextResultReader::new(self.caps);
        loop {
            let span = self.stream.expect_packet().await?;
            let step = reader.feed(&self.stream.payload(&span));
            self.stream.consume(&span);
            match step {
                Ok(Step::More) => {}
                Ok(Step::Done) => {
                    let result = reader.into_result();
                    // sluice's own queries read variables: they raise no warning.
                    self.visible.ran_own(result.is_err());
                    return Ok(result);
                }
                Err(e) => {
                    self.health = Health::Broken;
                    return Err(e.into());
                }
            }
        }
    }

    /// Runs a query of one column for sluice's own use and returns its first row's value as
    /// a number (`None`: no row, NULL, or not a number). `Ok(Err(_))` is the server's refusal.
    pub async fn query_first_u64(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<Option<u64>, ErrPacket>, Error> {
        self.stream.queue_packet(0, &request::query(sql));
        self.stream.flush(None).await?;
        self.read_first_u64().await
    }

    /// The answer to a query of one column sent already (`query_first_u64`'s second half,
    /// for a query sent behind a client's command in the same write).
    pub async fn read_first_u64(&mut self) -> Result<Result<Option<u64>, ErrPacket>, Error> {
        let mut tracker = ResponseTracker::new(ResponseKind::Query, self.caps);
        // Column count, one definition, then an EOF unless DEPRECATE_EOF: the next is a row.
        let eof = !self.caps.contains(Capabilities::CLIENT_DEPRECATE_EOF);
        let row_at = 2 + usize::from(eof);
        let (mut n, mut value) = (0usize, None);
        while !tracker.is_done() {
            let span = self.stream.expect_packet().await?;
            let payload = self.stream.payload(&span).into_owned();
            self.stream.consume(&span);
            let feed = tracker.feed(&payload)?;
            if n == row_at && matches!(feed, crate::protocol::Feed::Continue) {
                let mut r = crate::protocol::buf::Reader::new(&payload);
                value = r
                    .lenenc_bytes()
                    .ok()
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
            }
            n += 1;
        }
        let summary = tracker.into_summary();
        self.visible
            .ran_own(summary.any_warnings || summary.error.is_some());
        match summary.error {
            Some(err) => Ok(Err(err)),
            None => Ok(Ok(value)),
        }
    }

    /// Queues COM_STMT_CLOSE (it has no response); it goes out with the next write.
    pub fn queue_stmt_close(&mut self, id: u32) {
        let mut payload = [0x19, 0, 0, 0, 0];
        payload[1..].copy_from_slice(&id.to_le_bytes());
        self.stream.queue_packet(0, &payload);
    }
}

/// The identity probe (see `identity`): setting the variable to the connection's own id
/// changes nothing but says whether the account may.
pub fn probe_sql(thread_id: u32) -> Vec<u8> {
    request::query(format!("SET @@SESSION.pseudo_thread_id = {thread_id}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_backends_also_track_their_own_gtids() {
        let mariadb = tracking_sql(b"5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert!(!mariadb.windows(19).any(|w| w == b"session_track_gtids"));
        assert_eq!(
            mariadb, ENABLE_TRACKING,
            "MariaDB refuses session_track_gtids"
        );
        let mysql = tracking_sql(b"8.0.36");
        assert!(mysql.ends_with(b"session_track_gtids=OWN_GTID"));
        assert!(mysql.starts_with(ENABLE_TRACKING));
    }
}
