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
    pub shutdown: CancellationToken,
    /// Cancelled when the drain deadline passes: end every session now.
    pub hard_stop: CancellationToken,
    /// While set, no new statement gets a backend (admin PAUSE).
    pub paused: tokio::sync::watch::Sender<bool>,
    /// Queue-wait and backend-time histograms (SHOW LATENCY, /metrics).
    pub latency: crate::latency::Latency,
    /// TLS towards the backend, built once at start (`backend_tls` is not live).
    pub backend_tls: Option<Arc<BackendTls>>,
    /// `pool_size = auto`: whether it is on and why the limit last moved.
    pub limit: crate::pool::limiter::LimitState,
    /// Per backend account: how CONNECTION_ID() shows the client's id (SHOW SERVERS).
    pub identity: Arc<crate::conn::identity::IdentityModes>,
    /// Commands being handled now, which tells a reply's wait whether to busy-poll.
    pub busy: crate::conn::busy_poll::Busy,
}

impl Context {
    /// `topology`: the monitor's receiver (`app` starts it when `Config::uses_topology`);
    /// `None` means one server that is the writer.
    pub fn new(
        config: Config,
        handshake: HandshakeContext,
        server: Arc<crate::conn::server_info::ServerInfoCell>,
        backend_tls: Option<Arc<BackendTls>>,
        topology: Option<tokio::sync::watch::Receiver<Arc<Snapshot>>>,
    ) -> Arc<Context> {
        let stats = Arc::new(Stats::default());
        let settings = pool_settings(&config);
        let pools: Vec<Pool> = (0..config.endpoints().len())
            .map(|i| {
                // Server 0's greeting is the one clients are shown; each pool learns its own.
                let cell = if i == 0 {
                    server.clone()
                } else {
                    Default::default()
                };
                Pool::new(&settings, stats.clone(), cell)
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
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    /// One pool per configured server, in `Config::endpoints` order.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Server `index`'s pool.
    pub fn pool_for(&self, index: usize) -> Option<&Pool> {
        self.pools.get(index)
    }

    /// The latest published topology (cheap: an `Arc` clone).
    pub fn topology(&self) -> Arc<Snapshot> {
        self.topology.borrow().clone()
    }

    /// A receiver of every new topology, for waiting on a change (`changed()`).
    pub fn topology_watch(&self) -> tokio::sync::watch::Receiver<Arc<Snapshot>> {
        self.topology.clone()
    }

    /// Statements queued for or running on each server's slots (the router's `queued`).
    pub fn queued(&self) -> Vec<usize> {
        self.pools
            .iter()
            .map(|p| p.slots().waiting() + p.slots().in_use() as usize)
            .collect()
    }
}

/// The routing settings of `topology::route`, from the config.
pub fn route_config(config: &Config) -> crate::topology::RouteConfig {
    crate::topology::RouteConfig {
        read_write_split: config.read_write_split,
        primary_reads: config.primary_reads,
        read_your_writes: config.read_your_writes,
        gtid_wait_timeout: config.gtid_wait_timeout,
    }
}

/// The monitor's settings and its targets (one per server, with the monitor's account).
pub fn monitor_settings(
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
            password: password.clone(),
            connect_timeout: config.connect_timeout.min(config.monitor_interval),
            max_payload: 16 << 20,
            tls: backend_tls.clone(),
            identity: Default::default(),
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

pub fn pool_settings(config: &Config) -> PoolSettings {
    PoolSettings {
        pool_size: initial_pool_size(config),
        max_backend_connections: config.max_backend_connections,
        server_lifetime: config.server_lifetime,
    }
}

/// Where a user's statements run on server 0 (the only one with one server), and with
/// which credentials.
pub fn backend_target(config: &Config, user: &UserConfig, ctx: &Context) -> BackendTarget {
    backend_target_for(config, user, ctx, 0)
}

/// A user's target on server `index` (`Config::endpoints`; server 0 if out of range).
pub fn backend_target_for(
    config: &Config,
    user: &UserConfig,
    ctx: &Context,
    index: usize,
) -> BackendTarget {
    let (name, password) = user.backend_credentials(config);
    let endpoints = config.endpoints();
    BackendTarget {
        addr: endpoints.get(index).unwrap_or(&endpoints[0]).clone(),
        user: name.to_string(),
        password: password.to_string(),
        connect_timeout: config.connect_timeout,
        max_payload: (config.max_allowed_packet as usize).max(16 << 20) * 2,
        tls: ctx.backend_tls.clone(),
        identity: ctx.identity.clone(),
    }
}

/// The group `min_idle` warms before any client has connected: the first user's backend
/// account, the capabilities mysql_async (the loadgen's driver) asks for (multi-statements,
/// multi-results, DEPRECATE_EOF, LOCAL_FILES) as far as sluice offers them, and
/// utf8mb4_general_ci. Once clients come, the pool follows the group that last needed a new
/// connection.
const UTF8MB4_GENERAL_CI: u8 = 45;

pub fn default_group(ctx: &Context, index: usize) -> Option<(PoolKey, BackendTarget)> {
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
    };
    Some((key, target))
}

/// `auto` starts at `min_pool_size` and lets the limiter (`autosize`) find the knee.
pub fn initial_pool_size(config: &Config) -> u32 {
    match config.pool_size {
        PoolSize::Fixed(n) => n,
        // Before the pool knows the server: a fixed cap, or none yet.
        PoolSize::Auto => {
            let cap = config.max_backend_connections.fixed().unwrap_or(u32::MAX);
            config.pool_bounds(cap).0
        }
    }
}
