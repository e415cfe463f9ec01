//! Shared test fixtures: the MariaDB under test, an in-process sluice, client options.
//!
//! Tests run as deployments do: sluice logs in to the backend with an application account
//! ([`APP_USER`]) that has grants on its own databases only (`t_*`, `bench`, `test`,
//! `client_test_db`), no global privilege. Setup that needs more (creating that account,
//! dropping and creating databases) uses the server's privileged account through
//! [`direct_root`]; `privileged.rs` covers what a privileged backend account changes.

#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use sluice::config::PoolSize;
use sluice::{Config, Proxy, ProxyHandle};

/// The application account sluice (and every direct comparison run) logs in to the backend
/// with: all privileges on its own databases, nothing global.
pub const APP_USER: &str = "sluice_app";
/// Password of [`APP_USER`].
pub const APP_PASSWORD: &str = "sluice-app-pw";

/// The service account sluice reads the server's accounts with (`auth_user`): SELECT on
/// `mysql.global_priv` and nothing else.
pub const AUTH_USER: &str = "sluice_auth";
/// Password of [`AUTH_USER`].
pub const AUTH_PASSWORD: &str = "sluice-auth-pw";

/// What [`APP_USER`] may use: `GRANT ALL` on each (`_` escaped, so `t\_%` is `t_` + anything).
const APP_DATABASES: &[&str] = &["t\\_%", "bench", "test", "client\\_test\\_db"];

/// The server every test in this binary shares (its account is the privileged one; tests log
/// in as [`APP_USER`], created here on first use).
pub fn server() -> &'static dbkit::TestServer {
    static APP_ACCOUNT: OnceLock<()> = OnceLock::new();
    let s = dbkit::test_server();
    APP_ACCOUNT.get_or_init(|| {
        // Called from sync and async code alike, in whichever runtime: a thread of its own
        // with a runtime of its own creates the account once.
        let (addr, user, password) = (backend_addr_of(s), s.user.clone(), s.password.clone());
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime for the account setup")
                .block_on(create_app_account(&addr, &user, &password))
        })
        .join()
        .expect("creating the application account");
    });
    s
}

fn backend_addr_of(s: &dbkit::TestServer) -> String {
    format!("{}:{}", s.host, s.port)
}

/// Creates (or re-grants) [`APP_USER`] on the server at `addr`, logged in as a privileged
/// `root_user`.
pub async fn create_app_account(addr: &str, root_user: &str, root_password: &str) {
    let addr: std::net::SocketAddr = addr.parse().expect("backend address");
    let mut c = Conn::new(opts_at(addr, root_user, root_password, None))
        .await
        .expect("privileged setup connection");
    for host in ["%", "localhost"] {
        let account = format!("'{APP_USER}'@'{host}'");
        c.query_drop(format!(
            "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '{APP_PASSWORD}'"
        ))
        .await
        .expect("CREATE USER");
        for db in APP_DATABASES {
            c.query_drop(format!("GRANT ALL ON `{db}`.* TO {account}"))
                .await
                .expect("GRANT");
        }
    }
    // The service account of `auth_source = server`, with the one grant it needs.
    c.query_drop(format!(
        "CREATE USER IF NOT EXISTS '{AUTH_USER}'@'%' IDENTIFIED BY '{AUTH_PASSWORD}'"
    ))
    .await
    .expect("CREATE USER");
    c.query_drop(format!(
        "GRANT SELECT ON mysql.global_priv TO '{AUTH_USER}'@'%'"
    ))
    .await
    .expect("GRANT");
    c.disconnect().await.expect("disconnect");
}

/// A test that cannot run on this machine (a driver, tool or resource is missing). Under
/// `CI=true` that is a failure: CI installs everything (`.ci/run`), so a skip there hides a
/// broken install. Elsewhere the test says why and passes.
pub fn skip_or_fail(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("cannot run: {reason}; CI=true, so this is a failure (see .ci/run for the install)");
    }
    eprintln!("SKIPPED: {reason}");
}

pub fn backend_addr() -> String {
    let s = server();
    format!("{}:{}", s.host, s.port)
}

thread_local! {
    /// The harness variant in which sluice has no `users` list and reads the server's
    /// accounts (`auth_source = server`): [`config`] builds that config on this thread, and
    /// the `app`/`secret` logins of a sluice so configured become the application account's
    /// own ([`login_for`]). Set by `accounts_suite`, which runs existing tests under it.
    static ACCOUNTS_FROM_SERVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `test` in the variant with accounts from the server (see [`ACCOUNTS_FROM_SERVER`]).
pub fn with_accounts_from_server(test: fn()) {
    ACCOUNTS_FROM_SERVER.with(|v| v.set(true));
    let outcome = std::panic::catch_unwind(test);
    ACCOUNTS_FROM_SERVER.with(|v| v.set(false));
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Whether this thread runs the accounts-from-the-server variant.
pub fn accounts_from_server() -> bool {
    ACCOUNTS_FROM_SERVER.with(|v| v.get())
}

/// The login a test means by `user`/`password` through `proxy`: as given, or, when that
/// sluice reads only the server's accounts, the application account's own name for `app`
/// and its password for `secret`.
pub fn login_for<'a>(proxy: &ProxyHandle, user: &'a str, password: &'a str) -> (&'a str, &'a str) {
    let server_only = proxy.context().config().auth_source() == sluice::config::AuthSource::Server;
    if !server_only {
        return (user, password);
    }
    let user = if user == "app" { APP_USER } else { user };
    let password = if password == "secret" {
        APP_PASSWORD
    } else {
        password
    };
    (user, password)
}

/// A config for an in-process sluice in front of the test server, user `app`/`secret`
/// mapped to the application account [`APP_USER`] (or, in the variant, no users list and the
/// server's accounts: [`config_server_accounts`]).
pub fn config(pool_size: u32) -> Config {
    server();
    if accounts_from_server() {
        return config_server_accounts(pool_size);
    }
    config_for(backend_addr(), APP_USER, APP_PASSWORD, pool_size)
}

/// sluice with no `users` list, reading the server's accounts as [`AUTH_USER`]: clients log
/// in with their own server accounts (the application account among them).
pub fn config_server_accounts(pool_size: u32) -> Config {
    server();
    let mut cfg = config_for(backend_addr(), APP_USER, APP_PASSWORD, pool_size);
    cfg.users.clear();
    cfg.auth_source = Some(sluice::config::AuthSource::Server);
    cfg.auth_user = Some(sluice::config::AuthUser {
        name: AUTH_USER.into(),
        password: sluice::config::Secret::new(AUTH_PASSWORD.into()),
    });
    cfg
}

/// Like [`config`], but sluice logs in to the backend with the server's privileged account
/// (for the tests of privileged paths only).
pub fn config_privileged(pool_size: u32) -> Config {
    let s = server();
    config_for(backend_addr(), &s.user, &s.password, pool_size)
}

pub async fn start(cfg: Config) -> ProxyHandle {
    init_logs();
    // A test run in the variant must not build a config of its own: it would not test it.
    assert!(
        !accounts_from_server() || cfg.auth_source() == sluice::config::AuthSource::Server,
        "a test run with accounts from the server started sluice with a users list"
    );
    Proxy::bind(cfg).await.expect("sluice starts")
}

pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Client options for sluice at `proxy` (never via a Unix socket: that would bypass it).
/// `user`/`password` as [`login_for`] reads them.
pub fn opts(proxy: &ProxyHandle, user: &str, password: &str, db: Option<&str>) -> Opts {
    let (user, password) = login_for(proxy, user, password);
    opts_at(proxy.local_addr(), user, password, db).into()
}

pub async fn connect(proxy: &ProxyHandle, db: Option<&str>) -> Conn {
    Conn::new(opts(proxy, "app", "secret", db))
        .await
        .expect("connect through sluice")
}

/// A direct connection to the test server as the application account (to compare with
/// direct behaviour, and for setup an application could do itself).
pub async fn direct(db: Option<&str>) -> Conn {
    server();
    direct_as(APP_USER, APP_PASSWORD, db).await
}

/// A direct connection with the server's privileged account: setup only (databases, accounts,
/// server variables), never what a test compares.
pub async fn direct_root(db: Option<&str>) -> Conn {
    let s = server();
    direct_as(&s.user, &s.password, db).await
}

async fn direct_as(user: &str, password: &str, db: Option<&str>) -> Conn {
    let s = server();
    let o: Opts = OptsBuilder::default()
        .ip_or_hostname(s.host.clone())
        .tcp_port(s.port)
        .user(Some(user))
        .pass(Some(password))
        .db_name(db)
        .prefer_socket(false)
        .into();
    Conn::new(o).await.expect("direct connection")
}

/// Creates (fresh) database `name` on the test server (`t_...`, so the application account
/// has all privileges on it).
pub async fn fresh_db(name: &str) {
    let mut c = direct_root(None).await;
    c.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
        .await
        .unwrap();
    c.query_drop(format!("CREATE DATABASE `{name}`"))
        .await
        .unwrap();
    c.disconnect().await.unwrap();
}

/// The MySQL error code of a failed call.
pub fn code_of(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

pub fn state_of(e: &mysql_async::Error) -> Option<String> {
    match e {
        mysql_async::Error::Server(s) => Some(s.state.clone()),
        _ => None,
    }
}

/// Client options for any MySQL-protocol endpoint (sluice or a server) at `addr`.
pub fn opts_at(
    addr: std::net::SocketAddr,
    user: &str,
    password: &str,
    db: Option<&str>,
) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(password))
        .db_name(db)
        .prefer_socket(false)
        .max_allowed_packet(Some(64 << 20))
        .wait_timeout(Some(28800))
        .stmt_cache_size(0)
}

/// A config for an in-process sluice in front of any backend, user `app`/`secret` mapped to
/// `backend_user`/`backend_password`.
pub fn config_for(
    backend: String,
    backend_user: &str,
    backend_password: &str,
    pool_size: u32,
) -> Config {
    let mut cfg = Config::for_backend(backend, "app", "secret");
    cfg.users[0].backend_user = Some(backend_user.to_string());
    cfg.users[0].backend_password = Some(sluice::config::Secret::new(backend_password.to_string()));
    cfg.pool_size = PoolSize::Fixed(pool_size);
    cfg.max_backend_connections = cfg.max_backend_connections.max(pool_size);
    cfg.queue_timeout = Duration::from_secs(10);
    cfg
}

/// A private MariaDB (not the shared one), for tests that kill or restart it.
pub async fn private_server() -> dbkit::LocalServer {
    private_server_with(Vec::new()).await
}

/// A private MariaDB started with extra server options (e.g. `--ssl-cert=...`), with the
/// application account.
pub async fn private_server_with(extra_args: Vec<String>) -> dbkit::LocalServer {
    let server = tokio::task::spawn_blocking(|| {
        dbkit::LocalServer::start(dbkit::ServerOptions {
            buffer_pool_mb: 32,
            max_connections: 500,
            extra_args,
            ..Default::default()
        })
    })
    .await
    .expect("server start task")
    .unwrap_or_else(|e| panic!("dbkit could not start a private server: {e}"));
    add_app_account(&server).await;
    server
}

/// Creates the application account on a private server (logged in with its privileged
/// `bench` account).
pub async fn add_app_account(server: &dbkit::LocalServer) {
    create_app_account(
        &server.addr().to_string(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
    )
    .await;
}

/// A config for sluice in front of a private server, as the application account (which
/// [`private_server`] creates there).
pub fn config_for_local(server: &dbkit::LocalServer, pool_size: u32) -> Config {
    config_for(server.addr().to_string(), APP_USER, APP_PASSWORD, pool_size)
}

static WORKER_PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts panics on tokio worker threads (where sluice's sessions run), so a test can assert
/// that hostile input never panicked a session task, which tokio would otherwise swallow.
pub fn count_worker_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Recent tokio names its workers "tokio-rt-worker", older ones "tokio-runtime-worker".
            let name = std::thread::current().name().map(str::to_owned);
            if matches!(
                name.as_deref(),
                Some("tokio-rt-worker") | Some("tokio-runtime-worker")
            ) {
                WORKER_PANICS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Panics seen on tokio worker threads since the process started (see `count_worker_panics`).
pub fn worker_panics() -> usize {
    WORKER_PANICS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Polls `cond` every 20 ms until it holds or `within` passes; returns whether it held.
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every session is gone and no execution slot is held (waits up to `within` for both).
pub async fn assert_drained(proxy: &ProxyHandle, within: std::time::Duration) {
    let ctx = proxy.context().clone();
    assert!(
        eventually(within, || ctx.registry.is_empty()).await,
        "{} client sessions still registered",
        ctx.registry.len()
    );
    assert!(
        eventually(within, || ctx.pool.snapshot().slots_in_use == 0).await,
        "execution slots still in use: {}",
        ctx.pool.snapshot().slots_in_use
    );
}

/// No tokio worker of this test binary panicked (sluice's tasks run on them).
pub fn assert_no_worker_panics() {
    assert_eq!(
        worker_panics(),
        0,
        "a tokio worker panicked (see the output above)"
    );
}

/// sluice at `proxy` still logs in a new client and answers it correctly.
pub async fn assert_still_serves(proxy: &ProxyHandle) {
    let mut c = connect(proxy, None).await;
    assert_eq!(
        c.query_first::<u32, _>("SELECT 41 + 1").await.unwrap(),
        Some(42)
    );
    c.disconnect().await.unwrap();
}
