//! The admin commands that change the running proxy: SET, PAUSE, RESUME, RELOAD, SHUTDOWN and
//! KILL. Each validates first and changes state through the one way `Context` offers.

use std::time::{Duration, Instant};

use crate::config::{
    format_duration, parse_duration, Config, ConfigError, PoolSize, SettingChange,
};
use crate::context::Context;
use crate::protocol::{codes, ErrorCode};

use super::parser::LiveSetting;
use super::show::{Cell, Kind, Table};

/// Why an admin command was refused; `code` gives each its MySQL error code.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Parse(#[from] super::parser::ParseError),
    #[error("invalid value {value:?} for {setting}: {message}")]
    BadValue {
        setting: LiveSetting,
        value: String,
        message: String,
    },
    #[error("SET {setting} refused, nothing changed: {source}")]
    Invalid {
        setting: LiveSetting,
        source: ConfigError,
    },
    #[error("RELOAD refused, the running configuration is unchanged: {0}")]
    Reload(ConfigError),
    #[error("RELOAD RULES refused, the rules in force are unchanged: {0}")]
    ReloadRules(ConfigError),
    #[error("RELOAD needs a config file, and sluice was started without --config")]
    NoConfigFile,
    #[error("Unknown thread id: {0} (SHOW CLIENTS lists the client ids)")]
    NoSuchClient(u32),
    #[error("Unknown thread id: {id}: it belongs to the sluice instance with instance_id {owner} (this one is {this}); KILL it through that instance's admin console")]
    ForeignClient { id: u32, owner: u32, this: u32 },
    #[error("the admin console takes text commands only (no prepared statements); send HELP")]
    PreparedStatement,
}

impl AdminError {
    /// What the client sees (the console hands it to opensrv through `console_error_kind`).
    pub fn code(&self) -> ErrorCode {
        match self {
            AdminError::Parse(_) => codes::PARSE_ERROR,
            AdminError::BadValue { .. } | AdminError::Invalid { .. } => codes::WRONG_VALUE_FOR_VAR,
            AdminError::Reload(_) | AdminError::ReloadRules(_) | AdminError::NoConfigFile => {
                codes::UNKNOWN_ERROR
            }
            AdminError::NoSuchClient(_) | AdminError::ForeignClient { .. } => codes::NO_SUCH_THREAD,
            AdminError::PreparedStatement => codes::UNSUPPORTED_PS,
        }
    }
}

/// `SET setting = value`: checks the whole resulting config, then swaps it in.
pub fn set(ctx: &Context, setting: LiveSetting, value: &str) -> Result<Table, AdminError> {
    let current = ctx.config();
    let mut next = (*current).clone();
    let bad = |message: String| AdminError::BadValue {
        setting,
        value: value.to_string(),
        message,
    };
    let count = || {
        value
            .parse::<u32>()
            .map_err(|_| bad("expected a whole number".into()))
    };
    let duration = || parse_duration(value).map_err(bad);
    match setting {
        LiveSetting::PoolSize => next.pool_size = value.parse::<PoolSize>().map_err(bad)?,
        LiveSetting::MaxBackendConnections => {
            next.max_backend_connections = value.parse().map_err(bad)?
        }
        LiveSetting::MaxClientConnections => next.max_client_connections = count()?,
        LiveSetting::QueueTimeout => next.queue_timeout = duration()?,
        LiveSetting::ConnectTimeout => next.connect_timeout = duration()?,
        LiveSetting::ClientWriteTimeout => next.client_write_timeout = duration()?,
        LiveSetting::ShutdownTimeout => next.shutdown_timeout = duration()?,
        LiveSetting::ServerIdleTimeout => next.server_idle_timeout = duration()?,
        LiveSetting::ServerLifetime => next.server_lifetime = duration()?,
        LiveSetting::HealthCheckInterval => next.health_check_interval = duration()?,
    }
    next.validate()
        .map_err(|source| AdminError::Invalid { setting, source })?;
    let (old, new) = (value_of(&current, setting), value_of(&next, setting));
    ctx.replace_config(next);
    tracing::info!(setting = %setting, %old, %new, "admin SET applied");
    let mut t = Table::new(&[
        ("setting", Kind::Text),
        ("old", Kind::Text),
        ("new", Kind::Text),
    ]);
    t.push(vec![setting.name().into(), old.into(), new.into()]);
    Ok(t)
}

fn value_of(c: &Config, setting: LiveSetting) -> String {
    match setting {
        LiveSetting::PoolSize => c.pool_size.to_string(),
        LiveSetting::MaxBackendConnections => c.max_backend_connections.to_string(),
        LiveSetting::MaxClientConnections => c.max_client_connections.to_string(),
        LiveSetting::QueueTimeout => format_duration(c.queue_timeout),
        LiveSetting::ConnectTimeout => format_duration(c.connect_timeout),
        LiveSetting::ClientWriteTimeout => format_duration(c.client_write_timeout),
        LiveSetting::ShutdownTimeout => format_duration(c.shutdown_timeout),
        LiveSetting::ServerIdleTimeout => format_duration(c.server_idle_timeout),
        LiveSetting::ServerLifetime => format_duration(c.server_lifetime),
        LiveSetting::HealthCheckInterval => format_duration(c.health_check_interval),
    }
}

/// Stops handing out slots, then waits (up to `timeout`) until no statement runs or queues.
/// Sessions in a transaction or holding a lock are not paused (their statements take slots
/// regardless): they cannot finish without their client, and pausing them would deadlock
/// their COMMIT.
pub async fn pause(ctx: &Context, timeout: Duration) -> Table {
    ctx.paused.send_replace(true);
    tracing::info!("admin PAUSE: no new statements get a backend");
    let start = Instant::now();
    let running = loop {
        let running = running_statements(ctx);
        if running == 0 || start.elapsed() >= timeout {
            break running;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut t = Table::new(&[
        ("paused", Kind::Text),
        ("running", Kind::Int),
        ("waited_ms", Kind::Int),
    ]);
    t.push(vec![
        "yes".into(),
        Cell::from(running),
        Cell::from(start.elapsed().as_millis() as u64),
    ]);
    t
}

/// Statements that run on a slot or are queued for one (a slot a transaction keeps between
/// statements runs nothing).
fn running_statements(ctx: &Context) -> u64 {
    let slots = ctx.pool.slots();
    u64::from(slots.running()) + slots.waiting() as u64
}

pub fn resume(ctx: &Context) {
    if ctx.paused.send_replace(false) {
        tracing::info!("admin RESUME: statements get backends again");
    }
}

/// Re-reads the config file (RELOAD and SIGHUP). An invalid file changes nothing. Settings
/// that need a restart keep their running value and are reported with `live == false`.
pub fn reload(ctx: &Context) -> Result<Vec<SettingChange>, AdminError> {
    let current = ctx.config();
    if current.config_path.is_none() {
        return Err(AdminError::NoConfigFile);
    }
    let mut next = current.reload().map_err(AdminError::Reload)?;
    let changes = current.diff(&next);
    keep_restart_only_settings(&current, &mut next);
    if current.diff(&next).iter().any(|c| !c.live) {
        tracing::warn!(
            "reload: a setting that needs a restart is not restored by keep_restart_only_settings"
        );
    }
    next.validate().map_err(AdminError::Reload)?;
    for c in &changes {
        if c.live {
            tracing::info!(setting = c.name, old = %c.old, new = %c.new, "reload: applied");
        } else {
            tracing::warn!(setting = c.name, old = %c.old, new = %c.new, "reload: needs a restart, not applied");
        }
    }
    ctx.replace_config(next);
    Ok(changes)
}

/// The running proxy cannot move its listeners, backend address, TLS files or log format:
/// keep the values it runs with, so that SHOW CONFIG tells the truth.
fn keep_restart_only_settings(current: &Config, next: &mut Config) {
    next.listen = current.listen;
    next.backend.clone_from(&current.backend);
    next.admin_listen = current.admin_listen;
    next.metrics_listen = current.metrics_listen;
    next.tls_cert.clone_from(&current.tls_cert);
    next.tls_key.clone_from(&current.tls_key);
    next.log_format = current.log_format;
    next.config_path.clone_from(&current.config_path);
}

pub fn reload_table(changes: &[SettingChange]) -> Table {
    let mut t = Table::new(&[
        ("setting", Kind::Text),
        ("old", Kind::Text),
        ("new", Kind::Text),
        ("applied", Kind::Text),
    ]);
    for c in changes {
        let applied = if c.live { "yes" } else { "no: needs a restart" };
        t.push(vec![
            c.name.into(),
            c.old.as_str().into(),
            c.new.as_str().into(),
            applied.into(),
        ]);
    }
    t
}

/// Starts the drain: stop accepting, let running statements finish. The binary's main loop
/// sees the cancelled token (`ProxyHandle::wait_shutdown`) and completes the shutdown.
pub fn shutdown(ctx: &Context) {
    tracing::info!("admin SHUTDOWN");
    ctx.shutdown.cancel();
}

/// Ends one client session (between statements, like KILL CONNECTION on MySQL).
pub fn kill(ctx: &Context, id: u32) -> Result<(), AdminError> {
    if let Some(owner) = ctx.registry.foreign_owner(id) {
        let this = ctx.registry.instance_id();
        return Err(AdminError::ForeignClient { id, owner, this });
    }
    let client = ctx.registry.get(id).ok_or(AdminError::NoSuchClient(id))?;
    tracing::info!(client = id, "admin KILL");
    client.kill.cancel();
    Ok(())
}
