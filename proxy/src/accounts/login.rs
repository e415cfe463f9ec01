//! The rules of a login to a server account, in the server's order: pick the row for the
//! client's address, ask for its plugin, verify the proof (`verify`), then refuse a locked
//! account (4151) or an expired password (1862), and finally check that sluice's own backend
//! login, which the server matches to sluice's address, will take the same credential.
//! Every refusal has its ERR packet here. Pure.

use super::directory::Account;
use super::host::ClientHost;
use super::loader::LoadError;
use super::pick::pick;
use super::row::{AccountRow, Flavor, Method, Plugin};
use super::verify::satisfies;
use crate::config::Secret;
use crate::protocol::{codes, ErrPacket};

/// What the client must prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// mysql_native_password over the login's nonce.
    Native,
    /// caching_sha2_password: the fast path with a remembered cleartext, else full
    /// authentication (the password over TLS or RSA).
    Sha2,
}

/// How a login to `user` from a client proceeds.
#[derive(Debug)]
pub enum Plan<'a> {
    Verify {
        row: &'a AccountRow,
        method: &'a Method,
        ask: Ask,
    },
    /// No row matches: the login goes on with the default plugin and is refused, as the
    /// server does (the client learns nothing from the exchange).
    NoRow,
    /// The row's plugin cannot be verified from the table.
    Unsupported { row: &'a AccountRow },
}

pub fn plan<'a>(account: &'a Account, user: &str, client: &ClientHost) -> Plan<'a> {
    let Some(row) = pick(&account.rows, user, client) else {
        return Plan::NoRow;
    };
    match row.method() {
        Some(m) if m.plugin == Plugin::Native => Plan::Verify {
            row,
            method: m,
            ask: Ask::Native,
        },
        Some(m) if m.plugin == Plugin::CachingSha2 => Plan::Verify {
            row,
            method: m,
            ask: Ask::Sha2,
        },
        _ => Plan::Unsupported { row },
    }
}

/// Why a server account's login was refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// Unknown account, no row for this host, or a wrong password.
    AccessDenied,
    /// The account authenticates with a plugin sluice cannot verify.
    Unsupported {
        account: String,
        plugin: String,
        flavor: Flavor,
    },
    Locked,
    Expired {
        account: String,
    },
    /// The backend login, from sluice's address, would meet another row.
    BackendRow {
        client_row: String,
        backend_row: Option<String>,
        sluice_host: String,
    },
    /// The table could not be read and the cached copy is too old.
    Unavailable(LoadError),
}

/// The closed list of refusal kinds (counters, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalKind {
    AccessDenied,
    UnsupportedPlugin,
    Locked,
    Expired,
    BackendRow,
    Unavailable,
}

impl RefusalKind {
    pub const ALL: [RefusalKind; 6] = [
        RefusalKind::AccessDenied,
        RefusalKind::UnsupportedPlugin,
        RefusalKind::Locked,
        RefusalKind::Expired,
        RefusalKind::BackendRow,
        RefusalKind::Unavailable,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RefusalKind::AccessDenied => "access_denied",
            RefusalKind::UnsupportedPlugin => "unsupported_plugin",
            RefusalKind::Locked => "locked",
            RefusalKind::Expired => "expired",
            RefusalKind::BackendRow => "backend_row",
            RefusalKind::Unavailable => "unavailable",
        }
    }
}

/// After the proof checked out against `row`: what the server refuses then, and whether the
/// backend login will work with `credential`.
pub fn admit(
    account: &Account,
    user: &str,
    row: &AccountRow,
    credential: &Secret,
) -> Result<(), Refusal> {
    if row.locked {
        return Err(Refusal::Locked);
    }
    if row.expired {
        return Err(Refusal::Expired {
            account: row.account(),
        });
    }
    let sluice = &account.server.sluice_host;
    let backend = pick(&account.rows, user, sluice);
    let works = match backend {
        Some(b) if b == row => true,
        Some(b) => !b.locked && !b.expired && b.method().is_some_and(|m| satisfies(m, credential)),
        None => false,
    };
    if works {
        return Ok(());
    }
    Err(Refusal::BackendRow {
        client_row: row.account(),
        backend_row: backend.map(AccountRow::account),
        sluice_host: sluice.shown().to_string(),
    })
}

impl Refusal {
    pub fn kind(&self) -> RefusalKind {
        match self {
            Refusal::AccessDenied => RefusalKind::AccessDenied,
            Refusal::Unsupported { .. } => RefusalKind::UnsupportedPlugin,
            Refusal::Locked => RefusalKind::Locked,
            Refusal::Expired { .. } => RefusalKind::Expired,
            Refusal::BackendRow { .. } => RefusalKind::BackendRow,
            Refusal::Unavailable(_) => RefusalKind::Unavailable,
        }
    }

    /// Whether it counts as a failed login for the per-address backoff (a wrong guess);
    /// the others are the account's state or configuration.
    pub fn is_failed_guess(&self) -> bool {
        matches!(self, Refusal::AccessDenied)
    }

    /// The ERR the client gets; `user`@`host` as in the server's 1045.
    pub fn packet(&self, user: &[u8], host: &str, used_password: bool) -> ErrPacket {
        let user = String::from_utf8_lossy(user);
        let denied = format!("Access denied for user '{user}'@'{host}'");
        let msg = match self {
            Refusal::AccessDenied => format!(
                "{denied} (using password: {})",
                if used_password { "YES" } else { "NO" }
            ),
            Refusal::Unsupported { account, plugin, flavor } => format!(
                "{denied}: the server account {account} authenticates with {plugin}, which sluice cannot verify from the account table. List '{user}' in sluice's users with its password, or change the account's plugin: {}",
                change_plugin(*flavor, account)
            ),
            Refusal::Locked => {
                return ErrPacket::from_code(codes::ACCOUNT_LOCKED, &b"Access denied, this account is locked"[..])
            }
            Refusal::Expired { account } => {
                let msg = format!(
                    "Your password has expired. To log in you must change it using a client that supports expired passwords. sluice cannot offer the expired-password sandbox: change it on the server directly (ALTER USER {account} IDENTIFIED BY '...')"
                );
                return ErrPacket::from_code(codes::MUST_CHANGE_PASSWORD_LOGIN, msg.as_bytes());
            }
            Refusal::BackendRow {
                client_row,
                backend_row: Some(backend),
                sluice_host,
            } => format!(
                "{denied}: the password is right for {client_row}, but sluice logs in to the server from {sluice_host}, where the server picks {backend}, which takes another password (or is locked or expired). Give {backend} the same password as {client_row}, or list '{user}' in sluice's users with backend credentials"
            ),
            Refusal::BackendRow {
                client_row,
                backend_row: None,
                sluice_host,
                ..
            } => format!(
                "{denied}: the password is right for {client_row}, but sluice logs in to the server from {sluice_host}, and no row of '{user}' matches that host. Add one with the same password (CREATE USER '{user}'@'{sluice_host}' ...), or list '{user}' in sluice's users with backend credentials"
            ),
            Refusal::Unavailable(e) => {
                let msg = format!(
                    "sluice cannot check the account '{user}': the server's account table cannot be read ({e}) and sluice's copy is older than auth_cache_ttl. Retry when the server is reachable"
                );
                return ErrPacket::from_code(codes::BACKEND_UNREACHABLE, msg.as_bytes());
            }
        };
        ErrPacket::from_code(codes::ACCESS_DENIED, msg.as_bytes())
    }
}

fn change_plugin(flavor: Flavor, account: &str) -> String {
    match flavor {
        Flavor::MariaDb => format!(
            "ALTER USER {account} IDENTIFIED VIA mysql_native_password USING PASSWORD('...')"
        ),
        Flavor::MySql => {
            format!("ALTER USER {account} IDENTIFIED WITH caching_sha2_password BY '...'")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::host::HostPattern;
    use crate::accounts::loader::ServerView;
    use crate::protocol::auth;
    use std::sync::Arc;

    fn row(user: &str, host: &str, password: &str) -> AccountRow {
        AccountRow {
            user: user.into(),
            host: HostPattern::parse(host, false),
            methods: vec![Method {
                plugin: Plugin::Native,
                auth: auth::native_hash(password.as_bytes()).into_bytes(),
            }],
            locked: false,
            expired: false,
            max_user_connections: 0,
        }
    }

    fn account(rows: Vec<AccountRow>) -> Account {
        Account {
            rows: Arc::from(rows),
            server: Arc::new(ServerView {
                flavor: Flavor::MariaDb,
                resolves_names: false,
                sluice_host: ClientHost::at("10.0.1.5".parse().unwrap(), false),
                default_lifetime_days: 0,
                service_account: "svc@%".into(),
            }),
            sha2_clear: None,
        }
    }

    fn at(ip: &str) -> ClientHost {
        ClientHost::at(ip.parse().unwrap(), false)
    }

    fn secret(pw: &str) -> Secret {
        Secret::native_stage1(auth::native_stage1(pw.as_bytes()))
    }

    #[test]
    fn the_row_for_the_clients_address_decides_the_plugin() {
        let mut ed = row("e", "%", "");
        ed.methods[0].plugin = Plugin::Unsupported("ed25519".into());
        let a = account(vec![row("app", "10.0.0.%", "x"), row("app", "%", "y"), ed]);
        match plan(&a, "app", &at("10.0.0.7")) {
            Plan::Verify { row, ask, .. } => {
                assert_eq!(
                    (row.account().as_str(), ask),
                    ("'app'@'10.0.0.%'", Ask::Native)
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(plan(&a, "nobody", &at("10.0.0.7")), Plan::NoRow));
        assert!(matches!(
            plan(&a, "e", &at("10.0.0.7")),
            Plan::Unsupported { .. }
        ));
    }

    #[test]
    fn state_and_the_backend_row_are_checked_after_the_password() {
        let a = account(vec![row("app", "10.0.0.%", "x"), row("app", "%", "y")]);
        let client_row = &a.rows[0];
        // sluice (10.0.1.5) is matched to 'app'@'%', whose password is y.
        let err = admit(&a, "app", client_row, &secret("x")).unwrap_err();
        assert_eq!(err.kind(), RefusalKind::BackendRow);
        let msg = err.packet(b"app", "10.0.0.7", true);
        let text = String::from_utf8_lossy(&msg.message).into_owned();
        assert!(
            text.contains("sluice logs in to the server from 10.0.1.5")
                && text.contains("'app'@'%'"),
            "{text}"
        );
        assert_eq!(msg.code, 1045);
        assert!(
            admit(&a, "app", &a.rows[1], &secret("y")).is_ok(),
            "the same row"
        );
        let same = account(vec![row("app", "10.0.0.%", "y"), row("app", "%", "y")]);
        assert!(
            admit(&same, "app", &same.rows[0], &secret("y")).is_ok(),
            "same password"
        );
        let none = account(vec![row("app", "10.0.0.%", "x")]);
        let err = admit(&none, "app", &none.rows[0], &secret("x")).unwrap_err();
        assert!(
            String::from_utf8_lossy(&err.packet(b"app", "h", true).message)
                .contains("no row of 'app' matches")
        );
        let mut locked = row("app", "%", "y");
        locked.locked = true;
        let l = account(vec![locked]);
        let err = admit(&l, "app", &l.rows[0], &secret("y")).unwrap_err();
        assert_eq!(err.packet(b"app", "h", true).code, 4151);
        let mut expired = row("app", "%", "y");
        expired.expired = true;
        let x = account(vec![expired]);
        let err = admit(&x, "app", &x.rows[0], &secret("y")).unwrap_err();
        assert_eq!(err.packet(b"app", "h", true).code, 1862);
    }

    #[test]
    fn refusals_name_the_account_and_the_fix() {
        let unsupported = Refusal::Unsupported {
            account: "'e'@'%'".into(),
            plugin: "ed25519".into(),
            flavor: Flavor::MariaDb,
        };
        let p = unsupported.packet(b"e", "127.0.0.1", true);
        let text = String::from_utf8_lossy(&p.message).into_owned();
        assert_eq!((p.code, p.sql_state_str()), (1045, "28000"));
        assert!(
            text.contains("'e'@'%' authenticates with ed25519")
                && text.contains("IDENTIFIED VIA mysql_native_password"),
            "{text}"
        );
        let denied = Refusal::AccessDenied.packet(b"bob", "10.0.0.5", false);
        assert_eq!(
            denied.message,
            b"Access denied for user 'bob'@'10.0.0.5' (using password: NO)"
        );
        let down = Refusal::Unavailable(LoadError::Abandoned).packet(b"bob", "h", true);
        assert_eq!(down.code, 9003);
        assert!(Refusal::AccessDenied.is_failed_guess() && !Refusal::Locked.is_failed_guess());
    }
}
