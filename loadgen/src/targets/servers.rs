//! The three server backends (`--server local|docker|external`, default auto) behind one
//! type that knows its URL, describes itself for `run_metadata.csv`, and tears down.

use anyhow::{Context, Result};
use dbkit::{LocalServer, ServerOptions};

use super::docker;
use crate::cli::ServerKind;
use crate::settings::Settings;

/// A running (or external) server.
pub enum Backend {
    /// A private mariadbd/mysqld; dropping it kills the process and removes its dir.
    Local(LocalServer),
    /// A pinned container.
    Docker(docker::Container),
    /// Someone else's server; nothing to start or stop.
    External {
        /// Its URL.
        url: String,
    },
}

/// Which backend `auto` picks: external with a URL, else local when a binary exists, else
/// docker when an engine answers.
pub fn resolve_kind(
    requested: ServerKind,
    has_url: bool,
    has_binary: bool,
    has_engine: bool,
) -> Option<ServerKind> {
    match requested {
        ServerKind::Auto if has_url => Some(ServerKind::External),
        ServerKind::Auto if has_binary => Some(ServerKind::Local),
        ServerKind::Auto if has_engine => Some(ServerKind::Docker),
        ServerKind::Auto => None,
        other => Some(other),
    }
}

/// MariaDB's and MySQL's default `max_prepared_stmt_count`, and the cap loadgen raises it to
/// (MySQL's largest allowed value).
const DEFAULT_PREPARED_STMTS: u64 = 16_382;
const MAX_PREPARED_STMTS: u64 = 1_048_576;

/// Server options beyond dbkit's for this run: with sysbench, room for every thread's
/// prepared statements when it runs straight at the server, and the default's worth more.
fn local_extra_args(s: &Settings) -> Vec<String> {
    match s.prepared_statements_needed() {
        Some(n) if n > DEFAULT_PREPARED_STMTS => {
            let n = (n + DEFAULT_PREPARED_STMTS).min(MAX_PREPARED_STMTS);
            vec![format!("--max-prepared-stmt-count={n}")]
        }
        _ => Vec::new(),
    }
}

impl Backend {
    /// Starts (or adopts) the server the settings ask for.
    pub async fn start(s: &Settings) -> Result<Backend> {
        let has_binary = dbkit::find_server_binary(s.server_bin.as_deref()).is_ok();
        let engine = if s.server == ServerKind::Docker
            || (s.server == ServerKind::Auto && s.mysql_url.is_none() && !has_binary)
        {
            docker::engine().await
        } else {
            None
        };
        let kind = resolve_kind(
            s.server,
            s.mysql_url.is_some(),
            has_binary,
            engine.is_some(),
        );
        match kind {
            Some(ServerKind::External) => Ok(Backend::External {
                url: s.mysql_url.clone().context("--mysql-url is required")?,
            }),
            Some(ServerKind::Docker) => {
                let docker = engine.context(
                    "no Docker engine answered a ping (is dockerd running? DOCKER_HOST?)",
                )?;
                Ok(Backend::Docker(
                    docker::Container::start(docker, &s.server_cpus).await?,
                ))
            }
            Some(ServerKind::Local) => {
                let opts = ServerOptions {
                    binary: s.server_bin.clone(),
                    cpus: Some(s.server_cpus.clone()),
                    max_connections: (s.max_connections_needed() as u32).max(2000),
                    buffer_pool_mb: 256,
                    extra_args: local_extra_args(s),
                    ..ServerOptions::default()
                };
                // Blocking (mariadb-install-db); the caller keeps awaiting it even after an
                // interrupt so a half-started server is always torn down.
                let server = tokio::task::spawn_blocking(move || LocalServer::start(opts))
                    .await
                    .context("the server start thread panicked")??;
                Ok(Backend::Local(server))
            }
            // Only `auto` can resolve to nothing: no URL, no binary, no engine.
            Some(ServerKind::Auto) | None => {
                Err(dbkit::find_server_binary(s.server_bin.as_deref())
                    .err()
                    .map(anyhow::Error::new)
                    .unwrap_or_else(|| anyhow::anyhow!("no server backend available")))
            }
        }
    }

    /// URL of the bench user on this server.
    pub fn url(&self) -> String {
        match self {
            Backend::Local(s) => s.url(),
            Backend::Docker(c) => format!("mysql://bench:bench@127.0.0.1:{}/bench", c.port),
            Backend::External { url } => url.clone(),
        }
    }

    /// The server process, when it is ours and local (so it can be re-pinned).
    pub fn local_pid(&self) -> Option<u32> {
        match self {
            Backend::Local(s) => Some(s.pid()),
            _ => None,
        }
    }

    /// `local`, `docker` or `external`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Local(_) => "local",
            Backend::Docker(_) => "docker",
            Backend::External { .. } => "external",
        }
    }

    /// Whether loadgen pinned the server (false for external).
    pub fn is_pinned(&self) -> bool {
        !matches!(self, Backend::External { .. })
    }

    /// `(key, value)` pairs describing the server for `run_metadata.csv`.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut out = vec![("server_kind".to_string(), self.kind().to_string())];
        match self {
            Backend::Local(s) => {
                out.push(("server_binary".into(), s.binary().display().to_string()));
                let settings = s
                    .settings()
                    .iter()
                    .filter(|(k, _)| {
                        // Temp paths change every run and say nothing about the server.
                        !matches!(
                            k.as_str(),
                            "datadir" | "socket" | "pid-file" | "log-error" | "init-file"
                        )
                    })
                    .map(|(k, v)| {
                        if v.is_empty() {
                            k.clone()
                        } else {
                            format!("{k}={v}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                out.push(("server_settings".into(), settings));
            }
            Backend::Docker(c) => {
                out.push(("server_image".into(), c.image.clone()));
                out.push(("server_settings".into(), docker::SERVER_ARGS.join(" ")));
            }
            Backend::External { url } => {
                let redacted = dbkit::TestServer::from_url(url)
                    .map(|t| format!("mysql://{}:***@{}:{}", t.user, t.host, t.port))
                    .unwrap_or_else(|_| "unparsable".into());
                out.push(("server_url".into(), redacted));
                out.push(("server_settings".into(), "unknown (external server)".into()));
            }
        }
        out
    }

    /// Stops whatever we started. Local: kill + remove the temp dir; docker: remove.
    pub async fn teardown(self) -> Result<()> {
        match self {
            Backend::Local(server) => {
                tokio::task::spawn_blocking(move || drop(server)).await?;
                Ok(())
            }
            Backend::Docker(c) => c.remove().await,
            Backend::External { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysbench_runs_get_room_for_their_prepared_statements() {
        use clap::Parser;
        let settings = |args: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from(args).unwrap();
            Settings::from_cli(cli, vec![0, 1]).unwrap()
        };
        assert_eq!(
            local_extra_args(&settings(&["loadgen", "sysbench"])),
            [format!("--max-prepared-stmt-count={}", 1024 * 38 + 16_382)]
        );
        // A few threads fit the default; experiments A to F never need more.
        let small = settings(&["loadgen", "sysbench", "--sysbench-threads", "16"]);
        assert!(local_extra_args(&small).is_empty());
        assert!(local_extra_args(&settings(&["loadgen", "bench"])).is_empty());
    }

    #[test]
    fn auto_prefers_url_then_local_then_docker() {
        use ServerKind::*;
        assert_eq!(resolve_kind(Auto, true, true, true), Some(External));
        assert_eq!(resolve_kind(Auto, false, true, true), Some(Local));
        assert_eq!(resolve_kind(Auto, false, false, true), Some(Docker));
        assert_eq!(resolve_kind(Auto, false, false, false), None);
        assert_eq!(resolve_kind(Docker, false, true, false), Some(Docker));
    }
}
