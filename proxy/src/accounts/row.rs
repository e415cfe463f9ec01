//! One row of the server's account table (`user@host`, how it authenticates, its state),
//! parsed from what the server returns: MariaDB's `mysql.global_priv` (a JSON `Priv`
//! document per account) or MySQL's `mysql.user` columns. Pure: the caller passes the clock.

use serde::Deserialize;

use super::host::HostPattern;
use super::sha_crypt::StoredSha2;

/// Which server's table the rows come from.
pub use crate::protocol::handshake::Flavor;

impl Flavor {
    /// The table the service account reads.
    pub fn table(self) -> &'static str {
        match self {
            Flavor::MariaDb => "mysql.global_priv",
            Flavor::MySql => "mysql.user",
        }
    }
}

/// An account's authentication plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plugin {
    Native,
    CachingSha2,
    /// Anything sluice cannot verify from a stored hash (ed25519, PAM, GSSAPI, unix_socket,
    /// sha256_password, LDAP, ...), by name.
    Unsupported(String),
}

impl Plugin {
    pub fn from_name(name: &str) -> Plugin {
        match name {
            "" | "mysql_native_password" => Plugin::Native,
            "caching_sha2_password" => Plugin::CachingSha2,
            other => Plugin::Unsupported(other.to_string()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Plugin::Native => "mysql_native_password",
            Plugin::CachingSha2 => "caching_sha2_password",
            Plugin::Unsupported(name) => name,
        }
    }
}

/// One way an account may authenticate: a plugin and its stored string.
#[derive(Clone, PartialEq, Eq)]
pub struct Method {
    pub plugin: Plugin,
    /// `*<40 hex>` (native; empty: no password), `$A$005$...` (caching_sha2), or the
    /// plugin's own string.
    pub auth: Vec<u8>,
}

impl std::fmt::Debug for Method {
    /// The stored hash is a credential to sluice (it recovers SHA1(password) from it): never
    /// printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Method({}, ***)", self.plugin.name())
    }
}

impl Method {
    /// The stored native hash as text (`*<40 hex>`, or empty for no password).
    pub fn native_hash(&self) -> Option<&str> {
        (self.plugin == Plugin::Native)
            .then(|| std::str::from_utf8(&self.auth).ok())
            .flatten()
    }

    /// The stored caching_sha2 hash.
    pub fn sha2_hash(&self) -> Option<StoredSha2> {
        (self.plugin == Plugin::CachingSha2)
            .then(|| StoredSha2::parse(&self.auth))
            .flatten()
    }

    /// No password is set (the plugin takes an empty answer).
    pub fn no_password(&self) -> bool {
        matches!(self.plugin, Plugin::Native | Plugin::CachingSha2) && self.auth.is_empty()
    }
}

/// One `user@host` row with what the server checks at a login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRow {
    /// Empty: an anonymous account (any user name).
    pub user: String,
    pub host: HostPattern,
    /// The ways it may authenticate, in the server's order (MariaDB's `IDENTIFIED VIA a OR
    /// b`); one for most accounts.
    pub methods: Vec<Method>,
    pub locked: bool,
    /// The password has expired (flagged, or older than its lifetime).
    pub expired: bool,
    /// 0: no limit of its own.
    pub max_user_connections: u32,
}

impl AccountRow {
    /// `user@host` as the server writes it in messages.
    pub fn account(&self) -> String {
        format!("'{}'@'{}'", self.user, self.host.as_str())
    }

    /// The method sluice verifies: the first one it can (native, then caching_sha2, in the
    /// row's order), else the first (to name its plugin in the refusal).
    pub fn method(&self) -> Option<&Method> {
        self.methods
            .iter()
            .find(|m| supported(m))
            .or_else(|| self.methods.first())
    }
}

fn supported(m: &Method) -> bool {
    matches!(m.plugin, Plugin::Native | Plugin::CachingSha2)
}

/// What expiry needs: the wall clock and the server's `default_password_lifetime` (days).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub now_epoch_secs: u64,
    pub default_lifetime_days: u32,
}

impl Clock {
    fn expired(&self, last_changed: Option<u64>, lifetime_days: Option<i64>) -> bool {
        let Some(changed) = last_changed.filter(|c| *c > 0) else {
            return false;
        };
        let days = match lifetime_days {
            None | Some(-1) => i64::from(self.default_lifetime_days),
            Some(d) => d,
        };
        days > 0 && self.now_epoch_secs > changed.saturating_add(days as u64 * 86_400)
    }
}

/// MariaDB's `Priv` JSON (only the keys sluice reads; absent ones take the server's defaults).
#[derive(Deserialize, Default)]
struct Priv {
    #[serde(default)]
    plugin: Option<String>,
    #[serde(default)]
    authentication_string: Option<String>,
    #[serde(default)]
    auth_or: Option<Vec<AuthOr>>,
    #[serde(default)]
    account_locked: Option<bool>,
    #[serde(default)]
    password_expired: Option<bool>,
    #[serde(default)]
    password_last_changed: Option<u64>,
    #[serde(default)]
    password_lifetime: Option<i64>,
    #[serde(default)]
    max_user_connections: Option<i64>,
    #[serde(default)]
    is_role: Option<bool>,
}

#[derive(Deserialize, Default)]
struct AuthOr {
    #[serde(default)]
    plugin: Option<String>,
    #[serde(default)]
    authentication_string: Option<String>,
}

/// Why a row could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("the Priv column of {account} is not the JSON document MariaDB writes")]
    BadPriv { account: String },
    #[error("an authentication_string of {account} is not hexadecimal")]
    BadHex { account: String },
}

/// A `mysql.global_priv` row; `None` for a role.
pub fn from_global_priv(
    user: &str,
    host: &str,
    priv_json: &[u8],
    clock: Clock,
) -> Result<Option<AccountRow>, RowError> {
    let bad = || RowError::BadPriv {
        account: format!("'{user}'@'{host}'"),
    };
    let p: Priv = if priv_json.is_empty() {
        Priv::default()
    } else {
        serde_json::from_slice(priv_json).map_err(|_| bad())?
    };
    if p.is_role == Some(true) {
        return Ok(None);
    }
    let main = Method {
        plugin: Plugin::from_name(p.plugin.as_deref().unwrap_or("")),
        auth: p
            .authentication_string
            .clone()
            .unwrap_or_default()
            .into_bytes(),
    };
    // `auth_or` lists every alternative in order; `{}` stands for the main one.
    let methods = match &p.auth_or {
        Some(alternatives) => alternatives
            .iter()
            .map(|a| match &a.plugin {
                None => main.clone(),
                Some(plugin) => Method {
                    plugin: Plugin::from_name(plugin),
                    auth: a
                        .authentication_string
                        .clone()
                        .unwrap_or_default()
                        .into_bytes(),
                },
            })
            .collect(),
        None => vec![main],
    };
    // PASSWORD EXPIRE stores password_last_changed = 0.
    let expired = p.password_expired == Some(true)
        || p.password_last_changed == Some(0)
        || clock.expired(p.password_last_changed, p.password_lifetime);
    Ok(Some(AccountRow {
        user: user.to_string(),
        host: HostPattern::parse(host, false),
        methods,
        locked: p.account_locked == Some(true),
        expired,
        max_user_connections: p
            .max_user_connections
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
    }))
}

/// The columns of a MySQL `mysql.user` row, as text.
pub struct MySqlColumns<'a> {
    pub user: &'a str,
    pub host: &'a str,
    pub plugin: &'a str,
    /// HEX(authentication_string).
    pub auth_hex: &'a str,
    pub account_locked: &'a str,
    pub password_expired: &'a str,
    /// UNIX_TIMESTAMP(password_last_changed), if set.
    pub last_changed: Option<u64>,
    /// NULL: the server's default.
    pub lifetime_days: Option<i64>,
    pub max_user_connections: u32,
}

/// A `mysql.user` row.
pub fn from_mysql_user(c: &MySqlColumns<'_>, clock: Clock) -> Result<AccountRow, RowError> {
    let auth = decode_hex(c.auth_hex).ok_or_else(|| RowError::BadHex {
        account: format!("'{}'@'{}'", c.user, c.host),
    })?;
    Ok(AccountRow {
        user: c.user.to_string(),
        host: HostPattern::parse(c.host, true),
        methods: vec![Method {
            plugin: Plugin::from_name(c.plugin),
            auth,
        }],
        locked: c.account_locked.eq_ignore_ascii_case("Y"),
        expired: c.password_expired.eq_ignore_ascii_case("Y")
            || clock.expired(c.last_changed, c.lifetime_days),
        max_user_connections: c.max_user_connections,
    })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOCK: Clock = Clock {
        now_epoch_secs: 1_800_000_000,
        default_lifetime_days: 0,
    };

    fn priv_row(json: &str) -> AccountRow {
        from_global_priv("app", "%", json.as_bytes(), CLOCK)
            .expect("parses")
            .expect("an account")
    }

    /// Priv documents as MariaDB 10.11 writes them (CREATE USER ... as shown by SELECT).
    #[test]
    fn mariadb_priv_documents() {
        let native = priv_row(
            r#"{"access":0,"version_id":101119,"plugin":"mysql_native_password","authentication_string":"*B69027D44F6E5EDC07F1AEAD1477967B16F28227","password_last_changed":1796347994}"#,
        );
        assert_eq!(native.methods.len(), 1);
        assert_eq!(
            native.method().and_then(Method::native_hash),
            Some("*B69027D44F6E5EDC07F1AEAD1477967B16F28227")
        );
        assert!(!native.locked && !native.expired);
        let locked = priv_row(
            r#"{"access":0,"plugin":"mysql_native_password","authentication_string":"*F24059C44AE7FCD38A595267C522FB133E9F06F1","account_locked":true,"password_last_changed":1796347994}"#,
        );
        assert!(locked.locked);
        let expired = priv_row(
            r#"{"access":0,"plugin":"mysql_native_password","authentication_string":"*B69027D44F6E5EDC07F1AEAD1477967B16F28227","password_last_changed":0,"password_lifetime":-1}"#,
        );
        assert!(expired.expired);
        let ed = priv_row(
            r#"{"access":0,"plugin":"ed25519","authentication_string":"xazss0L7brFwI1lmAqCIiQbo8/Zpi+JzOCmNHPh91dw","password_last_changed":1796347994}"#,
        );
        assert_eq!(
            ed.method().map(|m| &m.plugin),
            Some(&Plugin::Unsupported("ed25519".into()))
        );
        // IDENTIFIED VIA ed25519 ... OR mysql_native_password ...: sluice verifies the native one.
        let either = priv_row(
            r#"{"access":0,"plugin":"mysql_native_password","authentication_string":"*3FBEFEC33FD8E842761B011670846D73057E67BE","auth_or":[{"plugin":"ed25519","authentication_string":"xazss0L7brFwI1lmAqCIiQbo8/Zpi+JzOCmNHPh91dw"},{}],"password_last_changed":1796347994}"#,
        );
        assert_eq!(either.methods.len(), 2);
        assert_eq!(either.method().map(|m| &m.plugin), Some(&Plugin::Native));
        let limited = priv_row(
            r#"{"access":0,"plugin":"mysql_native_password","authentication_string":"","max_user_connections":2,"password_last_changed":1796347994}"#,
        );
        assert_eq!(limited.max_user_connections, 2);
        assert!(limited.method().is_some_and(Method::no_password));
        // An install's root row: only access bits, which means native with no password.
        let root = priv_row(r#"{"access":18446744073709551615}"#);
        assert!(root.method().is_some_and(Method::no_password) && !root.expired);
        let role = from_global_priv("r1", "", br#"{"access":0,"is_role":true}"#, CLOCK);
        assert_eq!(role, Ok(None));
        assert!(from_global_priv("a", "%", b"{not json", CLOCK).is_err());
    }

    #[test]
    fn a_password_older_than_its_lifetime_has_expired() {
        let day = 86_400;
        let changed = CLOCK.now_epoch_secs - 10 * day;
        let json = |lifetime: i64| {
            format!(
                r#"{{"plugin":"mysql_native_password","authentication_string":"","password_last_changed":{changed},"password_lifetime":{lifetime}}}"#
            )
        };
        assert!(priv_row(&json(5)).expired);
        assert!(!priv_row(&json(30)).expired);
        assert!(!priv_row(&json(0)).expired, "0: never");
        assert!(!priv_row(&json(-1)).expired, "the default: never here");
        let strict = Clock {
            default_lifetime_days: 7,
            ..CLOCK
        };
        let row = from_global_priv("a", "%", json(-1).as_bytes(), strict).unwrap();
        assert!(row.unwrap().expired, "the server's default of 7 days");
    }

    #[test]
    fn mysql_user_rows() {
        let hash = "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";
        let cols = MySqlColumns {
            user: "app",
            host: "10.0.0.0/24",
            plugin: "caching_sha2_password",
            auth_hex: hash,
            account_locked: "N",
            password_expired: "N",
            last_changed: Some(CLOCK.now_epoch_secs - 100),
            lifetime_days: None,
            max_user_connections: 0,
        };
        let row = from_mysql_user(&cols, CLOCK).expect("parses");
        let sha2 = row
            .method()
            .and_then(Method::sha2_hash)
            .expect("a $A$ hash");
        assert!(sha2.verify(b"foobar"));
        assert!(row.host.matches(&super::super::host::ClientHost::at(
            "10.0.0.3".parse().unwrap(),
            false
        )));
        let locked = MySqlColumns {
            account_locked: "Y",
            password_expired: "Y",
            ..cols
        };
        let row = from_mysql_user(&locked, CLOCK).unwrap();
        assert!(row.locked && row.expired);
        let bad = MySqlColumns {
            auth_hex: "ABC",
            ..locked
        };
        assert!(from_mysql_user(&bad, CLOCK).is_err());
        assert_eq!(
            format!("{:?}", row.methods[0]),
            "Method(caching_sha2_password, ***)"
        );
    }
}
