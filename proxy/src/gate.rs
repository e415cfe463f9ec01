//! A FIFO gate: at most `limit` statements hold it at once; the others queue in arrival order
//! (tokio's fair semaphore) for up to a timeout. A query rule's `max_concurrency` and a
//! user's `max_concurrency` each have one; the statement path holds the [`GateGuard`] while
//! its statement runs, and dropping it lets the next one in.
//!
//! The limit can change while statements hold the gate: a lower limit retires permits as
//! their holders leave, so the gate never lets more than the new limit in.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Gate {
    inner: Arc<Inner>,
}

struct Inner {
    sem: Arc<Semaphore>,
    limit: AtomicU32,
    /// Held permits to retire when they come back (the limit was lowered).
    debt: AtomicU32,
    waiting: AtomicUsize,
}

/// A place in the gate; the next waiter goes in when it is dropped.
pub struct GateGuard {
    permit: Option<OwnedSemaphorePermit>,
    inner: Arc<Inner>,
}

/// How a statement got in.
pub struct Entered {
    pub guard: GateGuard,
    /// It had to queue (the gate was full when it came).
    pub queued: bool,
}

/// No place came free within the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateTimeout {
    pub waited: Duration,
}

impl Gate {
    pub fn new(limit: u32) -> Gate {
        Gate {
            inner: Arc::new(Inner {
                sem: Arc::new(Semaphore::new(limit as usize)),
                limit: AtomicU32::new(limit),
                debt: AtomicU32::new(0),
                waiting: AtomicUsize::new(0),
            }),
        }
    }

    /// Waits (FIFO) up to `timeout` for a place.
    pub async fn enter(&self, timeout: Duration) -> Result<Entered, GateTimeout> {
        let inner = &self.inner;
        if let Ok(permit) = inner.sem.clone().try_acquire_owned() {
            return Ok(Entered {
                guard: self.guard(permit),
                queued: false,
            });
        }
        let start = Instant::now();
        inner.waiting.fetch_add(1, Relaxed);
        let got = tokio::time::timeout(timeout, inner.sem.clone().acquire_owned()).await;
        inner.waiting.fetch_sub(1, Relaxed);
        match got {
            Ok(Ok(permit)) => Ok(Entered {
                guard: self.guard(permit),
                queued: true,
            }),
            // Timed out (the semaphore is never closed).
            _ => Err(GateTimeout {
                waited: start.elapsed(),
            }),
        }
    }

    fn guard(&self, permit: OwnedSemaphorePermit) -> GateGuard {
        GateGuard {
            permit: Some(permit),
            inner: self.inner.clone(),
        }
    }

    /// A new limit, for the statements that come next (a user's limit changed on reload).
    pub fn set_limit(&self, limit: u32) {
        let inner = &self.inner;
        let old = inner.limit.swap(limit, Relaxed);
        if limit > old {
            let more = limit - old;
            // Cancel retirements first, then add places.
            let debt = inner
                .debt
                .fetch_update(Relaxed, Relaxed, |d| Some(d - d.min(more)))
                .unwrap_or(0);
            inner.sem.add_permits((more - debt.min(more)) as usize);
        } else if limit < old {
            let fewer = old - limit;
            let free = inner.sem.forget_permits(fewer as usize) as u32;
            inner.debt.fetch_add(fewer - free, Relaxed);
        }
    }

    pub fn limit(&self) -> u32 {
        self.inner.limit.load(Relaxed)
    }

    /// Statements holding the gate now.
    pub fn running(&self) -> u32 {
        let inner = &self.inner;
        let issued = inner.limit.load(Relaxed) + inner.debt.load(Relaxed);
        issued.saturating_sub(inner.sem.available_permits() as u32)
    }

    /// Statements queued for it now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Relaxed)
    }
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        let retire = self
            .inner
            .debt
            .fetch_update(Relaxed, Relaxed, |d| d.checked_sub(1))
            .is_ok();
        if let Some(permit) = self.permit.take() {
            if retire {
                permit.forget();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn at_most_limit_inside_and_waiters_go_in_arrival_order() {
        let gate = Arc::new(Gate::new(2));
        let a = gate.enter(LONG).await.unwrap();
        let b = gate.enter(LONG).await.unwrap();
        assert!(!a.queued && !b.queued);
        assert_eq!(gate.running(), 2);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..5 {
            let (g, order) = (gate.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let e = g.enter(LONG).await.unwrap();
                assert!(e.queued);
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(e);
            }));
            // Each queues before the next arrives.
            while gate.waiting() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!((gate.running(), gate.waiting()), (2, 5));
        drop(a);
        drop(b);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!((gate.running(), gate.waiting()), (0, 0));
    }

    #[tokio::test]
    async fn a_full_gate_times_out() {
        let gate = Gate::new(1);
        let _held = gate.enter(LONG).await.unwrap();
        let e = gate.enter(Duration::from_millis(50)).await.err().unwrap();
        assert!(e.waited >= Duration::from_millis(50));
        assert_eq!(gate.waiting(), 0);
    }

    #[tokio::test]
    async fn the_limit_changes_while_held() {
        let gate = Gate::new(3);
        let held: Vec<_> = futures_util::future::join_all((0..3).map(|_| gate.enter(LONG))).await;
        gate.set_limit(1);
        assert_eq!(gate.running(), 3);
        drop(held);
        assert_eq!(gate.running(), 0);
        let one = gate.enter(LONG).await.unwrap();
        assert!(
            gate.enter(Duration::from_millis(20)).await.is_err(),
            "one place now"
        );
        gate.set_limit(2);
        let two = gate.enter(Duration::from_millis(20)).await.unwrap();
        assert_eq!(gate.running(), 2);
        // Lowered and raised again while held: the retirement is cancelled.
        gate.set_limit(1);
        gate.set_limit(2);
        drop((one, two));
        assert_eq!(gate.running(), 0);
        let a = gate.enter(Duration::from_millis(20)).await.unwrap();
        let b = gate.enter(Duration::from_millis(20)).await.unwrap();
        assert!(gate.enter(Duration::from_millis(20)).await.is_err());
        drop((a, b));
    }
}
