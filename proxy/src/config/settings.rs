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
        description: "Clients sluice accepts; at least one unless auth_source reads the server's accounts. TOML: `[[users]]` tables; flag: `--user NAME:PASSWORD`, repeatable; env: comma-separated `NAME:PASSWORD` pairs. A higher source replaces the whole list.",
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
        description: "Every server of one replication setup (a primary and its replicas), each written like `backend`; roles are discovered, never configured. TOML: `servers = [\"db1:3306\", \"db2:3306\"]`; flag `--server`, repeatable; env comma-separated. Unset: the one server in `backend`.",
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
            #[serde(default)]
            pub rules: Option<Vec<super::rules::FileRule>>,
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
        "The MySQL or MariaDB server: host:port over TCP (a host name is resolved at every connect), or its Unix socket on this host as unix:/path (or the absolute path), which saves the TCP stack's CPU. A Unix socket carries no TLS: backend_tls must be disabled or preferred.";
    backend_user, "SLUICE_BACKEND_USER", "--backend-user", "", "name", true,
        "User sluice logs in to the backend as, for users without their own `backend_user`. Unset: each client's own name (pass-through).";
    backend_password, "SLUICE_BACKEND_PASSWORD", "--backend-password", "", "password", true,
        "Password for the backend login, for users without their own `backend_password`. Unset: each client's own password.";
    default_auth_plugin, "SLUICE_DEFAULT_AUTH_PLUGIN", "--default-auth-plugin", "mysql_native_password", "plugin", true,
        "Auth plugin sluice asks clients to use, unless a user sets `auth_plugin`: `mysql_native_password` or `caching_sha2_password`.";
    auth_source, "SLUICE_AUTH_SOURCE", "--auth-source", "", "list|server|both", true,
        "Where client accounts come from: `list` (the `users` list only), `server` (the server's own accounts, read as auth_user, so applications keep their names and passwords) or `both` (the list first). Unset: `list` with a `users` list, `server` with auth_user and no list.";
    auth_user, "SLUICE_AUTH_USER", "--auth-user", "", "NAME:PASSWORD", true,
        "Service account (NAME:PASSWORD) that reads the account table for auth_source = server or both. Its only grant: SELECT on mysql.global_priv (MariaDB 10.4+) or mysql.user (MySQL). sluice refuses to start when it cannot log in or lacks the grant.";
    auth_cache_ttl, "SLUICE_AUTH_CACHE_TTL", "--auth-cache-ttl", "30s", "duration", true,
        "How long an account read from the server is used before it is read again (unknown names too). A failed login re-reads at once, so a changed password works at the next login. While the table cannot be read, cached accounts work until this passes. 0: read at every login.";
    pool_size, "SLUICE_POOL_SIZE", "--pool-size", "4", "statements", true,
        "Execution slots: at most this many statements run on the backend at once; the rest wait in a fair FIFO queue. `auto` finds the server's throughput knee between min_pool_size and max_pool_size and keeps re-probing as the load changes; SHOW POOLS says why it last moved.";
    min_pool_size, "SLUICE_MIN_POOL_SIZE", "--min-pool-size", "1", "statements", true,
        "Lower bound for `pool_size = auto`, and where it starts.";
    max_pool_size, "SLUICE_MAX_POOL_SIZE", "--max-pool-size", "64", "statements", true,
        "Upper bound for `pool_size = auto`.";
    max_backend_connections, "SLUICE_MAX_BACKEND_CONNECTIONS", "--max-backend-connections", "auto", "connections", true,
        "Cap on open backend connections, idle and pinned ones included; at least pool_size. `auto`: the server's max_connections less a tenth (at least 10). Give each of several sluice instances in front of one server its share. The connections beyond pool_size are what pinned sessions can hold.";
    max_client_connections, "SLUICE_MAX_CLIENT_CONNECTIONS", "--max-client-connections", "10000", "connections", true,
        "Clients beyond this get error 1040 (Too many connections) at the handshake.";
    queue_timeout, "SLUICE_QUEUE_TIMEOUT", "--queue-timeout", "30s", "duration", true,
        "A statement that waited this long for an execution slot gets error 9001; the session stays usable. One inside a transaction or holding a lock runs beyond pool_size instead.";
    max_queue_wait, "SLUICE_MAX_QUEUE_WAIT", "--max-queue-wait", "", "duration", true,
        "Latency-target admission: a statement expected to wait longer than this for a slot is refused at once with the retryable error 9002 instead of queueing, or once it has waited this long. Sessions in a transaction are never refused. Set it when clients would rather retry than wait. Unset: off.";
    pipeline_depth, "SLUICE_PIPELINE_DEPTH", "--pipeline-depth", "16", "statements", true,
        "Pipelining: up to this many stateless autocommit reads of different sessions that share a backend account and session state go to one backend connection at once and are answered in order, saving a send and a server wake-up each. Raise it when clients outnumber slots by more. 1: off.";
    pipeline_max_delay, "SLUICE_PIPELINE_MAX_DELAY", "--pipeline-max-delay", "1ms", "duration", true,
        "A read that would find a slot free joins a pipelined batch only while pipeline_depth x one statement's server time stays below this, so batching never delays it by much more; otherwise it runs at once. Reads that would queue join regardless. 0: pipeline only reads that would queue.";
    server_cpus, "SLUICE_SERVER_CPUS", "--server-cpus", "auto", "CPUs", true,
        "How many CPUs the backend server runs statements on; with more statements running than that, pipelining batches short reads even while a slot is free. `auto`: the server's @@thread_pool_size (MariaDB, Percona Server); unknown on MySQL Community, so set it there.";
    backend_busy_poll, "SLUICE_BACKEND_BUSY_POLL", "--backend-busy-poll", "100us", "duration", true,
        "How long sluice may poll the backend's socket for a reply's first bytes instead of sleeping, while that statement is the only one it is handling; on a virtual machine this spares a halted CPU's wake-up. Costs at most this much CPU per statement. 0: always sleep.";
    pin_wait, "SLUICE_PIN_WAIT", "--pin-wait", "2s", "duration", true,
        "How long a statement that would pin its session (a temporary table, a user variable, GET_LOCK, PREPARE, LOCK TABLES, ...) waits while every pinned place is taken, before error 9005. The statement does not run and the session stays usable and unpinned. 0: refuse at once.";
    backend_down_wait, "SLUICE_BACKEND_DOWN_WAIT", "--backend-down-wait", "10s", "duration", true,
        "While the backend server is unreachable, a statement that needs a new backend connection waits this long (never longer than queue_timeout) for sluice's reconnect loop, then gets error 9003 naming the backend and its last connect error. 0: fail at once.";
    connect_timeout, "SLUICE_CONNECT_TIMEOUT", "--connect-timeout", "5s", "duration", true,
        "Deadline for opening a backend connection, login included.";
    client_login_timeout, "SLUICE_CLIENT_LOGIN_TIMEOUT", "--client-login-timeout", "10s", "duration", true,
        "A client must finish the handshake and authentication within this.";
    auth_failure_threshold, "SLUICE_AUTH_FAILURE_THRESHOLD", "--auth-failure-threshold", "5", "failures", true,
        "Consecutive failed logins from one IP address before its logins are slowed down (like max_connect_errors, without blocking): each then waits 250 ms before its verdict, doubling per further failure up to auth_failure_max_delay. A success clears the address. 0: off.";
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
    max_prepared_statements_per_client, "SLUICE_MAX_PREPARED_STATEMENTS_PER_CLIENT", "--max-prepared-statements-per-client", "16382", "statements", true,
        "Prepared statements one client session may hold open; the next COM_STMT_PREPARE gets error 1461 and the session goes on. It bounds what a client that never closes its statements makes sluice hold. The default is the server's default max_prepared_stmt_count.";
    server_version, "SLUICE_SERVER_VERSION", "--server-version", "", "text", true,
        "Version string sent to clients in the handshake. Unset: the backend's own.";
    server_idle_timeout, "SLUICE_SERVER_IDLE_TIMEOUT", "--server-idle-timeout", "10m", "duration", true,
        "An idle backend connection is closed after this. 0 disables.";
    server_lifetime, "SLUICE_SERVER_LIFETIME", "--server-lifetime", "1h", "duration", true,
        "A backend connection is closed when released after being open this long. 0 disables.";
    health_check_interval, "SLUICE_HEALTH_CHECK_INTERVAL", "--health-check-interval", "30s", "duration", true,
        "Idle backend connections are pinged this often, one at a time and each only while an execution slot is free (a round stops while statements queue; a checkout tests a connection's socket itself). 0 disables.";
    globals_check_interval, "SLUICE_GLOBALS_CHECK_INTERVAL", "--globals-check-interval", "5s", "duration", true,
        "How often sluice checks whether the server's global defaults changed (a SET GLOBAL made on the server directly), so that logins from then on get backend connections opened under the new values. MariaDB only (on MySQL, use the admin console's RECONNECT). 0: off.";
    min_idle, "SLUICE_MIN_IDLE", "--min-idle", "0", "connections", true,
        "Idle backend connections kept open (and opened at start, after an outage, and after idle or lifetime closes) for the warm group: at start the first user with mysql_async's capabilities and utf8mb4, then the group of the clients that last needed a new connection.";
    admin_listen, "SLUICE_ADMIN_LISTEN", "--admin-listen", "", "address", false,
        "Address of the admin console (MySQL protocol), e.g. 127.0.0.1:6032. Unset: off.";
    metrics_listen, "SLUICE_METRICS_LISTEN", "--metrics-listen", "", "address", false,
        "Address of the Prometheus endpoint (`/metrics`), e.g. 127.0.0.1:9187. Unset: off.";
    // Running several instances behind one balancer; kept together as one block.
    instance_id, "SLUICE_INSTANCE_ID", "--instance-id", "0", "id", false,
        "Number of this sluice instance among several behind one balancer (0 to 255; give each its own, e.g. a StatefulSet pod's ordinal). It keeps client connection ids unique across instances; a KILL must go through the instance that owns the id.";
    reuse_port, "SLUICE_REUSE_PORT", "--reuse-port", "false", "bool", false,
        "Set SO_REUSEPORT on the client listener, so several sluice processes on one host (same user) share its port and the kernel spreads new connections over them. Every process sharing it must set it; give each its own admin_listen and metrics_listen.",
        { num_args = 0..=1, default_missing_value = "true" };
    tls_cert, "SLUICE_TLS_CERT", "--tls-cert", "", "path", false,
        "PEM certificate chain for client TLS. Needs tls_key.";
    tls_key, "SLUICE_TLS_KEY", "--tls-key", "", "path", false,
        "PEM private key for client TLS. Needs tls_cert.";
    backend_tls, "SLUICE_BACKEND_TLS", "--backend-tls", "preferred", "mode", false,
        "TLS to the backend: disabled, preferred (TLS when offered, certificate not checked), required (certificate not checked), verify_ca (chains to backend_tls_ca) or verify_identity (also names the host). Use disabled for a backend on the same host, verify_identity across networks.";
    backend_tls_ca, "SLUICE_BACKEND_TLS_CA", "--backend-tls-ca", "", "path", false,
        "PEM file of the CA certificate(s) the backend's certificate must chain to; required by verify_ca and verify_identity.";
    require_secure_transport, "SLUICE_REQUIRE_SECURE_TRANSPORT", "--require-secure-transport", "false", "bool", true,
        "Refuse clients that do not use TLS. Needs tls_cert and tls_key.",
        { num_args = 0..=1, default_missing_value = "true" };
    log_format, "SLUICE_LOG_FORMAT", "--log-format", "text", "format", false,
        "Log output: `text` or `json`.";
    worker_threads, "SLUICE_WORKER_THREADS", "--worker-threads", "auto", "threads", false,
        "Threads the `sluice` binary runs clients on. `auto`: one per CPU the process may use (its affinity and cgroup quota). One thread costs less CPU per statement; more spread the load over CPUs. Ignored when sluice runs inside another program (`Proxy::bind`).";
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
        "Where a session's reads go after its write. `session`: only to a replica that has the write, else to the writer. `wait`: a replica close behind may first wait for it (gtid_wait_timeout). `off`: no tracking. A `/* sluice:min_gtid=<position> */` comment asks for a position.";
    gtid_wait_timeout, "SLUICE_GTID_WAIT_TIMEOUT", "--gtid-wait-timeout", "100ms", "duration", true,
        "With `read_your_writes = wait`: how long a replica may wait for the session's write before the read goes to the writer, and how close (in lag) a replica must be to be asked.";
    writer_wait_timeout, "SLUICE_WRITER_WAIT_TIMEOUT", "--writer-wait-timeout", "10s", "duration", true,
        "While there is no writer (none, or several servers writable: split brain), a write (and every statement that must go to the writer) waits this long for exactly one, then gets error 1290 (HY000) naming the state. 0: fail at once.";
    // Seeing and steering what flows through: digests and per-user limits (the query rules are `[[rules]]` tables).
    digests, "SLUICE_DIGESTS", "--digests", "on", "on|off", true,
        "Per-digest statistics (SHOW DIGESTS, /metrics): statements normalised (literals become ?) and counted per digest, user, schema and server. `off` stops counting and keeps what was counted (RESET DIGESTS clears it); query rules work either way.";
    digest_table_size, "SLUICE_DIGEST_TABLE_SIZE", "--digest-table-size", "10000", "rows", true,
        "Rows of the digest table (each about 1.3 KiB plus up to 1 KiB of text). When it is full, the least recently seen row is evicted into one overflow row, so memory stays bounded whatever the literals. 0 turns digests off and frees the table.";
    metrics_digest_top, "SLUICE_METRICS_DIGEST_TOP", "--metrics-digest-top", "20", "rows", true,
        "How many digests /metrics shows (the top by total time), so that the series' number stays bounded. 0: none.";
    max_user_client_connections, "SLUICE_MAX_USER_CLIENT_CONNECTIONS", "--max-user-client-connections", "0", "connections", true,
        "Client connections one user may have at once, for users without their own `max_client_connections` (`[[users]]`); the next login gets error 1226 (ER_USER_LIMIT_REACHED, as MySQL's max_user_connections). 0: no limit.";
    max_user_concurrency, "SLUICE_MAX_USER_CONCURRENCY", "--max-user-concurrency", "0", "statements", true,
        "Statements of one user running at once, for users without their own `max_concurrency` (`[[users]]`); the others queue FIFO and get error 1226 after queue_timeout. 0: no limit.";
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
        "auth_source" => {
            cfg.auth_source = if is_off(raw) {
                None
            } else {
                Some(raw.parse()?)
            }
        }
        "auth_user" => {
            cfg.auth_user = if raw.trim().is_empty() {
                None
            } else {
                Some(raw.parse()?)
            }
        }
        "auth_cache_ttl" => cfg.auth_cache_ttl = parse_duration(raw)?,
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
        "max_prepared_statements_per_client" => {
            cfg.max_prepared_statements_per_client = parse_u32(raw)?
        }
        "server_version" => cfg.server_version = opt_string(raw),
        "server_idle_timeout" => cfg.server_idle_timeout = parse_duration(raw)?,
        "server_lifetime" => cfg.server_lifetime = parse_duration(raw)?,
        "health_check_interval" => cfg.health_check_interval = parse_duration(raw)?,
        "globals_check_interval" => cfg.globals_check_interval = parse_duration(raw)?,
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
        "digests" => cfg.digests = parse_bool(raw)?,
        "digest_table_size" => cfg.digest_table_size = parse_u32(raw)?,
        "metrics_digest_top" => cfg.metrics_digest_top = parse_u32(raw)?,
        "max_user_client_connections" => cfg.max_user_client_connections = parse_u32(raw)?,
        "max_user_concurrency" => cfg.max_user_concurrency = parse_u32(raw)?,
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
        "auth_source" => cfg.auth_source.map(|a| a.to_string()).and_then(s),
        "auth_user" => cfg.auth_user.as_ref().and_then(|u| {
            let password = if mask { "***" } else { u.password.expose() };
            s(format!("{}:{password}", u.name))
        }),
        "auth_cache_ttl" => d(cfg.auth_cache_ttl),
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
        "max_prepared_statements_per_client" => n(cfg.max_prepared_statements_per_client),
        "server_version" => cfg.server_version.clone().and_then(s),
        "server_idle_timeout" => d(cfg.server_idle_timeout),
        "server_lifetime" => d(cfg.server_lifetime),
        "health_check_interval" => d(cfg.health_check_interval),
        "globals_check_interval" => d(cfg.globals_check_interval),
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
        "digests" => s(if cfg.digests { "on" } else { "off" }.into()),
        "digest_table_size" => n(cfg.digest_table_size),
        "metrics_digest_top" => n(cfg.metrics_digest_top),
        "max_user_client_connections" => n(cfg.max_user_client_connections),
        "max_user_concurrency" => n(cfg.max_user_concurrency),
        _ => None,
    }
}

/// True for the rows handled by `apply`/`render` (everything but the list settings).
pub(crate) fn is_scalar(doc: &SettingDoc) -> bool {
    !LIST_SETTINGS.iter().any(|l| l.name == doc.name)
}
