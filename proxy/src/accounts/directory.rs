//! The directory of server accounts: a cache per account name in front of the account table.
//!
//! - An account is used for `auth_cache_ttl` after its read; past that the next login reads
//!   it again. Unknown names are cached too (at most [`MAX_UNKNOWN`], oldest dropped first).
//! - A failed verify may re-read its account at once ([`Directory::refresh`]), at most once
//!   per [`REFRESH_EVERY`] per account, so an `ALTER USER` works at the next login.
//! - Reads are single-flight per account: every login of a name that needs a read waits for
//!   the same one. Up to [`MAX_READERS`] reads run at once, each for every name waiting then
//!   (one query, at most [`BATCH`] names): a login never waits behind another account's read
//!   while a reader is free, and a storm of new names costs a few queries.
//! - The last credential a login of each account proved is kept for backend logins
//!   ([`Directory::credential`]), in memory only.
//! - A table that cannot be read keeps cached accounts until their TTL, then refuses their
//!   logins (never "allow").

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use super::loader::{LoadError, ServerView, TableReader};
use super::row::AccountRow;
use crate::config::{Config, Secret};

/// Unknown names remembered at once.
pub const MAX_UNKNOWN: usize = 10_000;
/// A failed verify re-reads its account at most this often.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Reads running at once.
pub const MAX_READERS: usize = 4;
/// Names one query asks for.
pub const BATCH: usize = 64;
/// Longer names cannot be accounts (MariaDB allows 80 characters, MySQL 32): not read.
pub const MAX_NAME_LEN: usize = 128;

/// What logins see of one account name.
#[derive(Debug, Clone)]
pub struct Account {
    /// The name's own rows and the anonymous rows (which may match any name).
    pub rows: Arc<[AccountRow]>,
    pub server: Arc<ServerView>,
    /// A caching_sha2 cleartext an earlier full authentication proved, with the stored hash
    /// it matched: the fast path may use it while the hash is unchanged.
    pub sha2_clear: Option<(Vec<u8>, Secret)>,
}

/// Counters of the directory (SHOW STATS, /metrics).
#[derive(Debug, Default)]
pub struct AccountStats {
    /// Logins (and COM_CHANGE_USERs) that looked a server account up.
    pub lookups: AtomicU64,
    /// ... answered from the cache.
    pub hits: AtomicU64,
    /// ... that needed a read.
    pub misses: AtomicU64,
    /// Re-reads after a failed verify.
    pub refreshes: AtomicU64,
    /// Queries of the account table.
    pub queries: AtomicU64,
    /// Account names read (one per name per query).
    pub names_read: AtomicU64,
    /// Queries that failed.
    pub read_errors: AtomicU64,
    /// Logins refused because the account's plugin cannot be verified by sluice.
    pub unsupported_plugin: AtomicU64,
}

struct Entry {
    account: Account,
    /// How many of `rows` are the name's own (0: no such account).
    own: usize,
    read_at: Instant,
    read_wall: SystemTime,
    /// When the last re-read after a failed login started (the refresh rate limit); reads
    /// at the TTL do not count, so a password changed just after one is seen at once.
    last_refresh: Option<Instant>,
    credential: Option<Secret>,
    /// The unsupported plugin was logged for this account.
    warned: bool,
}

type Flight = watch::Sender<Option<Result<(), LoadError>>>;

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// Unknown names in the order they were read (for the bound).
    unknown: VecDeque<String>,
    flights: HashMap<String, Flight>,
    queue: VecDeque<String>,
    readers: usize,
    /// The last server view a read brought.
    server: Option<Arc<ServerView>>,
}

/// One account of SHOW USERS.
#[derive(Debug, Clone)]
pub struct Listed {
    pub row: AccountRow,
    pub read_wall: SystemTime,
    pub read_age: Duration,
    /// A login proved a credential sluice logs in to the backend with.
    pub has_credential: bool,
}

pub struct Directory {
    reader: Arc<dyn TableReader>,
    state: Mutex<State>,
    pub stats: AccountStats,
}

impl Directory {
    pub fn new(reader: Arc<dyn TableReader>) -> Arc<Directory> {
        Arc::new(Directory {
            reader,
            state: Mutex::default(),
            stats: AccountStats::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The account `name`, from the cache while it is younger than `auth_cache_ttl`, else
    /// read (shared with every other login of the name waiting for it).
    pub async fn lookup(
        self: &Arc<Self>,
        name: &str,
        config: &Arc<Config>,
    ) -> Result<Account, LoadError> {
        Stats::incr(&self.stats.lookups);
        let ttl = config.auth_cache_ttl;
        let waiting = {
            let mut st = self.lock();
            if let Some(account) = fresh(&st, name, ttl) {
                Stats::incr(&self.stats.hits);
                return Ok(account);
            }
            Stats::incr(&self.stats.misses);
            self.join_read(&mut st, name, config)
        };
        self.finish(name, waiting).await
    }

    /// Reads `name` again after a failed login, unless that happened less than
    /// [`REFRESH_EVERY`] ago; `None` when it was not (or the read failed).
    pub async fn refresh(self: &Arc<Self>, name: &str, config: &Arc<Config>) -> Option<Account> {
        let waiting = {
            let mut st = self.lock();
            let running = st.flights.contains_key(name);
            let recent = st
                .entries
                .get_mut(name)
                .map(|e| &mut e.last_refresh)
                .filter(|last| last.is_some_and(|t| t.elapsed() < REFRESH_EVERY));
            if recent.is_some() && !running {
                return None;
            }
            if let Some(e) = st.entries.get_mut(name) {
                e.last_refresh = Some(Instant::now());
            }
            Stats::incr(&self.stats.refreshes);
            self.join_read(&mut st, name, config)
        };
        self.finish(name, waiting).await.ok()
    }

    /// The read of `name` that is running or queued, or a new one.
    fn join_read(
        self: &Arc<Self>,
        st: &mut State,
        name: &str,
        config: &Arc<Config>,
    ) -> Option<watch::Receiver<Option<Result<(), LoadError>>>> {
        if name.len() > MAX_NAME_LEN {
            return None;
        }
        if let Some(flight) = st.flights.get(name) {
            return Some(flight.subscribe());
        }
        let (tx, rx) = watch::channel(None);
        st.flights.insert(name.to_string(), tx);
        st.queue.push_back(name.to_string());
        if st.readers < MAX_READERS {
            st.readers += 1;
            tokio::spawn(self.clone().reader(config.clone()));
        }
        Some(rx)
    }

    /// Waits for the read and returns what it left in the cache.
    async fn finish(
        &self,
        name: &str,
        waiting: Option<watch::Receiver<Option<Result<(), LoadError>>>>,
    ) -> Result<Account, LoadError> {
        if let Some(mut rx) = waiting {
            let outcome = match rx.wait_for(Option::is_some).await {
                Ok(v) => v.clone().unwrap_or(Ok(())),
                // The reader ended without an answer (shutdown): nothing was read.
                Err(_) => Err(LoadError::Abandoned),
            };
            outcome?;
        }
        let st = self.lock();
        match st.entries.get(name) {
            Some(e) => Ok(e.account.clone()),
            // A name too long to be an account: no rows.
            None => Ok(Account {
                rows: Arc::from(Vec::new()),
                server: st
                    .server
                    .clone()
                    .unwrap_or_else(|| Arc::new(placeholder_view())),
                sha2_clear: None,
            }),
        }
    }

    /// One reader: takes every waiting name (up to [`BATCH`]) into one query until none wait.
    async fn reader(self: Arc<Self>, config: Arc<Config>) {
        loop {
            let names: Vec<String> = {
                let mut st = self.lock();
                if st.queue.is_empty() {
                    st.readers -= 1;
                    return;
                }
                let n = st.queue.len().min(BATCH);
                st.queue.drain(..n).collect()
            };
            Stats::incr(&self.stats.queries);
            self.stats.names_read.fetch_add(names.len() as u64, Relaxed);
            let result = self.reader.read(&config, &names).await;
            let mut st = self.lock();
            match result {
                Ok(read) => {
                    st.server = Some(read.server.clone());
                    for name in &names {
                        store(&mut st, name, &read.rows, &read.server);
                        if let Some(f) = st.flights.remove(name) {
                            f.send_replace(Some(Ok(())));
                        }
                    }
                }
                Err(e) => {
                    Stats::incr(&self.stats.read_errors);
                    tracing::warn!("cannot read the account table: {e}");
                    for name in &names {
                        if let Some(f) = st.flights.remove(name) {
                            f.send_replace(Some(Err(e.clone())));
                        }
                    }
                }
            }
        }
    }

    /// Reads no account (only the anonymous rows): whether auth_user can log in and read
    /// the table. Used at start.
    pub async fn check_service(&self, config: &Config) -> Result<Arc<ServerView>, LoadError> {
        Stats::incr(&self.stats.queries);
        let read = self.reader.read(config, &[]).await?;
        self.lock().server = Some(read.server.clone());
        Ok(read.server)
    }

    /// A login of `name` proved `credential`: backend connections of the account log in with
    /// it from now on. `sha2`: the caching_sha2 hash it was checked against, remembered with
    /// the cleartext for the fast path.
    pub fn record_login(&self, name: &str, credential: &Secret, sha2: Option<&[u8]>) {
        let mut st = self.lock();
        if let Some(e) = st.entries.get_mut(name) {
            e.credential = Some(credential.clone());
            if let Some(hash) = sha2 {
                e.account.sha2_clear = Some((hash.to_vec(), credential.clone()));
            }
        }
    }

    /// The credential the last successful login of `name` proved.
    pub fn credential(&self, name: &str) -> Option<Secret> {
        self.lock()
            .entries
            .get(name)
            .and_then(|e| e.credential.clone())
    }

    /// True the first time it is asked for `name` since its last read (one log line per
    /// account for a plugin sluice cannot verify).
    pub fn first_warning(&self, name: &str) -> bool {
        let mut st = self.lock();
        match st.entries.get_mut(name) {
            Some(e) if !e.warned => {
                e.warned = true;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Every cached account row (SHOW USERS): never a secret.
    pub fn listing(&self) -> Vec<Listed> {
        let st = self.lock();
        let mut out: Vec<Listed> = st
            .entries
            .iter()
            .flat_map(|(name, e)| {
                e.account
                    .rows
                    .iter()
                    .filter(move |r| r.user == *name)
                    .map(|row| Listed {
                        row: row.clone(),
                        read_wall: e.read_wall,
                        read_age: e.read_at.elapsed(),
                        has_credential: e.credential.is_some(),
                    })
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.row.user, a.row.host.weight(), a.row.host.as_str()).cmp(&(
                &b.row.user,
                b.row.host.weight(),
                b.row.host.as_str(),
            ))
        });
        out
    }

    /// Cached names: (accounts that exist, unknown names).
    pub fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        let unknown = st.entries.values().filter(|e| e.own == 0).count();
        (st.entries.len() - unknown, unknown)
    }
}

/// The cached account, if younger than `ttl`.
fn fresh(st: &State, name: &str, ttl: Duration) -> Option<Account> {
    st.entries
        .get(name)
        .filter(|e| e.read_at.elapsed() < ttl)
        .map(|e| e.account.clone())
}

/// Puts what a read found for `name` in the cache, keeping the bound on unknown names.
fn store(st: &mut State, name: &str, rows: &[AccountRow], server: &Arc<ServerView>) {
    let mine: Vec<AccountRow> = rows
        .iter()
        .filter(|r| r.user == name || r.user.is_empty())
        .cloned()
        .collect();
    let own = mine.iter().filter(|r| r.user == name).count();
    let previous = st.entries.remove(name);
    let keep = previous.filter(|_| own > 0);
    let (credential, warned, sha2_clear, last_refresh) = match keep {
        Some(p) => (p.credential, p.warned, p.account.sha2_clear, p.last_refresh),
        None => (None, false, None, None),
    };
    if own == 0 {
        if st.unknown.len() >= MAX_UNKNOWN {
            while let Some(old) = st.unknown.pop_front() {
                if st.entries.get(&old).is_some_and(|e| e.own == 0) {
                    st.entries.remove(&old);
                    break;
                }
            }
        }
        st.unknown.push_back(name.to_string());
    }
    st.entries.insert(
        name.to_string(),
        Entry {
            account: Account {
                rows: Arc::from(mine),
                server: server.clone(),
                sha2_clear,
            },
            own,
            read_at: Instant::now(),
            read_wall: SystemTime::now(),
            last_refresh,
            credential,
            warned,
        },
    );
}

/// A view for a name that was never read (too long to be an account): it matches nothing.
fn placeholder_view() -> ServerView {
    ServerView {
        flavor: super::row::Flavor::MariaDb,
        resolves_names: false,
        sluice_host: super::host::ClientHost {
            ip: None,
            ip_text: String::new(),
            name: None,
        },
        default_lifetime_days: 0,
        service_account: String::new(),
    }
}

struct Stats;

impl Stats {
    fn incr(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
}

impl AccountStats {
    /// (lookups, hits, misses, refreshes, queries, names read, read errors, unsupported).
    pub fn snapshot(&self) -> [(&'static str, u64); 8] {
        [
            ("lookups", self.lookups.load(Relaxed)),
            ("hits", self.hits.load(Relaxed)),
            ("misses", self.misses.load(Relaxed)),
            ("refreshes", self.refreshes.load(Relaxed)),
            ("table_reads", self.queries.load(Relaxed)),
            ("names_read", self.names_read.load(Relaxed)),
            ("read_errors", self.read_errors.load(Relaxed)),
            ("unsupported_plugin", self.unsupported_plugin.load(Relaxed)),
        ]
    }
}

#[cfg(test)]
#[path = "directory_tests.rs"]
mod tests;
