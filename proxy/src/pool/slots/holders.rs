//! The holders' way to an execution slot ([`Slots::acquire_held`]): sessions in a
//! transaction or holding a lock, whom others may be waiting on. A slot given back while one
//! of them waits is handed to the first of them directly (a FIFO of oneshot senders under a
//! mutex), ahead of the semaphore's own queue; a holder that stops waiting passes on what it
//! was handed. A holder that sees no slot come back for its [`Slots::patience`] runs beyond
//! `pool_size` (an overflow slot): every slot may be held by statements waiting on its locks.
//!
//! The fast path of everyone else stays as it was: a slot given back reads one counter
//! (`holders_waiting`) and takes the lock only while holders wait.

use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::{Slot, Slots};

/// A holder's patience is this many mean slot times: a whole pool that gives back no slot
/// for that long is most likely held by statements that wait on locks.
const PATIENCE_MEANS: u32 = 4;
/// The least patience: while statements take microseconds, scheduling noise alone may go
/// that long without a slot coming back.
const MIN_PATIENCE: Duration = Duration::from_millis(20);
/// The most patience: long statements hold a holder (whom others may wait on) up for at most
/// this long, far below the server's lock wait timeouts (`innodb_lock_wait_timeout` is 50 s by
/// default), so that statements blocked on its locks get them before they give up.
const MAX_PATIENCE: Duration = Duration::from_secs(1);

/// The holders waiting for a slot: each gets the next permit given back, first come first.
#[derive(Default)]
pub(super) struct Holders {
    pub(super) queue: VecDeque<(u64, oneshot::Sender<Handed>)>,
    next_id: u64,
}

/// A permit on its way to a waiting holder. If that holder stopped waiting before it took
/// the permit, the permit goes on to the next holder (or back to the semaphore).
pub(super) struct Handed {
    permit: Option<OwnedSemaphorePermit>,
    slots: Arc<Slots>,
}

impl Drop for Handed {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.slots.give_back(p);
        }
    }
}

/// A holder's place in the `holders` queue; leaving it (or dropping it) takes the entry out
/// if no permit was handed to it yet.
struct HolderWait<'a> {
    slots: &'a Arc<Slots>,
    id: u64,
    rx: oneshot::Receiver<Handed>,
    queued: bool,
}

impl<'a> HolderWait<'a> {
    fn join(slots: &'a Arc<Slots>) -> HolderWait<'a> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut holders = slots.lock_holders();
            let id = holders.next_id;
            holders.next_id += 1;
            holders.queue.push_back((id, tx));
            slots.holders_waiting.fetch_add(1, Ordering::SeqCst);
            id
        };
        // A permit given back just before this holder queued may have gone to the semaphore
        // (its giver saw nobody queued): it goes to the first holder now. The fence pairs
        // with the one in `pass_on`, so one of the two sees the other.
        fence(Ordering::SeqCst);
        if let Ok(p) = slots.sem.clone().try_acquire_owned() {
            slots.pass_on(p);
        }
        HolderWait {
            slots,
            id,
            rx,
            queued: true,
        }
    }

    /// Out of the queue: nobody hands this holder a permit from now on.
    fn leave(&mut self) {
        if !std::mem::take(&mut self.queued) {
            return;
        }
        let mut holders = self.slots.lock_holders();
        if let Some(i) = holders.queue.iter().position(|(id, _)| *id == self.id) {
            holders.queue.remove(i);
            self.slots.holders_waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for HolderWait<'_> {
    fn drop(&mut self) {
        // A permit already handed over drops with `rx` and goes on to the next holder.
        self.leave();
    }
}

impl Slots {
    /// A slot for a statement of a session that holds a transaction or a lock between
    /// statements (others may wait on it): ahead of every statement of a session that holds
    /// nothing, first come first served among holders. It does not fail for want of a slot:
    /// once no slot has come back for a whole [`Slots::patience`] (the statements holding
    /// them may be waiting on this session's locks), or `timeout` has passed, the statement
    /// gets an overflow slot, beyond `size` (its backend is the session's already, so it
    /// takes no connection from the pool). `Err(waited)` only when the slots are closed.
    pub(crate) async fn acquire_held(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<Slot, Duration> {
        // Free at once, and no holder ahead: no clock read, no lock.
        if self.holders_waiting.load(Ordering::SeqCst) == 0 {
            if let Ok(p) = self.sem.clone().try_acquire_owned() {
                return Ok(self.slot(Some(p)));
            }
        }
        if self.sem.is_closed() {
            return Err(Duration::ZERO);
        }
        let start = Instant::now();
        let deadline = start + timeout;
        let _guard = self.queue_up();
        let mut wait = HolderWait::join(self);
        let mut seen = self.returned.load(Ordering::Relaxed);
        loop {
            let until = (Instant::now() + self.patience()).min(deadline);
            match tokio::time::timeout_at(until.into(), &mut wait.rx).await {
                Ok(Ok(handed)) => {
                    wait.queued = false;
                    self.note_wait(start);
                    return Ok(self.handed(handed));
                }
                Ok(Err(_)) => return Err(start.elapsed()),
                Err(_) => {
                    let now = self.returned.load(Ordering::Relaxed);
                    if now != seen && Instant::now() < deadline {
                        // Slots come back: the queue moves, and this holder's turn comes.
                        seen = now;
                        continue;
                    }
                    wait.leave();
                    // A permit handed over before it left is taken rather than overflowing.
                    if let Ok(handed) = wait.rx.try_recv() {
                        self.note_wait(start);
                        return Ok(self.handed(handed));
                    }
                    self.note_wait(start);
                    self.overflowing.fetch_add(1, Ordering::Relaxed);
                    return Ok(self.slot(None));
                }
            }
        }
    }

    /// How long a holder waits for any slot to come back before its statement runs beyond
    /// `pool_size`: [`PATIENCE_MEANS`] mean slot times, within [`MIN_PATIENCE`] and
    /// [`MAX_PATIENCE`]. Slots that keep coming back mean the queue moves; none for that
    /// long means every slot may be held by a statement waiting on a lock a holder owns.
    pub(crate) fn patience(&self) -> Duration {
        (self.mean_service() * PATIENCE_MEANS).clamp(MIN_PATIENCE, MAX_PATIENCE)
    }

    /// The slot of a permit handed to a waiting holder.
    fn handed(self: &Arc<Self>, mut handed: Handed) -> Slot {
        let permit = handed.permit.take();
        if permit.is_none() {
            self.overflowing.fetch_add(1, Ordering::Relaxed);
        }
        self.slot(permit)
    }

    pub(super) fn lock_holders(&self) -> MutexGuard<'_, Holders> {
        // Every mutation is one push or removal: a poisoned lock is consistent.
        self.holders.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A permit to the first waiting holder, else to the semaphore (its queue first).
    pub(super) fn pass_on(self: &Arc<Self>, mut p: OwnedSemaphorePermit) {
        loop {
            if self.holders_waiting.load(Ordering::SeqCst) > 0 {
                match self.hand_over(p) {
                    Ok(()) => return,
                    Err(back) => p = back,
                }
            }
            drop(p);
            // A holder that queued meanwhile found no free permit before this one was back
            // in the semaphore: take it out again for the first holder (see `HolderWait::join`).
            fence(Ordering::SeqCst);
            if self.holders_waiting.load(Ordering::SeqCst) == 0 {
                return;
            }
            match self.sem.clone().try_acquire_owned() {
                Ok(again) => p = again,
                Err(_) => return,
            }
        }
    }

    /// Sends `p` to the first holder still waiting; `Err(p)` if none is.
    fn hand_over(
        self: &Arc<Self>,
        mut p: OwnedSemaphorePermit,
    ) -> Result<(), OwnedSemaphorePermit> {
        let mut holders = self.lock_holders();
        while let Some((_, tx)) = holders.queue.pop_front() {
            self.holders_waiting.fetch_sub(1, Ordering::SeqCst);
            let handed = Handed {
                permit: Some(p),
                slots: self.clone(),
            };
            match tx.send(handed) {
                Ok(()) => return Ok(()),
                // That holder stopped waiting: the next one.
                Err(mut back) => match back.permit.take() {
                    Some(again) => p = again,
                    None => return Ok(()),
                },
            }
        }
        Err(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::Mutex;
    use std::task::{Context, Poll};

    /// Polls `f` once (it registers as a waiter if it must wait).
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        std::pin::Pin::new(f).poll(&mut cx)
    }

    async fn until(cond: impl Fn() -> bool) {
        while !cond() {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn holders_go_ahead_of_other_statements_in_arrival_order() {
        let slots = Slots::new(1);
        let first = slots.acquire(Duration::from_secs(1)).await.unwrap();
        // Patience long enough that nobody overflows while the slot is busy.
        slots.record_service(Duration::from_millis(200));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Two ordinary statements queue first, then two holders.
        for (i, held) in [(0, false), (1, false), (2, true), (3, true)] {
            let (s, o) = (slots.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = if held {
                    s.acquire_held(Duration::from_secs(5)).await.unwrap()
                } else {
                    s.acquire(Duration::from_secs(5)).await.unwrap()
                };
                assert!(!slot.is_overflow());
                o.lock().unwrap().push(i);
            }));
            until(|| slots.waiting() == i + 1).await;
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![2, 3, 0, 1]);
        assert_eq!((slots.in_use(), slots.waiting()), (0, 0));
    }

    #[tokio::test]
    async fn a_holder_runs_beyond_the_pool_when_no_slot_comes_back() {
        let slots = Slots::new(1);
        let stuck = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let started = Instant::now();
        let slot = slots.acquire_held(Duration::from_secs(10)).await.unwrap();
        let waited = started.elapsed();
        assert!(slot.is_overflow());
        assert!(
            waited >= MIN_PATIENCE && waited < MAX_PATIENCE,
            "{waited:?}"
        );
        assert_eq!(
            (slots.in_use(), slots.overflowing(), slots.waiting()),
            (2, 1, 0)
        );
        // The overflow slot frees no permit: an ordinary statement still waits.
        drop(slot);
        assert_eq!(slots.overflowing(), 0);
        assert!(slots.acquire(Duration::from_millis(10)).await.is_err());
        drop(stuck);
        assert!(slots.try_acquire().is_some());
    }

    #[tokio::test]
    async fn patience_follows_the_mean_slot_time_within_its_bounds() {
        let slots = Slots::new(1);
        assert_eq!(slots.patience(), MIN_PATIENCE);
        slots.record_service(Duration::from_millis(50));
        assert_eq!(slots.patience(), Duration::from_millis(200));
        for _ in 0..200 {
            slots.record_service(Duration::from_secs(2));
        }
        assert_eq!(slots.patience(), MAX_PATIENCE);
        // A slot held for less than the patience comes back to the holder: no overflow.
        let slots = Slots::new(1);
        slots.record_service(Duration::from_millis(100));
        let busy = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let s = slots.clone();
        let holder = tokio::spawn(async move { s.acquire_held(Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(60)).await;
        drop(busy);
        assert!(!holder.await.unwrap().unwrap().is_overflow());
    }

    #[tokio::test]
    async fn a_holder_that_stops_waiting_passes_its_permit_on() {
        let slots = Slots::new(1);
        let busy = slots.acquire(Duration::from_secs(1)).await.unwrap();
        slots.record_service(Duration::from_millis(200));
        // The first holder queues, and is handed the permit, but never takes it.
        let mut first = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut first).is_pending());
        let mut second = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut second).is_pending());
        drop(busy);
        drop(first);
        let slot = second.await.unwrap();
        assert!(!slot.is_overflow());
        // A holder that leaves before anything was handed to it leaves no trace.
        let mut third = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut third).is_pending());
        drop(third);
        drop(slot);
        assert_eq!(slots.holders_waiting.load(Ordering::SeqCst), 0);
        assert!(
            slots.try_acquire().is_some(),
            "the permit is back in the semaphore"
        );
    }

    #[tokio::test]
    async fn background_work_never_takes_a_slot_a_holder_waits_for() {
        let slots = Slots::new(1);
        let busy = slots.acquire(Duration::from_secs(1)).await.unwrap();
        slots.record_service(Duration::from_millis(200));
        let mut holder = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut holder).is_pending());
        assert!(slots.try_acquire().is_none());
        drop(busy);
        assert!(slots.try_acquire().is_none());
        assert!(!holder.await.unwrap().is_overflow());
    }

    #[tokio::test]
    async fn a_slot_added_by_a_resize_goes_to_a_waiting_holder() {
        let slots = Slots::new(1);
        let _busy = slots.acquire(Duration::from_secs(1)).await.unwrap();
        slots.record_service(Duration::from_millis(200));
        let mut holder = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut holder).is_pending());
        slots.resize(2);
        match poll_once(&mut holder) {
            Poll::Ready(Ok(slot)) => assert!(!slot.is_overflow()),
            _ => panic!("the holder got no slot from the resize"),
        }
    }

    #[tokio::test]
    async fn closing_the_slots_ends_a_holders_wait() {
        let slots = Slots::new(1);
        let _busy = slots.acquire(Duration::from_secs(1)).await.unwrap();
        slots.record_service(Duration::from_millis(200));
        let mut holder = Box::pin(slots.acquire_held(Duration::from_secs(5)));
        assert!(poll_once(&mut holder).is_pending());
        slots.close();
        assert!(holder.await.is_err());
    }

    #[tokio::test]
    async fn a_kept_slot_runs_nothing() {
        let slots = Slots::new(2);
        let mut kept = slots.acquire(Duration::from_secs(1)).await.unwrap();
        let _running = slots.acquire(Duration::from_secs(1)).await.unwrap();
        kept.set_kept(true);
        assert_eq!((slots.in_use(), slots.running()), (2, 1));
        kept.set_kept(false);
        assert_eq!(slots.running(), 2);
        kept.set_kept(true);
        drop(kept);
        assert_eq!((slots.in_use(), slots.running()), (1, 1));
    }
}
