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

pub struct Context {
    config: RwLock<Arc<Config>>,
    pub pool: Pool,
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
}

impl Context {
    pub fn new(
        config: Config,
        handshake: HandshakeContext,
        server: Arc<crate::conn::server_info::ServerInfoCell>,
        backend_tls: Option<Arc<BackendTls>>,
    ) -> Arc<Context> {
        let stats = Arc::new(Stats::default());
        let pool = Pool::new(&pool_settings(&config), stats.clone(), server);
        let (paused, _) = tokio::sync::watch::channel(false);
        Arc::new(Context {
            config: RwLock::new(Arc::new(config)),
            pool,
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
        })
    }

    /// The config in force now (cheap: an `Arc` clone under a read lock).
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Swaps in a validated config and applies its live settings to the pool.
    pub fn replace_config(&self, config: Config) {
        let mut settings = pool_settings(&config);
        if config.pool_size == PoolSize::Auto {
            // The limiter owns the size: keep what it found (within the new bounds).
            let cap = self.pool.cap_for(config.max_backend_connections);
            let (min, max) = config.pool_bounds(cap);
            settings.pool_size = self.pool.slots().size().clamp(min, max);
        }
        self.pool.apply(&settings);
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }
}

pub fn pool_settings(config: &Config) -> PoolSettings {
    PoolSettings {
        pool_size: initial_pool_size(config),
        max_backend_connections: config.max_backend_connections,
        server_lifetime: config.server_lifetime,
    }
}

/// Where a user's statements run, and with which credentials.
pub fn backend_target(config: &Config, user: &UserConfig, ctx: &Context) -> BackendTarget {
    let (name, password) = user.backend_credentials(config);
    BackendTarget {
        addr: config.backend.clone(),
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

pub fn default_group(ctx: &Context) -> Option<(PoolKey, BackendTarget)> {
    use crate::protocol::{flags, Capabilities};
    let config = ctx.config();
    let user = config.users.first()?;
    let target = backend_target(&config, user, ctx);
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
