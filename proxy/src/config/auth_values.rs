//! The values of the settings of accounts from the server: `auth_source` and `auth_user`.

use std::fmt;
use std::str::FromStr;

use super::values::{parse_user_spec, Secret};

/// Where client accounts come from (`auth_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthSource {
    /// Only the `users` list.
    List,
    /// Only the server's account table, read as `auth_user`.
    Server,
    /// The `users` list first, then the server's account table.
    Both,
}

impl AuthSource {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthSource::List => "list",
            AuthSource::Server => "server",
            AuthSource::Both => "both",
        }
    }

    /// Whether the `users` list is consulted.
    pub fn uses_list(self) -> bool {
        !matches!(self, AuthSource::Server)
    }

    /// Whether the server's account table is consulted.
    pub fn uses_server(self) -> bool {
        !matches!(self, AuthSource::List)
    }
}

impl FromStr for AuthSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "list" => Ok(AuthSource::List),
            "server" => Ok(AuthSource::Server),
            "both" => Ok(AuthSource::Both),
            other => Err(format!("expected list, server or both; got {other:?}")),
        }
    }
}

impl fmt::Display for AuthSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The service account that reads the server's account table (`auth_user`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser {
    pub name: String,
    pub password: Secret,
}

impl FromStr for AuthUser {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, password) = parse_user_spec(s)
            .map_err(|_| format!("expected NAME:PASSWORD (the service account that reads the account table); got {:?}", s.trim()))?;
        if name.is_empty() {
            return Err("the account name before ':' is empty; write it as NAME:PASSWORD".into());
        }
        Ok(AuthUser { name, password })
    }
}
