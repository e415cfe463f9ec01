//! `Proxy::bind`: learns the backend's greeting, binds the listener, runs the accept loop and
//! the pool maintenance, and shuts all of it down in order.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio_util::task::TaskTracker;

use crate::config::{Config, ConfigError, Endpoint};
use crate::conn::client::HandshakeContext;
use crate::conn::server_info::{ServerInfo, ServerInfoCell};
use crate::context::Context;
use crate::pool::Pool;
use crate::protocol::Handshake;

/// Connection backlog: hundreds of clients may connect at once; the default 128 makes the
/// overflow wait a SYN retransmit (a full second).
const LISTEN_BACKLOG: u32 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}{}", in_use_hint(source))]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] crate::conn::tls::TlsError),
    /// auth_user cannot log in or lacks the grant (auth_source = server | both).
    #[error("accounts from the server: {0}")]
    Accounts(#[from] crate::accounts::LoadError),
}

/// What to do about "address in use": the usual cause is a second sluice on the same port.
fn in_use_hint(source: &std::io::Error) -> &'static str {
    if source.kind() == std::io::ErrorKind::AddrInUse {
        " (another process listens there; several sluice processes can share the client port \
         only when every one of them sets reuse_port = true, and admin_listen and \
         metrics_listen each need a port of their own)"
    } else {
        ""
    }
}

pub struct Proxy;

/// A running proxy. Dropping it does not stop it; call `shutdown`.
pub struct ProxyHandle {
    ctx: Arc<Context>,
    local_addr: SocketAddr,
    tracker: TaskTracker,
    admin_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
}

impl Proxy {
    /// Starts sluice on the current tokio runtime.
    pub async fn bind(config: Config) -> Result<ProxyHandle, StartError> {
        config.validate()?;
        // Loaded before anything starts, so a bad certificate fails start-up, not each client.
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(tokio_rustls::TlsAcceptor::from(
                crate::conn::tls::load_server_config(cert, key)?,
            )),
            _ => None,
        };
        let backend_tls = crate::conn::tls::load_backend_tls(
            config.backend_tls,
            config.backend_tls_ca.as_deref(),
            &config.backend,
        )?;
        let greeting = probe_backend(
            &config.endpoints()[0],
            config.connect_timeout.min(Duration::from_secs(3)),
        )
        .await;
        let server = Arc::new(ServerInfoCell::default());
        match &greeting {
            Some(hs) => {
                server.learn(&ServerInfo::from_handshake(hs));
            }
            None => {
                tracing::warn!(backend = %config.backend, "backend not reachable at start-up: clients get errors until it is, and a stand-in greeting until the first backend connection");
            }
        }
        let handshake = HandshakeContext {
            server: server.clone(),
            version_override: config.server_version.clone().map(String::into_bytes),
            rsa: OnceLock::new(),
            sha2_cache: Mutex::new(Default::default()),
            tls,
            auth_failures: Default::default(),
            accounts: crate::accounts::Directory::new(Arc::new(
                crate::conn::account_table::AccountTable::new(backend_tls.clone()),
            )),
        };
        check_accounts(&handshake, &config).await?;
        let listen = config.listen;
        let listener =
            bind_listener(listen, config.reuse_port).map_err(|source| StartError::Listen {
                addr: listen,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: listen,
            source,
        })?;
        let reachable = greeting.is_some();
        // With several servers (or the split on) the monitor finds the roles; with one, that
        // server is the writer and nothing is monitored.
        let topology = config.uses_topology().then(|| {
            let (settings, connect) =
                crate::context::monitor_settings(&config, backend_tls.clone());
            crate::topology::task::spawn(settings, connect).0
        });
        let instance_id = config.instance_id;
        let ctx = Context::new(config, handshake, server, backend_tls, topology);
        // Before the accept loop starts, so every client id carries it.
        ctx.registry.set_instance_id(instance_id);
        for (index, pool) in ctx.pools().iter().enumerate() {
            let Some((key, target)) = crate::context::default_group(&ctx, index) else {
                break;
            };
            if reachable || index > 0 {
                // The first user's login lane, opened now: it also reads the server's
                // max_connections, which `max_backend_connections = auto` is derived from.
                let open = pool.open_control(&key, &target);
                let _ = tokio::time::timeout(Duration::from_secs(3), open).await;
            }
            pool.set_warm_group(key, target);
        }
        let (admin_addr, metrics_addr) = spawn_consoles(&ctx).await?;
        let tracker = TaskTracker::new();
        tracker.spawn(accept_loop(ctx.clone(), listener, tracker.clone()));
        tokio::spawn(maintenance(ctx.clone()));
        for index in 0..ctx.pools().len() {
            tokio::spawn(crate::autosize::run(ctx.clone(), index));
        }
        tracing::info!(%local_addr, backend = %ctx.config().backend, "sluice listening");
        Ok(ProxyHandle {
            ctx,
            local_addr,
            tracker,
            admin_addr,
            metrics_addr,
        })
    }
}

/// With accounts from the server: auth_user must log in and read the account table, or
/// sluice does not start (the error names the GRANT to run). A server that does not answer
/// yet is only warned about: logins of server accounts are refused until it does.
async fn check_accounts(handshake: &HandshakeContext, config: &Config) -> Result<(), StartError> {
    if !config.auth_source().uses_server() {
        return Ok(());
    }
    match handshake.accounts.check_service(config).await {
        Ok(view) => {
            tracing::info!(
                service_account = %view.service_account,
                sluice_seen_as = %view.sluice_host.shown(),
                "reading accounts from the server's {}", view.flavor.table()
            );
            Ok(())
        }
        Err(e) if e.is_configuration() => Err(StartError::Accounts(e)),
        Err(e) => {
            tracing::warn!(
                "cannot read the server's accounts yet: {e}; their logins are refused until it can"
            );
            Ok(())
        }
    }
}

/// The admin console and the metrics endpoint, when configured. Outside the task tracker:
/// the drain must not wait for an operator's open admin session.
async fn spawn_consoles(
    ctx: &Arc<Context>,
) -> Result<(Option<SocketAddr>, Option<SocketAddr>), StartError> {
    let config = ctx.config();
    let listen_err = |addr| move |source| StartError::Listen { addr, source };
    let admin = match config.admin_listen {
        Some(addr) => Some(
            crate::admin::spawn(ctx.clone(), addr)
                .await
                .map_err(listen_err(addr))?,
        ),
        None => None,
    };
    let metrics = match config.metrics_listen {
        Some(addr) => Some(
            crate::metrics::spawn(ctx.clone(), addr)
                .await
                .map_err(listen_err(addr))?,
        ),
        None => None,
    };
    Ok((admin, metrics))
}

impl ProxyHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Where the admin console listens, if `admin_listen` is set.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Where `/metrics` is served, if `metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Resolves when shutdown has been requested from inside (the admin SHUTDOWN command);
    /// the owner then calls `shutdown` to drain.
    pub async fn wait_shutdown(&self) {
        self.ctx.shutdown.cancelled().await
    }

    /// Stops accepting, lets running statements finish until `shutdown_timeout`, then ends
    /// every session with an ERR and closes the backends.
    pub async fn shutdown(self) {
        let deadline = self.ctx.config().shutdown_timeout;
        self.ctx.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(deadline, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("drain deadline passed; closing the remaining sessions");
            self.ctx.hard_stop.cancel();
            self.ctx.pools().iter().for_each(Pool::close_all);
            let _ = tokio::time::timeout(Duration::from_secs(5), self.tracker.wait()).await;
        }
        self.ctx.pools().iter().for_each(Pool::close_all);
        tracing::info!("sluice stopped");
    }
}

/// The client listener. `reuse_port` (SO_REUSEPORT) lets several sluice processes on one
/// host listen on the same port, the kernel spreading connections over them; without it a
/// second process gets "address in use" (SO_REUSEADDR only allows a restart over sockets
/// in TIME_WAIT, never two listeners).
fn bind_listener(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

async fn accept_loop(ctx: Arc<Context>, listener: TcpListener, tracker: TaskTracker) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let accepted = tokio::select! {
            // Shutdown first: once it is requested, no connection waiting in the backlog
            // may still be taken in.
            biased;
            _ = ctx.shutdown.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((socket, _)) => {
                backoff = Duration::from_millis(10);
                tracker.spawn(crate::session::serve(ctx.clone(), socket));
            }
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Closes backends idle past `server_idle_timeout`, pings idle ones every
/// `health_check_interval`, and keeps `min_idle` open (at start, after an outage, after
/// idle or lifetime closes).
async fn maintenance(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since_check = Duration::ZERO;
    let mut since_globals = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = ctx.shutdown.cancelled() => return,
        }
        let config = ctx.config();
        for pool in ctx.pools() {
            pool.close_idle_older_than(config.server_idle_timeout, config.min_idle);
            pool.warm_up(config.min_idle);
        }
        since_check += Duration::from_secs(1);
        // 0 disables the checks (as documented).
        if !config.health_check_interval.is_zero() && since_check >= config.health_check_interval {
            since_check = Duration::ZERO;
            for pool in ctx.pools() {
                let pool = pool.clone();
                tokio::spawn(async move { pool.check_idle().await });
            }
        }
        since_globals += Duration::from_secs(1);
        if !config.globals_check_interval.is_zero()
            && since_globals >= config.globals_check_interval
        {
            since_globals = Duration::ZERO;
            for (index, pool) in ctx.pools().iter().enumerate() {
                if let Some((key, target)) = crate::context::default_group(&ctx, index) {
                    let pool = pool.clone();
                    tokio::spawn(async move { pool.watch_globals(&key, &target).await });
                }
            }
        }
    }
}

/// Reads the backend's greeting to learn its version string, capabilities and collation.
async fn probe_backend(addr: &Endpoint, timeout: Duration) -> Option<Handshake> {
    let probe = async {
        let mut stream = crate::conn::PacketStream::connect(
            addr,
            1 << 20,
            crate::conn::stream::CLIENT_READ_CHUNK,
        )
        .await
        .ok()?;
        let span = stream.next_packet().await.ok()??;
        let hs = Handshake::decode(&stream.payload(&span)).ok();
        stream.shutdown().await;
        hs
    };
    tokio::time::timeout(timeout, probe).await.ok().flatten()
}
