//! Per-address login backoff, like MySQL's `max_connect_errors` but slowing down instead of
//! blocking: after `threshold` consecutive failed logins from one IP address, every further
//! login attempt from it waits before it learns its verdict, twice as long each failure, up to
//! a cap. The wait applies to the verdict whatever it is, so a fast answer cannot reveal a
//! correct guess; a success clears the address. Other addresses are never delayed.
//!
//! The map is bounded (`MAX_TRACKED`) and entries are forgotten `FORGET_AFTER` after their last
//! failure, so a spray of addresses cannot grow it without limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at once; beyond this the one whose last failure is oldest is dropped.
pub const MAX_TRACKED: usize = 16_384;
/// An address with no failure for this long starts from zero again.
pub const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// The first delay; each further failure doubles it.
pub const FIRST_DELAY: Duration = Duration::from_millis(250);

/// The policy in force (from the live config, so RELOAD applies it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Failures tolerated without delay; 0 turns the backoff off.
    pub threshold: u32,
    pub max_delay: Duration,
}

impl BackoffPolicy {
    /// The wait for an address with `failures` consecutive failures.
    pub fn delay(&self, failures: u32) -> Duration {
        if self.threshold == 0 || failures < self.threshold {
            return Duration::ZERO;
        }
        // Capped shift: beyond 2^20 the cap has long been reached.
        let doublings = (failures - self.threshold).min(20);
        FIRST_DELAY
            .saturating_mul(1 << doublings)
            .min(self.max_delay)
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last_failure: Instant,
}

/// Consecutive login failures per client IP address.
#[derive(Debug, Default)]
pub struct AuthFailures {
    entries: Mutex<HashMap<IpAddr, Entry>>,
}

impl AuthFailures {
    /// How long a login attempt from `ip` waits before its verdict.
    pub fn delay_for(&self, ip: IpAddr, policy: BackoffPolicy, now: Instant) -> Duration {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(&ip) {
            Some(e) if now.duration_since(e.last_failure) < FORGET_AFTER => {
                policy.delay(e.failures)
            }
            _ => Duration::ZERO,
        }
    }

    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_TRACKED && !entries.contains_key(&ip) {
            entries.retain(|_, e| now.duration_since(e.last_failure) < FORGET_AFTER);
            if entries.len() >= MAX_TRACKED {
                let oldest = entries
                    .iter()
                    .min_by_key(|(_, e)| e.last_failure)
                    .map(|(ip, _)| *ip);
                if let Some(oldest) = oldest {
                    entries.remove(&oldest);
                }
            }
        }
        let entry = entries.entry(ip).or_insert(Entry {
            failures: 0,
            last_failure: now,
        });
        if now.duration_since(entry.last_failure) >= FORGET_AFTER {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
    }

    pub fn succeeded(&self, ip: IpAddr) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(&ip);
    }

    /// Addresses tracked now (for tests and the admin console).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: BackoffPolicy = BackoffPolicy {
        threshold: 3,
        max_delay: Duration::from_secs(2),
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn no_delay_up_to_the_threshold_then_doubling_up_to_the_cap() {
        let delays: Vec<_> = (0..9).map(|n| POLICY.delay(n)).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            delays,
            [
                ms(0),
                ms(0),
                ms(0),
                ms(250),
                ms(500),
                ms(1000),
                ms(2000),
                ms(2000),
                ms(2000)
            ]
        );
        assert_eq!(POLICY.delay(u32::MAX), ms(2000), "no overflow");
    }

    #[test]
    fn threshold_zero_turns_it_off() {
        let off = BackoffPolicy {
            threshold: 0,
            ..POLICY
        };
        assert_eq!(off.delay(1_000), Duration::ZERO);
    }

    #[test]
    fn failures_count_per_address_and_a_success_clears_them() {
        let t = AuthFailures::default();
        let now = Instant::now();
        for _ in 0..4 {
            t.failed(ip(1), now);
        }
        assert_eq!(t.delay_for(ip(1), POLICY, now), Duration::from_millis(500));
        assert_eq!(
            t.delay_for(ip(2), POLICY, now),
            Duration::ZERO,
            "other address"
        );
        t.succeeded(ip(1));
        assert_eq!(t.delay_for(ip(1), POLICY, now), Duration::ZERO);
        assert!(t.is_empty());
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_period() {
        let t = AuthFailures::default();
        let start = Instant::now();
        for _ in 0..5 {
            t.failed(ip(1), start);
        }
        let later = start + FORGET_AFTER;
        assert_eq!(t.delay_for(ip(1), POLICY, later), Duration::ZERO);
        // The next failure starts a new count.
        t.failed(ip(1), later);
        assert_eq!(t.delay_for(ip(1), POLICY, later), Duration::ZERO);
    }

    #[test]
    fn the_map_stays_bounded_and_drops_the_oldest_address() {
        let t = AuthFailures::default();
        let start = Instant::now();
        for i in 0..MAX_TRACKED as u32 {
            let addr = IpAddr::from(i.to_be_bytes());
            t.failed(addr, start + Duration::from_millis(u64::from(i)));
        }
        // The first address is the oldest: it goes when a new one arrives.
        let newest = start + Duration::from_secs(60);
        for _ in 0..3 {
            t.failed(ip(200), newest);
        }
        assert_eq!(t.len(), MAX_TRACKED);
        assert_eq!(
            t.delay_for(ip(200), POLICY, newest),
            Duration::from_millis(250)
        );
        let first = IpAddr::from(0u32.to_be_bytes());
        assert_eq!(t.delay_for(first, POLICY, newest), Duration::ZERO);
    }
}
