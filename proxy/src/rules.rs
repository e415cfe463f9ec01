//! Query rules at run time: the ordered `[[rules]]` (checked by `config::rules` into
//! [`RuleDef`]s), each with its counters and, for `max_concurrency`, its [`Gate`].
//!
//! Per statement the statement path calls, in order (docs/architecture.md, "Wiring"):
//! 1. [`RuleSet::decide`] with the statement's [`Facts`]: pure, the first rule whose matchers
//!    all match decides (ProxySQL's `apply`), a [`Decision`] out;
//! 2. [`Decision::admit`]: counts the hit, writes the log line (sampled), blocks the
//!    statement with the rule's error (1148), or waits FIFO at the rule's gate (9001 after
//!    queue_timeout); an [`Admitted`] out, which holds the gate while the statement runs. A
//!    session that holds its execution slot already (a transaction) does not wait there: it
//!    takes a free place or runs without one, since the statements inside may be waiting for
//!    that very slot;
//! 3. [`RouteWish::route`] (from [`Admitted::route_wish`]) in place of `topology::route`: the
//!    rule's `route` where the router allows it (`topology::route_wished`), counted as
//!    `overridden` where it does not ([`RouteWish::stays_on`] where nothing is routed);
//! 4. [`Admitted::timeout`] for the statement's deadline (`classify::with_time_limit` writes
//!    it into the statement for the server), and [`Admitted::timed_out`] when it struck.
//!
//! A reload builds a new set ([`RuleSet::build`]); a rule whose definition did not change
//! keeps its counters and its gate (with the statements inside it), wherever it moved to.

mod admit;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::classify::Digest;
use crate::config::{RouteTarget, RuleDef};
use crate::gate::Gate;
pub use admit::{Admitted, RouteWish};

/// What a rule may match on, for one statement.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// The statement's digest (`None` when it has no text: rules with a digest or
    /// match_digest do not match it).
    pub digest: Option<&'a Digest>,
    pub user: &'a str,
    /// The session's default database.
    pub schema: Option<&'a [u8]>,
    pub client: Option<IpAddr>,
}

/// One rule with its run-time state.
pub struct Rule {
    pub def: RuleDef,
    pub counters: RuleCounters,
    gate: Option<Gate>,
}

/// What SHOW RULES and /metrics count per rule.
#[derive(Default)]
pub struct RuleCounters {
    /// Statements the rule decided.
    pub hits: AtomicU64,
    /// Refused with the rule's error.
    pub blocked: AtomicU64,
    /// Ended by the rule's timeout.
    pub timed_out: AtomicU64,
    /// Queued at the rule's max_concurrency gate.
    pub throttled: AtomicU64,
    /// Refused after queue_timeout at the gate.
    pub queue_timeouts: AtomicU64,
    /// Its route was not followed (transaction, pin, write, no usable replica).
    pub overridden: AtomicU64,
    /// Log lines written.
    pub logged: AtomicU64,
}

impl Rule {
    fn new(def: RuleDef) -> Rule {
        Rule {
            gate: def.max_concurrency.map(Gate::new),
            def,
            counters: RuleCounters::default(),
        }
    }

    /// The rule's label in logs and SHOW RULES: its name, else its index.
    pub fn label(&self, index: usize) -> String {
        match &self.def.name {
            Some(name) => name.clone(),
            None => format!("rules[{index}]"),
        }
    }

    pub fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    fn matches(&self, f: &Facts<'_>) -> bool {
        let d = &self.def;
        let digest_ok = match (d.digest, &d.match_digest) {
            (None, None) => true,
            (id, pattern) => f.digest.is_some_and(|g| {
                id.is_none_or(|id| id == g.id.0)
                    && pattern.as_ref().is_none_or(|p| p.0.is_match(g.text()))
            }),
        };
        digest_ok
            && d.user.as_deref().is_none_or(|u| u == f.user)
            && d.schema
                .as_deref()
                .is_none_or(|s| f.schema == Some(s.as_bytes()))
            && d.client_addr
                .is_none_or(|c| f.client.is_some_and(|ip| c.contains(ip)))
    }
}

/// The rules in force, in order.
#[derive(Default)]
pub struct RuleSet {
    rules: Vec<Arc<Rule>>,
    needs_digest: bool,
}

impl RuleSet {
    /// The set for `defs`; a rule equal to one of `old`'s keeps that one's counters and gate.
    pub fn build(defs: &[RuleDef], old: Option<&RuleSet>) -> RuleSet {
        let mut unused: Vec<Arc<Rule>> = old.map(|o| o.rules.clone()).unwrap_or_default();
        let rules = defs
            .iter()
            .map(|def| match unused.iter().position(|r| r.def == *def) {
                Some(i) => unused.swap_remove(i),
                None => Arc::new(Rule::new(def.clone())),
            })
            .collect::<Vec<_>>();
        let needs_digest = rules
            .iter()
            .any(|r| r.def.digest.is_some() || r.def.match_digest.is_some());
        RuleSet {
            rules,
            needs_digest,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a rule reads the digest (the statement path computes it for them even with
    /// digests off).
    pub fn needs_digest(&self) -> bool {
        self.needs_digest
    }

    /// Every rule, in order (SHOW RULES, /metrics).
    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// The first rule whose matchers all match the statement. Pure.
    pub fn decide<'r>(&'r self, facts: &Facts<'_>) -> Decision<'r> {
        let rule = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(facts));
        Decision { rule }
    }
}

/// What the rules decided for one statement (no rule: nothing to do).
#[derive(Clone, Copy)]
pub struct Decision<'r> {
    rule: Option<(usize, &'r Arc<Rule>)>,
}

impl<'r> Decision<'r> {
    /// No rule applies (no rules, or the statement is not one rules see).
    pub fn none() -> Decision<'static> {
        Decision { rule: None }
    }

    /// The deciding rule and its index.
    pub fn rule(&self) -> Option<(usize, &'r Rule)> {
        self.rule.map(|(i, r)| (i, &**r))
    }

    pub fn route(&self) -> Option<RouteTarget> {
        self.rule.and_then(|(_, r)| r.def.route)
    }

    /// The message the statement is blocked with.
    pub fn block(&self) -> Option<&'r str> {
        self.rule.and_then(|(_, r)| r.def.error.as_deref())
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.rule.and_then(|(_, r)| r.def.timeout)
    }

    /// The gate the statement must pass (`max_concurrency`).
    pub fn gate(&self) -> Option<&'r Gate> {
        self.rule.and_then(|(_, r)| r.gate.as_ref())
    }

    /// The share of matches to log.
    pub fn log(&self) -> Option<f64> {
        self.rule.and_then(|(_, r)| r.def.log)
    }
}

/// Counts one on a rule counter.
fn bump(c: &AtomicU64) -> u64 {
    c.fetch_add(1, Relaxed)
}

#[cfg(test)]
#[path = "rules/tests.rs"]
mod tests;
