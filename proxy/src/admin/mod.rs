//! The admin console: a MySQL-protocol port (opensrv-mysql) with its own users, where an
//! operator inspects and steers the running proxy (`mariadb -h127.0.0.1 -P6032 -uadmin -p`).
//!
//! - `parser`: text -> `AdminCommand`.
//! - `show`: the SHOW result sets as plain tables; `users`: SHOW USERS.
//! - `actions`: SET, PAUSE, RESUME, RELOAD, SHUTDOWN, KILL.
//! - `steer`: SHOW DIGESTS, SHOW RULES, RELOAD RULES.
//! - `auth`: password check and the MySQL-style access-denied error.
//!
//! This file holds the listener and the opensrv shim. Only codes opensrv knows may be sent
//! (it panics on others), so every error goes through `console_error_kind`.

pub mod actions;
pub mod auth;
pub mod parser;
pub mod show;
pub mod steer;
mod users;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter,
    OkResponse, ParamParser, QueryResultWriter, StatementMetaWriter,
};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};

use crate::context::Context;
use crate::protocol::auth::random_nonce;
use crate::protocol::{codes, ErrorCode};
use actions::AdminError;
use auth::{AdminOutput, Denial};
use parser::{AdminCommand, ShowWhat};
use show::{Cell, Kind, Table};

/// Version string in the console's greeting; clients parse it, so it must look like MySQL's.
const VERSION: &str = "8.0.36-sluice-admin";

/// What a command answers: rows, or an OK with a message.
pub enum Reply {
    Rows(Table),
    Done(String),
}

/// State shared by every admin connection.
pub struct Console {
    ctx: Arc<Context>,
    started: Instant,
    /// Serialises SET and RELOAD, which read, modify and swap the config.
    config_change: std::sync::Mutex<()>,
    next_id: AtomicU32,
}

/// Binds the console on `addr` and serves it until shutdown. Returns the bound address
/// (port 0 picks one).
pub async fn spawn(ctx: Arc<Context>, addr: SocketAddr) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let console = Arc::new(Console {
        ctx,
        started: Instant::now(),
        config_change: Default::default(),
        next_id: AtomicU32::new(1),
    });
    tokio::spawn(accept_loop(console, listener));
    tracing::info!(%local, "admin console listening");
    Ok(local)
}

async fn accept_loop(console: Arc<Console>, listener: TcpListener) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = console.ctx.shutdown.cancelled() => return,
        };
        match accepted {
            Ok((socket, peer)) => {
                tokio::spawn(serve(console.clone(), socket, peer));
            }
            Err(e) => {
                tracing::warn!("admin accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// One admin connection; it must log in within `client_login_timeout`.
async fn serve(console: Arc<Console>, socket: TcpStream, peer: SocketAddr) {
    let _ = socket.set_nodelay(true);
    let login_timeout = console.ctx.config().client_login_timeout;
    let (read, write) = socket.into_split();
    let denial: Denial = Arc::default();
    let logged_in = Arc::new(AtomicBool::new(false));
    let shim = AdminShim {
        id: console.next_id.fetch_add(1, Ordering::Relaxed),
        console,
        salt: random_nonce(),
        peer,
        denial: denial.clone(),
        logged_in: logged_in.clone(),
    };
    let run = AsyncMysqlIntermediary::run_on(shim, read, AdminOutput::new(write, denial));
    let login_deadline = async {
        tokio::time::sleep(login_timeout).await;
        if logged_in.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        r = run => if let Err(e) = r {
            tracing::debug!(%peer, "admin connection ended: {e}");
        },
        _ = login_deadline => tracing::info!(%peer, "admin login timed out"),
    }
}

struct AdminShim {
    console: Arc<Console>,
    id: u32,
    /// Fresh per connection: a fixed salt would let a captured scramble be replayed.
    salt: [u8; 20],
    peer: SocketAddr,
    denial: Denial,
    logged_in: Arc<AtomicBool>,
}

type Out = AdminOutput<OwnedWriteHalf>;

#[async_trait]
impl AsyncMysqlShim<Out> for AdminShim {
    type Error = io::Error;

    fn version(&self) -> String {
        VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.id
    }

    fn salt(&self) -> [u8; 20] {
        self.salt
    }

    async fn authenticate(&self, _plugin: &str, user: &[u8], salt: &[u8], response: &[u8]) -> bool {
        let ok = auth::verify(&self.console.ctx.config(), user, salt, response);
        if ok {
            self.logged_in.store(true, Ordering::Relaxed);
            tracing::info!(peer = %self.peer, user = %String::from_utf8_lossy(user), "admin logged in");
        } else {
            tracing::warn!(peer = %self.peer, user = %String::from_utf8_lossy(user), "admin login failed");
            let packet =
                auth::access_denied(user, &self.peer.ip().to_string(), !response.is_empty());
            if let Ok(mut d) = self.denial.lock() {
                *d = Some(packet);
            }
        }
        ok
    }

    async fn on_prepare<'a>(
        &'a mut self,
        _query: &'a str,
        info: StatementMetaWriter<'a, Out>,
    ) -> io::Result<()> {
        let e = AdminError::PreparedStatement;
        info.error(error_kind(&e), e.to_string().as_bytes()).await
    }

    async fn on_execute<'a>(
        &'a mut self,
        _id: u32,
        _p: ParamParser<'a>,
        results: QueryResultWriter<'a, Out>,
    ) -> io::Result<()> {
        let e = AdminError::PreparedStatement;
        results
            .error(error_kind(&e), e.to_string().as_bytes())
            .await
    }

    async fn on_close<'a>(&'a mut self, _stmt: u32)
    where
        Out: 'async_trait,
    {
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, Out>,
    ) -> io::Result<()> {
        tracing::debug!(admin = self.id, query, "admin command");
        match self.console.run(query).await {
            Ok(Reply::Rows(table)) => write_table(results, &table).await,
            Ok(Reply::Done(info)) => {
                results
                    .completed(OkResponse {
                        info,
                        ..Default::default()
                    })
                    .await
            }
            Err(e) => {
                results
                    .error(error_kind(&e), e.to_string().as_bytes())
                    .await
            }
        }
    }

    /// `USE x` and a default database at login: the console has no databases, so accept any.
    async fn on_init<'a>(&'a mut self, _db: &'a str, w: InitWriter<'a, Out>) -> io::Result<()> {
        w.ok().await
    }
}

impl Console {
    /// Parses and runs one command.
    pub async fn run(&self, text: &str) -> Result<Reply, AdminError> {
        let ctx = &*self.ctx;
        let reply = match parser::parse(text)? {
            AdminCommand::Show(what) => Reply::Rows(match what {
                ShowWhat::Pools => show::pools(ctx),
                ShowWhat::Clients => show::clients(ctx),
                ShowWhat::Servers => show::servers(ctx),
                ShowWhat::Stats => show::stats(ctx, self.started),
                ShowWhat::Config => show::config(ctx),
                ShowWhat::Version => show::version(ctx),
                ShowWhat::Latency => show::latency(ctx),
                ShowWhat::Rules => steer::rules(ctx),
                ShowWhat::Users => users::users(ctx),
            }),
            AdminCommand::ShowDigests { order, limit } => {
                Reply::Rows(steer::digests(ctx, order, limit))
            }
            AdminCommand::ResetDigests => {
                ctx.digests.reset();
                tracing::info!("admin RESET DIGESTS");
                Reply::Done("digests reset".into())
            }
            AdminCommand::ReloadRules => {
                let _one_at_a_time = self.config_change.lock().unwrap_or_else(|p| p.into_inner());
                steer::reload_rules(ctx)?;
                Reply::Rows(steer::rules(ctx))
            }
            AdminCommand::Help => Reply::Rows(show::help()),
            AdminCommand::SelectVariable(name) => Reply::Rows(show::variable(&name)),
            AdminCommand::Set { setting, value } => {
                let _one_at_a_time = self.config_change.lock().unwrap_or_else(|p| p.into_inner());
                Reply::Rows(actions::set(ctx, setting, &value)?)
            }
            AdminCommand::Reload => {
                let _one_at_a_time = self.config_change.lock().unwrap_or_else(|p| p.into_inner());
                Reply::Rows(actions::reload_table(&actions::reload(ctx)?))
            }
            AdminCommand::Reconnect => {
                let generation = ctx.globals.changed();
                Reply::Done(format!(
                    "logins from now on see the server's current globals (generation {generation}); \
                     backends opened before retire once their sessions leave"
                ))
            }
            AdminCommand::Pause => {
                Reply::Rows(actions::pause(ctx, ctx.config().shutdown_timeout).await)
            }
            AdminCommand::Resume => {
                actions::resume(ctx);
                Reply::Done("resumed".into())
            }
            AdminCommand::Shutdown => {
                actions::shutdown(ctx);
                Reply::Done("shutting down: running statements finish, then sluice exits".into())
            }
            AdminCommand::Kill(id) => {
                actions::kill(ctx, id)?;
                Reply::Done(format!("client {id} killed"))
            }
        };
        Ok(reply)
    }
}

/// The one way an error code reaches opensrv. Its `ErrorKind::from(u16)` panics on any code
/// outside MariaDB's 1000..=1885 (and it sends the SQLSTATE its own table has for the kind),
/// so a code it cannot carry exactly, code and SQLSTATE, becomes ER_UNKNOWN_ERROR.
pub fn console_error_kind(code: ErrorCode) -> ErrorKind {
    const OPENSRV_KNOWS: std::ops::RangeInclusive<u16> = 1000..=1885;
    let fallback = ErrorKind::from(codes::UNKNOWN_ERROR.code);
    if !OPENSRV_KNOWS.contains(&code.code) {
        return fallback;
    }
    let kind = ErrorKind::from(code.code);
    if kind.sqlstate() == code.sql_state.as_bytes() {
        kind
    } else {
        fallback
    }
}

fn error_kind(e: &AdminError) -> ErrorKind {
    console_error_kind(e.code())
}

async fn write_table(results: QueryResultWriter<'_, Out>, table: &Table) -> io::Result<()> {
    let columns: Vec<Column> = table
        .columns
        .iter()
        .map(|(name, kind)| Column {
            table: String::new(),
            column: name.clone(),
            coltype: match kind {
                Kind::Int => ColumnType::MYSQL_TYPE_LONGLONG,
                Kind::Text => ColumnType::MYSQL_TYPE_VAR_STRING,
            },
            colflags: ColumnFlags::empty(),
        })
        .collect();
    let mut w = results.start(&columns).await?;
    for row in &table.rows {
        for cell in row {
            match cell {
                Cell::Int(v) => w.write_col(*v)?,
                Cell::Text(s) => w.write_col(s.as_str())?,
                Cell::Null => w.write_col(None::<i64>)?,
            }
        }
        w.end_row().await?;
    }
    w.finish().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_console_code_reaches_opensrv_unchanged() {
        for code in [
            codes::PARSE_ERROR,
            codes::WRONG_VALUE_FOR_VAR,
            codes::UNKNOWN_ERROR,
            codes::NO_SUCH_THREAD,
            codes::UNSUPPORTED_PS,
            codes::ACCESS_DENIED,
        ] {
            let kind = console_error_kind(code);
            assert_eq!(kind as u16, code.code, "{code:?}");
            assert_eq!(kind.sqlstate(), code.sql_state.as_bytes(), "{code:?}");
        }
    }

    #[test]
    fn codes_opensrv_would_panic_on_or_misstate_become_unknown_error() {
        for code in [
            codes::QUEUE_TIMEOUT,
            codes::SECURE_TRANSPORT_REQUIRED,
            ErrorCode {
                code: 999,
                sql_state: "HY000",
            },
            ErrorCode {
                code: 1886,
                sql_state: "HY000",
            },
            // In range, but not the SQLSTATE opensrv would send for 1064.
            ErrorCode {
                code: 1064,
                sql_state: "HY000",
            },
        ] {
            assert_eq!(
                console_error_kind(code) as u16,
                codes::UNKNOWN_ERROR.code,
                "{code:?}"
            );
        }
    }
}
