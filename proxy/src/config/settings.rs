//! The one table of settings.
//!
//! `settings!` below is the single place a scalar setting is declared: it produces the
//! documentation row (`SETTINGS`), the command-line flag with its env var (`SettingArgs`, flattened
//! into `Cli`) and the TOML key (`FileConfig`). Defaults are applied by parsing the documented
//! default text, so the docs cannot disagree with the code. `apply` and `render` are the only two
//! per-setting matches; unit tests check that they cover every row.

use std::path::PathBuf;

use super::file::{FileUser, Scalar};
use super::values::{
    format_bytes, format_duration, is_off, parse_bool, parse_bytes, parse_duration, parse_u32,
    Secret,
};
use super::Config;

/// Documentation of one setting (one row of `docs/config.md`).
#[derive(Debug, Clone, Copy)]
pub struct SettingDoc {
    /// TOML key (and the name used by the admin console).
    pub name: &'static str,
    pub env: &'static str,
    pub flag: &'static str,
    /// Default as text; empty means "unset".
    pub default: &'static str,
    pub unit: &'static str,
    /// Whether a RELOAD applies it to the running proxy (otherwise a restart is needed).
    pub live: bool,
    pub description: &'static str,
}

/// Settings that are not scalars: they are handled by hand in `Cli`, `FileConfig` and the merge.
pub(crate) const LIST_SETTINGS: [SettingDoc; 4] = [
    SettingDoc {
        name: "config",
        env: "SLUICE_CONFIG",
        flag: "--config",
        default: "",
        unit: "path",
        live: false,
        description: "TOML file with settings (command line and environment only). RELOAD and SIGHUP re-read it; flags and environment still win over it.",
    },
    SettingDoc {
        name: "users",
        env: "SLUICE_USERS",
        flag: "--user",
        default: "",
        unit: "list",
        live: true,
        description: "Clients sluice accepts; at least one is required. TOML: `[[users]]` tables with `name`, `password` and optional `auth_plugin`, `backend_user`, `backend_password`. Flag: `--user NAME:PASSWORD`, repeatable. Env: comma-separated `NAME:PASSWORD` pairs. A higher source replaces the whole list. A password `*<40 hex>` is a mysql_native_password hash: that user can only use mysql_native_password and needs backend credentials.",
    },
    SettingDoc {
        name: "admin_users",
        env: "SLUICE_ADMIN_USERS",
        flag: "--admin-user",
        default: "",
        unit: "list",
        live: true,
        description: "Users of the admin console, same forms as `users` (`[[admin_users]]`, `--admin-user NAME:PASSWORD`). Required when admin_listen is set.",
    },
    SettingDoc {
        name: "servers",
        env: "SLUICE_SERVERS",
        flag: "--server",
        default: "",
        unit: "list of host:port or unix:/path",
        live: false,
        description: "Every server of one replication setup (a primary and its replicas), each written like `backend`. TOML: `servers = [\"db1:3306\", \"db2:3306\"]`; flag `--server`, repeatable; env comma-separated. Roles are discovered, never configured: every monitor_interval sluice reads each server's read_only, replica status and GTID position, and the writer is the one server with read_only=OFF that replicates from nobody. Each server gets its own pool_size slots, its own `auto` limiter and its own max_backend_connections. Unset: the one server in `backend` (setting both is an error).",
    },
];

macro_rules! settings {
    ($( $field:ident, $env:literal, $flag:literal, $default:literal, $unit:literal, $live:literal,
        $desc:literal $(, { $($attr:tt)* })? ; )*) => {
        /// Every setting, in documentation order.
        pub const SETTINGS: &[SettingDoc] = &[
            LIST_SETTINGS[0], LIST_SETTINGS[1], LIST_SETTINGS[2], LIST_SETTINGS[3],
            $( SettingDoc { name: stringify!($field), env: $env, flag: $flag, default: $default,
                unit: $unit, live: $live, description: $desc }, )*
        ];

        /// One flag (and env var) per scalar setting. Values stay text until the merge, so a
        /// bad value is reported together with every other problem.
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct SettingArgs {
            $( #[arg(long, env = $env, value_name = $unit, help = $desc $(, $($attr)*)?)]
               pub $field: Option<String>, )*
        }

        impl SettingArgs {
            pub(crate) fn values(&self) -> Vec<(&'static str, &str)> {
                let mut v = Vec::new();
                $( if let Some(x) = &self.$field { v.push((stringify!($field), x.as_str())); } )*
                v
            }
        }

        /// The TOML file as written. Every key is optional; unknown keys are an error so that a
        /// typo does not silently fall back to a default.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct FileConfig {
            $( #[serde(default)] pub $field: Option<Scalar>, )*
            #[serde(default)]
            pub users: Option<Vec<FileUser>>,
            #[serde(default)]
            pub admin_users: Option<Vec<FileUser>>,
            #[serde(default)]
            pub servers: Option<Vec<String>>,
        }

        impl FileConfig {
            pub(crate) fn values(&self) -> Vec<(&'static str, &str)> {
                let mut v = Vec::new();
                $( if let Some(x) = &self.$field { v.push((stringify!($field), x.0.as_str())); } )*
                v
            }
        }
    };
}

settings! {
    listen, "SLUICE_LISTEN", "--listen", "127.0.0.1:6033", "address", false,
        "Address clients connect to (`ip:port`; port 0 picks a free port).";
    backend, "SLUICE_BACKEND", "--backend", "127.0.0.1:3306", "host:port or unix:/path", false,
        "The MySQL or MariaDB server: host:port over TCP (a host name is resolved at every connect), or its Unix socket on this host as unix:/path/to/mysqld.sock (or just the absolute path), which saves the TCP stack's CPU on both sides. A Unix socket carries no TLS: backend_tls must be disabled or preferred with it.";
    backend_user, "SLUICE_BACKEND_USER", "--backend-user", "", "name", true,
        "User sluice logs in to the backend as, for users without their own `backend_user`. Unset: each client's own name (pass-through).";
    backend_password, "SLUICE_BACKEND_PASSWORD", "--backend-password", "", "password", true,
        "Password for the backend login, for users without their own `backend_password`. Unset: each client's own password.";
    default_auth_plugin, "SLUICE_DEFAULT_AUTH_PLUGIN", "--default-auth-plugin", "mysql_native_password", "plugin", true,
        "Auth plugin sluice asks clients to use, unless a user sets `auth_plugin`: `mysql_native_password` or `caching_sha2_password`.";
    pool_size, "SLUICE_POOL_SIZE", "--pool-size", "4", "statements", true,
        "Execution slots: at most this many statements run on the backend at once (a fair FIFO queue for the rest). `auto` finds the server's throughput knee between min_pool_size and max_pool_size (never above max_backend_connections) and keeps re-probing as the load changes; SHOW POOLS says why the limit last moved.";
    min_pool_size, "SLUICE_MIN_POOL_SIZE", "--min-pool-size", "1", "statements", true,
        "Lower bound for `pool_size = auto`, and where it starts.";
    max_pool_size, "SLUICE_MAX_POOL_SIZE", "--max-pool-size", "64", "statements", true,
        "Upper bound for `pool_size = auto`.";
    max_backend_connections, "SLUICE_MAX_BACKEND_CONNECTIONS", "--max-backend-connections", "auto", "connections", true,
        "Cap on open backend connections, idle and pinned ones included. `auto`: the server's max_connections less a tenth (at least 10) for other clients, monitoring and sluice's own control connections, read at start or, when sluice starts before its server, at the first connection (151, the MySQL default, is assumed until then). A number overrides it and must be at least pool_size; with several sluice instances in front of one server, give each its share. pool_size connections always stay for statements that do not pin: at most max_backend_connections - pool_size sessions can be pinned (temporary tables, user variables, named locks, ...). SHOW POOLS and /metrics show the pinned ones against that cap.";
    max_client_connections, "SLUICE_MAX_CLIENT_CONNECTIONS", "--max-client-connections", "10000", "connections", true,
        "Clients beyond this get error 1040 (Too many connections) at the handshake.";
    queue_timeout, "SLUICE_QUEUE_TIMEOUT", "--queue-timeout", "30s", "duration", true,
        "A statement that waited this long for an execution slot gets error 9001; the session stays usable.";
    max_queue_wait, "SLUICE_MAX_QUEUE_WAIT", "--max-queue-wait", "", "duration", true,
        "Latency-target admission: a statement whose expected queue wait (queued statements x mean slot time / pool size) exceeds this is refused at once with the retryable error 9002 (HY000) instead of queueing, and one admitted on a wrong estimate is refused once it has waited this long. The expected wait may reach 40% of this for a session just served, growing with the time since the session last got a slot to 80% after 10 x max_queue_wait: under sustained overload the clients that waited longest get the next places, and the margin absorbs the estimate's error. Sessions in a transaction are never refused. Unset: off.";
    pipeline_depth, "SLUICE_PIPELINE_DEPTH", "--pipeline-depth", "16", "statements", true,
        "Pipelining: up to this many autocommit reads (queries, and executions of prepared statements without a cursor that are prepared on the batch's backend already) of different sessions that the classifier proves stateless (replica-safe, no CONNECTION_ID() or LAST_INSERT_ID() to present, nothing that pins) and that share the backend account and session state are written to one backend connection at once and answered in order. Each client still gets its own answer, relayed with its own write timeout; a member only joins a batch while nobody else has queued for a slot since its leader did, so FIFO order holds. A KILL QUERY of a pipelined statement ends its answer with 1317 (Query execution was interrupted) without touching the server, where another session's statement may be running. Saves one send to the server and one server wake-up per statement; a read that raised warnings and was not the batch's last loses them (SHOW WARNINGS then finds none, as when every pinned place is taken). With `servers` and the split on, each server has its own batches: a read is routed first and joins a batch of that server's (a read that waits for a replica to reach the session's writes runs on its own). The default, 16, lets one batch take every read queued for a slot when clients outnumber slots 16 to 1 (64 on 4); with 8, such a queue needed two round trips to the server per slot, and 64 clients on P=4 cost about a tenth more CPU per `SELECT 1`. 1: off.";
    pipeline_max_delay, "SLUICE_PIPELINE_MAX_DELAY", "--pipeline-max-delay", "1ms", "duration", true,
        "A read that would find an execution slot free runs at once on a backend of its own, beside the others; it joins a batch instead only while pipeline_depth x the server time of one statement stays below this, so that pipelining never holds a statement back by much more than this to save its send. One statement's server time is the pool's mean statement time, divided by how many statements share each server CPU when sluice runs more of them than the server has CPUs (`server_cpus`). Reads that would queue for a slot join whatever this says. 0: pipeline only reads that would queue.";
    server_cpus, "SLUICE_SERVER_CPUS", "--server-cpus", "auto", "CPUs", true,
        "How many CPUs the backend server runs statements on. With more statements running than that, each waits for a CPU inside the server anyway, so pipelining batches short reads even with an execution slot free (see pipeline_max_delay): the same work with fewer sends and server wake-ups. `auto`: the server's @@thread_pool_size (MariaDB's, and Percona Server's thread pool), which defaults to its CPU count (the ones it may run on), read with max_connections; MySQL Community does not say, so there `auto` means unknown, and reads with a slot free batch only when the mean statement time alone is short. SHOW POOLS shows the value in force.";
    backend_busy_poll, "SLUICE_BACKEND_BUSY_POLL", "--backend-busy-poll", "100us", "duration", true,
        "How long sluice may wait for a reply's first bytes by polling the backend's socket instead of sleeping, when that statement is the only command it is handling. On a virtual machine, a CPU left idle while the process sleeps is halted, and waking it when the reply lands takes tens of microseconds; polling keeps it awake (the trade HAProxy's busy-polling makes always, here only for this wait). Each backend connection measures how long its replies take when polled and when slept for (every 16th wait goes the other way) and polls only while that has been the quicker, so a slow or distant server, or a host where the polling CPU slows the server's down, soon gets sleeping waits again. It costs at most this much CPU per statement. SHOW STATS counts busy_poll_hits, busy_poll_misses and busy_poll_skipped. 0: always sleep.";
    pin_wait, "SLUICE_PIN_WAIT", "--pin-wait", "2s", "duration", true,
        "A statement that would pin its session to a backend (CREATE TEMPORARY TABLE, SET @var, GET_LOCK, PREPARE, LOCK TABLES, ...) while max_backend_connections - pool_size sessions are pinned already waits this long for one of them to end, then gets error 9005 (HY000) naming the cap and the pinned sessions by reason. The statement does not run, so nothing is lost; the session stays usable and unpinned. 0: refuse at once.";
    backend_down_wait, "SLUICE_BACKEND_DOWN_WAIT", "--backend-down-wait", "10s", "duration", true,
        "While the backend server is unreachable, a statement that needs a new backend connection waits this long (never longer than queue_timeout) for sluice's reconnect loop, then gets error 9003 naming the backend and its last connect error. 0: fail at once.";
    connect_timeout, "SLUICE_CONNECT_TIMEOUT", "--connect-timeout", "5s", "duration", true,
        "Deadline for opening a backend connection, login included.";
    client_login_timeout, "SLUICE_CLIENT_LOGIN_TIMEOUT", "--client-login-timeout", "10s", "duration", true,
        "A client must finish the handshake and authentication within this.";
    auth_failure_threshold, "SLUICE_AUTH_FAILURE_THRESHOLD", "--auth-failure-threshold", "5", "failures", true,
        "Consecutive failed logins from one IP address before its login attempts are slowed down (a max_connect_errors-like backoff). After that, every login from the address waits 250 ms before its verdict, doubling with each further failure up to auth_failure_max_delay; a successful login clears the address. 0 disables.";
    auth_failure_max_delay, "SLUICE_AUTH_FAILURE_MAX_DELAY", "--auth-failure-max-delay", "5s", "duration", true,
        "Cap on the auth-failure backoff delay. The delay counts against client_login_timeout and is never more than half of it, so a slowed client still gets its answer.";
    client_write_timeout, "SLUICE_CLIENT_WRITE_TIMEOUT", "--client-write-timeout", "30s", "duration", true,
        "A client that does not read its result for this long is disconnected, so it cannot hold a backend.";
    shutdown_timeout, "SLUICE_SHUTDOWN_TIMEOUT", "--shutdown-timeout", "10s", "duration", true,
        "On shutdown, running statements get this long to finish before sessions are closed.";
    max_allowed_packet, "SLUICE_MAX_ALLOWED_PACKET", "--max-allowed-packet", "64MiB", "bytes", true,
        "Largest client command accepted (K/M/G suffixes are powers of 1024). Larger ones get an error and a disconnect.";
    max_prepared_statements_per_backend, "SLUICE_MAX_PREPARED_STATEMENTS_PER_BACKEND", "--max-prepared-statements-per-backend", "256", "statements", true,
        "Prepared statements kept per backend connection; the least recently used is closed beyond this. Keep it well below the server's max_prepared_stmt_count / max_backend_connections.";
    server_version, "SLUICE_SERVER_VERSION", "--server-version", "", "text", true,
        "Version string sent to clients in the handshake. Unset: the backend's own.";
    server_idle_timeout, "SLUICE_SERVER_IDLE_TIMEOUT", "--server-idle-timeout", "10m", "duration", true,
        "An idle backend connection is closed after this. 0 disables.";
    server_lifetime, "SLUICE_SERVER_LIFETIME", "--server-lifetime", "1h", "duration", true,
        "A backend connection is closed when released after being open this long. 0 disables.";
    health_check_interval, "SLUICE_HEALTH_CHECK_INTERVAL", "--health-check-interval", "30s", "duration", true,
        "Idle backend connections are pinged this often, one at a time and each only while an execution slot is free (a round stops while statements queue; a checkout tests a connection's socket itself). 0 disables.";
    min_idle, "SLUICE_MIN_IDLE", "--min-idle", "0", "connections", true,
        "Idle backend connections kept open (and opened at start, after an outage, and after idle or lifetime closes) for the warm group: at start the first user with mysql_async's capabilities and utf8mb4, then the group of the clients that last needed a new connection.";
    admin_listen, "SLUICE_ADMIN_LISTEN", "--admin-listen", "", "address", false,
        "Address of the admin console (MySQL protocol), e.g. 127.0.0.1:6032. Unset: off.";
    metrics_listen, "SLUICE_METRICS_LISTEN", "--metrics-listen", "", "address", false,
        "Address of the Prometheus endpoint (`/metrics`), e.g. 127.0.0.1:9187. Unset: off.";
    // Running several instances (issue 15); kept together as one block.
    instance_id, "SLUICE_INSTANCE_ID", "--instance-id", "0", "id", false,
        "Number of this sluice instance among several behind one balancer (0 to 255; give each instance its own, e.g. a StatefulSet pod's ordinal). Client connection ids (the handshake's thread id, CONNECTION_ID(), what KILL takes) are instance_id * 2^24 + n with n from 1 to 2^24 - 1, so ids of different instances never collide and the owner of an id is id >> 24. A KILL of another instance's id gets error 1094 (unknown thread id; the admin console's KILL names the owning instance): send it through the owning instance.";
    reuse_port, "SLUICE_REUSE_PORT", "--reuse-port", "false", "bool", false,
        "Set SO_REUSEPORT on the client listener (`listen`), so several sluice processes on one host (same user) can listen on the same port and the kernel spreads new connections over them. Every process sharing the port must set it; without it a second process fails to start with \"address in use\". The admin console and /metrics never share their ports: give each process its own admin_listen and metrics_listen so that each instance can be inspected and scraped.",
        { num_args = 0..=1, default_missing_value = "true" };
    tls_cert, "SLUICE_TLS_CERT", "--tls-cert", "", "path", false,
        "PEM certificate chain for client TLS. Needs tls_key.";
    tls_key, "SLUICE_TLS_KEY", "--tls-key", "", "path", false,
        "PEM private key for client TLS. Needs tls_cert.";
    backend_tls, "SLUICE_BACKEND_TLS", "--backend-tls", "preferred", "mode", false,
        "TLS to the backend server: disabled; preferred (TLS when the server offers it, certificate not checked; the mysql client's default); required (TLS or no connection, certificate not checked); verify_ca (the certificate must chain to backend_tls_ca); verify_identity (verify_ca, and the certificate must name the backend host or IP). Over TLS, caching_sha2_password full authentication sends the password inside TLS instead of RSA-encrypting it. Use disabled for a backend on the same host to save the encryption CPU, verify_identity across networks.";
    backend_tls_ca, "SLUICE_BACKEND_TLS_CA", "--backend-tls-ca", "", "path", false,
        "PEM file of the CA certificate(s) the backend's certificate must chain to; required by verify_ca and verify_identity.";
    require_secure_transport, "SLUICE_REQUIRE_SECURE_TRANSPORT", "--require-secure-transport", "false", "bool", true,
        "Refuse clients that do not use TLS. Needs tls_cert and tls_key.",
        { num_args = 0..=1, default_missing_value = "true" };
    log_format, "SLUICE_LOG_FORMAT", "--log-format", "text", "format", false,
        "Log output: `text` or `json`.";
    worker_threads, "SLUICE_WORKER_THREADS", "--worker-threads", "auto", "threads", false,
        "Threads the `sluice` binary runs clients on. `auto`: one per CPU the process may run on (its CPU affinity and cgroup quota). With one, sluice runs everything on a single thread without cross-thread scheduling, as PgBouncer does, which costs less CPU per statement; with more, tasks move between threads as load requires. Ignored when sluice runs inside another program (`Proxy::bind`), which brings its own runtime.";
    monitor_user, "SLUICE_MONITOR_USER", "--monitor-user", "", "name", false,
        "Account of the topology monitor's own connection to each server (with several servers, or with `read_write_split = on`). It needs the REPLICA MONITOR (MariaDB; MySQL: REPLICATION CLIENT) privilege and nothing else. Unset: backend_user, else the first user's backend credentials.";
    monitor_password, "SLUICE_MONITOR_PASSWORD", "--monitor-password", "", "password", false,
        "Password of monitor_user. Unset: the password of the backend credentials monitor_user falls back to.";
    monitor_interval, "SLUICE_MONITOR_INTERVAL", "--monitor-interval", "500ms", "duration", false,
        "How often the monitor checks every server (read_only, replica status, GTID position). A check that takes longer than this fails, and the server is excluded until one succeeds.";
    read_write_split, "SLUICE_READ_WRITE_SPLIT", "--read-write-split", "off", "off|on", true,
        "`on`: autocommit SELECT/SHOW/DESCRIBE and START TRANSACTION READ ONLY may go to a replica (the shortest queue, then the lowest lag); writes, other transactions, pinned sessions and every statement the classifier cannot prove read-only go to the writer. `off`: everything goes to the writer.";
    primary_reads, "SLUICE_PRIMARY_READS", "--primary-reads", "fallback", "never|fallback|always", true,
        "May the writer serve reads (with `read_write_split = on`)? `never`: only read-your-writes fallbacks, and reads wait for a replica while none is usable; `fallback`: when no replica is usable; `always`: it competes with the replicas.";
    max_replica_lag, "SLUICE_MAX_REPLICA_LAG", "--max-replica-lag", "5s", "duration", true,
        "A replica lagging more than this takes no reads. A replica whose lag is NULL, whose SQL or IO thread has stopped, or whose check failed takes none either.";
    read_your_writes, "SLUICE_READ_YOUR_WRITES", "--read-your-writes", "session", "off|session|wait", true,
        "`session`: after a write, the session's reads go only to a replica whose monitored GTID position covers its last write, else to the writer. `wait`: as session, but a replica lagging less than gtid_wait_timeout may first wait for the write (MASTER_GTID_WAIT / WAIT_FOR_EXECUTED_GTID_SET), falling back to the writer on timeout. `off`: no tracking. A `/* sluice:min_gtid=<position> */` comment in a statement asks for that position in every mode; without such a token there is no guarantee across sessions.";
    gtid_wait_timeout, "SLUICE_GTID_WAIT_TIMEOUT", "--gtid-wait-timeout", "100ms", "duration", true,
        "With `read_your_writes = wait`: how long a replica may wait for the session's write before the read goes to the writer, and how close (in lag) a replica must be to be asked.";
    writer_wait_timeout, "SLUICE_WRITER_WAIT_TIMEOUT", "--writer-wait-timeout", "10s", "duration", true,
        "While there is no writer (none, or several servers writable: split brain), a write (and every statement that must go to the writer) waits this long for exactly one, then gets error 1290 (HY000) naming the state. 0: fail at once.";
}

/// Finds the documentation row of a setting by its TOML name.
pub fn setting(name: &str) -> Option<&'static SettingDoc> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// Sets one scalar setting from its text form.
pub(crate) fn apply(cfg: &mut Config, key: &str, raw: &str) -> Result<(), String> {
    let opt_string = |raw: &str| (!raw.trim().is_empty()).then(|| raw.trim().to_string());
    let opt_path = |raw: &str| opt_string(raw).map(PathBuf::from);
    let opt_addr = |raw: &str| -> Result<_, String> {
        if is_off(raw) {
            Ok(None)
        } else {
            parse_addr(raw).map(Some)
        }
    };
    match key {
        "listen" => cfg.listen = parse_addr(raw)?,
        "backend" => {
            cfg.backend = super::Endpoint::checked(raw.trim())?;
        }
        "backend_user" => cfg.backend_user = opt_string(raw),
        "backend_password" => {
            cfg.backend_password = (!raw.is_empty()).then(|| Secret::new(raw.to_string()))
        }
        "default_auth_plugin" => cfg.default_auth_plugin = raw.parse()?,
        "pool_size" => cfg.pool_size = raw.parse()?,
        "min_pool_size" => cfg.min_pool_size = parse_u32(raw)?,
        "max_pool_size" => cfg.max_pool_size = parse_u32(raw)?,
        "max_backend_connections" => cfg.max_backend_connections = raw.parse()?,
        "max_client_connections" => cfg.max_client_connections = parse_u32(raw)?,
        "queue_timeout" => cfg.queue_timeout = parse_duration(raw)?,
        "max_queue_wait" => {
            cfg.max_queue_wait = if is_off(raw) {
                None
            } else {
                Some(parse_duration(raw)?)
            }
        }
        "pipeline_depth" => cfg.pipeline_depth = parse_u32(raw)?,
        "pipeline_max_delay" => cfg.pipeline_max_delay = parse_duration(raw)?,
        "backend_busy_poll" => cfg.backend_busy_poll = parse_duration(raw)?,
        "server_cpus" => cfg.server_cpus = raw.parse()?,
        "pin_wait" => cfg.pin_wait = parse_duration(raw)?,
        "backend_down_wait" => cfg.backend_down_wait = parse_duration(raw)?,
        "connect_timeout" => cfg.connect_timeout = parse_duration(raw)?,
        "client_login_timeout" => cfg.client_login_timeout = parse_duration(raw)?,
        "auth_failure_threshold" => cfg.auth_failure_threshold = parse_u32(raw)?,
        "auth_failure_max_delay" => cfg.auth_failure_max_delay = parse_duration(raw)?,
        "client_write_timeout" => cfg.client_write_timeout = parse_duration(raw)?,
        "shutdown_timeout" => cfg.shutdown_timeout = parse_duration(raw)?,
        "max_allowed_packet" => cfg.max_allowed_packet = parse_bytes(raw)?,
        "max_prepared_statements_per_backend" => {
            cfg.max_prepared_statements_per_backend = parse_u32(raw)?
        }
        "server_version" => cfg.server_version = opt_string(raw),
        "server_idle_timeout" => cfg.server_idle_timeout = parse_duration(raw)?,
        "server_lifetime" => cfg.server_lifetime = parse_duration(raw)?,
        "health_check_interval" => cfg.health_check_interval = parse_duration(raw)?,
        "min_idle" => cfg.min_idle = parse_u32(raw)?,
        "admin_listen" => cfg.admin_listen = opt_addr(raw)?,
        "metrics_listen" => cfg.metrics_listen = opt_addr(raw)?,
        "instance_id" => cfg.instance_id = parse_u32(raw)?,
        "reuse_port" => cfg.reuse_port = parse_bool(raw)?,
        "tls_cert" => cfg.tls_cert = opt_path(raw),
        "tls_key" => cfg.tls_key = opt_path(raw),
        "require_secure_transport" => cfg.require_secure_transport = parse_bool(raw)?,
        "backend_tls" => cfg.backend_tls = raw.parse()?,
        "backend_tls_ca" => cfg.backend_tls_ca = opt_path(raw),
        "log_format" => cfg.log_format = raw.parse()?,
        "worker_threads" => cfg.worker_threads = raw.parse()?,
        "monitor_user" => cfg.monitor_user = opt_string(raw),
        "monitor_password" => {
            cfg.monitor_password = (!raw.is_empty()).then(|| Secret::new(raw.to_string()))
        }
        "monitor_interval" => cfg.monitor_interval = parse_duration(raw)?,
        "read_write_split" => cfg.read_write_split = raw.parse()?,
        "primary_reads" => cfg.primary_reads = raw.parse()?,
        "max_replica_lag" => cfg.max_replica_lag = parse_duration(raw)?,
        "read_your_writes" => cfg.read_your_writes = raw.parse()?,
        "gtid_wait_timeout" => cfg.gtid_wait_timeout = parse_duration(raw)?,
        "writer_wait_timeout" => cfg.writer_wait_timeout = parse_duration(raw)?,
        other => return Err(format!("unknown setting {other:?}")),
    }
    Ok(())
}

fn parse_addr(raw: &str) -> Result<std::net::SocketAddr, String> {
    raw.trim().parse().map_err(|_| {
        format!("{:?} is not an ip:port address; write it like 127.0.0.1:6033 (host names are not accepted for listen addresses)", raw.trim())
    })
}

/// The current value of one scalar setting as a TOML value (`None` when unset). Secrets are
/// shown as `***` unless `mask` is false.
pub(crate) fn render(cfg: &Config, key: &str, mask: bool) -> Option<toml::Value> {
    use toml::Value as V;
    let s = |x: String| Some(V::String(x));
    let n = |x: u32| Some(V::Integer(i64::from(x)));
    let d = |x: std::time::Duration| s(format_duration(x));
    let secret = |x: &Secret| {
        s(if mask {
            "***".into()
        } else {
            x.expose().into()
        })
    };
    match key {
        "listen" => s(cfg.listen.to_string()),
        "backend" => s(cfg.backend.to_string()),
        "backend_user" => cfg.backend_user.clone().and_then(s),
        "backend_password" => cfg.backend_password.as_ref().and_then(secret),
        "default_auth_plugin" => s(cfg.default_auth_plugin.to_string()),
        "pool_size" => match cfg.pool_size {
            super::PoolSize::Fixed(x) => n(x),
            super::PoolSize::Auto => s("auto".into()),
        },
        "min_pool_size" => n(cfg.min_pool_size),
        "max_pool_size" => n(cfg.max_pool_size),
        "max_backend_connections" => match cfg.max_backend_connections {
            super::BackendLimit::Fixed(x) => n(x),
            super::BackendLimit::Auto => s("auto".into()),
        },
        "max_client_connections" => n(cfg.max_client_connections),
        "queue_timeout" => d(cfg.queue_timeout),
        "max_queue_wait" => cfg.max_queue_wait.and_then(d),
        "pipeline_depth" => n(cfg.pipeline_depth),
        "pipeline_max_delay" => d(cfg.pipeline_max_delay),
        "backend_busy_poll" => d(cfg.backend_busy_poll),
        "server_cpus" => cfg.server_cpus.fixed().map_or_else(|| s("auto".into()), n),
        "pin_wait" => d(cfg.pin_wait),
        "backend_down_wait" => d(cfg.backend_down_wait),
        "connect_timeout" => d(cfg.connect_timeout),
        "client_login_timeout" => d(cfg.client_login_timeout),
        "auth_failure_threshold" => n(cfg.auth_failure_threshold),
        "auth_failure_max_delay" => d(cfg.auth_failure_max_delay),
        "client_write_timeout" => d(cfg.client_write_timeout),
        "shutdown_timeout" => d(cfg.shutdown_timeout),
        "max_allowed_packet" => s(format_bytes(cfg.max_allowed_packet)),
        "max_prepared_statements_per_backend" => n(cfg.max_prepared_statements_per_backend),
        "server_version" => cfg.server_version.clone().and_then(s),
        "server_idle_timeout" => d(cfg.server_idle_timeout),
        "server_lifetime" => d(cfg.server_lifetime),
        "health_check_interval" => d(cfg.health_check_interval),
        "min_idle" => n(cfg.min_idle),
        "admin_listen" => cfg.admin_listen.map(|a| a.to_string()).and_then(s),
        "metrics_listen" => cfg.metrics_listen.map(|a| a.to_string()).and_then(s),
        "instance_id" => n(cfg.instance_id),
        "reuse_port" => Some(V::Boolean(cfg.reuse_port)),
        "tls_cert" => cfg
            .tls_cert
            .as_ref()
            .and_then(|p| s(p.display().to_string())),
        "tls_key" => cfg
            .tls_key
            .as_ref()
            .and_then(|p| s(p.display().to_string())),
        "require_secure_transport" => Some(V::Boolean(cfg.require_secure_transport)),
        "backend_tls" => s(cfg.backend_tls.to_string()),
        "backend_tls_ca" => cfg
            .backend_tls_ca
            .as_ref()
            .and_then(|p| s(p.display().to_string())),
        "log_format" => s(cfg.log_format.to_string()),
        "worker_threads" => cfg
            .worker_threads
            .fixed()
            .map_or_else(|| s("auto".into()), n),
        "monitor_user" => cfg.monitor_user.clone().and_then(s),
        "monitor_password" => cfg.monitor_password.as_ref().and_then(secret),
        "monitor_interval" => d(cfg.monitor_interval),
        "read_write_split" => s(cfg.read_write_split.to_string()),
        "primary_reads" => s(cfg.primary_reads.to_string()),
        "max_replica_lag" => d(cfg.max_replica_lag),
        "read_your_writes" => s(cfg.read_your_writes.to_string()),
        "gtid_wait_timeout" => d(cfg.gtid_wait_timeout),
        "writer_wait_timeout" => d(cfg.writer_wait_timeout),
        _ => None,
    }
}

/// True for the rows handled by `apply`/`render` (everything but the list settings).
pub(crate) fn is_scalar(doc: &SettingDoc) -> bool {
    !LIST_SETTINGS.iter().any(|l| l.name == doc.name)
}
