//! What the backend server says about itself in its greeting: version, capabilities,
//! default collation and status. Clients are greeted with the latest greeting any backend
//! connection saw, so a sluice started before its server, or a server upgraded behind it,
//! presents the server as it is now (MariaDB clients pick features by its version and flags).

use std::sync::{Arc, RwLock};

use crate::protocol::{flags, Capabilities, Handshake, StatusFlags};

/// Version string used until a backend has answered.
const FALLBACK_VERSION: &[u8] = b"8.0.36-sluice";
/// utf8mb4_general_ci, understood by MySQL and MariaDB alike.
const FALLBACK_COLLATION: u8 = 45;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    pub version: Vec<u8>,
    pub caps: Capabilities,
    pub collation: u8,
    /// A new session's status: AUTOCOMMIT follows the server's global `autocommit`.
    pub status: StatusFlags,
    /// MariaDB's extended capabilities (0 from MySQL).
    pub mariadb_caps: u32,
    /// A new session's idle timeouts, read with the baseline after a backend's login (not
    /// part of the greeting); `None` until one was read.
    pub idle: Option<super::baseline::IdleTimeouts>,
}

impl ServerInfo {
    pub fn from_handshake(hs: &Handshake) -> ServerInfo {
        ServerInfo {
            version: hs.server_version.clone(),
            caps: hs.capabilities,
            collation: hs.collation,
            status: hs.status,
            mariadb_caps: hs.mariadb_caps,
            idle: None,
        }
    }

    /// The server is MariaDB (its version says so), not MySQL.
    pub fn is_mariadb(&self) -> bool {
        self.version
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"MariaDB"))
    }

    /// What sluice presents before any backend has answered.
    pub fn fallback() -> ServerInfo {
        ServerInfo {
            version: FALLBACK_VERSION.to_vec(),
            caps: flags::server_capabilities(),
            collation: FALLBACK_COLLATION,
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            mariadb_caps: 0,
            idle: None,
        }
    }
}

/// The latest greeting, shared by the pool (which writes it on every new backend
/// connection) and the client handshake (which reads it on every accept).
#[derive(Default)]
pub struct ServerInfoCell(RwLock<Option<Arc<ServerInfo>>>);

impl ServerInfoCell {
    /// The latest greeting, or `None` before any backend answered.
    pub fn get(&self) -> Option<Arc<ServerInfo>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records a greeting; true when it differs from the one held. Idle timeouts it does not
    /// carry (a greeting alone) keep the ones known.
    pub fn learn(&self, info: &ServerInfo) -> bool {
        let held = self.get();
        let info = ServerInfo {
            idle: info.idle.or(held.as_ref().and_then(|h| h.idle)),
            ..info.clone()
        };
        if held.is_some_and(|held| *held == info) {
            return false;
        }
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(info));
        true
    }

    /// The idle timeouts a session logging in now starts with, once a backend read them.
    pub fn idle(&self) -> Option<super::baseline::IdleTimeouts> {
        self.get().and_then(|info| info.idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_latest_greeting_once() {
        let cell = ServerInfoCell::default();
        assert!(cell.get().is_none());
        let mut info = ServerInfo::fallback();
        info.version = b"5.5.5-10.11.19-MariaDB".to_vec();
        assert!(cell.learn(&info));
        assert!(!cell.learn(&info));
        info.status = StatusFlags::empty();
        assert!(cell.learn(&info));
        assert_eq!(cell.get().unwrap().status, StatusFlags::empty());
    }
}
