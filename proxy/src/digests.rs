//! Per-digest statistics: one row per (digest, user, schema, server) with counts, errors,
//! times (total, min, max, p50, p99; queued for a slot and on the server apart), rows, how
//! often the statements were pinned, went to a replica, were pipelined or retried, and when
//! they were first and last seen. SHOW DIGESTS and /metrics read it.
//!
//! The statement path calls [`Digests::record`] once per statement. It never takes a lock
//! that other sessions' statements wait on: the table is split into shards by key, a known
//! row is found under its shard's *read* lock and counted with relaxed atomics
//! (`counters`), and only a new row takes its shard's write lock. Readers (the console,
//! /metrics) take the same read locks, so reading never stops a statement.
//!
//! The table holds at most `digest_table_size` rows (live: [`Digests::configure`]). When it is
//! full, a new row first evicts the least recently seen row of its shard (the shards are
//! hash-spread, so this is the least recently seen of about every sixteenth), which is
//! counted (`digests_evicted`) and folded into the one overflow row: totals stay whole and
//! memory stays bounded whatever the literals. A row keeps at most [`STORED_TEXT`] bytes of
//! its normalised text.

mod counters;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustc_hash::{FxBuildHasher, FxHasher};

use crate::classify::{Digest, DigestId};
pub use counters::Totals;
use counters::{Counters, Sample};

/// Shards of the table.
const SHARDS: usize = 16;
/// Bytes of normalised text a row keeps (SHOW DIGESTS shows the first 200 characters).
pub const STORED_TEXT: usize = 1024;

/// One statement, as the statement path reports it after its answer.
#[derive(Clone, Copy, Debug)]
pub struct StatementRecord<'a> {
    pub digest: &'a Digest,
    /// The client's user name.
    pub user: &'a str,
    /// The session's default database when the statement ran.
    pub schema: Option<&'a [u8]>,
    /// The server it ran on (its index in `Config::endpoints`).
    pub server: usize,
    /// Time waiting for an execution slot and a backend.
    pub queued: Duration,
    /// Time on the server, the answer's relay included.
    pub server_time: Duration,
    /// Result rows sent (`ResponseSummary::rows`).
    pub rows_sent: u64,
    /// Rows the last OK reported (`ResponseSummary::affected_rows`).
    pub rows_affected: u64,
    /// The answer was an ERR (from the server, or sluice's own).
    pub error: bool,
    pub pinned: bool,
    pub replica: bool,
    pub pipelined: bool,
    /// Run again on another server after its replica failed.
    pub retried: bool,
    /// When the answer was in (any `Instant` near it; the relay has one).
    pub at: Instant,
}

/// How SHOW DIGESTS orders its rows (largest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    #[default]
    TotalTime,
    Count,
    P99,
    Queued,
}

/// One row as read.
#[derive(Clone, Debug)]
pub struct DigestRow {
    /// `None` for the overflow row (every evicted row's numbers).
    pub digest: Option<DigestId>,
    pub user: Arc<str>,
    pub schema: Option<Arc<[u8]>>,
    pub server: usize,
    pub text: Arc<[u8]>,
    pub totals: Totals,
    pub first_seen: Option<SystemTime>,
    pub last_seen: SystemTime,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    digest: u64,
    /// Hash of user and schema (the row holds them, and is checked against them).
    who: u64,
    server: u32,
}

struct Row {
    user: Arc<str>,
    schema: Option<Arc<[u8]>>,
    text: Arc<[u8]>,
    counters: Counters,
}

type Shard = HashMap<Key, Row, FxBuildHasher>;

/// The digest table (one per proxy, in `Context`).
pub struct Digests {
    shards: Box<[RwLock<Shard>]>,
    on: AtomicBool,
    capacity: AtomicUsize,
    rows: AtomicUsize,
    evicted: AtomicU64,
    overflow: Counters,
    epoch: Instant,
    epoch_wall: SystemTime,
}

impl Digests {
    /// A table of at most `capacity` rows, recording only while `on` (and `capacity` > 0).
    pub fn new(on: bool, capacity: usize) -> Digests {
        Digests {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            on: AtomicBool::new(on),
            capacity: AtomicUsize::new(capacity),
            rows: AtomicUsize::new(0),
            evicted: AtomicU64::new(0),
            overflow: Counters::new(),
            epoch: Instant::now(),
            epoch_wall: SystemTime::now(),
        }
    }

    /// Applies `digests` and `digest_table_size` (at start and on every reload); a smaller
    /// size evicts at once. Off keeps what was counted (RESET DIGESTS clears it); size 0
    /// clears it.
    pub fn configure(&self, on: bool, capacity: usize) {
        self.on.store(on, Relaxed);
        self.capacity.store(capacity, Relaxed);
        if capacity == 0 {
            self.reset();
        }
        // The least recently seen row of each shard in turn, until it fits.
        let (mut shard, mut empty) = (0, 0);
        while self.rows.load(Relaxed) > capacity && empty < SHARDS {
            empty = if self.evict_one(shard) { 0 } else { empty + 1 };
            shard += 1;
        }
    }

    /// Whether statements are recorded: the statement path skips the digest when not (and
    /// no rule needs it).
    pub fn enabled(&self) -> bool {
        self.on.load(Relaxed) && self.capacity.load(Relaxed) > 0
    }

    /// Counts one statement.
    pub fn record(&self, r: &StatementRecord<'_>) {
        if !self.enabled() {
            return;
        }
        let sample = Sample {
            total_us: micros(r.queued + r.server_time),
            queued_us: micros(r.queued),
            server_us: micros(r.server_time),
            rows_sent: r.rows_sent,
            rows_affected: r.rows_affected,
            error: r.error,
            pinned: r.pinned,
            replica: r.replica,
            pipelined: r.pipelined,
            retried: r.retried,
            at_ms: r.at.saturating_duration_since(self.epoch).as_millis() as u64,
        };
        let key = Key {
            digest: r.digest.id.0,
            who: who(r.user, r.schema),
            server: r.server as u32,
        };
        let index = shard_of(&key);
        {
            let shard = self.shards[index].read().unwrap_or_else(|p| p.into_inner());
            if let Some(row) = shard.get(&key) {
                if row.is(r.user, r.schema) {
                    row.counters.add(&sample);
                } else {
                    // Two (user, schema) pairs with one 64-bit hash: counted, not mixed up.
                    self.overflow.add(&sample);
                }
                return;
            }
        }
        self.insert(index, key, r, &sample);
    }

    /// A new row: room is made first (one shard lock at a time, never two).
    fn insert(&self, index: usize, key: Key, r: &StatementRecord<'_>, sample: &Sample) {
        let mut spins = 0;
        while !self.reserve() {
            if !self.evict_one(index + spins) && spins >= SHARDS {
                // Nothing left to evict (a concurrent RESET or resize): count it aside.
                self.overflow.add(sample);
                return;
            }
            spins += 1;
        }
        let mut shard = self.shards[index]
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(row) = shard.get(&key) {
            // Another session inserted it meanwhile.
            self.rows.fetch_sub(1, Relaxed);
            if row.is(r.user, r.schema) {
                row.counters.add(sample);
            } else {
                self.overflow.add(sample);
            }
            return;
        }
        let text = r.digest.text();
        let row = Row {
            user: r.user.into(),
            schema: r.schema.map(Into::into),
            text: text[..cut(text, STORED_TEXT)].into(),
            counters: Counters::new(),
        };
        row.counters.add(sample);
        shard.insert(key, row);
    }

    /// Takes a place for one more row, if the table has one.
    fn reserve(&self) -> bool {
        let capacity = self.capacity.load(Relaxed);
        self.rows
            .fetch_update(Relaxed, Relaxed, |n| (n < capacity).then_some(n + 1))
            .is_ok()
    }

    /// Evicts the least recently seen row of shard `index % SHARDS` into the overflow row;
    /// false when that shard is empty.
    fn evict_one(&self, index: usize) -> bool {
        let mut shard = self.shards[index % SHARDS]
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let oldest = shard
            .iter()
            .min_by_key(|(_, row)| row.counters.last_ms())
            .map(|(k, _)| k.clone());
        let Some(row) = oldest.and_then(|k| shard.remove(&k)) else {
            return false;
        };
        drop(shard);
        self.overflow.absorb(&row.counters);
        self.rows.fetch_sub(1, Relaxed);
        self.evicted.fetch_add(1, Relaxed);
        true
    }

    /// RESET DIGESTS: every row and the overflow row go. The eviction count is a total
    /// since start (a Prometheus counter) and stays.
    pub fn reset(&self) {
        for shard in self.shards.iter() {
            let mut s = shard.write().unwrap_or_else(|p| p.into_inner());
            let n = s.len();
            s.clear();
            drop(s);
            self.rows.fetch_sub(n, Relaxed);
        }
        self.overflow.clear();
    }

    /// Rows evicted since start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Relaxed)
    }

    /// Rows held now (the overflow row not included).
    pub fn len(&self) -> usize {
        self.rows.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row, ordered by `order` (largest first), then the overflow row (when it counted
    /// anything), cut to `limit` rows in all.
    pub fn rows(&self, order: Order, limit: Option<usize>) -> Vec<DigestRow> {
        let mut rows = Vec::with_capacity(self.len());
        for shard in self.shards.iter() {
            let s = shard.read().unwrap_or_else(|p| p.into_inner());
            rows.extend(s.iter().map(|(k, row)| {
                let t = row.counters.read();
                self.row(Some(DigestId(k.digest)), row, k.server as usize, t)
            }));
        }
        let key = |r: &DigestRow| match order {
            Order::TotalTime => r.totals.total_us,
            Order::Count => r.totals.count,
            Order::P99 => r.totals.p99_us,
            Order::Queued => r.totals.queued_us,
        };
        let limit = limit.unwrap_or(usize::MAX);
        if limit < rows.len() {
            rows.select_nth_unstable_by(limit, |a, b| key(b).cmp(&key(a)));
            rows.truncate(limit);
        }
        rows.sort_by(|a, b| key(b).cmp(&key(a)).then(a.digest.cmp(&b.digest)));
        let overflow = self.overflow.read();
        if overflow.count > 0 && rows.len() < limit {
            let text: Arc<[u8]> = Arc::from(&b"(evicted rows)"[..]);
            rows.push(DigestRow {
                digest: None,
                user: Arc::from(""),
                schema: None,
                server: 0,
                text,
                first_seen: overflow.first_ms.map(|ms| self.wall(ms)),
                last_seen: self.wall(overflow.last_ms),
                totals: overflow,
            });
        }
        rows
    }

    fn row(&self, digest: Option<DigestId>, row: &Row, server: usize, totals: Totals) -> DigestRow {
        DigestRow {
            digest,
            user: row.user.clone(),
            schema: row.schema.clone(),
            server,
            text: row.text.clone(),
            first_seen: totals.first_ms.map(|ms| self.wall(ms)),
            last_seen: self.wall(totals.last_ms),
            totals,
        }
    }

    fn wall(&self, ms: u64) -> SystemTime {
        self.epoch_wall + Duration::from_millis(ms)
    }
}

impl Row {
    fn is(&self, user: &str, schema: Option<&[u8]>) -> bool {
        &*self.user == user && self.schema.as_deref() == schema
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn who(user: &str, schema: Option<&[u8]>) -> u64 {
    let mut h = FxHasher::default();
    h.write(user.as_bytes());
    match schema {
        Some(s) => {
            h.write_u8(1);
            h.write(s);
        }
        None => h.write_u8(0),
    }
    h.finish()
}

fn shard_of(key: &Key) -> usize {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    // Fx mixes into the high bits.
    (h.finish() >> 59) as usize % SHARDS
}

/// The longest prefix of `text` within `max` bytes that does not split a UTF-8 character.
fn cut(text: &[u8], max: usize) -> usize {
    if text.len() <= max {
        return text.len();
    }
    (0..=max)
        .rev()
        .find(|&i| i == 0 || text.get(i).is_none_or(|b| (b & 0xC0) != 0x80))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "digests/tests.rs"]
mod tests;
