//! HAProxy in TCP mode: the plain C relay the relay-cost goal measures sluice against, in the
//! same run.
//!
//! loadgen writes a minimal config of its own ([`config`]): `mode tcp`, one thread, loopback
//! only, no log lines (so nothing goes to syslog), no health checks, and timeouts far longer
//! than any level, so HAProxy does nothing but copy bytes. It is started and torn down as a
//! [`super::process::RelayProcess`], like the other relays.
//!
//! The same config with `busy-polling` in `global` is the busy-polling row
//! ([`super::relays::Relay::HaProxyBusy`]): HAProxy's pollers then always use a null timeout,
//! so it never sleeps between events, the trade sluice's `backend_busy_poll` makes only
//! while it waits for a reply.

use std::path::{Path, PathBuf};

use crate::programs::Program;

/// Connections HAProxy accepts (two sockets each); far above the experiment's 64 clients.
const MAXCONN: usize = 4096;

/// HAProxy, as loadgen finds and names it.
const HAPROXY: Program = Program {
    name: "haproxy",
    flag: "--haproxy-bin",
    install: "`scripts/install-test-deps.sh --overhead`, apt-get install haproxy",
    version_arg: "-v",
};

/// The HAProxy binary: `explicit` (`--haproxy-bin`), else `haproxy` on PATH, in /usr/sbin or
/// in /usr/local/sbin.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
    HAPROXY.find(explicit)
}

/// `haproxy -v`'s first line, e.g. `HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/`.
pub fn version(bin: &Path) -> String {
    HAPROXY.version(bin)
}

/// The config: relays `listen` to `backend` (both `host:port`), TCP mode, one thread; with
/// `busy_polling`, the global `busy-polling` keyword too (the pollers never sleep).
pub fn config(listen: &str, backend: &str, busy_polling: bool) -> String {
    let busy = if busy_polling {
        "    busy-polling\n"
    } else {
        ""
    };
    format!(
        "# Written by loadgen overhead: HAProxy as a plain TCP relay (the C baseline for relay cost).\n\
         global\n\
         \x20   nbthread 1\n\
         \x20   maxconn {MAXCONN}\n\
         {busy}\
         defaults\n\
         \x20   mode tcp\n\
         \x20   timeout connect 10s\n\
         \x20   timeout client 1h\n\
         \x20   timeout server 1h\n\
         listen relay\n\
         \x20   bind {listen}\n\
         \x20   server db {backend}\n"
    )
}

/// The command that runs HAProxy in the foreground (`-db`) on the config file `cfg`.
pub fn command(bin: &Path, cfg: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("-f").arg(cfg).arg("-db");
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_a_one_thread_tcp_relay_on_loopback_without_logging() {
        let cfg = config("127.0.0.1:41000", "127.0.0.1:3306", false);
        let lines: Vec<&str> = cfg.lines().map(str::trim).collect();
        for want in [
            "global",
            "nbthread 1",
            "mode tcp",
            "timeout client 1h",
            "timeout server 1h",
            "bind 127.0.0.1:41000",
            "server db 127.0.0.1:3306",
        ] {
            assert!(lines.contains(&want), "{want:?} missing:\n{cfg}");
        }
        // No log target, no health checks, no HTTP.
        assert!(!cfg.contains("log "), "{cfg}");
        assert!(!cfg.contains(" check"), "{cfg}");
        assert!(!cfg.contains("http"), "{cfg}");
        assert!(!cfg.contains("busy-polling"), "{cfg}");
    }

    #[test]
    fn the_busy_polling_config_adds_one_global_keyword() {
        let plain = config("127.0.0.1:41000", "127.0.0.1:3306", false);
        let busy = config("127.0.0.1:41000", "127.0.0.1:3306", true);
        let lines: Vec<&str> = busy.lines().collect();
        let global = lines.iter().position(|l| *l == "global").unwrap();
        let defaults = lines.iter().position(|l| *l == "defaults").unwrap();
        let at = lines.iter().position(|l| *l == "    busy-polling").unwrap();
        assert!(global < at && at < defaults, "{busy}");
        // Nothing else differs.
        let without: Vec<&str> = lines
            .into_iter()
            .filter(|l| *l != "    busy-polling")
            .collect();
        assert_eq!(without, plain.lines().collect::<Vec<_>>());
    }

    #[test]
    fn a_missing_explicit_binary_is_a_clear_error() {
        let err = find(Some(Path::new("/nonexistent/haproxy"))).unwrap_err();
        assert!(err.contains("--haproxy-bin"), "{err}");
    }
}
