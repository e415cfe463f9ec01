//! Every live client session, by sluice connection id: for SHOW CLIENTS, KILL, and the
//! max_client_connections limit.
//!
//! # Connection ids across instances
//! A client's id (the handshake's thread id, what `CONNECTION_ID()` returns and `KILL`
//! takes) is `instance_id * 2^24 + n`, with `n` counting 1 ..= 2^24 - 1 and wrapping past
//! the ids still in use. So the top 8 bits name the sluice instance that owns the id
//! (`instance_id`, 0 ..= 255): several instances behind one balancer never hand out the
//! same id, an id is never 0 (clients read 0 as "no id"), and it fits the protocol's u32.
//! [`instance_of`] reads the owner back, e.g. to say where a foreign id lives.

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
    /// The client's IP address (`addr` read once at registration; query rules match it).
    pub ip: Option<std::net::IpAddr>,
    pub connected: Instant,
    pub user: Mutex<String>,
    phase: AtomicU8,
    /// 0: not pinned; else 1 + the `PinReason` (set after every statement: no lock).
    pin: AtomicU8,
    pub queries: AtomicU64,
    /// The server thread id of the backend running this client's statement, 0 if none.
    pub backend_thread: AtomicU32,
    /// Which server (`Config::endpoints` index) that thread id is on: thread ids are per
    /// server, so a KILL QUERY must go to this one (`ClientInfo::running_on`).
    pub backend_server: AtomicU32,
    /// Cancelled by `KILL CONNECTION` or an admin.
    pub kill: CancellationToken,
    /// The running statement shares its backend with other sessions' (`pool::batches`):
    /// a KILL QUERY interrupts it here (`interrupt`), never on the server.
    pub pipelined: std::sync::atomic::AtomicBool,
    pub interrupt: Interrupt,
    /// Statements of this client that ran in a batch with other sessions' (the totals are
    /// SHOW STATS' pipeline counters).
    pub pipelined_statements: AtomicU64,
    /// The user this client counts against (`Registry::count_user`), until it leaves.
    counted_as: Mutex<Option<Box<str>>>,
}

/// Set by KILL QUERY for a pipelined statement: the client gets ER_QUERY_INTERRUPTED in
/// place of the rest of its answer, as from a server that killed it, and the answer's
/// remaining packets are read and dropped, so the backend stays in step for the sessions
/// whose statements follow on it.
///
/// Only the session's own task waits for it, so one waker slot (`AtomicWaker`) is enough: it
/// costs a few atomics per wait, where a `Notify` took its waiter list's lock twice on every
/// pipelined statement.
pub struct Interrupt {
    flag: std::sync::atomic::AtomicBool,
    waker: futures_util::task::AtomicWaker,
}

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt {
            flag: std::sync::atomic::AtomicBool::new(false),
            waker: futures_util::task::AtomicWaker::new(),
        }
    }
    pub fn is_set(&self) -> bool {
        self.flag.load(std::sync::atomic::Ordering::Acquire)
    }
    pub fn set(&self) {
        self.flag.store(true, std::sync::atomic::Ordering::Release);
        self.waker.wake();
    }
    pub fn clear(&self) {
        self.flag.store(false, std::sync::atomic::Ordering::Release);
    }
    /// Resolves once the interrupt is set (at once if it is). The session's own task only.
    pub async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.is_set() {
                return std::task::Poll::Ready(());
            }
            self.waker.register(cx.waker());
            // Set between the check and the registration: its wake found no waker.
            if self.is_set() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await
    }
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt::new()
    }
}

impl ClientInfo {
    /// The backend this client's statement runs on from now: thread `thread` of server
    /// `server`.
    pub fn running_on(&self, thread: u32, server: usize) {
        self.backend_server.store(server as u32, Ordering::Relaxed);
        // Released after the server: a KILL that sees the thread sees its server too.
        self.backend_thread.store(thread, Ordering::Release);
    }

    pub fn phase(&self) -> ClientPhase {
        ClientPhase::from_u8(self.phase.load(Ordering::Relaxed))
    }
    pub fn set_phase(&self, p: ClientPhase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }
    pub fn pin(&self) -> Option<PinReason> {
        let v = self.pin.load(Ordering::Relaxed);
        PinReason::ALL.get(usize::from(v).checked_sub(1)?).copied()
    }
    pub fn set_pin(&self, reason: Option<PinReason>) {
        // `ALL` is in declaration order: a reason's discriminant is its index there.
        let v = reason.map_or(0, |r| r as u8 + 1);
        self.pin.store(v, Ordering::Relaxed);
    }
    pub fn user(&self) -> String {
        self.user.lock().map(|u| u.clone()).unwrap_or_default()
    }
}

/// Bits of a connection id that count clients within one instance; the bits above them are
/// the `instance_id`.
pub const ID_COUNTER_BITS: u32 = 24;
/// The largest per-instance counter value (2^24 - 1 clients at once per instance).
const COUNTER_MAX: u32 = (1 << ID_COUNTER_BITS) - 1;
/// The largest `instance_id` (it takes the 8 bits above the counter).
pub const MAX_INSTANCE_ID: u32 = u32::MAX >> ID_COUNTER_BITS;

/// The `instance_id` of the sluice instance that handed out connection id `id`.
pub fn instance_of(id: u32) -> u32 {
    id >> ID_COUNTER_BITS
}

/// A user has as many clients as its `max_client_connections` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserLimitReached {
    pub limit: u32,
}

#[derive(Default)]
pub struct Registry {
    clients: Mutex<HashMap<u32, Arc<ClientInfo>>>,
    /// Clients per user (those counted with `count_user`).
    users: Mutex<HashMap<Box<str>, u32>>,
    /// Sessions holding named locks: (client id, server index, backend thread id). Few at
    /// once (each keeps an execution slot), written when a session starts or stops holding.
    lock_holders: Mutex<Vec<(u32, u32, u32)>>,
    /// The per-instance counter (the low 24 bits of the next id; 0 is skipped).
    next_id: AtomicU32,
    /// This instance's `instance_id`, already shifted into the top bits.
    instance_base: AtomicU32,
}

/// Removes the client from the registry when its session ends, however it ends.
pub struct Registration {
    pub info: Arc<ClientInfo>,
    registry: Arc<Registry>,
}

/// A session's entry among the lock holders (`Registry::hold_locks`), removed on drop.
pub struct LockListing {
    registry: Arc<Registry>,
    client: u32,
}

impl Drop for LockListing {
    fn drop(&mut self) {
        if let Ok(mut h) = self.registry.lock_holders.lock() {
            h.retain(|(c, _, _)| *c != self.client);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut c) = self.registry.clients.lock() {
            c.remove(&self.info.id);
        }
        self.registry.uncount(&self.info);
    }
}

impl Registry {
    pub fn new() -> Arc<Registry> {
        Arc::new(Registry {
            clients: Mutex::new(HashMap::new()),
            users: Mutex::new(HashMap::new()),
            lock_holders: Mutex::new(Vec::new()),
            next_id: AtomicU32::new(1),
            instance_base: AtomicU32::new(0),
        })
    }

    /// Sets the `instance_id` every id handed out from now on carries (start-up, before the
    /// first client; values above [`MAX_INSTANCE_ID`] are refused by config validation and
    /// masked here).
    pub fn set_instance_id(&self, instance_id: u32) {
        let base = (instance_id & MAX_INSTANCE_ID) << ID_COUNTER_BITS;
        self.instance_base.store(base, Ordering::Relaxed);
    }

    /// The `instance_id` that owns `id` when it is another instance's (a KILL of it here can
    /// only say where it lives); `None` for this instance's ids.
    pub fn foreign_owner(&self, id: u32) -> Option<u32> {
        let owner = instance_of(id);
        (owner != self.instance_id()).then_some(owner)
    }

    /// This instance's `instance_id`.
    pub fn instance_id(&self) -> u32 {
        instance_of(self.instance_base.load(Ordering::Relaxed))
    }

    /// Registers a new client unless `max` are connected already.
    pub fn register(self: &Arc<Self>, addr: String, max: u32) -> Option<Registration> {
        let mut clients = self.clients.lock().ok()?;
        if clients.len() >= max as usize {
            return None;
        }
        if clients.len() >= COUNTER_MAX as usize {
            return None;
        }
        // At most len + 1 tries: fewer than COUNTER_MAX ids are in use, so a free one exists.
        let base = self.instance_base.load(Ordering::Relaxed);
        let id = loop {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed) & COUNTER_MAX;
            let id = base | n;
            if n != 0 && !clients.contains_key(&id) {
                break id;
            }
        };
        let ip = addr.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
        let info = Arc::new(ClientInfo {
            id,
            ip,
            addr,
            connected: Instant::now(),
            user: Mutex::new(String::new()),
            phase: AtomicU8::new(ClientPhase::Login as u8),
            pin: AtomicU8::new(0),
            queries: AtomicU64::new(0),
            backend_thread: AtomicU32::new(0),
            backend_server: AtomicU32::new(0),
            kill: CancellationToken::new(),
            pipelined: std::sync::atomic::AtomicBool::new(false),
            interrupt: Interrupt::new(),
            pipelined_statements: AtomicU64::new(0),
            counted_as: Mutex::new(None),
        });
        clients.insert(id, info.clone());
        Some(Registration {
            info,
            registry: self.clone(),
        })
    }

    /// Counts `info`'s client as one of `user`'s (at login, and again after COM_CHANGE_USER,
    /// which moves it from its old user), unless `user` has `max` clients already; then the
    /// client keeps counting where it did. The count ends with the client's registration.
    pub fn count_user(
        &self,
        info: &ClientInfo,
        user: &str,
        max: Option<u32>,
    ) -> Result<(), UserLimitReached> {
        let mut counted = info.counted_as.lock().unwrap_or_else(|p| p.into_inner());
        if counted.as_deref() == Some(user) {
            return Ok(());
        }
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let now = users.get(user).copied().unwrap_or(0);
        if let Some(limit) = max.filter(|&m| now >= m) {
            return Err(UserLimitReached { limit });
        }
        *users.entry(user.into()).or_insert(0) += 1;
        if let Some(old) = counted.replace(user.into()) {
            release(&mut users, &old);
        }
        Ok(())
    }

    /// Clients counted as `user`'s now.
    pub fn user_clients(&self, user: &str) -> u32 {
        let users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users.get(user).copied().unwrap_or(0)
    }

    fn uncount(&self, info: &ClientInfo) {
        let mut counted = info.counted_as.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = counted.take() {
            release(
                &mut self.users.lock().unwrap_or_else(|p| p.into_inner()),
                &old,
            );
        }
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

    /// Lists client `client` as holding named locks on backend thread `thread` of server
    /// `server` until the returned listing drops (IS_USED_LOCK() names it by its client id).
    pub fn hold_locks(self: &Arc<Self>, client: u32, server: u32, thread: u32) -> LockListing {
        if let Ok(mut h) = self.lock_holders.lock() {
            h.retain(|(c, s, t)| *c != client && !(*s == server && *t == thread));
            h.push((client, server, thread));
        }
        LockListing {
            registry: self.clone(),
            client,
        }
    }

    /// (backend thread id, client id) of every session holding named locks on `server`.
    pub fn lock_holders(&self, server: u32) -> Vec<(u32, u32)> {
        self.lock_holders
            .lock()
            .map(|h| {
                h.iter()
                    .filter(|(_, s, _)| *s == server)
                    .map(|(c, _, t)| (*t, *c))
                    .collect()
            })
            .unwrap_or_default()
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

/// One client of `user` fewer (the entry goes with its last client).
fn release(users: &mut HashMap<Box<str>, u32>, user: &str) {
    if let Some(n) = users.get_mut(user) {
        *n -= 1;
        if *n == 0 {
            users.remove(user);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_count_per_user_up_to_its_limit() {
        let r = Registry::new();
        let a = r.register("10.1.2.3:4567".into(), 10).unwrap();
        let b = r.register("b".into(), 10).unwrap();
        let c = r.register("c".into(), 10).unwrap();
        assert_eq!(a.info.ip, Some("10.1.2.3".parse().unwrap()));
        assert_eq!(b.info.ip, None);
        assert_eq!(r.count_user(&a.info, "app", Some(2)), Ok(()));
        assert_eq!(
            r.count_user(&a.info, "app", Some(2)),
            Ok(()),
            "counted once"
        );
        assert_eq!(r.count_user(&b.info, "app", Some(2)), Ok(()));
        assert_eq!(
            r.count_user(&c.info, "app", Some(2)),
            Err(UserLimitReached { limit: 2 })
        );
        assert_eq!(
            r.count_user(&c.info, "other", Some(2)),
            Ok(()),
            "other users unaffected"
        );
        assert_eq!(r.user_clients("app"), 2);
        // COM_CHANGE_USER moves b from app to other; a refused move leaves it where it was.
        assert_eq!(r.count_user(&b.info, "other", None), Ok(()));
        assert_eq!((r.user_clients("app"), r.user_clients("other")), (1, 2));
        assert_eq!(
            r.count_user(&b.info, "solo", Some(0)),
            Err(UserLimitReached { limit: 0 })
        );
        assert_eq!(r.user_clients("other"), 2);
        drop(a);
        assert_eq!(r.user_clients("app"), 0);
        drop((b, c));
        assert_eq!(r.user_clients("other"), 0);
        assert!(r.users.lock().unwrap().is_empty());
    }

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

    #[test]
    fn ids_carry_the_instance_id_in_the_top_bits() {
        let r = Registry::new();
        r.set_instance_id(3);
        assert_eq!(r.instance_id(), 3);
        let a = r.register("a".into(), 10).unwrap();
        let b = r.register("b".into(), 10).unwrap();
        assert_eq!(a.info.id, 3 * (1 << 24) + 1);
        assert_eq!(b.info.id, 3 * (1 << 24) + 2);
        assert_eq!(instance_of(a.info.id), 3);
        assert!(r.get(a.info.id).is_some());
        // Instance 3's registry knows nothing of instance 0's id 1, and says who owns it.
        assert!(r.get(1).is_none());
        assert_eq!(r.foreign_owner(1), Some(0));
        assert_eq!(r.foreign_owner(a.info.id), None);
    }

    #[test]
    fn lock_holders_are_listed_while_their_listing_lives() {
        let r = Registry::new();
        let a = r.hold_locks(5, 0, 100);
        let b = r.hold_locks(6, 1, 100);
        assert_eq!(r.lock_holders(0), vec![(100, 5)]);
        assert_eq!(r.lock_holders(1), vec![(100, 6)]);
        // Thread 100 of server 0 now holds for client 7: the stale entry goes.
        let c = r.hold_locks(7, 0, 100);
        assert_eq!(r.lock_holders(0), vec![(100, 7)]);
        drop((a, b));
        assert_eq!(r.lock_holders(0), vec![(100, 7)]);
        assert!(r.lock_holders(1).is_empty());
        drop(c);
        assert!(r.lock_holders(0).is_empty());
    }

    #[test]
    fn instance_zero_keeps_the_plain_counter() {
        let r = Registry::new();
        let a = r.register("a".into(), 10).unwrap();
        assert_eq!(a.info.id, 1);
        assert_eq!(instance_of(a.info.id), 0);
    }

    #[test]
    fn the_counter_wraps_within_the_instance_and_never_gives_0_or_a_used_id() {
        let r = Registry::new();
        r.set_instance_id(MAX_INSTANCE_ID);
        let first = r.register("a".into(), 10).unwrap();
        r.next_id.store(COUNTER_MAX, Ordering::Relaxed);
        let last = r.register("b".into(), 10).unwrap();
        assert_eq!(last.info.id, u32::MAX);
        // The counter wraps to 0 (skipped) and 1 (still used by `first`): next is 2.
        let wrapped = r.register("c".into(), 10).unwrap();
        assert_eq!(wrapped.info.id, (MAX_INSTANCE_ID << 24) | 2);
        assert_eq!(instance_of(wrapped.info.id), MAX_INSTANCE_ID);
        assert_ne!(wrapped.info.id, first.info.id);
    }
}
