//! Pinned places: how many sessions may keep a backend connection between statements.
//!
//! A session keeps its backend past the end of a statement only while it holds a
//! [`PinPlace`]. At most `max_backend_connections - pool_size` places are handed out, so
//! `pool_size` connections always remain for statements that do not pin: an execution slot
//! never waits for a connection that an idle pinned session sits on.
//!
//! A statement the classifier knows will pin waits for a place *before* it runs
//! ([`Pool::pin_place`]) and is refused after `pin_wait` if none frees up, so nothing it would
//! have created is lost. State that only turns out to pin afterwards (the server reports a
//! change nothing explains, a cursor, long data) takes a place regardless
//! ([`Pool::pin_place_anyway`]); the pool then lets execution connections exceed the cap by as
//! many (`Pool::allowed_open`), so `pool_size` connections still remain.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Error, Pool};
use crate::stats::{PinReason, Stats};

/// Why a session keeps its backend between statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    Pin(PinReason),
    /// The last statement left warnings or an error that SHOW WARNINGS must find on the
    /// same backend. Such a session keeps its backend only while a quarter of the places
    /// stays free for pins; it never waits for one.
    Warnings,
    /// A statement whose client stopped reading its answer gave its execution slot up
    /// (`session::Session::relay_on`); its backend stays with it until the answer is out.
    /// Taken only while a place is free.
    Stalled,
    /// An open transaction (or a lock inside one) between its statements, with no other
    /// reason to keep the backend: the session gives its execution slot back after each
    /// statement. Taken only while a place is free; otherwise the session keeps its slot.
    Transaction,
}

impl Hold {
    const COUNT: usize = PinReason::ALL.len() + 3;

    fn index(self) -> usize {
        match self {
            Hold::Pin(r) => r as usize,
            Hold::Warnings => PinReason::ALL.len(),
            Hold::Stalled => PinReason::ALL.len() + 1,
            Hold::Transaction => PinReason::ALL.len() + 2,
        }
    }

    /// Every hold, in display order.
    pub(crate) fn all() -> impl Iterator<Item = Hold> {
        PinReason::ALL.iter().map(|r| Hold::Pin(*r)).chain([
            Hold::Warnings,
            Hold::Stalled,
            Hold::Transaction,
        ])
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Hold::Pin(r) => r.label(),
            Hold::Warnings => "pending_warnings",
            Hold::Stalled => "stalled_reader",
            Hold::Transaction => "transaction",
        }
    }
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The places in use, by hold.
#[derive(Default)]
pub(super) struct Places {
    held: Mutex<[u32; Hold::COUNT]>,
    /// The sum of `held`, readable without the lock (the checkout's cap uses it).
    total: AtomicU32,
    /// A place was given back or the cap grew.
    pub(super) freed: Notify,
}

impl Places {
    fn lock(&self) -> MutexGuard<'_, [u32; Hold::COUNT]> {
        // Every mutation is one increment or decrement: a poisoned lock is consistent.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn total(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }

    fn add(held: &mut [u32; Hold::COUNT], total: &AtomicU32, hold: Hold) {
        held[hold.index()] += 1;
        total.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a statement could not pin its session: what the client's error reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PinRefusal {
    pub(crate) wanted: Hold,
    pub(crate) waited: Duration,
    /// max_backend_connections in force, and where it came from.
    pub(crate) max_open: u32,
    pub(crate) from_server: Option<u32>,
    pub(crate) pool_size: u32,
    /// Places pinned sessions may hold (max_open - pool_size).
    pub(crate) cap: u32,
    pub(crate) pinned: u32,
    /// Places in use by hold, largest first.
    pub(crate) by: Vec<(Hold, u32)>,
}

/// One session's right to keep its backend between statements; given back on drop.
pub(crate) struct PinPlace {
    pool: Pool,
    hold: Hold,
}

impl PinPlace {
    #[cfg(test)]
    pub(crate) fn hold(&self) -> Hold {
        self.hold
    }

    /// Files the place under another hold (the session's first pin reason changed).
    pub(crate) fn set(&mut self, hold: Hold) {
        if hold != self.hold {
            let mut held = self.pool.shared.places.lock();
            held[self.hold.index()] -= 1;
            held[hold.index()] += 1;
            self.hold = hold;
        }
    }
}

impl Drop for PinPlace {
    fn drop(&mut self) {
        let places = &self.pool.shared.places;
        places.lock()[self.hold.index()] -= 1;
        places.total.fetch_sub(1, Ordering::Relaxed);
        places.freed.notify_waiters();
    }
}

impl Pool {
    /// How many places pinned sessions may hold: what max_backend_connections leaves after
    /// the execution slots' connections.
    pub(crate) fn pin_cap(&self) -> u32 {
        self.max_open().saturating_sub(self.shared.slots.size())
    }

    /// Places in use now.
    pub fn pinned(&self) -> u32 {
        self.shared.places.total()
    }

    /// Places in use by hold (holds with none left out), largest first.
    pub(crate) fn pinned_by(&self) -> Vec<(Hold, u32)> {
        let held = *self.shared.places.lock();
        let mut by: Vec<(Hold, u32)> = Hold::all()
            .map(|h| (h, held[h.index()]))
            .filter(|(_, n)| *n > 0)
            .collect();
        by.sort_by_key(|h| std::cmp::Reverse(h.1));
        by
    }

    /// A place if one is free now.
    pub(crate) fn try_pin_place(&self, hold: Hold) -> Option<PinPlace> {
        let places = &self.shared.places;
        let mut held = places.lock();
        // Diagnostics are kept only while a quarter of the places stays free for pins: a
        // session may sit on them until its next statement that names a table.
        let cap = self.pin_cap();
        let reserve = if hold == Hold::Warnings { cap / 4 } else { 0 };
        if places.total() + reserve >= cap {
            return None;
        }
        Places::add(&mut held, &places.total, hold);
        Some(PinPlace {
            pool: self.clone(),
            hold,
        })
    }

    /// A place, waiting up to `wait` for one to free up; `Error::PinLimit` after that.
    pub(crate) async fn pin_place(&self, hold: Hold, wait: Duration) -> Result<PinPlace, Error> {
        let started = Instant::now();
        let deadline = started + wait;
        loop {
            if let Some(place) = self.try_pin_place(hold) {
                return Ok(place);
            }
            let freed = self.shared.places.freed.notified();
            tokio::pin!(freed);
            // Registered before the second look, so a place given back in between wakes us.
            freed.as_mut().enable();
            if let Some(place) = self.try_pin_place(hold) {
                return Ok(place);
            }
            if tokio::time::timeout_at(deadline.into(), freed)
                .await
                .is_err()
            {
                Stats::incr(&self.shared.stats.pin_refusals);
                return Err(Error::PinLimit(Box::new(
                    self.refusal(hold, started.elapsed()),
                )));
            }
        }
    }

    /// A place even beyond the cap, for state that is already on the backend.
    pub(crate) fn pin_place_anyway(&self, hold: Hold) -> PinPlace {
        let places = &self.shared.places;
        let over = {
            let mut held = places.lock();
            Places::add(&mut held, &places.total, hold);
            places.total() > self.pin_cap()
        };
        if over {
            Stats::incr(&self.shared.stats.pin_overflows);
            tracing::warn!(
                %hold,
                pinned = places.total(),
                cap = self.pin_cap(),
                "a statement pinned its session after it ran and no pinned place was free: \
                 the backend stays with the session, over max_backend_connections - pool_size"
            );
        }
        PinPlace {
            pool: self.clone(),
            hold,
        }
    }

    fn refusal(&self, wanted: Hold, waited: Duration) -> PinRefusal {
        PinRefusal {
            wanted,
            waited,
            max_open: self.max_open(),
            from_server: self.cap_from_server(),
            pool_size: self.shared.slots.size(),
            cap: self.pin_cap(),
            pinned: self.pinned(),
            by: self.pinned_by(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendLimit;
    use crate::pool::PoolSettings;

    fn pool(pool_size: u32, max: u32) -> Pool {
        Pool::new(
            &PoolSettings {
                pool_size,
                max_backend_connections: BackendLimit::Fixed(max),
                server_lifetime: Duration::ZERO,
            },
            Default::default(),
            Default::default(),
            Default::default(),
        )
    }

    #[test]
    fn diagnostics_leave_a_quarter_of_the_places_to_pins() {
        let pool = pool(2, 10);
        assert_eq!(pool.pin_cap(), 8);
        let kept: Vec<_> = (0..8)
            .map_while(|_| pool.try_pin_place(Hold::Warnings))
            .collect();
        assert_eq!(kept.len(), 6, "two places stay for pins");
        let pins: Vec<_> = (0..2)
            .filter_map(|_| pool.try_pin_place(Hold::Pin(PinReason::TemporaryTable)))
            .collect();
        assert_eq!(pins.len(), 2);
    }

    #[tokio::test]
    async fn places_stop_at_the_cap_and_name_who_holds_them() {
        let pool = pool(2, 5);
        assert_eq!(pool.pin_cap(), 3);
        let a = pool.try_pin_place(Hold::Pin(PinReason::TemporaryTable));
        let mut b = pool.try_pin_place(Hold::Warnings).unwrap();
        let c = pool.try_pin_place(Hold::Pin(PinReason::TemporaryTable));
        assert!(a.is_some() && c.is_some());
        assert!(pool.try_pin_place(Hold::Warnings).is_none());
        b.set(Hold::Pin(PinReason::UserVariable));
        let err = pool
            .pin_place(Hold::Pin(PinReason::NamedLock), Duration::from_millis(20))
            .await
            .err()
            .unwrap();
        let Error::PinLimit(refusal) = err else {
            panic!("{err}")
        };
        assert_eq!(
            (
                refusal.cap,
                refusal.pinned,
                refusal.max_open,
                refusal.pool_size
            ),
            (3, 3, 5, 2)
        );
        assert!(refusal.waited >= Duration::from_millis(20));
        assert_eq!(
            refusal.by,
            [
                (Hold::Pin(PinReason::TemporaryTable), 2),
                (Hold::Pin(PinReason::UserVariable), 1)
            ]
        );
        assert_eq!(pool.stats().pin_refusals.load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(pool.pinned(), 2);
    }

    #[tokio::test]
    async fn a_waiter_gets_the_place_given_back() {
        let pool = pool(1, 2);
        let held = pool
            .try_pin_place(Hold::Pin(PinReason::TemporaryTable))
            .unwrap();
        let p = pool.clone();
        let waiter = tokio::spawn(async move {
            p.pin_place(Hold::Pin(PinReason::UserVariable), Duration::from_secs(5))
                .await
                .map(|place| place.hold())
        });
        // Whether the waiter is already waiting or not yet, it gets the place.
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert_eq!(
            waiter.await.unwrap().unwrap(),
            Hold::Pin(PinReason::UserVariable)
        );
        assert_eq!(pool.pinned(), 0);
    }

    #[tokio::test]
    async fn state_already_on_a_backend_overflows_and_widens_the_execution_room() {
        let pool = pool(2, 3);
        let _a = pool
            .try_pin_place(Hold::Pin(PinReason::TemporaryTable))
            .unwrap();
        assert_eq!(pool.allowed_open(), 3);
        let _b = pool.pin_place_anyway(Hold::Pin(PinReason::UntrackedState));
        assert_eq!(pool.pinned(), 2);
        // Two execution connections remain beside the two pinned ones.
        assert_eq!(pool.allowed_open(), 4);
        assert_eq!(pool.stats().pin_overflows.load(Ordering::Relaxed), 1);
    }
}
