//! [`LocalServer`]: a throwaway MariaDB/MySQL in a temp dir, pinned, on a loopback port.
//!
//! Lifecycle: `start` initialises a fresh datadir and waits until the server greets;
//! `kill`/`stop`/`restart` keep the datadir; `Drop` kills the process and removes the dir.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::binary::{self, Flavor};
use crate::datadir::{init_datadir, init_sql};
use crate::error::tail_of;
use crate::greeting::{read_greeting, GreetingError};
use crate::spawn::{spawn, SpawnOptions};
use crate::{affinity, Error};

/// How long a start or restart may take before we give up (a loaded 2-core box is slow).
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a SIGTERM shutdown may take before we fall back to SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts with a fresh free port when the picked one was taken in the meantime.
const PORT_ATTEMPTS: usize = 3;

/// The user, password and database every [`LocalServer`] creates.
pub const BENCH_USER: &str = "bench";
/// Password of [`BENCH_USER`].
pub const BENCH_PASSWORD: &str = "bench";
/// Database created for [`BENCH_USER`].
pub const BENCH_DB: &str = "bench";

/// What server to start and how.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Server binary; default: `mariadbd`, then `mysqld`, on PATH and in the sbin dirs.
    pub binary: Option<PathBuf>,
    /// CPUs to pin the server to; default: not pinned.
    pub cpus: Option<Vec<usize>>,
    /// Loopback port; default: a free one.
    pub port: Option<u16>,
    /// `max_connections`; default 2000. `back_log` is set to at least this too.
    pub max_connections: u32,
    /// `innodb_buffer_pool_size` in MiB; default 256, which holds the 200k-row bench table.
    pub buffer_pool_mb: u32,
    /// More server options, e.g. `--thread-handling=pool-of-threads`; appended last.
    pub extra_args: Vec<String>,
    /// Write a binary log (`log-bin` in the datadir); default off (`skip-log-bin`).
    /// Replication needs it; see [`crate::replication`].
    pub binlog: bool,
    /// More statements for the init file, which the server runs at every start with the
    /// binary log off for the session (so they never become replicated transactions).
    /// One statement each, without the trailing `;` and without newlines.
    pub init_sql: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            binary: None,
            cpus: None,
            port: None,
            max_connections: 2000,
            buffer_pool_mb: 256,
            extra_args: Vec::new(),
            binlog: false,
            init_sql: Vec::new(),
        }
    }
}

/// A private server process with its own datadir. Never outlives this value.
#[derive(Debug)]
pub struct LocalServer {
    binary: PathBuf,
    flavor: Flavor,
    version: String,
    port: u16,
    settings: Vec<(String, String)>,
    cpus: Mutex<Option<Vec<usize>>>,
    log: PathBuf,
    out_log: PathBuf,
    child: Option<Child>,
    pid: u32,
    // Last: dropped after the process is dead.
    dir: Option<tempfile::TempDir>,
}

impl LocalServer {
    /// Initialises a fresh datadir, starts the server and waits until it answers.
    /// Blocking; takes a few seconds (mostly `mariadb-install-db`).
    pub fn start(opts: ServerOptions) -> Result<LocalServer, Error> {
        let binary = binary::find_server_binary(opts.binary.as_deref())?;
        let (flavor, version_line) = binary::probe(&binary)?;
        raise_nofile_limit();
        sweep_orphans();
        let dir = tempfile::Builder::new()
            .prefix("dbkit-")
            .tempdir()
            .map_err(|e| Error::io("creating the server temp dir", e))?;
        // Lets a later start remove this dir if our process is SIGKILLed (PDEATHSIG takes
        // the server down, but nobody is left to delete the files).
        let _ = std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string());
        let datadir = dir.path().join("data");
        init_datadir(&binary, flavor, &datadir, dir.path())?;
        let init_file = dir.path().join("init.sql");
        std::fs::write(&init_file, init_sql(flavor, &version_line, &opts.init_sql))
            .map_err(|e| Error::io("writing the init file", e))?;

        let mut last_err = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = match opts.port {
                Some(p) => p,
                None => free_port()?,
            };
            let mut server = LocalServer {
                settings: server_settings(flavor, dir.path(), &init_file, port, &opts),
                binary: binary.clone(),
                flavor,
                version: String::new(),
                port,
                cpus: Mutex::new(opts.cpus.clone()),
                log: dir.path().join("error.log"),
                out_log: dir.path().join("server.out"),
                child: None,
                pid: 0,
                dir: None,
            };
            match server.launch() {
                Ok(()) => {
                    server.dir = Some(dir);
                    return Ok(server);
                }
                Err(e) => {
                    server.kill();
                    let port_taken = tail_of(&server.log, 4096).contains("Address already in use");
                    if opts.port.is_some() || !port_taken {
                        return Err(keep_log_in_error(e, &server.log));
                    }
                    // Remove the old log so the next attempt's failure is judged on its own.
                    let _ = std::fs::remove_file(&server.log);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or(Error::Timeout {
            what: "finding a free port",
            secs: 0,
            log: PathBuf::new(),
        }))
    }

    /// Spawns the server process with the recorded settings and waits for its greeting.
    fn launch(&mut self) -> Result<(), Error> {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--no-defaults").args(self.args());
        let out = std::fs::File::create(&self.out_log)
            .map_err(|e| Error::io("creating the server output file", e))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io("cloning the server output file", e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let cpus = self.cpus.lock().map(|c| c.clone()).unwrap_or(None);
        let child = spawn(
            cmd,
            SpawnOptions {
                cpus,
                new_process_group: true,
            },
        )
        .map_err(|e| Error::Start {
            binary: self.binary.clone(),
            detail: format!("spawn failed: {e}"),
            log: self.log.clone(),
        })?;
        self.pid = child.id();
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(Error::Start {
                        binary: self.binary.clone(),
                        detail: format!(
                            "the server exited with {status}; log tail:\n{}{}",
                            tail_of(&self.log, 2000),
                            tail_of(&self.out_log, 1000)
                        ),
                        log: self.log.clone(),
                    });
                }
            }
            match read_greeting(self.addr(), Duration::from_secs(2)) {
                Ok(g) => {
                    self.version = g.version().to_string();
                    return Ok(());
                }
                // Refusals such as "too many connections" mean it is up.
                Err(GreetingError::Refused { .. }) if !self.version.is_empty() => return Ok(()),
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "the server greeting",
                    secs: READY_TIMEOUT.as_secs(),
                    log: self.log.clone(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn args(&self) -> Vec<String> {
        self.settings
            .iter()
            .map(|(k, v)| {
                if k.starts_with("--") {
                    k.clone() // an extra arg, passed verbatim
                } else if v.is_empty() {
                    format!("--{k}")
                } else {
                    format!("--{k}={v}")
                }
            })
            .collect()
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `mysql://bench:bench@127.0.0.1:PORT/bench`.
    pub fn url(&self) -> String {
        format!(
            "mysql://{BENCH_USER}:{BENCH_PASSWORD}@127.0.0.1:{}/{BENCH_DB}",
            self.port
        )
    }

    /// Process id of the server (the last one, if it is not running).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server binary in use.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// MariaDB or MySQL.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// Server version from its greeting, e.g. `10.11.19-MariaDB-0+deb12u1`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The exact server options used, as `(name, value)`; an empty value is a bare flag.
    /// Extra args appear with their full text as the name.
    pub fn settings(&self) -> &[(String, String)] {
        &self.settings
    }

    /// Sets a server option for the next (re)start, replacing any earlier value of it (also
    /// one given verbatim in `extra_args`); an empty value is a bare flag. For example
    /// `set_setting("read-only", "OFF")` before [`restart`](Self::restart), as an operator
    /// edits `my.cnf` after a promotion.
    pub fn set_setting(&mut self, name: &str, value: &str) {
        let verbatim = format!("--{name}");
        let verbatim_eq = format!("--{name}=");
        self.settings
            .retain(|(k, _)| k != name && k != &verbatim && !k.starts_with(&verbatim_eq));
        self.settings.push((name.to_string(), value.to_string()));
    }

    /// The server's error log (kept while the server value lives).
    pub fn error_log(&self) -> PathBuf {
        self.log.clone()
    }

    /// The temp dir holding datadir, socket, logs and init file.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// SIGKILL and wait; the datadir stays for [`restart`](Self::restart).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (SIGKILL after 60 s); the datadir stays.
    pub fn stop(&mut self) {
        // A stopped (SIGSTOPped) server cannot act on SIGTERM. Signal before taking the
        // child: `signal` only targets a child we still own.
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let Some(mut child) = self.child.take() else {
            return;
        };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts the server again on the same port and datadir (stopping it first if it runs)
    /// and waits until it answers.
    pub fn restart(&mut self) -> Result<(), Error> {
        self.stop();
        self.launch()
    }

    /// SIGSTOP: the server freezes with its connections open (simulates a hung backend).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: libc::c_int) {
        if self.child.is_some() && self.pid != 0 {
            // SAFETY: plain kill(2) on our own child's pid, which we have not reaped yet.
            unsafe { libc::kill(self.pid as libc::pid_t, sig) };
        }
    }

    /// Re-pins every server thread to `cpus` (also used for later restarts).
    pub fn set_cpus(&self, cpus: &[usize]) -> Result<(), Error> {
        if let Ok(mut c) = self.cpus.lock() {
            *c = Some(cpus.to_vec());
        }
        if self.child.is_some() {
            affinity::pin_process(self.pid, cpus)?;
        }
        Ok(())
    }

    /// The CPUs the server is pinned to, if any.
    pub fn cpus(&self) -> Option<Vec<usize>> {
        self.cpus.lock().ok().and_then(|c| c.clone())
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.resume();
        self.kill();
        // `dir` (a TempDir) is dropped after this and removes everything.
    }
}

/// The server options, in command-line order.
fn server_settings(
    flavor: Flavor,
    dir: &Path,
    init_file: &Path,
    port: u16,
    opts: &ServerOptions,
) -> Vec<(String, String)> {
    let p = |path: &Path| path.display().to_string();
    let mut s: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| s.push((k.to_string(), v));
    if is_root() {
        set("user", "root".into());
    }
    set("datadir", p(&dir.join("data")));
    set("socket", p(&dir.join("mysql.sock")));
    // A private tmpdir: servers started side by side must not share temporary-table files.
    set("tmpdir", p(&dir.join("tmp")));
    set("pid-file", p(&dir.join("mysqld.pid")));
    set("log-error", p(&dir.join("error.log")));
    set("init-file", p(init_file));
    set("port", port.to_string());
    set("bind-address", "127.0.0.1".into());
    set("max-connections", opts.max_connections.to_string());
    // The accept queue must hold a burst of every client connecting at once.
    set("back-log", opts.max_connections.max(2000).to_string());
    set("max-connect-errors", "1000000".into());
    set(
        "innodb-buffer-pool-size",
        format!("{}M", opts.buffer_pool_mb.max(8)),
    );
    set("max-allowed-packet", "64M".into());
    set("performance-schema", "OFF".into());
    set("skip-name-resolve", String::new());
    if opts.binlog {
        // A bare name puts the logs in the datadir, so they survive a restart with it.
        set("log-bin", "binlog".into());
    } else {
        set("skip-log-bin", String::new());
    }
    // A throwaway server: durability costs seeding time and measures nothing we care about.
    set("innodb-flush-log-at-trx-commit", "2".into());
    if flavor == Flavor::MySql {
        // Otherwise X Plugin binds 33060 and two servers collide.
        set("mysqlx", "OFF".into());
    }
    for extra in &opts.extra_args {
        s.push((extra.clone(), String::new()));
    }
    s
}

/// Holds the pid of the process that owns a dbkit temp dir.
const OWNER_FILE: &str = "owner.pid";

/// Removes `dbkit-*` temp dirs whose owning process no longer exists.
fn sweep_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_name().to_string_lossy().starts_with("dbkit-") {
            continue;
        }
        // No owner file: an older dbkit or a dir still being set up; leave it alone.
        let Some(owner) = std::fs::read_to_string(path.join(OWNER_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{owner}")).exists() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::io("finding a free loopback port", e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::io("reading the free port", e))
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

/// Thousands of connections need thousands of descriptors; servers size `max_connections`
/// down silently when the limit is low. Raises this process's soft open-files limit to the
/// hard one (children inherit it) and returns the soft limit now in force (0 if unknown).
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    lim.rlim_cur
}

/// The temp dir is removed on failure, so copy the error log next to it (a single file) and
/// point the error at the copy.
fn keep_log_in_error(e: Error, log: &Path) -> Error {
    let kept = std::env::temp_dir().join(format!(
        "dbkit-failed-{}-{}.log",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    ));
    let log = if std::fs::copy(log, &kept).is_ok() {
        kept
    } else {
        log.to_path_buf()
    };
    match e {
        Error::Timeout { what, secs, .. } => Error::Timeout { what, secs, log },
        Error::Start { binary, detail, .. } => Error::Start {
            binary,
            detail,
            log,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_cover_the_benchmark_requirements() {
        let opts = ServerOptions {
            extra_args: vec!["--thread-cache-size=64".into()],
            ..ServerOptions::default()
        };
        let s = server_settings(
            Flavor::MariaDb,
            Path::new("/tmp/x"),
            Path::new("/tmp/x/init.sql"),
            3307,
            &opts,
        );
        let get = |k: &str| s.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("max-connections"), Some("2000"));
        assert_eq!(get("back-log"), Some("2000"));
        assert_eq!(get("performance-schema"), Some("OFF"));
        assert_eq!(get("skip-name-resolve"), Some(""));
        assert_eq!(get("max-allowed-packet"), Some("64M"));
        assert_eq!(get("innodb-buffer-pool-size"), Some("256M"));
        assert_eq!(get("bind-address"), Some("127.0.0.1"));
        assert_eq!(get("port"), Some("3307"));
        assert_eq!(get("mysqlx"), None);
        assert_eq!(get("log-bin"), None);
        let binlog = ServerOptions {
            binlog: true,
            ..ServerOptions::default()
        };
        let b = server_settings(
            Flavor::MariaDb,
            Path::new("/x"),
            Path::new("/x/i"),
            1,
            &binlog,
        );
        assert!(b.iter().any(|(k, v)| k == "log-bin" && v == "binlog"));
        assert!(!b.iter().any(|(k, _)| k == "skip-log-bin"));
        assert_eq!(
            s.last().map(|(k, _)| k.as_str()),
            Some("--thread-cache-size=64")
        );
    }
}
