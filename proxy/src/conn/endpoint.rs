//! Where the backend server listens: `host:port` over TCP, or a Unix socket on this host
//! (`unix:/path` or an absolute path), which spares both sides the TCP stack.

use std::path::PathBuf;

use tokio::net::{TcpStream, UnixStream};

use super::stream::PacketStream;

/// A parsed `backend` setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl Endpoint {
    pub fn parse(backend: &str) -> Endpoint {
        match backend.strip_prefix("unix:") {
            Some(path) => Endpoint::Unix(PathBuf::from(path)),
            None if backend.starts_with('/') => Endpoint::Unix(PathBuf::from(backend)),
            None => Endpoint::Tcp(backend.to_string()),
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }

    /// Opens the socket, framed, with `read_chunk`-sized reads.
    pub async fn connect(
        &self,
        max_payload: usize,
        read_chunk: usize,
    ) -> std::io::Result<PacketStream> {
        Ok(match self {
            Endpoint::Tcp(addr) => PacketStream::with_read_chunk(
                TcpStream::connect(addr.as_str()).await?,
                max_payload,
                read_chunk,
            ),
            Endpoint::Unix(path) => {
                PacketStream::unix(UnixStream::connect(path).await?, max_payload, read_chunk)
            }
        })
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
}
