//! Every live client session, by sluice connection id: for SHOW CLIENTS, KILL, and the
//! max_client_connections limit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::stats::PinReason;

/// What a client is doing right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ClientPhase {
    Login = 0,
    Idle = 1,
    Waiting = 2,
    Active = 3,
    IdleInTransaction = 4,
}

impl ClientPhase {
    pub fn label(self) -> &'static str {
        match self {
            ClientPhase::Login => "login",
            ClientPhase::Idle => "idle",
            ClientPhase::Waiting => "waiting",
            ClientPhase::Active => "active",
            ClientPhase::IdleInTransaction => "idle_in_transaction",
        }
    }
    fn from_u8(v: u8) -> ClientPhase {
        match v {
            1 => ClientPhase::Idle,
            2 => ClientPhase::Waiting,
            3 => ClientPhase::Active,
            4 => ClientPhase::IdleInTransaction,
            _ => ClientPhase::Login,
        }
    }
}

/// The shared, lock-free view of one session.
pub struct ClientInfo {
    pub id: u32,
    pub addr: String,
    pub connected: Instant,
    pub user: Mutex<String>,
    phase: AtomicU8,
    pin: Mutex<Option<PinReason>>,
    pub queries: AtomicU64,
    /// The server thread id of the backend running this client's statement, 0 if none.
    pub backend_thread: AtomicU32,
    /// Cancelled by `KILL CONNECTION` or an admin.
    pub kill: CancellationToken,
}

impl ClientInfo {
    pub fn phase(&self) -> ClientPhase {
        ClientPhase::from_u8(self.phase.load(Ordering::Relaxed))
    }
    pub fn set_phase(&self, p: ClientPhase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }
    pub fn pin(&self) -> Option<PinReason> {
        self.pin.lock().ok().and_then(|p| *p)
    }
    pub fn set_pin(&self, reason: Option<PinReason>) {
        if let Ok(mut p) = self.pin.lock() {
            *p = reason;
        }
    }
    pub fn user(&self) -> String {
        self.user.lock().map(|u| u.clone()).unwrap_or_default()
    }
}

#[derive(Default)]
pub struct Registry {
    clients: Mutex<HashMap<u32, Arc<ClientInfo>>>,
    next_id: AtomicU32,
}

/// Removes the client from the registry when its session ends, however it ends.
pub struct Registration {
    pub info: Arc<ClientInfo>,
    registry: Arc<Registry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut c) = self.registry.clients.lock() {
            c.remove(&self.info.id);
        }
    }
}

impl Registry {
    pub fn new() -> Arc<Registry> {
        Arc::new(Registry {
            clients: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(1),
        })
    }

    /// Registers a new client unless `max` are connected already.
    pub fn register(self: &Arc<Self>, addr: String, max: u32) -> Option<Registration> {
        let mut clients = self.clients.lock().ok()?;
        if clients.len() >= max as usize {
            return None;
        }
        let mut id = self.next_id.fetch_add(1, Ordering::Relaxed);
        while id == 0 || clients.contains_key(&id) {
            id = self.next_id.fetch_add(1, Ordering::Relaxed);
        }
        let info = Arc::new(ClientInfo {
            id,
            addr,
            connected: Instant::now(),
            user: Mutex::new(String::new()),
            phase: AtomicU8::new(ClientPhase::Login as u8),
            pin: Mutex::new(None),
            queries: AtomicU64::new(0),
            backend_thread: AtomicU32::new(0),
            kill: CancellationToken::new(),
        });
        clients.insert(id, info.clone());
        Some(Registration {
            info,
            registry: self.clone(),
        })
    }

    pub fn get(&self, id: u32) -> Option<Arc<ClientInfo>> {
        self.clients.lock().ok()?.get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.clients.lock().map(|c| c.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        let mut v: Vec<_> = self
            .clients
            .lock()
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(|c| c.id);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_respects_the_limit_and_unregisters_on_drop() {
        let r = Registry::new();
        let a = r.register("a".into(), 2).unwrap();
        let b = r.register("b".into(), 2).unwrap();
        assert!(r.register("c".into(), 2).is_none());
        assert_ne!(a.info.id, b.info.id);
        drop(a);
        assert_eq!(r.len(), 1);
        assert!(r.register("c".into(), 2).is_some());
    }
}
