//! Client and admin accounts: where each came from, the limits it carries, and the
//! credentials sluice logs in to the backend with on its behalf.

use super::file::FileUser;
use super::values::{self, AuthPluginName, Secret};
use super::Config;

/// A client (or admin) account sluice accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct UserConfig {
    pub name: String,
    pub password: Secret,
    /// Plugin to ask this user's clients for; `None` means `Config::default_auth_plugin`.
    pub auth_plugin: Option<AuthPluginName>,
    pub backend_user: Option<String>,
    pub backend_password: Option<Secret>,
    /// This user's own client-connection limit (0: none); `None`: max_user_client_connections.
    pub max_client_connections: Option<u32>,
    /// This user's own limit on statements running at once (0: none); `None`:
    /// max_user_concurrency.
    pub max_concurrency: Option<u32>,
    /// Where this account came from. A server account (`auth_source`) is built per login:
    /// its `password` is the credential the login proved, and it logs in to the backend as
    /// itself with it, whatever `backend_user` says.
    pub source: UserSource,
}

/// Where a [`UserConfig`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserSource {
    /// The `users` (or `admin_users`) list.
    #[default]
    List,
    /// The server's account table, read at the client's login (`accounts`).
    Server,
}

impl UserSource {
    pub fn as_str(self) -> &'static str {
        match self {
            UserSource::List => "list",
            UserSource::Server => "server",
        }
    }
}

/// A user's limits in force (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserLimits {
    pub max_client_connections: Option<u32>,
    pub max_concurrency: Option<u32>,
}

impl UserLimits {
    /// The limits of an account with no `[[users]]` entry of its own (server-sourced): the
    /// global defaults.
    pub fn defaults(cfg: &Config) -> UserLimits {
        let limit = |n: u32| (n > 0).then_some(n);
        UserLimits {
            max_client_connections: limit(cfg.max_user_client_connections),
            max_concurrency: limit(cfg.max_user_concurrency),
        }
    }
}

impl UserConfig {
    pub fn new(name: &str, password: &str) -> Self {
        UserConfig {
            name: name.to_string(),
            password: Secret::new(password.to_string()),
            auth_plugin: None,
            backend_user: None,
            backend_password: None,
            max_client_connections: None,
            max_concurrency: None,
            source: UserSource::List,
        }
    }

    /// A server account after a successful login: `credential` is what the login proved
    /// (the cleartext, or SHA1(password) recovered from a native answer).
    pub fn from_server(name: &str, credential: Secret) -> Self {
        UserConfig {
            source: UserSource::Server,
            password: credential,
            ..UserConfig::new(name, "")
        }
    }

    /// The limits in force for this user: its own, else the global defaults.
    pub fn limits(&self, cfg: &Config) -> UserLimits {
        let defaults = UserLimits::defaults(cfg);
        let own = |n: Option<u32>, default: Option<u32>| match n {
            Some(0) => None,
            Some(n) => Some(n),
            None => default,
        };
        UserLimits {
            max_client_connections: own(
                self.max_client_connections,
                defaults.max_client_connections,
            ),
            max_concurrency: own(self.max_concurrency, defaults.max_concurrency),
        }
    }

    /// The (user, password) sluice logs in to the backend with for this client: the user's own
    /// backend_* settings, else the global backend_user/backend_password, else the client's own
    /// name and password (pass-through). A server account always logs in as itself.
    pub fn backend_credentials<'a>(&'a self, cfg: &'a Config) -> (&'a str, &'a Secret) {
        if self.source == UserSource::Server {
            return (&self.name, &self.password);
        }
        let user = self
            .backend_user
            .as_deref()
            .or(cfg.backend_user.as_deref())
            .unwrap_or(&self.name);
        let password = self
            .backend_password
            .as_ref()
            .or(cfg.backend_password.as_ref())
            .unwrap_or(&self.password);
        (user, password)
    }

    /// The plugin to offer this user's clients.
    pub fn auth_plugin(&self, cfg: &Config) -> AuthPluginName {
        self.auth_plugin.unwrap_or(cfg.default_auth_plugin)
    }
}

pub(super) fn users_summary(users: &[UserConfig]) -> String {
    let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
    format!("[{}] (passwords masked)", names.join(", "))
}

pub(super) fn users_from_specs(
    specs: &[String],
    source: &str,
    errors: &mut Vec<String>,
) -> Vec<UserConfig> {
    let mut out = Vec::new();
    for spec in specs.iter().filter(|s| !s.trim().is_empty()) {
        match values::parse_user_spec(spec) {
            Ok((name, password)) => out.push(UserConfig {
                password,
                ..UserConfig::new(&name, "")
            }),
            Err(e) => errors.push(format!("{e} (from {source})")),
        }
    }
    out
}

pub(super) fn user_from_file(u: &FileUser, what: &str, errors: &mut Vec<String>) -> UserConfig {
    let auth_plugin = u.auth_plugin.as_deref().and_then(|p| match p.parse() {
        Ok(p) => Some(p),
        Err(e) => {
            errors.push(format!("{what} {:?}: auth_plugin: {e}", u.name));
            None
        }
    });
    let secret = |p: &Option<String>| p.clone().filter(|p| !p.is_empty()).map(Secret::new);
    UserConfig {
        name: u.name.clone(),
        password: Secret::new(u.password.clone().unwrap_or_default()),
        auth_plugin,
        backend_user: u.backend_user.clone().filter(|b| !b.is_empty()),
        backend_password: secret(&u.backend_password),
        max_client_connections: u.max_client_connections,
        max_concurrency: u.max_concurrency,
        source: UserSource::List,
    }
}
