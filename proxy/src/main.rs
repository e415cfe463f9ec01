//! The `sluice` binary: parse flags, load the config, run the proxy until a signal.

use clap::Parser;
use sluice::config::{config_docs_markdown, example_toml, Cli};
use sluice::{Config, Proxy};
use tokio::signal::unix::{signal, SignalKind};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.print_config_docs {
        print!("{}", config_docs_markdown());
        return Ok(());
    }
    if cli.print_example_config {
        print!("{}", example_toml());
        return Ok(());
    }
    let config = match Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: invalid configuration:\n{e}");
            std::process::exit(2);
        }
    };
    if cli.check_config {
        for w in config.warnings() {
            eprintln!("warning: {w}");
        }
        print!("{}", config.masked_toml());
        return Ok(());
    }
    init_tracing(&config);
    raise_fd_limit();
    for w in config.warnings() {
        tracing::warn!("{w}");
    }
    runtime(config.worker_threads.resolve())?.block_on(run(config))
}

/// One thread: tokio's current-thread scheduler, which wakes and polls a session without
/// the cross-thread queues and atomics of the multi-thread one, so each statement costs
/// fewer instructions (docs/benchmarks.md). More: the multi-thread one.
fn runtime(threads: u32) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads as usize);
        b
    };
    builder.enable_all().build()
}

async fn run(config: Config) -> anyhow::Result<()> {
    let handle = Proxy::bind(config).await?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => reload(&handle),
            _ = handle.wait_shutdown() => break,
        }
    }
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}

/// SIGHUP: re-read the file; an invalid one is rejected whole and the running config stays.
fn reload(handle: &sluice::ProxyHandle) {
    // The same path as the admin RELOAD: it logs each change and keeps restart-only settings.
    if let Err(e) = sluice::admin::actions::reload(handle.context()) {
        tracing::error!("SIGHUP: {e}");
    }
}

fn init_tracing(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match config.log_format {
        sluice::config::LogFormat::Json => builder.json().init(),
        sluice::config::LogFormat::Text => builder.init(),
    }
}

/// Every client is a socket: lift the soft open-files limit to the hard one.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!("could not raise the open-files limit");
            }
        }
    }
}

/// mimalloc: sessions allocate a few small buffers per statement (a pipelined member's
/// channel and packet), and mimalloc's thread-local free lists serve them in a fraction of
/// glibc's instructions (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
