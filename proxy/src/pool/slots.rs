//! Execution slots: at most `pool_size` statements run on the backend at once. A fair FIFO
//! queue (tokio's semaphore hands permits to waiters in arrival order), resizable live.
//!
//! Sessions that hold a transaction or a lock between statements wait apart
//! ([`Slots::acquire_held`]): others may be waiting on what they hold, so a slot given back
//! while one of them waits is handed to the first of them directly (a FIFO of `holders`),
//! ahead of the semaphore's queue. Such a session keeps no slot while its client is idle
//! (its backend stays on a pinned place), so no number of idle transactions holds up another
//! client's statement. And it never waits for long on statements that may be waiting on its
//! locks: when no slot comes back for its [`Slots::patience`], every slot may be held by
//! such statements, and its statement runs beyond `pool_size` (an overflow slot).

mod holders;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ServerCpus;
use holders::Holders;

pub struct Slots {
    sem: Arc<Semaphore>,
    size: AtomicU32,
    /// Permits to swallow as they come back, after the size was lowered.
    excess: AtomicU32,
    waiting: AtomicUsize,
    in_use: AtomicU32,
    /// Slots sessions keep between statements (a transaction for which no pinned place was
    /// free): taken, but running nothing.
    kept: AtomicU32,
    /// Statements running beyond `size` now (overflow slots).
    overflowing: AtomicU32,
    /// Holders waiting for a slot, in arrival order (`acquire_held`).
    holders: Mutex<Holders>,
    /// The length of `holders`' queue, readable without its lock: a slot given back looks
    /// at it first.
    holders_waiting: AtomicUsize,
    /// Permits given back while holders waited: a holder that sees none come back for its
    /// patience overflows.
    returned: AtomicU64,
    /// Statements that have queued for a slot, ever: pipelined batches take members only
    /// while nobody has queued after their leader (`batches`).
    arrivals: AtomicU64,
    /// Longest wait of a statement that got its slot, since the last `take_max_wait`.
    max_wait_us: AtomicU64,
    /// Moving average of how long a statement holds its slot (µs), for admission control.
    service_us: AtomicU64,
    /// The server's CPUs as it reported them (`server_cpus = auto`); 0 until known.
    reported_cpus: AtomicU32,
    /// Since the last `take_window`: statements finished, their summed backend time, and
    /// the highest queue and slot use seen (what `pool_size = auto` learns from).
    window_done: AtomicU64,
    window_busy_us: AtomicU64,
    window_peak_waiting: AtomicUsize,
    window_peak_in_use: AtomicU32,
}

/// What the slots saw since the previous [`Slots::take_window`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) completions: u64,
    pub(crate) busy: Duration,
    pub(crate) peak_waiting: usize,
    pub(crate) peak_in_use: u32,
}

/// One execution slot; returned on drop.
pub(crate) struct Slot {
    /// `None`: an overflow slot, beyond `size` (`Slots::acquire_held`).
    permit: Option<OwnedSemaphorePermit>,
    slots: Arc<Slots>,
    /// Kept by its session between statements (`Slot::set_kept`).
    kept: bool,
}

impl Slot {
    /// Whether the statement runs beyond `pool_size`.
    pub(crate) fn is_overflow(&self) -> bool {
        self.permit.is_none()
    }

    /// The session keeps the slot between statements (`true`), or runs a statement on it
    /// again (`false`): a kept slot runs nothing, which `Slots::running` leaves out.
    pub(crate) fn set_kept(&mut self, kept: bool) {
        if kept != self.kept {
            self.kept = kept;
            if kept {
                self.slots.kept.fetch_add(1, Ordering::Relaxed);
            } else {
                self.slots.kept.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.set_kept(false);
        self.slots.in_use.fetch_sub(1, Ordering::Relaxed);
        match self.permit.take() {
            Some(p) => self.slots.give_back(p),
            None => {
                self.slots.overflowing.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Keeps the waiting count right when an acquiring future is cancelled.
struct WaitGuard<'a>(&'a AtomicUsize);
impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Slots {
    pub(crate) fn new(size: u32) -> Arc<Slots> {
        Arc::new(Slots {
            sem: Arc::new(Semaphore::new(size as usize)),
            size: AtomicU32::new(size),
            excess: AtomicU32::new(0),
            waiting: AtomicUsize::new(0),
            in_use: AtomicU32::new(0),
            kept: AtomicU32::new(0),
            overflowing: AtomicU32::new(0),
            holders: Mutex::default(),
            holders_waiting: AtomicUsize::new(0),
            returned: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            max_wait_us: AtomicU64::new(0),
            service_us: AtomicU64::new(0),
            reported_cpus: AtomicU32::new(0),
            window_done: AtomicU64::new(0),
            window_busy_us: AtomicU64::new(0),
            window_peak_waiting: AtomicUsize::new(0),
            window_peak_in_use: AtomicU32::new(0),
        })
    }

    /// Waits in FIFO order for a slot, at most `timeout`. `Err(waited)` on timeout.
    pub(crate) async fn acquire(self: &Arc<Self>, timeout: Duration) -> Result<Slot, Duration> {
        self.arrivals.fetch_add(1, Ordering::Relaxed);
        let permit = match self.sem.clone().try_acquire_owned() {
            // Free at once: no wait to time, so no clock read.
            Ok(p) => p,
            Err(_) => {
                let start = Instant::now();
                let _guard = self.queue_up();
                match tokio::time::timeout(timeout, self.sem.clone().acquire_owned()).await {
                    Ok(Ok(p)) => {
                        self.note_wait(start);
                        p
                    }
                    _ => return Err(start.elapsed()),
                }
            }
        };
        Ok(self.slot(Some(permit)))
    }

    /// A slot if one is free and nobody queues for it (background work that must not jump
    /// the queue: a free permit exists only while no one waits).
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<Slot> {
        if self.holders_waiting.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let permit = self.sem.clone().try_acquire_owned().ok()?;
        Some(self.slot(Some(permit)))
    }

    fn slot(self: &Arc<Self>, permit: Option<OwnedSemaphorePermit>) -> Slot {
        let held = self.in_use.fetch_add(1, Ordering::Relaxed) + 1;
        self.window_peak_in_use.fetch_max(held, Ordering::Relaxed);
        Slot {
            permit,
            slots: self.clone(),
            kept: false,
        }
    }

    /// Counts a statement that starts waiting; the guard uncounts it.
    fn queue_up(&self) -> WaitGuard<'_> {
        let queued = self.waiting.fetch_add(1, Ordering::Relaxed) + 1;
        self.window_peak_waiting
            .fetch_max(queued, Ordering::Relaxed);
        WaitGuard(&self.waiting)
    }

    fn note_wait(&self, start: Instant) {
        let waited = start.elapsed().as_micros() as u64;
        self.max_wait_us.fetch_max(waited, Ordering::Relaxed);
    }

    /// A permit given back: swallowed while the size shrinks, else passed on.
    fn give_back(self: &Arc<Self>, p: OwnedSemaphorePermit) {
        let mut excess = self.excess.load(Ordering::Relaxed);
        while excess > 0 {
            match self.excess.compare_exchange(
                excess,
                excess - 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    p.forget();
                    return;
                }
                Err(now) => excess = now,
            }
        }
        // Counted only for the holders waiting now (they watch it for progress): the path
        // of a slot given back while none waits stays free of the shared write.
        if self.holders_waiting.load(Ordering::Relaxed) > 0 {
            self.returned.fetch_add(1, Ordering::Relaxed);
        }
        self.pass_on(p);
    }

    /// Changes the number of slots without disturbing statements that hold one.
    pub(crate) fn resize(self: &Arc<Self>, new: u32) {
        let old = self.size.swap(new, Ordering::AcqRel);
        if new > old {
            let mut grow = new - old;
            // Cancel pending shrinkage first.
            while grow > 0 {
                let ex = self.excess.load(Ordering::Relaxed);
                if ex == 0 {
                    break;
                }
                let take = ex.min(grow);
                if self
                    .excess
                    .compare_exchange(ex, ex - take, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    grow -= take;
                }
            }
            self.sem.add_permits(grow as usize);
            // New slots the semaphore's own waiters did not take go to waiting holders, which
            // would otherwise wait for one given back while these sat free.
            for _ in 0..grow {
                if self.holders_waiting.load(Ordering::SeqCst) == 0 {
                    break;
                }
                match self.sem.clone().try_acquire_owned() {
                    Ok(p) => self.pass_on(p),
                    Err(_) => break,
                }
            }
        } else if new < old {
            let shrink = old - new;
            let forgotten = self.sem.forget_permits(shrink as usize) as u32;
            self.excess.fetch_add(shrink - forgotten, Ordering::AcqRel);
        }
    }

    pub fn size(&self) -> u32 {
        self.size.load(Ordering::Relaxed)
    }
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
    /// How many statements have queued for a slot so far (each `acquire` counts).
    pub(crate) fn arrivals(&self) -> u64 {
        self.arrivals.load(Ordering::Relaxed)
    }
    /// Slots taken: statements running, overflow slots included, and slots kept between
    /// statements.
    pub fn in_use(&self) -> u32 {
        self.in_use.load(Ordering::Relaxed)
    }
    /// Statements running on a slot now (overflow slots included, kept slots not).
    pub fn running(&self) -> u32 {
        self.in_use()
            .saturating_sub(self.kept.load(Ordering::Relaxed))
    }
    /// Statements of holders running beyond `size` now.
    pub fn overflowing(&self) -> u32 {
        self.overflowing.load(Ordering::Relaxed)
    }
    /// A slot is free and nobody queues for it: a statement arriving now runs at once.
    pub(crate) fn has_free(&self) -> bool {
        self.permits_taken() < self.size() && self.waiting() == 0
    }
    /// Slots taken within `size` (overflow slots are beyond it).
    fn permits_taken(&self) -> u32 {
        self.in_use().saturating_sub(self.overflowing())
    }
    /// The moving average of how long a statement holds its slot.
    pub fn mean_service(&self) -> Duration {
        Duration::from_micros(self.service_us.load(Ordering::Relaxed))
    }
    /// The server's own CPU count, once a backend connection has read it.
    pub fn reported_cpus(&self) -> Option<u32> {
        Some(self.reported_cpus.load(Ordering::Relaxed)).filter(|&n| n > 0)
    }
    pub(crate) fn set_reported_cpus(&self, cpus: u32) {
        self.reported_cpus.store(cpus, Ordering::Relaxed);
    }
    /// `server_cpus` in force: the configured number, or with `auto` what the server said.
    pub fn server_cpus(&self, configured: ServerCpus) -> Option<u32> {
        match configured {
            ServerCpus::Fixed(n) => Some(n),
            ServerCpus::Auto => self.reported_cpus(),
        }
    }
    /// The server time one statement takes, on average. The mean slot time counts the
    /// wait for a CPU inside the server too: with `n` statements running on `cpus` CPUs
    /// (n > cpus) each gets cpus/n of one, so one statement's own time is that share of its
    /// slot time (Little's law). With the CPUs unknown, the slot time itself. Only running
    /// statements count: a transaction between its statements holds no slot (or, kept for
    /// want of a pinned place, one `running` leaves out).
    pub(crate) fn statement_cost(&self, cpus: Option<u32>) -> Duration {
        let mean = self.mean_service();
        match cpus {
            Some(cpus) if cpus > 0 => {
                let running = self.running().max(cpus);
                mean * cpus / running
            }
            _ => mean,
        }
    }
    pub(crate) fn take_max_wait(&self) -> Duration {
        Duration::from_micros(self.max_wait_us.swap(0, Ordering::Relaxed))
    }
    /// Feeds the service-time average (weight 1/32 per sample).
    pub(crate) fn record_service(&self, d: Duration) {
        let sample = d.as_micros().min(u64::MAX as u128) as u64;
        self.window_done.fetch_add(1, Ordering::Relaxed);
        self.window_busy_us.fetch_add(sample, Ordering::Relaxed);
        let _ = self
            .service_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
                Some(if avg == 0 {
                    sample
                } else {
                    avg - avg / 32 + sample / 32
                })
            });
    }

    /// Counters since the last call, reset. Peaks include what is queued and held right now,
    /// so a tick in which nothing arrived but every slot stayed busy still shows demand.
    pub(crate) fn take_window(&self) -> Window {
        Window {
            completions: self.window_done.swap(0, Ordering::Relaxed),
            busy: Duration::from_micros(self.window_busy_us.swap(0, Ordering::Relaxed)),
            peak_waiting: self
                .window_peak_waiting
                .swap(0, Ordering::Relaxed)
                .max(self.waiting()),
            peak_in_use: self
                .window_peak_in_use
                .swap(0, Ordering::Relaxed)
                .max(self.in_use()),
        }
    }

    /// How long a statement arriving now should expect to wait: everyone queued ahead of it
    /// is served `size` at a time, each taking the average service time (Little's law).
    pub(crate) fn expected_wait(&self) -> Duration {
        let queued = self.waiting() as u64 + 1;
        let size = u64::from(self.size().max(1));
        if self.has_free() {
            return Duration::ZERO;
        }
        Duration::from_micros(queued * self.service_us.load(Ordering::Relaxed) / size)
    }

    /// Latency-target admission: `Err(expected wait)` when a statement arriving now should
    /// be refused. `starved` is how long its session has gone without a slot. A session just
    /// served may fill the queue to [`MIN_SHARE`] of `target`; the share grows with the
    /// session's wait and reaches [`MAX_SHARE`] after [`FULL_SHARE_AFTER`] targets. Under
    /// sustained overload the queue then sits in the top band, where only the longest-waiting
    /// get in: a client that just finished, and so arrives the moment a place frees up,
    /// cannot keep taking places from clients that are backing off after refusals.
    pub(crate) fn admit(&self, target: Duration, starved: Duration) -> Result<(), Duration> {
        let expected = self.expected_wait();
        if expected <= admission_limit(target, starved) {
            Ok(())
        } else {
            Err(expected)
        }
    }

    /// No slot is handed out any more: waiting statements fail (holders too).
    pub(crate) fn close(&self) {
        self.sem.close();
        let mut holders = self.lock_holders();
        let n = holders.queue.len();
        // Their senders dropped: each waiting holder wakes to a closed channel.
        holders.queue.clear();
        self.holders_waiting.fetch_sub(n, Ordering::SeqCst);
    }
}

/// The share of `max_queue_wait` that the expected wait may reach for a session just served.
pub(crate) const MIN_SHARE: f64 = 0.4;
/// The share for a session that waited [`FULL_SHARE_AFTER`] targets. It stays below 1: the
/// expected wait is a mean, and the margin keeps most statements admitted on it from waiting
/// out the whole target and being refused after all (the backstop in the session).
pub(crate) const MAX_SHARE: f64 = 0.8;
/// A session that has waited this many `max_queue_wait`s for a slot gets [`MAX_SHARE`].
pub(crate) const FULL_SHARE_AFTER: u32 = 10;

/// The expected wait up to which a session that has gone `starved` without a slot is admitted.
pub(crate) fn admission_limit(target: Duration, starved: Duration) -> Duration {
    let full = target.saturating_mul(FULL_SHARE_AFTER);
    let grown = if full.is_zero() {
        1.0
    } else {
        (starved.as_secs_f64() / full.as_secs_f64()).min(1.0)
    };
    target.mul_f64(MIN_SHARE + (MAX_SHARE - MIN_SHARE) * grown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_handed_out_in_arrival_order() {
        let slots = Slots::new(1);
        let first = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let s = slots.clone();
            let o = order.clone();
            tasks.push(tokio::spawn(async move {
                let _slot = s.acquire(Duration::from_secs(5)).await.unwrap();
                o.lock().unwrap().push(i);
            }));
            // Let task i enqueue before task i+1.
            tokio::task::yield_now().await;
            while slots.waiting() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn expected_wait_follows_queue_and_service_time() {
        let slots = Slots::new(2);
        assert_eq!(slots.expected_wait(), Duration::ZERO);
        slots.record_service(Duration::from_millis(10));
        let _a = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let _b = slots.acquire(Duration::from_secs(1)).await.unwrap();
        // Full, nobody queued: one service time shared by two slots.
        assert_eq!(slots.expected_wait(), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn a_statement_costs_its_share_of_the_server_cpus_it_waits_for() {
        let slots = Slots::new(64);
        slots.record_service(Duration::from_millis(8));
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(slots.acquire(Duration::from_secs(1)).await.unwrap());
        }
        // Unknown CPUs: the slot time itself.
        assert_eq!(slots.statement_cost(None), Duration::from_millis(8));
        // 8 statements on 2 CPUs: each got a quarter of one for its 8 ms.
        assert_eq!(slots.statement_cost(Some(2)), Duration::from_millis(2));
        // More CPUs than statements: nothing waited for a CPU.
        assert_eq!(slots.statement_cost(Some(16)), Duration::from_millis(8));
        assert_eq!(slots.reported_cpus(), None);
        assert_eq!(slots.server_cpus(ServerCpus::Auto), None);
        slots.set_reported_cpus(4);
        assert_eq!(slots.server_cpus(ServerCpus::Auto), Some(4));
        assert_eq!(slots.server_cpus(ServerCpus::Fixed(3)), Some(3));
    }

    #[test]
    fn the_admission_limit_grows_with_the_wait_since_the_last_slot() {
        let t = Duration::from_millis(200);
        assert_eq!(
            admission_limit(t, Duration::ZERO),
            Duration::from_millis(80)
        );
        assert_eq!(
            admission_limit(t, Duration::from_secs(1)),
            Duration::from_millis(120)
        );
        assert_eq!(
            admission_limit(t, Duration::from_secs(2)),
            Duration::from_millis(160)
        );
        assert_eq!(
            admission_limit(t, Duration::from_secs(60)),
            Duration::from_millis(160)
        );
        assert_eq!(
            admission_limit(Duration::ZERO, Duration::ZERO),
            Duration::ZERO
        );
    }

    #[tokio::test]
    async fn a_long_waiting_session_may_use_the_band_a_just_served_one_may_not() {
        let slots = Slots::new(1);
        let target = Duration::from_millis(150);
        assert_eq!(slots.admit(target, Duration::ZERO), Ok(()));
        slots.record_service(Duration::from_millis(100));
        let _held = slots.acquire(Duration::from_secs(1)).await.unwrap();
        // Expected wait 100 ms: under 0.8 of the target (120 ms), above 0.4 of it (60 ms).
        assert_eq!(slots.admit(target, Duration::from_secs(5)), Ok(()));
        assert_eq!(
            slots.admit(target, Duration::ZERO),
            Err(Duration::from_millis(100))
        );
        assert!(slots
            .admit(Duration::from_millis(110), Duration::from_secs(5))
            .is_err());
        assert_eq!(
            slots.admit(Duration::from_millis(250), Duration::ZERO),
            Ok(())
        );
    }

    #[tokio::test]
    async fn windows_count_completions_and_peaks_then_reset() {
        let slots = Slots::new(1);
        let held = slots.acquire(Duration::from_secs(1)).await.unwrap();
        assert!(slots.acquire(Duration::from_millis(5)).await.is_err());
        slots.record_service(Duration::from_millis(3));
        slots.record_service(Duration::from_millis(5));
        let w = slots.take_window();
        assert_eq!(
            w,
            Window {
                completions: 2,
                busy: Duration::from_millis(8),
                peak_waiting: 1,
                peak_in_use: 1,
            }
        );
        drop(held);
        assert_eq!(slots.take_window(), Window::default());
    }

    #[tokio::test]
    async fn try_acquire_never_jumps_the_queue() {
        let slots = Slots::new(1);
        let held = slots.try_acquire().expect("a free slot");
        assert!(slots.try_acquire().is_none());
        let s = slots.clone();
        let waiter = tokio::spawn(async move { s.acquire(Duration::from_secs(5)).await.is_ok() });
        while slots.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        drop(held);
        // The permit went to the waiter, not to a late try.
        assert!(slots.try_acquire().is_none() || slots.waiting() == 0);
        assert!(waiter.await.unwrap());
        assert_eq!(slots.in_use(), 0);
    }

    #[tokio::test]
    async fn acquire_times_out_and_keeps_counts_right() {
        let slots = Slots::new(1);
        let _held = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let err = slots
            .acquire(Duration::from_millis(20))
            .await
            .err()
            .unwrap();
        assert!(err >= Duration::from_millis(20));
        assert_eq!(slots.waiting(), 0);
        assert_eq!(slots.in_use(), 1);
    }

    #[tokio::test]
    async fn shrinking_waits_for_holders_and_growing_adds_slots() {
        let slots = Slots::new(2);
        let a = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let b = slots.acquire(Duration::from_secs(1)).await.unwrap();
        slots.resize(1);
        drop(a); // swallowed
        assert!(slots.acquire(Duration::from_millis(10)).await.is_err());
        drop(b); // the one remaining slot
        let c = slots.acquire(Duration::from_millis(100)).await.unwrap();
        slots.resize(3);
        let d = slots.acquire(Duration::from_millis(100)).await.unwrap();
        let e = slots.acquire(Duration::from_millis(100)).await.unwrap();
        assert!(slots.acquire(Duration::from_millis(10)).await.is_err());
        drop((c, d, e));
    }
}
