//! [`test_server`]: one MySQL server per test process, shared by every test in it.
//!
//! `MYSQL_TEST_URL` wins when set (CI may start one server for all binaries); otherwise a
//! [`LocalServer`] is started on first use and killed by an `atexit` hook when the test
//! binary exits. If the binary is killed instead, `PR_SET_PDEATHSIG` takes the server down.

use std::sync::{Mutex, OnceLock};

use crate::server::{BENCH_DB, BENCH_PASSWORD, BENCH_USER};
use crate::{LocalServer, ServerOptions};

/// Where the tests' server is and how to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestServer {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// User with all privileges.
    pub user: String,
    /// Its password.
    pub password: String,
    /// `mysql://user:password@host:port/db`.
    pub url: String,
}

impl TestServer {
    /// Parses `mysql://user[:password]@host[:port][/db]`; the port defaults to 3306.
    pub fn from_url(url: &str) -> Result<TestServer, String> {
        let rest = url
            .strip_prefix("mysql://")
            .ok_or_else(|| format!("{url:?} does not start with mysql://"))?;
        let (auth, hostpart) = rest
            .rsplit_once('@')
            .ok_or_else(|| format!("{url:?} has no user@host part"))?;
        let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
        let hostport = hostpart.split(['/', '?']).next().unwrap_or("");
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("{url:?} has a bad port {p:?}"))?,
            ),
            None => (hostport, 3306),
        };
        if user.is_empty() || host.is_empty() {
            return Err(format!("{url:?} needs a user and a host"));
        }
        Ok(TestServer {
            host: host.to_string(),
            port,
            user: percent_decode(user),
            password: percent_decode(password),
            url: url.to_string(),
        })
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

static TEST_SERVER: OnceLock<TestServer> = OnceLock::new();
static LOCAL: Mutex<Option<LocalServer>> = Mutex::new(None);

extern "C" fn teardown_local() {
    // Dropping the LocalServer kills the process and removes its temp dir.
    if let Ok(mut guard) = LOCAL.lock() {
        guard.take();
    }
}

/// The server for this test process: `MYSQL_TEST_URL` if set, else a private local server
/// (64 MiB buffer pool, `max_connections` 4000) started on first call. Panics with the
/// reason (and the three ways out) if neither works: a test cannot run without a server.
pub fn test_server() -> &'static TestServer {
    TEST_SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("MYSQL_TEST_URL") {
            if !url.is_empty() {
                return TestServer::from_url(&url)
                    .unwrap_or_else(|e| panic!("MYSQL_TEST_URL is not usable: {e}"));
            }
        }
        let server = LocalServer::start(ServerOptions {
            buffer_pool_mb: 64,
            max_connections: 4000,
            ..ServerOptions::default()
        })
        .unwrap_or_else(|e| panic!("dbkit could not start a test server: {e}"));
        let info = TestServer {
            host: "127.0.0.1".into(),
            port: server.port(),
            user: BENCH_USER.into(),
            password: BENCH_PASSWORD.into(),
            url: server.url(),
        };
        debug_assert!(info.url.ends_with(BENCH_DB));
        if let Ok(mut guard) = LOCAL.lock() {
            *guard = Some(server);
        }
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe { libc::atexit(teardown_local) };
        info
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_and_partial_urls() {
        let t = TestServer::from_url("mysql://bench:p%40ss@127.0.0.1:3310/bench").expect("ok");
        assert_eq!(t.host, "127.0.0.1");
        assert_eq!(t.port, 3310);
        assert_eq!(t.user, "bench");
        assert_eq!(t.password, "p@ss");
        let t = TestServer::from_url("mysql://root@db").expect("ok");
        assert_eq!((t.port, t.password.as_str()), (3306, ""));
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(TestServer::from_url("postgres://a@b").is_err());
        assert!(TestServer::from_url("mysql://nohost").is_err());
        assert!(TestServer::from_url("mysql://a@b:notaport").is_err());
    }
}
