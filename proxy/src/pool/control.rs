//! Login-time checks of a client's default database, on a control connection per backend
//! account (and collation), never on one of the pool's connections: a login must not queue
//! behind running statements or wait for a connection a pinned session holds.
//!
//! The check is a COM_INIT_DB as the client's backend account, so the answer is exactly the
//! server's: 1049 for an unknown database, 1044 for one the account may not use (MariaDB
//! also says 1044 for an unknown one the account could not see anyway). Logins that arrive
//! together share one check: a successful check answers every login that arrived at most
//! [`VERIFIED_FOR`] after it started, so a storm of logins naming one database costs about
//! one round trip a second. Refusals are never reused (a database created a moment ago is
//! found at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Error, Pool};
use crate::conn::backend::{BackendTarget, PoolKey};
use crate::conn::BackendConn;
use crate::protocol::ErrPacket;

/// How long a successful check answers for later logins naming the same database.
pub(crate) const VERIFIED_FOR: Duration = Duration::from_secs(1);

/// Why a login's default database was not accepted.
#[derive(Debug)]
pub(crate) enum CheckError {
    /// The server's own answer (1049, 1044, ...), to be sent to the client as it is.
    Refused(ErrPacket),
    /// No answer: the server is down, refuses the login, or did not reply in time.
    Pool(Error),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LaneKey {
    user: Arc<str>,
    collation: u8,
}

/// One control connection and what it verified. Behind a FIFO async mutex: logins take
/// turns, and a login that waited finds the check the one before it made.
#[derive(Default)]
struct Lane {
    conn: Option<BackendConn>,
    /// The address and password `conn` logged in with (a RELOAD may change them).
    login: Option<(String, crate::config::Secret)>,
    /// Database -> when its last successful check started.
    verified: HashMap<Vec<u8>, Instant>,
}

#[derive(Default)]
pub(super) struct Lanes {
    map: Mutex<HashMap<LaneKey, Arc<tokio::sync::Mutex<Lane>>>>,
}

impl Lanes {
    fn get(&self, key: &PoolKey) -> Arc<tokio::sync::Mutex<Lane>> {
        let key = LaneKey {
            user: key.user.clone(),
            collation: key.collation,
        };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key).or_default().clone()
    }

    fn all(&self) -> Vec<Arc<tokio::sync::Mutex<Lane>>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.values().cloned().collect()
    }
}

impl Pool {
    /// Checks that the account of `target` may use database `db`, as the server would at a
    /// login naming it. Gives up at `deadline`; while the server is down, waits for the
    /// reconnect loop at most `down_wait`.
    pub(crate) async fn check_database(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        db: &[u8],
        deadline: Instant,
        down_wait: Duration,
    ) -> Result<(), CheckError> {
        let arrived = Instant::now();
        let lane = self.shared.lanes.get(key);
        let check = async {
            let mut lane = lane.lock().await;
            if lane
                .verified
                .get(db)
                .is_some_and(|started| *started + VERIFIED_FOR >= arrived)
            {
                return Ok(());
            }
            let down_until = deadline.min(arrived + down_wait);
            self.check_on_lane(&mut lane, key, target, db, (arrived, down_until))
                .await
        };
        match tokio::time::timeout_at(deadline.into(), check).await {
            Ok(result) => result,
            Err(_) => Err(CheckError::Pool(Error::NoAnswer {
                addr: target.addr.to_string(),
                waited: arrived.elapsed(),
            })),
        }
    }

    async fn check_on_lane(
        &self,
        lane: &mut Lane,
        key: &PoolKey,
        target: &BackendTarget,
        db: &[u8],
        (arrived, down_until): (Instant, Instant),
    ) -> Result<(), CheckError> {
        let login = (target.addr.to_string(), target.password.clone());
        if lane.login.as_ref() != Some(&login) {
            lane.conn = None;
        }
        let init_db = crate::protocol::request::init_db(db);
        // A kept connection may have been closed by the server (wait_timeout, restart):
        // one more try on a fresh one.
        for _ in 0..2 {
            let kept = match lane.conn.take() {
                Some(mut c) => (!c.stream.closed_while_idle()).then_some(c),
                None => None,
            };
            let mut conn = match kept {
                Some(c) => c,
                None => self
                    .connect_control(key, target, down_until)
                    .await
                    .map_err(CheckError::Pool)?,
            };
            lane.login = Some(login.clone());
            let started = Instant::now();
            let answer = tokio::time::timeout(target.connect_timeout, conn.run_simple(&init_db));
            match answer.await {
                Ok(Ok(Ok(_))) => {
                    lane.verified.retain(|_, t| t.elapsed() < VERIFIED_FOR);
                    lane.verified.insert(db.to_vec(), started);
                    conn.last_used = Instant::now();
                    lane.conn = Some(conn);
                    return Ok(());
                }
                Ok(Ok(Err(refused))) => {
                    lane.verified.remove(db);
                    conn.last_used = Instant::now();
                    lane.conn = Some(conn);
                    return Err(CheckError::Refused(refused));
                }
                // Broken or silent: drop it (closing the socket) and try a fresh one.
                Ok(Err(_)) | Err(_) => {}
            }
        }
        Err(CheckError::Pool(Error::NoAnswer {
            addr: target.addr.to_string(),
            waited: arrived.elapsed(),
        }))
    }

    /// A control connection: counted and recorded like any backend connection, but outside
    /// `open` (it is part of the server's headroom, not of max_backend_connections).
    async fn connect_control(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        down_until: Instant,
    ) -> Result<BackendConn, Error> {
        let started = Instant::now();
        let control = control_key(key);
        loop {
            match self.open_conn(&control, target, true).await {
                Ok(conn) => return Ok(conn),
                Err(source) => match self.connect_failed(key, target, source) {
                    Error::Connect { kind, .. } if !kind.is_permanent() => {
                        self.wait_up(down_until, started).await?
                    }
                    permanent => return Err(permanent),
                },
            }
        }
    }

    /// Opens the control connection of `key`'s account ahead of the first login (at start:
    /// it also reads the server's max_connections). Failures are left to the first login.
    pub(crate) async fn open_control(&self, key: &PoolKey, target: &BackendTarget) {
        let lane = self.shared.lanes.get(key);
        let mut lane = lane.lock().await;
        if lane.conn.is_none() {
            if let Ok(conn) = self.open_conn(&control_key(key), target, true).await {
                lane.conn = Some(conn);
                lane.login = Some((target.addr.to_string(), target.password.clone()));
            }
        }
    }

    /// Runs `sql`, a query of one number, on `key`'s control connection (opened if needed),
    /// and returns that number; `None` if the server refused it, or is down, or busy with
    /// logins past `deadline`.
    pub(super) async fn number_on_control(
        &self,
        key: &PoolKey,
        target: &BackendTarget,
        sql: &[u8],
        deadline: Instant,
    ) -> Option<u64> {
        let lane = self.shared.lanes.get(key);
        let read = async {
            let mut lane = lane.lock().await;
            let login = (target.addr.to_string(), target.password.clone());
            if lane.login.as_ref() != Some(&login) {
                lane.conn = None;
            }
            let kept = match lane.conn.take() {
                Some(mut c) => (!c.stream.closed_while_idle()).then_some(c),
                None => None,
            };
            let mut conn = match kept {
                Some(c) => c,
                None => self.open_conn(&control_key(key), target, true).await.ok()?,
            };
            let answer = tokio::time::timeout(target.connect_timeout, conn.query_first_u64(sql));
            let n = match answer.await {
                Ok(Ok(answer)) => answer.ok().flatten(),
                // Broken or silent: dropped (the next login opens a fresh one).
                _ => return None,
            };
            conn.last_used = Instant::now();
            lane.login = Some(login);
            lane.conn = Some(conn);
            n
        };
        tokio::time::timeout_at(deadline.into(), read)
            .await
            .ok()
            .flatten()
    }

    /// Closes control connections unused for `idle_timeout` (0: never); skips busy ones.
    pub(super) fn close_idle_control(&self, idle_timeout: Duration) {
        for lane in self.shared.lanes.all() {
            if let Ok(mut lane) = lane.try_lock() {
                let idle = lane
                    .conn
                    .as_ref()
                    .is_some_and(|c| c.last_used.elapsed() >= idle_timeout);
                if idle && !idle_timeout.is_zero() {
                    lane.conn = None;
                }
            }
        }
    }

    /// Closes every control connection that is not in use (shutdown).
    pub(super) fn close_control(&self) {
        for lane in self.shared.lanes.all() {
            if let Ok(mut lane) = lane.try_lock() {
                lane.conn = None;
            }
        }
    }
}

/// A control connection needs no shaping capability: it only sends COM_INIT_DB (and, once,
/// reads @@max_connections). The collation stays the client's, because the server reads
/// the database name in it.
fn control_key(key: &PoolKey) -> PoolKey {
    PoolKey {
        user: key.user.clone(),
        caps: 0,
        collation: key.collation,
        globals: key.globals,
    }
}
