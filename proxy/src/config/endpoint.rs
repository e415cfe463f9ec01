//! The `backend` setting, parsed once when the setting is read: `host:port` over TCP, or a Unix
//! socket on this host (`unix:/path` or an absolute path), which spares both sides the TCP
//! stack. `conn` connects to it; nothing parses the text again.

use std::fmt;
use std::path::PathBuf;

use super::values::check_host_port;

/// Where the backend server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `host:port`; the host is resolved at each connect, so DNS changes are honoured.
    Tcp(String),
    Unix(PathBuf),
}

impl Default for Endpoint {
    /// An empty TCP address (what a blank config holds until the default is applied).
    fn default() -> Endpoint {
        Endpoint::Tcp(String::new())
    }
}

impl Endpoint {
    /// Reads the spelling only; [`Endpoint::checked`] also rejects what cannot work.
    pub fn parse(backend: &str) -> Endpoint {
        match backend.strip_prefix("unix:") {
            Some(path) => Endpoint::Unix(PathBuf::from(path)),
            None if backend.starts_with('/') => Endpoint::Unix(PathBuf::from(backend)),
            None => Endpoint::Tcp(backend.to_string()),
        }
    }

    /// Parses a `backend` value: a Unix socket's absolute path, else `host:port`.
    pub fn checked(s: &str) -> Result<Endpoint, String> {
        let endpoint = Endpoint::parse(s);
        match &endpoint {
            Endpoint::Unix(path) if !path.is_absolute() => Err(format!(
                "{s:?}: a Unix socket needs an absolute path, e.g. unix:/run/mysqld/mysqld.sock"
            )),
            Endpoint::Unix(_) => Ok(endpoint),
            Endpoint::Tcp(addr) => check_host_port(addr).map(|()| endpoint),
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }

    /// The host a TLS certificate must name (`None` for a Unix socket, which carries no TLS).
    pub fn tls_host(&self) -> Option<&str> {
        match self {
            Endpoint::Tcp(addr) => Some(
                addr.rsplit_once(':')
                    .map_or(addr.as_str(), |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']'),
            ),
            Endpoint::Unix(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    /// The setting as it reads back: `host:port`, or `unix:/path`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => f.write_str(addr),
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// `endpoint == "unix:/x"`: the same place, whichever way it is spelled.
impl PartialEq<&str> for Endpoint {
    fn eq(&self, other: &&str) -> bool {
        *self == Endpoint::parse(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_addresses_and_both_unix_spellings() {
        assert_eq!(
            Endpoint::parse("127.0.0.1:3306"),
            Endpoint::Tcp("127.0.0.1:3306".into())
        );
        assert_eq!(
            Endpoint::parse("[::1]:3306"),
            Endpoint::Tcp("[::1]:3306".into())
        );
        assert_eq!(
            Endpoint::parse("unix:/run/mysqld/mysqld.sock"),
            Endpoint::Unix("/run/mysqld/mysqld.sock".into())
        );
        assert_eq!(
            Endpoint::parse("/tmp/mysql.sock"),
            Endpoint::Unix("/tmp/mysql.sock".into())
        );
        assert!(Endpoint::parse("unix:relative.sock").is_unix());
    }

    #[test]
    fn checked_refuses_relative_sockets_and_portless_hosts() {
        assert!(Endpoint::checked("unix:relative.sock").is_err());
        assert!(Endpoint::checked("db.example").is_err());
        assert_eq!(
            Endpoint::checked("db.example:3306"),
            Ok(Endpoint::Tcp("db.example:3306".into()))
        );
    }

    #[test]
    fn tls_host_strips_the_port_and_ipv6_brackets() {
        assert_eq!(Endpoint::parse("[::1]:3306").tls_host(), Some("::1"));
        assert_eq!(Endpoint::parse("db:3306").tls_host(), Some("db"));
        assert_eq!(Endpoint::parse("/tmp/s").tls_host(), None);
    }
}
