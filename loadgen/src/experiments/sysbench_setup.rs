//! What the sysbench experiment sets up once per run, before it measures: the binaries
//! (sysbench, HAProxy, sluice), the application account the load logs in as (grants on its
//! own database only, created by the privileged monitor connection), the tables (`sysbench
//! prepare`, then `prewarm` into the buffer pool), the wrapper scripts, and the metadata
//! that says all of it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;

use super::run::Run;
use crate::measure::sysbench::{self, DbConn, Tables};
use crate::settings::Settings;
use crate::targets::relays::Binaries;
use crate::targets::sysbench_targets::{self, Launch};
use crate::targets::{haproxy, sluice_child};

/// The database the tables live in, and the application account the load uses.
pub const DATABASE: &str = "loadgen_sbtest";
pub const APP_USER: &str = "sbtest_app";
pub const APP_PASSWORD: &str = "sbtest-app-pw";

/// Everything the levels share.
pub struct Setup {
    pub bin: PathBuf,
    pub bins: Binaries,
    /// The server, as the load's account.
    pub direct: DbConn,
    pub tables: Tables,
    /// Scripts, relay configs and logs, sysbench's stderr.
    pub dir: tempfile::TempDir,
}

impl Setup {
    /// The wrapper script of `workload`.
    pub fn script(&self, workload: &str) -> PathBuf {
        self.dir.path().join(format!("loadgen_{workload}.lua"))
    }

    /// How relays are started.
    pub fn launch<'a>(&'a self, s: &'a Settings, backend: &'a str, user: &'a str) -> Launch<'a> {
        Launch {
            backend,
            cpus: &s.loadgen_cpus,
            dir: self.dir.path(),
            user,
            sluice_args: &s.sysbench.sluice_args,
        }
    }

    /// Finds the tools, creates the account, prepares and warms the tables, writes the
    /// scripts and the metadata. `None` (with a note) when sysbench itself is missing.
    pub async fn prepare(run: &mut Run<'_>) -> Result<Option<Setup>> {
        let s = run.s;
        let bin = match sysbench::find(s.sysbench.bin.as_deref()) {
            Ok(bin) => bin,
            Err(why) => {
                note(run, format!("sysbench: not run: {why}"));
                return Ok(None);
            }
        };
        let bins = Binaries {
            haproxy: haproxy::find(s.haproxy_bin.as_deref()),
            sluice: sluice_child::sluice_bin(s.sluice_bin.as_deref()).map_err(|e| e.to_string()),
        };
        for target in &s.sysbench.targets {
            if let Some(why) = sysbench_targets::missing(*target, &bins) {
                note(
                    run,
                    format!("sysbench: {} not measured: {why}", target.key()),
                );
            }
        }
        let direct = account(run).await?;
        let tables = Tables {
            count: s.sysbench.tables,
            rows: s.sysbench.table_size,
        };
        let dir = tempfile::Builder::new()
            .prefix("loadgen-sysbench-")
            .tempdir()
            .context("creating the sysbench experiment's temp dir")?;
        for w in &s.sysbench.workloads {
            let path = dir.path().join(format!("loadgen_{}.lua", w.script()));
            std::fs::write(&path, sysbench::wrapper_script(w.script()))?;
        }
        let setup = Setup {
            bin,
            bins,
            direct,
            tables,
            dir,
        };
        setup.make_tables(run).await?;
        setup.describe(run).await;
        Ok(Some(setup))
    }

    /// `cleanup` (the tables of an earlier run on an external server), `prepare`, `prewarm`.
    async fn make_tables(&self, run: &mut Run<'_>) -> Result<()> {
        let started = Instant::now();
        let cpus = &run.s.loadgen_cpus;
        let t = self.tables;
        run.progress.log(format!(
            "sysbench: preparing {} tables x {} rows in {DATABASE} as {}",
            t.count, t.rows, self.direct.user
        ));
        for action in ["cleanup", "prepare", "prewarm"] {
            sysbench::admin(
                &self.bin,
                sysbench::admin_args(&self.direct, t, action),
                cpus,
            )
            .await
            .with_context(|| format!("sysbench {action}"))?;
        }
        let secs = started.elapsed().as_secs_f64();
        run.report.meta("sysbench_prepare_s", format!("{secs:.1}"));
        note(
            run,
            format!(
                "sysbench: prepared {} tables x {} rows with sysbench prepare and prewarm in {secs:.1} s",
                t.count, t.rows
            ),
        );
        Ok(())
    }

    /// The metadata: versions, settings, sizes, pinning, the exact command lines.
    async fn describe(&self, run: &mut Run<'_>) {
        let s = run.s;
        let sb = &s.sysbench;
        let join = |v: Vec<String>| v.join(", ");
        let data = data_mib(run, &self.direct.db).await;
        let server = server_settings(run).await;
        let r = &mut *run.report;
        r.meta("sysbench_bin", self.bin.display());
        r.meta("sysbench_version", sysbench::version(&self.bin));
        r.meta(
            "sysbench_workloads",
            join(
                sb.workloads
                    .iter()
                    .map(|w| w.script().to_string())
                    .collect(),
            ),
        );
        r.meta(
            "sysbench_threads",
            join(sb.threads.iter().map(|t| t.to_string()).collect()),
        );
        r.meta(
            "sysbench_targets",
            join(sb.targets.iter().map(|t| t.key().to_string()).collect()),
        );
        r.meta("sysbench_rounds", sb.rounds);
        r.meta("sysbench_time_s", sb.time_s);
        r.meta("sysbench_warmup_s", sb.warmup_s);
        r.meta("sysbench_tables", self.tables.count);
        r.meta("sysbench_table_size", self.tables.rows);
        r.meta("sysbench_database", &self.direct.db);
        let grants = match self.direct.user == APP_USER {
            true => format!("{APP_USER} (an application account: ALL on {DATABASE}.* only)"),
            false => format!("{} (the server URL's account)", self.direct.user),
        };
        r.meta("sysbench_account", grants);
        if let Some((data, pool)) = data {
            r.meta("sysbench_data_mib", format!("{data:.1}"));
            r.meta("sysbench_buffer_pool_mib", format!("{pool:.0}"));
            if data > pool {
                r.notes.push(format!(
                    "sysbench: WARNING: the tables ({data:.0} MiB) do not fit the buffer pool ({pool:.0} MiB): \
                     reads go to disk; use a smaller --sysbench-table-size"
                ));
            }
        }
        for (k, v) in server {
            r.meta(&k, v);
        }
        let job = sysbench::Job {
            bin: &self.bin,
            script: Path::new("loadgen_<workload>.lua"),
            conn: DbConn {
                host: "<target host>".into(),
                port: 0,
                ..self.direct.clone()
            },
            tables: self.tables,
            threads: 0,
            time_s: sb.time_s,
            seed: s.seed,
            cpus: &s.loadgen_cpus,
            dir: self.dir.path(),
        };
        r.meta(
            "sysbench_options",
            format!(
                "{} loadgen_<workload>.lua {} (threads and port per level; the warm-up run: --time={} --rand-seed={})",
                self.bin.display(),
                sysbench::run_args(&job, true).join(" "),
                sb.warmup_s,
                s.seed + 1
            ),
        );
        r.meta("sysbench_script", "sysbench's own oltp_<workload>.lua, required unchanged by a wrapper that counts each thread's events");
        self.describe_targets(run);
    }

    /// The metadata of where the load goes: pinning, order, HAProxy's config, sluice's flags.
    fn describe_targets(&self, run: &mut Run<'_>) {
        let s = run.s;
        let sb = &s.sysbench;
        let r = &mut *run.report;
        r.meta(
            "sysbench_pinning",
            format!(
                "server on CPUs {:?}; the relay and sysbench on CPUs {:?}",
                s.server_cpus, s.loadgen_cpus
            ),
        );
        r.meta(
            "sysbench_order",
            "for each workload and thread count, odd rounds direct, haproxy, sluice; even rounds the reverse; a fresh relay for every run",
        );
        let cfg = haproxy::config("127.0.0.1:<free port>", "<server host:port>", false);
        let cfg: Vec<&str> = cfg.lines().map(str::trim).collect();
        r.meta("sysbench_haproxy_config", cfg.join("; "));
        if let Ok(bin) = &self.bins.haproxy {
            r.meta("sysbench_haproxy_version", haproxy::version(bin));
        }
        if let Ok(bin) = &self.bins.sluice {
            r.meta("sysbench_sluice_bin", bin.display());
        }
        let settings = match sb.sluice_args.is_empty() {
            true => "its defaults".to_string(),
            false => format!("its defaults, {}", sb.sluice_args.join(" ")),
        };
        r.meta("sysbench_sluice_settings", settings);
    }
}

fn note(run: &mut Run<'_>, note: String) {
    run.progress.log(&note);
    run.report.notes.push(note);
}

/// The database named at the end of a `mysql://` URL.
fn url_database(url: &str) -> String {
    let path = url.rsplit_once('/').map(|(_, db)| db).unwrap_or("");
    path.split('?').next().unwrap_or("").to_string()
}

/// The application account on its own database, made by the privileged monitor connection;
/// if the server refuses (an external server's account without GRANT OPTION), the URL's own
/// account and database, with a note.
async fn account(run: &mut Run<'_>) -> Result<DbConn> {
    let server = dbkit::TestServer::from_url(&run.server_url).map_err(anyhow::Error::msg)?;
    let mut conn = DbConn {
        host: server.host.clone(),
        port: server.port,
        user: APP_USER.into(),
        password: APP_PASSWORD.into(),
        db: DATABASE.into(),
    };
    let account = format!("'{APP_USER}'@'%'");
    let statements = [
        format!("CREATE DATABASE IF NOT EXISTS `{DATABASE}`"),
        format!("CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '{APP_PASSWORD}'"),
        format!("ALTER USER {account} IDENTIFIED BY '{APP_PASSWORD}'"),
        format!("GRANT ALL ON `{DATABASE}`.* TO {account}"),
    ];
    for sql in &statements {
        if let Err(e) = run.monitor.query_drop(sql).await {
            conn.user = server.user.clone();
            conn.password = server.password.clone();
            if run.monitor.query_drop(&statements[0]).await.is_err() {
                conn.db = url_database(&run.server_url);
            }
            note(
                run,
                format!(
                    "sysbench: could not create the application account ({e}); the load logs in as {} on {}",
                    conn.user, conn.db
                ),
            );
            break;
        }
    }
    Ok(conn)
}

/// The tables' size with their indexes and the buffer pool's, MiB.
async fn data_mib(run: &mut Run<'_>, db: &str) -> Option<(f64, f64)> {
    let sql = format!(
        "SELECT CAST(SUM(data_length + index_length) AS DOUBLE), CAST(@@innodb_buffer_pool_size AS DOUBLE) \
         FROM information_schema.tables WHERE table_schema = '{db}'"
    );
    let row: Option<(Option<f64>, Option<f64>)> = run.monitor.query_first(sql).await.ok()?;
    match row? {
        (Some(data), Some(pool)) => Some((data / 1048576.0, pool / 1048576.0)),
        _ => None,
    }
}

/// The server settings that decide how many threads it takes and how it runs them.
async fn server_settings(run: &mut Run<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, var) in [
        ("sysbench_server_max_connections", "max_connections"),
        ("sysbench_server_thread_handling", "thread_handling"),
        ("sysbench_server_thread_pool_size", "thread_pool_size"),
        (
            "sysbench_server_max_prepared_stmt_count",
            "max_prepared_stmt_count",
        ),
    ] {
        let v: Option<String> = run
            .monitor
            .query_first(format!("SELECT CAST(@@{var} AS CHAR)"))
            .await
            .ok()
            .flatten();
        out.push((key.to_string(), v.unwrap_or_else(|| "unknown".into())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_is_the_urls_last_path_part() {
        assert_eq!(url_database("mysql://a:b@h:1/bench"), "bench");
        assert_eq!(url_database("mysql://a:b@h:1/db?ssl=1"), "db");
        assert_eq!(url_database("mysql://a:b@h:1/"), "");
    }
}
