//! `Context`: what every session and the admin console share. Built once by `app`, passed
//! down as `Arc<Context>`; the config inside can be swapped by RELOAD / SIGHUP.

use std::sync::{Arc, RwLock};

use tokio_util::sync::CancellationToken;

use crate::config::{Config, PoolSize, UserConfig};
use crate::conn::backend::{BackendTarget, PoolKey};
use crate::conn::client::HandshakeContext;
use crate::conn::tls::BackendTls;
use crate::pool::{Pool, PoolSettings};
use crate::registry::Registry;
use crate::stats::Stats;
use crate::topology::task::Snapshot;

pub struct Context {
    config: RwLock<Arc<Config>>,
    /// Server 0's pool (the only one with one server): `pools()[0]`.
    pub pool: Pool,
    /// One pool per configured server (`Config::endpoints`, same index): each with its own
    /// FIFO slots, limiter and pinned places.
    pools: Vec<Pool>,
    /// The latest topology (roles, lag, positions): the monitor's channel, or a fixed
    /// snapshot naming server 0 the writer when nothing is monitored.
    topology: tokio::sync::watch::Receiver<Arc<Snapshot>>,
    pub stats: Arc<Stats>,
    pub registry: Arc<Registry>,
    pub handshake: HandshakeContext,
    /// Cancelled when shutdown starts: stop accepting, end idle sessions.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled when the drain deadline passes: end every session now.
    pub(crate) hard_stop: CancellationToken,
    /// While set, no new statement gets a backend (admin PAUSE).
    pub(crate) paused: tokio::sync::watch::Sender<bool>,
    /// Queue-wait and backend-time histograms (SHOW LATENCY, /metrics).
    pub(crate) latency: crate::latency::Latency,
    /// TLS towards the backend, built once at start (`backend_tls` is not live).
    pub(crate) backend_tls: Option<Arc<BackendTls>>,
    /// `pool_size = auto`: whether it is on and why the limit last moved.
    pub limit: crate::pool::limiter::LimitState,
    /// Per backend account: how CONNECTION_ID() shows the client's id (SHOW SERVERS).
    pub identity: Arc<crate::conn::identity::IdentityModes>,
    /// Commands being handled now, which tells a reply's wait whether to busy-poll.
    pub(crate) busy: crate::conn::busy_poll::Busy,
    /// Per-digest statistics (SHOW DIGESTS, /metrics), sized by the config.
    pub digests: crate::digests::Digests,
    /// The query rules in force, with their counters and gates (`rules()`); rebuilt from the
    /// config by `replace_config`.
    rules: RwLock<Arc<crate::rules::RuleSet>>,
    /// Whether any rule is in force, so that a statement without rules takes no lock.
    has_rules: std::sync::atomic::AtomicBool,
    /// Each user's max_concurrency gate.
    pub user_gates: crate::user_limits::UserGates,
    /// The generation of the server's globals each login sees (`pool::globals`), shared by
    /// every pool.
    pub(crate) globals: Arc<crate::pool::Globals>,
}

impl Context {
    /// `topology`: the monitor's receiver (`app` starts it when `Config::uses_topology`);
    /// `None` means one server that is the writer.
    pub(crate) fn new(
        config: Config,
        handshake: HandshakeContext,
        server: Arc<crate::conn::server_info::ServerInfoCell>,
        backend_tls: Option<Arc<BackendTls>>,
        topology: Option<tokio::sync::watch::Receiver<Arc<Snapshot>>>,
    ) -> Arc<Context> {
        let stats = Arc::new(Stats::default());
        let globals = Arc::new(crate::pool::Globals::default());
        let settings = pool_settings(&config);
        let pools: Vec<Pool> = (0..config.endpoints().len())
            .map(|i| {
                // Server 0's greeting is the one clients are shown; each pool learns its own.
                let cell = if i == 0 {
                    server.clone()
                } else {
                    Default::default()
                };
                Pool::new(&settings, stats.clone(), cell, globals.clone())
            })
            .collect();
        let pool = pools[0].clone();
        let topology = topology.unwrap_or_else(|| {
            let (tx, rx) = tokio::sync::watch::channel(Arc::new(Snapshot::single_writer()));
            // Nothing ever changes: the receiver keeps the value after the sender is gone.
            drop(tx);
            rx
        });
        let (paused, _) = tokio::sync::watch::channel(false);
        let digests =
            crate::digests::Digests::new(config.digests, config.digest_table_size as usize);
        let rules = crate::rules::RuleSet::build(&config.rules, None);
        let has_rules = (!rules.is_empty()).into();
        Arc::new(Context {
            config: RwLock::new(Arc::new(config)),
            pool,
            pools,
            topology,
            stats,
            registry: Registry::new(),
            handshake,
            shutdown: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            paused,
            latency: crate::latency::Latency::new(),
            backend_tls,
            limit: Default::default(),
            identity: Default::default(),
            busy: Default::default(),
            digests,
            rules: RwLock::new(Arc::new(rules)),
            has_rules,
            user_gates: Default::default(),
            globals,
        })
    }

    /// The config in force now (cheap: an `Arc` clone under a read lock).
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Swaps in a validated config and applies its live settings to every pool.
    pub fn replace_config(&self, config: Config) {
        for pool in &self.pools {
            let mut settings = pool_settings(&config);
            if config.pool_size == PoolSize::Auto {
                // The limiter owns the size: keep what it found (within the new bounds).
                let cap = pool.cap_for(config.max_backend_connections);
                let (min, max) = config.pool_bounds(cap);
                settings.pool_size = pool.slots().size().clamp(min, max);
            }
            pool.apply(&settings);
        }
        self.digests
            .configure(config.digests, config.digest_table_size as usize);
        self.replace_rules(&config);
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    /// The query rules in force; `None` when there are none (then no lock is taken).
    pub fn rules(&self) -> Option<Arc<crate::rules::RuleSet>> {
        if !self.has_rules.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        Some(self.rules.read().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Builds the rules of `config`; unchanged rules keep their counters and gates.
    fn replace_rules(&self, config: &Config) {
        let mut rules = self.rules.write().unwrap_or_else(|p| p.into_inner());
        let next = crate::rules::RuleSet::build(&config.rules, Some(&rules));
        self.has_rules
            .store(!next.is_empty(), std::sync::atomic::Ordering::Relaxed);
        *rules = Arc::new(next);
    }

    /// One pool per configured server, in `Config::endpoints` order.
    pub(crate) fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Server `index`'s pool.
    pub(crate) fn pool_for(&self, index: usize) -> Option<&Pool> {
        self.pools.get(index)
    }

    /// The latest published topology (cheap: an `Arc` clone).
    pub fn topology(&self) -> Arc<Snapshot> {
        self.topology.borrow().clone()
    }

    /// A receiver of every new topology, for waiting on a change (`changed()`).
    pub(crate) fn topology_watch(&self) -> tokio::sync::watch::Receiver<Arc<Snapshot>> {
        self.topology.clone()
    }

    /// Statements queued for or running on each server's slots (the router's `queued`).
    pub(crate) fn queued(&self) -> Vec<usize> {
        self.pools
            .iter()
            .map(|p| p.slots().waiting() + p.slots().in_use() as usize)
            .collect()
    }
}

/// The routing settings of `topology::route`, from the config.
pub(crate) fn route_config(config: &Config) -> crate::topology::RouteConfig {
    crate::topology::RouteConfig {
        read_write_split: config.read_write_split,
        primary_reads: config.primary_reads,
        read_your_writes: config.read_your_writes,
        gtid_wait_timeout: config.gtid_wait_timeout,
    }
}

/// The monitor's settings and its targets (one per server, with the monitor's account).
pub(crate) fn monitor_settings(
    config: &Config,
    backend_tls: Option<Arc<BackendTls>>,
) -> (
    crate::topology::task::MonitorSettings,
    crate::topology::task::BackendConnect,
) {
    let (user, password) = config.monitor_credentials();
    let targets = config
        .endpoints()
        .iter()
        .map(|addr| BackendTarget {
            addr: addr.clone(),
            user: user.clone(),
            password: crate::config::Secret::new(password.clone()),
            connect_timeout: config.connect_timeout.min(config.monitor_interval),
            max_payload: 16 << 20,
            tls: backend_tls.clone(),
            identity: Default::default(),
            credentials: None,
        })
        .collect();
    let settings = crate::topology::task::MonitorSettings {
        interval: config.monitor_interval,
        check_timeout: config.monitor_interval,
        limits: crate::topology::Limits {
            max_replica_lag: config.max_replica_lag,
        },
    };
    (settings, crate::topology::task::BackendConnect { targets })
}

pub(crate) fn pool_settings(config: &Config) -> PoolSettings {
    PoolSettings {
        pool_size: initial_pool_size(config),
        max_backend_connections: config.max_backend_connections,
        server_lifetime: config.server_lifetime,
    }
}

/// Where a user's statements run on server 0 (the only one with one server), and with
/// which credentials.
pub(crate) fn backend_target(config: &Config, user: &UserConfig, ctx: &Context) -> BackendTarget {
    backend_target_for(config, user, ctx, 0)
}

/// A user's target on server `index` (`Config::endpoints`; server 0 if out of range).
pub(crate) fn backend_target_for(
    config: &Config,
    user: &UserConfig,
    ctx: &Context,
    index: usize,
) -> BackendTarget {
    let (name, password) = user.backend_credentials(config);
    // A server account logs in with what its newest login proved (read at each connect).
    let credentials =
        (user.source == crate::config::UserSource::Server).then(|| ctx.handshake.accounts.clone());
    let endpoints = config.endpoints();
    BackendTarget {
        addr: endpoints.get(index).unwrap_or(&endpoints[0]).clone(),
        user: name.to_string(),
        password: password.clone(),
        connect_timeout: config.connect_timeout,
        max_payload: (config.max_allowed_packet as usize).max(16 << 20) * 2,
        tls: ctx.backend_tls.clone(),
        identity: ctx.identity.clone(),
        credentials,
    }
}

/// The group `min_idle` warms before any client has connected: the first user's backend
/// account, the capabilities mysql_async (the loadgen's driver) asks for (multi-statements,
/// multi-results, DEPRECATE_EOF, LOCAL_FILES) as far as sluice offers them, and
/// utf8mb4_general_ci. Once clients come, the pool follows the group that last needed a new
/// connection.
const UTF8MB4_GENERAL_CI: u8 = 45;

pub(crate) fn default_group(ctx: &Context, index: usize) -> Option<(PoolKey, BackendTarget)> {
    use crate::protocol::{flags, Capabilities};
    let config = ctx.config();
    let user = config.users.first()?;
    let target = backend_target_for(&config, user, ctx, index);
    let common = Capabilities::CLIENT_MULTI_STATEMENTS
        | Capabilities::CLIENT_MULTI_RESULTS
        | Capabilities::CLIENT_PS_MULTI_RESULTS
        | Capabilities::CLIENT_DEPRECATE_EOF
        | Capabilities::CLIENT_LOCAL_FILES;
    let key = PoolKey {
        user: Arc::from(target.user.as_str()),
        caps: (common & ctx.handshake.offered() & flags::shaping_mask()).bits(),
        collation: UTF8MB4_GENERAL_CI,
        globals: 0,
    };
    Some((key, target))
}

/// `auto` starts at `min_pool_size` and lets the limiter (`autosize`) find the knee.
pub(crate) fn initial_pool_size(config: &Config) -> u32 {
    match config.pool_size {
        PoolSize::Fixed(n) => n,
        // Before the pool knows the server: a fixed cap, or none yet.
        PoolSize::Auto => {
            let cap = config.max_backend_connections.fixed().unwrap_or(u32::MAX);
            config.pool_bounds(cap).0
        }
    }
}
