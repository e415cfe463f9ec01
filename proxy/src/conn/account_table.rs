//! The account table read over backend connections as `auth_user`: the
//! [`TableReader`] of `accounts::Directory`. Up to `accounts::directory::MAX_READERS`
//! connections are kept between reads; each learns once how the server sees sluice
//! (`accounts::loader::SERVER_SQL`). Servers are tried in `Config::endpoints` order, so a
//! replica answers while the primary is down (the table is replicated).

use std::sync::Arc;
use std::time::SystemTime;

use super::backend::{BackendConn, BackendTarget, PoolKey};
use super::identity::{IdentityMode, IdentityModes};
use super::tls::BackendTls;
use crate::accounts::directory::MAX_READERS;
use crate::accounts::loader::{self, LoadError, ServerView, TableRead, TableReader};
use crate::accounts::row::{Clock, Flavor};
use crate::config::{AuthUser, Config};
use crate::protocol::ErrPacket;

/// ER_TABLEACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR: the service account lacks the grant.
const NO_GRANT: [u16; 2] = [1142, 1044];
/// utf8mb4_general_ci: the names are sent as hex, the collation only shapes the answer.
const COLLATION: u8 = 45;

/// An open reader connection and what it learnt about the server.
struct Reader {
    conn: BackendConn,
    view: Arc<ServerView>,
    /// The account it logged in as (a RELOAD may change auth_user).
    login: AuthUser,
}

/// Reads accounts for the directory.
pub struct AccountTable {
    tls: Option<Arc<BackendTls>>,
    idle: std::sync::Mutex<Vec<Reader>>,
    identity: Arc<IdentityModes>,
}

impl AccountTable {
    pub fn new(tls: Option<Arc<BackendTls>>) -> AccountTable {
        AccountTable {
            tls,
            idle: Default::default(),
            identity: Default::default(),
        }
    }

    fn take_idle(&self, login: &AuthUser) -> Option<Reader> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(mut r) = idle.pop() {
            if r.login == *login && !r.conn.stream.closed_while_idle() {
                return Some(r);
            }
        }
        None
    }

    fn keep(&self, reader: Reader) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_READERS {
            idle.push(reader);
        }
    }

    /// A new connection as `login`, on the first server that answers.
    async fn open(&self, config: &Config, login: &AuthUser) -> Result<Reader, LoadError> {
        let mut last = None;
        for addr in config.endpoints() {
            let target = BackendTarget {
                addr: addr.clone(),
                user: login.name.clone(),
                password: login.password.clone(),
                connect_timeout: config.connect_timeout,
                max_payload: 16 << 20,
                tls: self.tls.clone(),
                identity: self.identity.clone(),
                credentials: None,
            };
            self.identity.preset(&login.name, IdentityMode::Rewrite);
            let key = PoolKey {
                user: Arc::from(login.name.as_str()),
                caps: 0,
                collation: COLLATION,
                globals: 0,
            };
            let mut conn = match BackendConn::connect(&target, key).await {
                Ok(c) => c,
                Err(super::Error::Server(err)) => {
                    return Err(LoadError::Login {
                        user: login.name.clone(),
                        err,
                    })
                }
                Err(e) => {
                    last = Some(unreachable(addr.to_string(), e));
                    continue;
                }
            };
            let flavor = Flavor::from_version(&conn.server.version);
            let local = conn.stream.local_addr().map(|a| a.ip());
            let result = self
                .query(&mut conn, config, loader::SERVER_SQL.as_bytes())
                .await;
            match result {
                Ok(Ok(r)) => {
                    let view = Arc::new(loader::parse_server(flavor, &r, local)?);
                    return Ok(Reader {
                        conn,
                        view,
                        login: login.clone(),
                    });
                }
                Ok(Err(err)) => return Err(refused_query(flavor, &login.name, err)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| LoadError::Unreachable {
            addr: String::new(),
            source: Arc::new(std::io::Error::other("no server configured")),
        }))
    }

    async fn query(
        &self,
        conn: &mut BackendConn,
        config: &Config,
        sql: &[u8],
    ) -> Result<Result<crate::protocol::TextResult, ErrPacket>, LoadError> {
        let addr = conn
            .stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        match tokio::time::timeout(config.connect_timeout, conn.query_rows(sql)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(unreachable(addr, e)),
            Err(_) => Err(unreachable(
                addr,
                super::Error::Timeout("account table read"),
            )),
        }
    }
}

#[async_trait::async_trait]
impl TableReader for AccountTable {
    async fn read(&self, config: &Config, names: &[String]) -> Result<TableRead, LoadError> {
        let Some(login) = config.auth_user.clone() else {
            return Err(LoadError::Unreachable {
                addr: String::new(),
                source: Arc::new(std::io::Error::other("auth_user is not set")),
            });
        };
        let mut reader = match self.take_idle(&login) {
            Some(r) => r,
            None => self.open(config, &login).await?,
        };
        let flavor = reader.view.flavor;
        let sql = loader::accounts_sql(flavor, names);
        match self.query(&mut reader.conn, config, sql.as_bytes()).await? {
            Ok(result) => {
                let clock = Clock {
                    now_epoch_secs: SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    default_lifetime_days: reader.view.default_lifetime_days,
                };
                let rows = loader::parse_accounts(flavor, &result, clock)?;
                let server = reader.view.clone();
                self.keep(reader);
                Ok(TableRead { rows, server })
            }
            Err(err) => {
                let refusal = if NO_GRANT.contains(&err.code) {
                    LoadError::NoGrant {
                        table: flavor.table(),
                        grant: loader::grant_advice(flavor, &reader.view.service_account),
                        err,
                    }
                } else {
                    refused_query(flavor, &login.name, err)
                };
                self.keep(reader);
                Err(refusal)
            }
        }
    }
}

fn unreachable(addr: String, e: super::Error) -> LoadError {
    LoadError::Unreachable {
        addr,
        source: Arc::new(e),
    }
}

/// The server refused a reader's query: a missing grant, or a table it does not have.
fn refused_query(flavor: Flavor, user: &str, err: ErrPacket) -> LoadError {
    if NO_GRANT.contains(&err.code) {
        return LoadError::NoGrant {
            table: flavor.table(),
            grant: loader::grant_advice(flavor, &format!("{user}@%")),
            err,
        };
    }
    LoadError::Malformed {
        flavor,
        what: format!("{} {}", err.code, String::from_utf8_lossy(&err.message)),
    }
}
