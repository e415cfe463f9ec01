//! Reading the account table: the [`TableReader`] the directory calls (implemented over a
//! backend connection in `conn::account_table`), the SQL it sends, and the parsing of what the
//! server answers. The SQL and the parsing are pure and tested here.
//!
//! Two queries per connection: once, who the server thinks sluice is and how it matches hosts
//! (`USER()`, `CURRENT_USER()`, `@@skip_name_resolve`, `@@default_password_lifetime`); then
//! one query per read, for every name asked at once and the anonymous rows. Names go as hex
//! literals, so no name can change the statement.

use std::fmt::Write;
use std::sync::Arc;

use super::host::ClientHost;
use super::row::{self, AccountRow, Clock, Flavor, MySqlColumns};
use crate::config::Config;
use crate::protocol::{ErrPacket, TextResult};

/// How the server matches logins, and how it sees sluice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerView {
    pub flavor: Flavor,
    /// `skip_name_resolve = OFF`: `localhost` rows match loopback clients.
    pub resolves_names: bool,
    /// sluice's own backend logins as the server sees them (the host part of `USER()`).
    pub sluice_host: ClientHost,
    /// `default_password_lifetime`, days (0: never).
    pub default_lifetime_days: u32,
    /// The service account's row as the server matched it (`CURRENT_USER()`).
    pub service_account: String,
}

/// One read: the rows of the names asked (and the anonymous rows), and the server's view.
#[derive(Debug, Clone)]
pub struct TableRead {
    pub rows: Vec<AccountRow>,
    pub server: Arc<ServerView>,
}

/// Why the account table could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// No server answered (down, unreachable, timed out).
    #[error("cannot reach the server at {addr}: {source}")]
    Unreachable {
        addr: String,
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The server refused auth_user's login.
    #[error("the server refused auth_user {user:?}: {} {}", .err.code, String::from_utf8_lossy(&.err.message))]
    Login { user: String, err: ErrPacket },
    /// The server refused the query: auth_user lacks the grant.
    #[error("auth_user cannot read {table}: {} {}; run {grant}", .err.code, String::from_utf8_lossy(&.err.message))]
    NoGrant {
        table: &'static str,
        grant: String,
        err: ErrPacket,
    },
    /// The read ended without an answer (sluice is stopping).
    #[error("the read was abandoned")]
    Abandoned,
    /// The answer was not the expected table.
    #[error("the account table's answer is not what {flavor:?} returns: {what}")]
    Malformed { flavor: Flavor, what: String },
}

impl LoadError {
    /// Whether sluice must refuse to start with it (a configuration error, not an outage).
    pub fn is_configuration(&self) -> bool {
        matches!(self, LoadError::Login { .. } | LoadError::NoGrant { .. })
    }
}

/// Reads accounts from the server (as auth_user, with the live config).
#[async_trait::async_trait]
pub trait TableReader: Send + Sync + 'static {
    async fn read(&self, config: &Config, names: &[String]) -> Result<TableRead, LoadError>;
}

/// The first query on a reader's connection.
pub const SERVER_SQL: &str = "SELECT USER() AS seen, CURRENT_USER() AS account, \
    @@skip_name_resolve AS skip_name_resolve, @@default_password_lifetime AS lifetime";

/// The server view from [`SERVER_SQL`]'s answer; `local_ip`: the connection's own address.
pub fn parse_server(
    flavor: Flavor,
    result: &TextResult,
    local_ip: Option<std::net::IpAddr>,
) -> Result<ServerView, LoadError> {
    let text = |name: &str| {
        result
            .get(0, name)
            .flatten()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .ok_or_else(|| LoadError::Malformed {
                flavor,
                what: format!("no {name} in the server query"),
            })
    };
    let seen = text("seen")?;
    let resolves_names = text("skip_name_resolve")? == "0";
    let host = seen.rsplit_once('@').map(|(_, h)| h).unwrap_or("");
    Ok(ServerView {
        flavor,
        resolves_names,
        sluice_host: ClientHost::from_user_host(host, local_ip, resolves_names),
        default_lifetime_days: text("lifetime")?.parse().unwrap_or(0),
        service_account: text("account")?,
    })
}

/// The account query for `names` (and the anonymous rows).
pub fn accounts_sql(flavor: Flavor, names: &[String]) -> String {
    let mut sql = String::from(match flavor {
        Flavor::MariaDb => "SELECT User, Host, Priv FROM mysql.global_priv WHERE User = ''",
        Flavor::MySql => {
            "SELECT User, Host, plugin, HEX(authentication_string) AS auth_hex, account_locked, \
             password_expired, UNIX_TIMESTAMP(password_last_changed) AS last_changed, \
             password_lifetime, max_user_connections FROM mysql.user WHERE User = ''"
        }
    });
    if !names.is_empty() {
        sql.push_str(" OR User IN (");
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str("X'");
            for b in name.as_bytes() {
                let _ = write!(sql, "{b:02X}");
            }
            sql.push('\'');
        }
        sql.push(')');
    }
    sql
}

/// The GRANT that lets `account` (as `CURRENT_USER()` names it) read the table.
pub fn grant_advice(flavor: Flavor, account: &str) -> String {
    let (user, host) = account.rsplit_once('@').unwrap_or((account, "%"));
    format!("GRANT SELECT ON {} TO '{user}'@'{host}'", flavor.table())
}

/// The rows of an account query's answer.
pub fn parse_accounts(
    flavor: Flavor,
    result: &TextResult,
    clock: Clock,
) -> Result<Vec<AccountRow>, LoadError> {
    let malformed = |what: String| LoadError::Malformed { flavor, what };
    let mut rows = Vec::with_capacity(result.rows.len());
    for i in 0..result.rows.len() {
        let text = |name: &str| -> Result<&str, LoadError> {
            let v = result
                .get(i, name)
                .ok_or_else(|| malformed(format!("no {name} column")))?;
            std::str::from_utf8(v.unwrap_or_default())
                .map_err(|_| malformed(format!("{name} is not UTF-8")))
        };
        let number = |name: &str| -> Result<Option<i64>, LoadError> {
            let v = text(name)?;
            Ok((!v.is_empty()).then(|| v.parse().ok()).flatten())
        };
        let parsed = match flavor {
            Flavor::MariaDb => {
                let priv_json = result.get(i, "Priv").flatten().unwrap_or_default();
                row::from_global_priv(text("User")?, text("Host")?, priv_json, clock)
            }
            Flavor::MySql => {
                let columns = MySqlColumns {
                    user: text("User")?,
                    host: text("Host")?,
                    plugin: text("plugin")?,
                    auth_hex: text("auth_hex")?,
                    account_locked: text("account_locked")?,
                    password_expired: text("password_expired")?,
                    last_changed: number("last_changed")?.and_then(|n| u64::try_from(n).ok()),
                    lifetime_days: number("password_lifetime")?,
                    max_user_connections: number("max_user_connections")?
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                };
                row::from_mysql_user(&columns, clock).map(Some)
            }
        };
        match parsed {
            Ok(Some(row)) => rows.push(row),
            Ok(None) => {}
            // One unreadable row must not lock every account out: it is skipped (and its
            // logins refused as unknown), the others are served.
            Err(e) => tracing::warn!("account table: {e}; skipping that row"),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(columns: &[&str], rows: &[&[Option<&str>]]) -> TextResult {
        TextResult {
            columns: columns.iter().map(|c| c.as_bytes().to_vec()).collect(),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|v| v.map(|s| s.as_bytes().to_vec())).collect())
                .collect(),
        }
    }

    const CLOCK: Clock = Clock {
        now_epoch_secs: 1_800_000_000,
        default_lifetime_days: 0,
    };

    #[test]
    fn names_go_as_hex_literals() {
        let sql = accounts_sql(Flavor::MariaDb, &["ab".into(), "x' OR 1=1 --".into()]);
        assert_eq!(
            sql,
            "SELECT User, Host, Priv FROM mysql.global_priv WHERE User = '' OR User IN (X'6162', X'7827204F5220313D31202D2D')"
        );
        assert!(accounts_sql(Flavor::MySql, &[]).ends_with("FROM mysql.user WHERE User = ''"));
        assert_eq!(
            grant_advice(Flavor::MariaDb, "sluice_auth@%"),
            "GRANT SELECT ON mysql.global_priv TO 'sluice_auth'@'%'"
        );
        assert_eq!(
            grant_advice(Flavor::MySql, "svc@10.0.0.%"),
            "GRANT SELECT ON mysql.user TO 'svc'@'10.0.0.%'"
        );
    }

    #[test]
    fn the_server_view() {
        let r = result(
            &["seen", "account", "skip_name_resolve", "lifetime"],
            &[&[
                Some("sluice_auth@127.0.0.1"),
                Some("sluice_auth@%"),
                Some("1"),
                Some("0"),
            ]],
        );
        let view = parse_server(Flavor::MariaDb, &r, None).expect("parses");
        assert!(!view.resolves_names);
        assert_eq!(view.sluice_host.ip_text, "127.0.0.1");
        assert_eq!(view.service_account, "sluice_auth@%");
        let empty = result(&["seen"], &[]);
        assert!(parse_server(Flavor::MariaDb, &empty, None).is_err());
    }

    #[test]
    fn mariadb_and_mysql_answers() {
        let maria = result(
            &["User", "Host", "Priv"],
            &[
                &[
                    Some("app"),
                    Some("%"),
                    Some(
                        r#"{"plugin":"mysql_native_password","authentication_string":"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"}"#,
                    ),
                ],
                &[Some("r1"), Some(""), Some(r#"{"is_role":true}"#)],
                &[Some("bad"), Some("%"), Some("{nope")],
                &[Some(""), Some("localhost"), Some("{}")],
            ],
        );
        let rows = parse_accounts(Flavor::MariaDb, &maria, CLOCK).expect("parses");
        let accounts: Vec<String> = rows.iter().map(AccountRow::account).collect();
        assert_eq!(
            accounts,
            ["'app'@'%'", "''@'localhost'"],
            "roles and bad rows skipped"
        );
        let mysql = result(
            &[
                "User",
                "Host",
                "plugin",
                "auth_hex",
                "account_locked",
                "password_expired",
                "last_changed",
                "password_lifetime",
                "max_user_connections",
            ],
            &[&[
                Some("app"),
                Some("10.0.0.0/8"),
                Some("mysql_native_password"),
                Some(""),
                Some("N"),
                Some("N"),
                None,
                None,
                Some("5"),
            ]],
        );
        let rows = parse_accounts(Flavor::MySql, &mysql, CLOCK).expect("parses");
        assert_eq!(rows[0].max_user_connections, 5);
        assert!(rows[0].methods[0].no_password());
        let missing = result(&["User"], &[&[Some("app")]]);
        assert!(parse_accounts(Flavor::MariaDb, &missing, CLOCK).is_err());
    }
}
