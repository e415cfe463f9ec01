//! The floor for the overhead experiment: a bare TCP relay that copies bytes both ways and
//! does nothing else, on the same kind of runtime as the sluice binary (tokio's multi-thread
//! runtime with its default worker count, one per CPU the process may use).
//!
//! Any proxy in front of MySQL pays for two extra loopback hops per query: a socket read and
//! a write each way, and the kernel's wake-up of whoever waits on the other end. On a
//! virtual machine those hops alone can cost more than a proxy's own logic. Measuring this
//! relay in the same run splits sluice's overhead into what any relay pays here and what
//! sluice adds on top (framing, pooling, session state).
//!
//! It runs as a process of its own (`loadgen relay`, a hidden subcommand that
//! [`command`] starts), so its CPU is measured exactly as HAProxy's and the sluice binary's
//! are: utime + stime of one process.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};

/// The command that runs the relay as a process of its own, listening on `listen` and
/// relaying to `backend` (`host:port`).
pub fn command(listen: SocketAddr, backend: &str) -> Result<std::process::Command> {
    let me = std::env::current_exe().context("finding loadgen's own executable")?;
    let mut cmd = std::process::Command::new(me);
    cmd.args([
        "relay",
        "--listen",
        &listen.to_string(),
        "--backend",
        backend,
    ]);
    Ok(cmd)
}

/// `loadgen relay`: relays until SIGTERM or SIGINT.
pub fn serve_process(listen: SocketAddr, backend: String) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .thread_name("relay")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen relay: building the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(listen, backend)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen relay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Accepts on `listen` and copies every connection to a fresh one to `backend`, until a
/// signal.
async fn serve(listen: SocketAddr, backend: String) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let (client, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
        };
        let backend = backend.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(&backend).await {
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (mut c, mut s) = (client, server);
                let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
            }
        });
    }
}
