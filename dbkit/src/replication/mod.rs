//! [`Cluster`]: a MariaDB primary and N GTID replicas on loopback ports, for tests and
//! loadgen, with the controls a failure test needs.
//!
//! Every server is a [`LocalServer`] (private datadir and port, small buffer pool, killed and
//! removed on drop) with a distinct `server_id` (index + 1), `log_bin`, `log_slave_updates`,
//! `gtid_strict_mode` and ROW binlogs. Replicas start `read_only=ON` and replicate with
//! `MASTER_USE_GTID=slave_pos`. Server 0 is the first primary; after a
//! [`switchover`](Cluster::switchover) or [`failover`](Cluster::failover),
//! [`primary`](Cluster::primary) says which one it is.
//!
//! Four accounts exist on every server, created by the init file with the binary log off
//! (so no server ever has a transaction its primary lacks):
//! - [`BENCH_USER`](crate::server::BENCH_USER): all privileges; dbkit's own control account.
//! - [`REPL_USER`]: `REPLICATION SLAVE` only, what a replica's IO thread needs.
//! - [`MONITOR_USER`]: `SLAVE MONITOR` only. MariaDB 10.5.9+ wants it (or SUPER) for
//!   `SHOW SLAVE STATUS` / `SHOW REPLICA STATUS`; `REPLICATION CLIENT` (now an alias of
//!   `BINLOG MONITOR`) is refused. `@@read_only` and `@@gtid_*` need no privilege.
//! - [`APP_USER`]: all privileges on the [`APP_DB`] database and nothing else, so
//!   `read_only` applies to it as it does to an application.
//!
//! The API is blocking, like the rest of dbkit. From async code call the long steps
//! (`start`, `switchover`, waits) through `tokio::task::spawn_blocking`.
//!
//! # Layout
//! - this file: options, accounts, start, accessors, and the per-server controls;
//! - [`failover`](self::failover): switchover, failover and rejoin.

pub mod failover;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::binary::{self, Flavor};
use crate::error::ReplicationProblem;
use crate::server::{BENCH_PASSWORD, BENCH_USER};
use crate::sql::{Row, Sql};
use crate::{Error, LocalServer, ServerOptions};

/// The account replicas connect to their primary with.
pub const REPL_USER: &str = "repl";
/// Password of [`REPL_USER`].
pub const REPL_PASSWORD: &str = "repl-secret";
/// The account a monitor (sluice's) reads replication state with.
pub const MONITOR_USER: &str = "monitor";
/// Password of [`MONITOR_USER`].
pub const MONITOR_PASSWORD: &str = "monitor-secret";
/// The application account: all privileges on [`APP_DB`], nothing else.
pub const APP_USER: &str = "app";
/// Password of [`APP_USER`].
pub const APP_PASSWORD: &str = "app-secret";
/// The application's database, present on every server.
pub const APP_DB: &str = "app";

/// How long a replica may take to connect to its primary after `START SLAVE`.
const REPLICATING_TIMEOUT: Duration = Duration::from_secs(60);

/// Which replication threads a stop or start applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Both (`STOP SLAVE`).
    Both,
    /// The IO thread, which fetches from the primary (`STOP SLAVE IO_THREAD`).
    Io,
    /// The SQL thread, which applies what was fetched (`STOP SLAVE SQL_THREAD`).
    Sql,
}

impl Threads {
    fn clause(self) -> &'static str {
        match self {
            Threads::Both => "",
            Threads::Io => " IO_THREAD",
            Threads::Sql => " SQL_THREAD",
        }
    }
}

/// How to start a [`Cluster`].
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of replicas; default 2.
    pub replicas: usize,
    /// Options for every server; `port` is ignored (each gets a free one). Default: 16 MiB
    /// buffer pool, 500 connections.
    pub server: ServerOptions,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            replicas: 2,
            server: ServerOptions {
                buffer_pool_mb: 16,
                max_connections: 500,
                ..ServerOptions::default()
            },
        }
    }
}

/// A primary and its replicas. Dropping it kills every server and removes their files.
#[derive(Debug)]
pub struct Cluster {
    servers: Vec<LocalServer>,
    primary: usize,
}

impl Cluster {
    /// Starts `1 + replicas` servers (in parallel), points each replica at server 0 and waits
    /// until all of them replicate.
    pub fn start(opts: ClusterOptions) -> Result<Cluster, Error> {
        let binary = binary::find_server_binary(opts.server.binary.as_deref())?;
        let (flavor, version) = binary::probe(&binary)?;
        if flavor != Flavor::MariaDb {
            return Err(ReplicationProblem::NotMariaDb { version }.into());
        }
        let count = opts.replicas + 1;
        let started: Vec<Result<LocalServer, Error>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..count)
                .map(|index| {
                    let server_opts = server_options(&opts.server, index);
                    scope.spawn(move || LocalServer::start(server_opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::io(
                            "a server start thread panicked",
                            std::io::Error::other("panic"),
                        ))
                    })
                })
                .collect()
        });
        // On any failure the servers already started are dropped (killed) here.
        let servers = started.into_iter().collect::<Result<Vec<_>, _>>()?;
        let cluster = Cluster {
            servers,
            primary: 0,
        };
        for index in 1..count {
            cluster.follow(index, 0)?;
        }
        for index in 1..count {
            cluster.wait_replicating(index, REPLICATING_TIMEOUT)?;
        }
        Ok(cluster)
    }

    /// Number of servers (primary included).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: a cluster has at least its primary.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The index of the current primary (as dbkit's own steps made it).
    pub fn primary(&self) -> usize {
        self.primary
    }

    /// The indexes of every server but the primary.
    pub fn replicas(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| i != self.primary).collect()
    }

    /// Server `index`. Panics on a bad index, like slice indexing.
    pub fn server(&self, index: usize) -> &LocalServer {
        &self.servers[index]
    }

    /// Server `index`, mutable (kill, pause, restart by hand).
    pub fn server_mut(&mut self, index: usize) -> &mut LocalServer {
        &mut self.servers[index]
    }

    /// `@@server_id` of server `index` (index + 1).
    pub fn server_id(&self, index: usize) -> u32 {
        index as u32 + 1
    }

    /// `127.0.0.1:port` of server `index`.
    pub fn addr(&self, index: usize) -> SocketAddr {
        self.servers[index].addr()
    }

    /// `mysql://app:…@127.0.0.1:PORT/app`: the application account on server `index`.
    pub fn app_url(&self, index: usize) -> String {
        format!(
            "mysql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{}/{APP_DB}",
            self.servers[index].port()
        )
    }

    /// `mysql://monitor:…@127.0.0.1:PORT`: the monitor account on server `index`.
    pub fn monitor_url(&self, index: usize) -> String {
        format!(
            "mysql://{MONITOR_USER}:{MONITOR_PASSWORD}@127.0.0.1:{}",
            self.servers[index].port()
        )
    }

    /// `mysql://bench:bench@127.0.0.1:PORT/bench`: the all-privileges account.
    pub fn admin_url(&self, index: usize) -> String {
        self.servers[index].url()
    }

    /// Runs `sql` on server `index` as the all-privileges account and returns its rows.
    pub fn query(&self, index: usize, sql: &str) -> Result<Vec<Row>, Error> {
        self.admin(index, Duration::ZERO)?.rows(sql)
    }

    /// Runs `sql` on server `index` as the all-privileges account.
    pub fn exec(&self, index: usize, sql: &str) -> Result<(), Error> {
        self.admin(index, Duration::ZERO)?.exec(sql)
    }

    /// `@@GLOBAL.<name>` on server `index` (`None` for NULL).
    pub fn global(&self, index: usize, name: &str) -> Result<Option<String>, Error> {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !valid {
            return Err(ReplicationProblem::BadVariable(name.to_string()).into());
        }
        self.admin(index, Duration::ZERO)?
            .value(&format!("SELECT @@GLOBAL.{name}"))
    }

    /// `@@gtid_binlog_pos`: what server `index` wrote to its binary log.
    pub fn gtid_binlog_pos(&self, index: usize) -> Result<String, Error> {
        Ok(self.global(index, "gtid_binlog_pos")?.unwrap_or_default())
    }

    /// `@@gtid_slave_pos`: what server `index` applied as a replica.
    pub fn gtid_slave_pos(&self, index: usize) -> Result<String, Error> {
        Ok(self.global(index, "gtid_slave_pos")?.unwrap_or_default())
    }

    /// `@@gtid_current_pos`: the later of the two, per domain.
    pub fn gtid_current_pos(&self, index: usize) -> Result<String, Error> {
        Ok(self.global(index, "gtid_current_pos")?.unwrap_or_default())
    }

    /// `SHOW SLAVE STATUS` of server `index` by column name; `None` if it replicates from
    /// nobody.
    pub fn slave_status(
        &self,
        index: usize,
    ) -> Result<Option<BTreeMap<String, Option<String>>>, Error> {
        Ok(self
            .admin(index, Duration::ZERO)?
            .named_rows("SHOW SLAVE STATUS")?
            .into_iter()
            .next())
    }

    /// `SET GLOBAL read_only` on server `index` (until its next restart; see
    /// [`restart_with_read_only`](Self::restart_with_read_only)).
    pub fn set_read_only(&self, index: usize, on: bool) -> Result<(), Error> {
        let value = if on { "ON" } else { "OFF" };
        self.exec(index, &format!("SET GLOBAL read_only={value}"))
    }

    /// `MASTER_DELAY` on replica `index`: it applies each transaction `delay` after its
    /// primary committed it (whole seconds; zero clears it). Restarts both threads.
    pub fn set_delay(&self, index: usize, delay: Duration) -> Result<(), Error> {
        self.replica(index)?;
        let mut sql = self.admin(index, Duration::ZERO)?;
        sql.exec("STOP SLAVE")?;
        sql.exec(&format!(
            "CHANGE MASTER TO MASTER_DELAY={}",
            delay.as_secs()
        ))?;
        sql.exec("START SLAVE")
    }

    /// `STOP SLAVE [IO_THREAD | SQL_THREAD]` on replica `index`.
    pub fn stop_replication(&self, index: usize, threads: Threads) -> Result<(), Error> {
        self.replica(index)?;
        self.exec(index, &format!("STOP SLAVE{}", threads.clause()))
    }

    /// `START SLAVE [IO_THREAD | SQL_THREAD]` on replica `index`.
    pub fn start_replication(&self, index: usize, threads: Threads) -> Result<(), Error> {
        self.replica(index)?;
        self.exec(index, &format!("START SLAVE{}", threads.clause()))
    }

    /// SIGKILL (`kill -9`) server `index`; its port and datadir stay for a restart.
    pub fn kill(&mut self, index: usize) {
        self.servers[index].kill();
    }

    /// Starts server `index` again on the same port and datadir (a replica resumes
    /// replicating on its own) and waits until it answers.
    pub fn restart(&mut self, index: usize) -> Result<(), Error> {
        self.servers[index].restart()
    }

    /// Like [`restart`](Self::restart), with `read_only` set in its configuration from now
    /// on: `false` on a replica makes the "restarted without read_only" mistake.
    pub fn restart_with_read_only(&mut self, index: usize, on: bool) -> Result<(), Error> {
        self.servers[index].set_setting("read-only", if on { "ON" } else { "OFF" });
        self.restart(index)
    }

    /// Waits until server `index` has applied `position` (a MariaDB GTID list such as
    /// `0-1-42,1-1-7`) as a replica, with `MASTER_GTID_WAIT`, which compares each domain's
    /// sequence number with `@@gtid_slave_pos`.
    pub fn wait_for_position(
        &self,
        index: usize,
        position: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        let valid = position
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b',' || b == b' ');
        if !valid {
            return Err(ReplicationProblem::BadPosition(position.to_string()).into());
        }
        let answer = self.admin(index, timeout)?.value(&format!(
            "SELECT MASTER_GTID_WAIT('{position}', {:.3})",
            timeout.as_secs_f64()
        ))?;
        if answer.as_deref() == Some("0") {
            Ok(())
        } else {
            Err(Error::Timeout {
                what: "a replica applying a GTID position (MASTER_GTID_WAIT)",
                secs: timeout.as_secs(),
                log: self.servers[index].error_log(),
            })
        }
    }

    /// Waits until every replica has applied everything the primary has written so far.
    pub fn sync_replicas(&self, timeout: Duration) -> Result<(), Error> {
        let position = self.gtid_binlog_pos(self.primary)?;
        for index in self.replicas() {
            self.wait_for_position(index, &position, timeout)?;
        }
        Ok(())
    }

    /// Waits until both replication threads of server `index` run.
    pub fn wait_replicating(&self, index: usize, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.slave_status(index)?.unwrap_or_default();
            let field = |name: &str| status.get(name).cloned().flatten().unwrap_or_default();
            let (io, sql) = (field("Slave_IO_Running"), field("Slave_SQL_Running"));
            if io == "Yes" && sql == "Yes" {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ReplicationProblem::NotReplicating {
                    index,
                    io,
                    sql,
                    io_error: field("Last_IO_Error"),
                    sql_error: field("Last_SQL_Error"),
                }
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Points server `index` at server `source` and starts replicating (from its
    /// `gtid_slave_pos`).
    fn follow(&self, index: usize, source: usize) -> Result<(), Error> {
        let mut sql = self.admin(index, Duration::ZERO)?;
        sql.exec(&format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, \
             MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', \
             MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            self.servers[source].port()
        ))?;
        sql.exec("START SLAVE")
    }

    /// Checks that `index` names a server other than the primary.
    fn replica(&self, index: usize) -> Result<(), Error> {
        if index >= self.len() {
            return Err(ReplicationProblem::NoSuchServer { index }.into());
        }
        if index == self.primary {
            return Err(ReplicationProblem::IsPrimary { index }.into());
        }
        Ok(())
    }

    fn admin(&self, index: usize, waits_up_to: Duration) -> Result<Sql, Error> {
        let server = self
            .servers
            .get(index)
            .ok_or(ReplicationProblem::NoSuchServer { index })?;
        Sql::connect(server.port(), BENCH_USER, BENCH_PASSWORD, waits_up_to)
    }
}

/// The options of server `index`: the shared ones plus its replication settings and the
/// four accounts.
fn server_options(base: &ServerOptions, index: usize) -> ServerOptions {
    let mut opts = base.clone();
    opts.port = None;
    opts.binlog = true;
    let read_only = if index == 0 { "OFF" } else { "ON" };
    opts.extra_args.extend([
        format!("--server-id={}", index + 1),
        "--log-slave-updates".to_string(),
        "--gtid-strict-mode=ON".to_string(),
        "--binlog-format=ROW".to_string(),
        // In the datadir, named the same on every server.
        "--relay-log=relay-bin".to_string(),
        format!("--read-only={read_only}"),
        // A dead primary is noticed in seconds, not the default minute.
        "--slave-net-timeout=10".to_string(),
    ]);
    opts.init_sql.extend(account_sql());
    opts
}

/// The accounts every server of a cluster has (see the module docs for why these grants).
fn account_sql() -> Vec<String> {
    vec![
        format!("CREATE DATABASE IF NOT EXISTS `{APP_DB}`"),
        format!("CREATE USER IF NOT EXISTS '{REPL_USER}'@'%' IDENTIFIED BY '{REPL_PASSWORD}'"),
        format!("GRANT REPLICATION SLAVE ON *.* TO '{REPL_USER}'@'%'"),
        format!(
            "CREATE USER IF NOT EXISTS '{MONITOR_USER}'@'%' IDENTIFIED BY '{MONITOR_PASSWORD}'"
        ),
        format!("GRANT SLAVE MONITOR ON *.* TO '{MONITOR_USER}'@'%'"),
        format!("CREATE USER IF NOT EXISTS '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}'"),
        format!("GRANT ALL PRIVILEGES ON `{APP_DB}`.* TO '{APP_USER}'@'%'"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_gets_its_own_id_and_replicas_start_read_only() {
        let base = ClusterOptions::default().server;
        for (index, read_only) in [(0, "OFF"), (1, "ON"), (2, "ON")] {
            let opts = server_options(&base, index);
            assert!(opts.binlog);
            assert!(opts
                .extra_args
                .contains(&format!("--server-id={}", index + 1)));
            assert!(opts
                .extra_args
                .contains(&format!("--read-only={read_only}")));
            for flag in [
                "--log-slave-updates",
                "--gtid-strict-mode=ON",
                "--binlog-format=ROW",
            ] {
                assert!(opts.extra_args.iter().any(|a| a == flag), "{flag}");
            }
        }
    }

    #[test]
    fn accounts_get_only_their_own_grants() {
        let sql = account_sql().join("\n");
        assert!(sql.contains("GRANT REPLICATION SLAVE ON *.* TO 'repl'"));
        assert!(sql.contains("GRANT SLAVE MONITOR ON *.* TO 'monitor'"));
        assert!(sql.contains("GRANT ALL PRIVILEGES ON `app`.* TO 'app'"));
        assert_eq!(sql.matches("GRANT").count(), 3);
    }

    #[test]
    fn thread_clauses() {
        assert_eq!(Threads::Both.clause(), "");
        assert_eq!(Threads::Io.clause(), " IO_THREAD");
        assert_eq!(Threads::Sql.clause(), " SQL_THREAD");
    }
}
