//! Configuration: one validated `Config`, built once and passed down (never a global).
//!
//! Sources, lowest to highest: built-in defaults < TOML file (`--config`) < environment
//! (`SLUICE_*`) < command-line flags. Every setting is declared once, in `settings.rs`, which
//! also yields `docs/config.md` and `sluice.example.toml`. All values travel as text until the
//! merge, so a bad value anywhere is reported together with every validation problem at once.

mod auth_values;
mod cli;
mod details;
mod docs;
mod endpoint;
mod file;
mod read;
mod replicas;
mod rules;
mod settings;
mod users;
mod validate;
mod values;

#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use auth_values::{AuthSource, AuthUser};
pub use cli::{Cli, ACTION_FLAGS};
pub use docs::{config_docs_markdown, example_toml};
pub use endpoint::Endpoint;
pub use file::{FileUser, Scalar};
pub use replicas::{PrimaryReads, ReadWriteSplit, ReadYourWrites};
pub use rules::{parse_digest_id, Cidr, FileRule, Pattern, RouteTarget, RuleDef};
pub use settings::{setting, FileConfig, SettingArgs, SettingDoc, SETTINGS};
pub use users::{UserConfig, UserLimits, UserSource};
pub use values::{
    format_duration, parse_bytes, parse_duration, AuthPluginName, BackendLimit, BackendTlsMode,
    LogFormat, PoolSize, Secret, ServerCpus, WorkerThreads,
};

use settings::{apply, is_scalar, render};
use users::{user_from_file, users_from_specs, users_summary};

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse config file {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

/// The validated configuration. See `SETTINGS` (or docs/config.md) for each field's meaning.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub backend: Endpoint,
    pub users: Vec<UserConfig>,
    pub backend_user: Option<String>,
    pub backend_password: Option<Secret>,
    pub default_auth_plugin: AuthPluginName,
    /// `None`: derived ([`Config::auth_source`]).
    pub auth_source: Option<AuthSource>,
    pub auth_user: Option<AuthUser>,
    pub auth_cache_ttl: Duration,
    pub pool_size: PoolSize,
    pub min_pool_size: u32,
    pub max_pool_size: u32,
    pub max_backend_connections: BackendLimit,
    pub max_client_connections: u32,
    pub queue_timeout: Duration,
    /// How long a statement that would pin its session waits for a pinned place.
    pub pin_wait: Duration,
    /// Statements of different sessions one backend may be sent at once (`pool::batches`).
    pub pipeline_depth: u32,
    /// How long batching may hold back a read that would find a free slot.
    pub pipeline_max_delay: Duration,
    /// The backend server's CPUs, which tell pipelining when the server is saturated.
    pub server_cpus: ServerCpus,
    /// How long a reply's wait may poll the backend instead of sleeping (`conn::busy_poll`).
    pub backend_busy_poll: Duration,
    pub max_queue_wait: Option<Duration>,
    pub backend_down_wait: Duration,
    pub connect_timeout: Duration,
    pub client_login_timeout: Duration,
    /// Failed logins per address before the backoff starts (0: off).
    pub auth_failure_threshold: u32,
    pub auth_failure_max_delay: Duration,
    pub client_write_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub max_allowed_packet: u32,
    pub max_prepared_statements_per_backend: u32,
    pub max_prepared_statements_per_client: u32,
    pub server_version: Option<String>,
    pub server_idle_timeout: Duration,
    pub server_lifetime: Duration,
    pub health_check_interval: Duration,
    pub globals_check_interval: Duration,
    pub min_idle: u32,
    pub admin_listen: Option<SocketAddr>,
    pub admin_users: Vec<UserConfig>,
    pub metrics_listen: Option<SocketAddr>,
    /// This instance's number (0 ..= 255): the top 8 bits of every client connection id.
    pub instance_id: u32,
    /// SO_REUSEPORT on the client listener.
    pub reuse_port: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub backend_tls: BackendTlsMode,
    pub backend_tls_ca: Option<PathBuf>,
    pub require_secure_transport: bool,
    pub log_format: LogFormat,
    /// Threads of the binary's runtime (`main.rs`).
    pub worker_threads: WorkerThreads,
    /// `servers`: every server of the replication setup, in configured order (the index
    /// the topology, the pools and SHOW SERVERS use). Empty: the one server in `backend`;
    /// read it through [`Config::endpoints`].
    pub servers: Vec<Endpoint>,
    pub monitor_user: Option<String>,
    pub monitor_password: Option<Secret>,
    pub monitor_interval: Duration,
    pub read_write_split: ReadWriteSplit,
    pub primary_reads: PrimaryReads,
    pub max_replica_lag: Duration,
    pub read_your_writes: ReadYourWrites,
    pub gtid_wait_timeout: Duration,
    pub writer_wait_timeout: Duration,
    /// Per-digest statistics on (`digests`), and their table's size.
    pub digests: bool,
    pub digest_table_size: u32,
    /// Digests /metrics shows (the top by total time).
    pub metrics_digest_top: u32,
    /// Defaults for users without their own limits (0: none).
    pub max_user_client_connections: u32,
    pub max_user_concurrency: u32,
    /// The `[[rules]]`, in order (their run-time state is `crate::rules`).
    pub rules: Arc<[RuleDef]>,
    /// The file this came from, re-read by `reload` (RELOAD, SIGHUP).
    pub config_path: Option<PathBuf>,
    /// The file holds a plaintext password (see `warnings`).
    pub file_has_plaintext_password: bool,
    /// Environment and flag values from start-up; `reload` applies them again over the new file.
    pub overrides: Arc<Overrides>,
}

/// One setting that differs between two configs (for reload reporting).
#[derive(Debug, Clone, PartialEq)]
pub struct SettingChange {
    pub name: &'static str,
    /// Old and new value as TOML text, secrets masked; "(unset)" when absent.
    pub old: String,
    pub new: String,
    /// Whether the running proxy can apply it; otherwise it needs a restart.
    pub live: bool,
}

/// Values from the environment and the command line, as text, with a label of their source.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    values: Vec<(&'static str, String, String)>,
    users: Option<(Vec<String>, String)>,
    admin_users: Option<(Vec<String>, String)>,
    servers: Option<(Vec<String>, String)>,
}

impl Overrides {
    /// Environment first, then flags, so a flag wins.
    fn new(cli: &Cli, env: &HashMap<String, String>) -> Overrides {
        let mut o = Overrides::default();
        let env_list = |var: &str| -> Option<(Vec<String>, String)> {
            let v = env.get(var).filter(|v| !v.is_empty())?;
            Some((
                v.split(',').map(str::to_string).collect(),
                format!("env {var}"),
            ))
        };
        for doc in SETTINGS.iter().filter(|d| is_scalar(d)) {
            if let Some(v) = env.get(doc.env).filter(|v| !v.is_empty()) {
                o.values
                    .push((doc.name, v.clone(), format!("env {}", doc.env)));
            }
        }
        o.users = env_list("SLUICE_USERS");
        o.admin_users = env_list("SLUICE_ADMIN_USERS");
        o.servers = env_list("SLUICE_SERVERS");
        for (name, v) in cli.settings.values() {
            let doc = setting(name);
            let src = doc.map_or(String::new(), |d| format!("{} or env {}", d.flag, d.env));
            o.values.push((name, v.to_string(), src));
        }
        if !cli.users.is_empty() {
            o.users = Some((cli.users.clone(), "--user or env SLUICE_USERS".into()));
        }
        if !cli.admin_users.is_empty() {
            let src = "--admin-user or env SLUICE_ADMIN_USERS".into();
            o.admin_users = Some((cli.admin_users.clone(), src));
        }
        if !cli.servers.is_empty() {
            let src = "--server or env SLUICE_SERVERS".into();
            o.servers = Some((cli.servers.clone(), src));
        }
        o
    }
}

impl Config {
    /// `[min, max]` for the `pool_size = auto` limit: `max_pool_size`, and never more slots
    /// than backends allowed (`max_open`: max_backend_connections in force).
    pub fn pool_bounds(&self, max_open: u32) -> (u32, u32) {
        let max = self.max_pool_size.min(max_open).max(1);
        (self.min_pool_size.clamp(1, max), max)
    }

    /// Every server, in configured order: `servers`, or the one `backend`.
    pub fn endpoints(&self) -> &[Endpoint] {
        if self.servers.is_empty() {
            std::slice::from_ref(&self.backend)
        } else {
            &self.servers
        }
    }

    /// Where client accounts come from: `auth_source`, or, unset, `server` when auth_user is
    /// set and no `users` list is, else `list`.
    pub fn auth_source(&self) -> AuthSource {
        match self.auth_source {
            Some(source) => source,
            None if self.users.is_empty() && self.auth_user.is_some() => AuthSource::Server,
            None => AuthSource::List,
        }
    }

    /// Whether the topology monitor runs: several servers, or the split asked for. With one
    /// server and the split off, that server is the writer and nothing is monitored.
    pub fn uses_topology(&self) -> bool {
        self.endpoints().len() > 1 || self.read_write_split == ReadWriteSplit::On
    }

    /// The monitor's account: `monitor_user` / `monitor_password`, else `backend_user` /
    /// `backend_password`, else the first user's backend credentials.
    pub fn monitor_credentials(&self) -> (String, String) {
        let fallback = self.users.first().map(|u| u.backend_credentials(self));
        let user = self
            .monitor_user
            .clone()
            .or_else(|| fallback.map(|(u, _)| u.to_string()))
            .unwrap_or_default();
        let password = match (&self.monitor_password, fallback) {
            (Some(p), _) => p.expose().to_string(),
            (None, Some((_, p))) => p.expose().to_string(),
            (None, None) => String::new(),
        };
        (user, password)
    }

    /// Built-in defaults with no users (not valid on its own).
    pub fn defaults() -> Config {
        let mut cfg = Config::blank();
        for doc in SETTINGS
            .iter()
            .filter(|d| is_scalar(d) && !d.default.is_empty())
        {
            // The defaults are constants of this crate; a unit test checks each one parses.
            let parsed = apply(&mut cfg, doc.name, doc.default);
            debug_assert!(parsed.is_ok(), "default of {} does not parse", doc.name);
        }
        cfg
    }

    /// For tests and loadgen: listen on 127.0.0.1:0, one user whose credentials are also used
    /// on the backend (pass-through).
    pub fn for_backend(backend: impl Into<String>, user: &str, password: &str) -> Config {
        let mut cfg = Config::defaults();
        cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        // Unchecked, like every field set in code; `backend` read as a setting is checked.
        cfg.backend = Endpoint::parse(&backend.into());
        cfg.users = vec![UserConfig::new(user, password)];
        cfg
    }

    /// Merges defaults < file < environment < flags, then validates.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        Config::load_with_env(cli, &std::env::vars().collect())
    }

    /// `load` with an explicit environment, so tests need not touch the process environment.
    pub fn load_with_env(cli: &Cli, env: &HashMap<String, String>) -> Result<Config, ConfigError> {
        let path = cli.config.clone().or_else(|| {
            let p = env.get("SLUICE_CONFIG").filter(|p| !p.is_empty());
            p.map(PathBuf::from)
        });
        build(path, Arc::new(Overrides::new(cli, env)))
    }

    /// The settings in a TOML text over the defaults, validated (no file, env or flags).
    pub fn from_toml_str(s: &str) -> Result<Config, ConfigError> {
        let file = read::parse(s, Path::new("<string>"))?;
        merge(Some((&file, Path::new("<string>"))), None, Arc::default())
    }

    /// Re-reads `config_path` and applies the start-up environment and flags over it again
    /// (RELOAD, SIGHUP). The running config should be kept when this fails.
    pub fn reload(&self) -> Result<Config, ConfigError> {
        build(self.config_path.clone(), self.overrides.clone())
    }

    /// The listed user of this name (none when auth_source = server).
    pub fn find_user(&self, name: &[u8]) -> Option<&UserConfig> {
        if !self.auth_source().uses_list() {
            return None;
        }
        self.users.iter().find(|u| u.name.as_bytes() == name)
    }

    pub fn find_admin(&self, name: &[u8]) -> Option<&UserConfig> {
        self.admin_users.iter().find(|u| u.name.as_bytes() == name)
    }

    /// The effective configuration as TOML with every secret masked.
    pub fn masked_toml(&self) -> String {
        docs::to_toml(self, true)
    }

    /// Which settings differ from `other`, and whether each can change while running.
    pub fn diff(&self, other: &Config) -> Vec<SettingChange> {
        let show = |v: Option<toml::Value>| v.map_or("(unset)".to_string(), |v| v.to_string());
        let mut out = Vec::new();
        for doc in SETTINGS.iter() {
            let changed = match doc.name {
                "users" => self.users != other.users,
                "admin_users" => self.admin_users != other.admin_users,
                "config" => self.config_path != other.config_path,
                "servers" => self.servers != other.servers,
                key => render(self, key, false) != render(other, key, false),
            };
            if !changed {
                continue;
            }
            let (old, new) = match doc.name {
                "users" => (users_summary(&self.users), users_summary(&other.users)),
                "admin_users" => (
                    users_summary(&self.admin_users),
                    users_summary(&other.admin_users),
                ),
                "config" => (path_text(&self.config_path), path_text(&other.config_path)),
                "servers" => (
                    endpoints_text(&self.servers),
                    endpoints_text(&other.servers),
                ),
                key => (
                    show(render(self, key, true)),
                    show(render(other, key, true)),
                ),
            };
            out.push(SettingChange {
                name: doc.name,
                old,
                new,
                live: doc.live,
            });
        }
        if self.rules != other.rules {
            out.push(SettingChange {
                name: "rules",
                old: format!("{} rules", self.rules.len()),
                new: format!("{} rules", other.rules.len()),
                live: true,
            });
        }
        out
    }

    fn blank() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            backend: Endpoint::default(),
            users: Vec::new(),
            backend_user: None,
            backend_password: None,
            default_auth_plugin: AuthPluginName::Native,
            auth_source: None,
            auth_user: None,
            auth_cache_ttl: Duration::ZERO,
            pool_size: PoolSize::Fixed(1),
            min_pool_size: 0,
            max_pool_size: 0,
            max_backend_connections: BackendLimit::Auto,
            max_client_connections: 0,
            queue_timeout: Duration::ZERO,
            pin_wait: Duration::ZERO,
            pipeline_depth: 0,
            pipeline_max_delay: Duration::ZERO,
            server_cpus: ServerCpus::Auto,
            backend_busy_poll: Duration::ZERO,
            max_queue_wait: None,
            backend_down_wait: Duration::ZERO,
            connect_timeout: Duration::ZERO,
            client_login_timeout: Duration::ZERO,
            auth_failure_threshold: 0,
            auth_failure_max_delay: Duration::ZERO,
            client_write_timeout: Duration::ZERO,
            shutdown_timeout: Duration::ZERO,
            max_allowed_packet: 0,
            max_prepared_statements_per_backend: 0,
            max_prepared_statements_per_client: 0,
            server_version: None,
            server_idle_timeout: Duration::ZERO,
            server_lifetime: Duration::ZERO,
            health_check_interval: Duration::ZERO,
            globals_check_interval: Duration::ZERO,
            min_idle: 0,
            admin_listen: None,
            admin_users: Vec::new(),
            metrics_listen: None,
            instance_id: 0,
            reuse_port: false,
            tls_cert: None,
            tls_key: None,
            backend_tls: BackendTlsMode::Preferred,
            backend_tls_ca: None,
            require_secure_transport: false,
            log_format: LogFormat::Text,
            worker_threads: WorkerThreads::Auto,
            servers: Vec::new(),
            monitor_user: None,
            monitor_password: None,
            monitor_interval: Duration::ZERO,
            read_write_split: ReadWriteSplit::Off,
            primary_reads: PrimaryReads::Fallback,
            max_replica_lag: Duration::ZERO,
            read_your_writes: ReadYourWrites::Session,
            gtid_wait_timeout: Duration::ZERO,
            writer_wait_timeout: Duration::ZERO,
            digests: true,
            digest_table_size: 0,
            metrics_digest_top: 0,
            max_user_client_connections: 0,
            max_user_concurrency: 0,
            rules: Arc::new([]),
            config_path: None,
            file_has_plaintext_password: false,
            overrides: Arc::default(),
        }
    }
}

fn endpoints_text(servers: &[Endpoint]) -> String {
    if servers.is_empty() {
        return "(unset)".into();
    }
    let list: Vec<String> = servers.iter().map(Endpoint::to_string).collect();
    format!("[{}]", list.join(", "))
}

fn path_text(p: &Option<PathBuf>) -> String {
    p.as_ref()
        .map_or("(unset)".into(), |p| p.display().to_string())
}

/// Reads the file (if any) and merges.
fn build(path: Option<PathBuf>, overrides: Arc<Overrides>) -> Result<Config, ConfigError> {
    match path {
        Some(path) => {
            let (file, plaintext) = read::read(&path)?;
            let mut cfg = merge(Some((&file, &path)), Some(path.clone()), overrides)?;
            cfg.file_has_plaintext_password = plaintext;
            Ok(cfg)
        }
        None => merge(None, None, overrides),
    }
}

/// Applies defaults < file < overrides, collecting every bad value, then validates.
fn merge(
    file: Option<(&FileConfig, &Path)>,
    config_path: Option<PathBuf>,
    overrides: Arc<Overrides>,
) -> Result<Config, ConfigError> {
    let mut cfg = Config::defaults();
    let mut errors = Vec::new();
    let mut raw: HashMap<&str, (String, String)> = HashMap::new();
    if let Some((f, path)) = file {
        for (k, v) in f.values() {
            raw.insert(k, (v.to_string(), format!("{} in {}", k, path.display())));
        }
    }
    for (k, v, src) in &overrides.values {
        raw.insert(k, (v.clone(), src.clone()));
    }
    for doc in SETTINGS.iter() {
        if let Some((value, source)) = raw.get(doc.name) {
            if let Err(e) = apply(&mut cfg, doc.name, value) {
                errors.push(format!("{}: {e} (from {source})", doc.name));
            }
        }
    }
    let file_users = |f: Option<&Vec<FileUser>>, what: &str, errors: &mut Vec<String>| {
        f.map(|list| {
            list.iter()
                .map(|u| user_from_file(u, what, errors))
                .collect()
        })
    };
    let users = match &overrides.users {
        Some((specs, src)) => Some(users_from_specs(specs, src, &mut errors)),
        None => file_users(file.and_then(|f| f.0.users.as_ref()), "users", &mut errors),
    };
    cfg.users = users.unwrap_or_default();
    let admins = match &overrides.admin_users {
        Some((specs, src)) => Some(users_from_specs(specs, src, &mut errors)),
        None => file_users(
            file.and_then(|f| f.0.admin_users.as_ref()),
            "admin_users",
            &mut errors,
        ),
    };
    cfg.admin_users = admins.unwrap_or_default();
    let servers = match &overrides.servers {
        Some((specs, src)) => Some((specs.clone(), src.clone())),
        None => file.and_then(|(f, path)| {
            let list = f.servers.clone()?;
            Some((list, format!("servers in {}", path.display())))
        }),
    };
    if let Some((specs, source)) = servers {
        if let Some((_, backend_source)) = raw.get("backend") {
            errors.push(format!(
                "both backend ({backend_source}) and servers ({source}) are set; drop backend: servers lists every server, backend is the one-server shorthand"
            ));
        }
        for spec in specs.iter().filter(|s| !s.trim().is_empty()) {
            match Endpoint::checked(spec.trim()) {
                Ok(e) => cfg.servers.push(e),
                Err(e) => errors.push(format!("servers: {e} (from {source})")),
            }
        }
        if cfg.servers.is_empty() && errors.is_empty() {
            errors.push(format!("servers is empty (from {source}); list at least one server, or drop it and set backend"));
        }
    }
    if let Some((f, _)) = file {
        let list = f.rules.as_deref().unwrap_or_default();
        cfg.rules = rules::rules_from_file(list, cfg.endpoints(), &mut errors).into();
    }
    cfg.config_path = config_path;
    cfg.overrides = overrides;
    if let Err(ConfigError::Invalid(more)) = cfg.validate() {
        errors.extend(more);
    }
    if errors.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigError::Invalid(errors))
    }
}
