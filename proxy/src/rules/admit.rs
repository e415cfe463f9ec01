//! Acting on a [`Decision`]: the hit and its log line, the block, the gate, and afterwards the
//! route and the deadline ([`Admitted`]).

use std::sync::Arc;
use std::time::Duration;

use super::{bump, Decision, Facts, Rule};
use crate::config::RouteTarget;
use crate::gate::{GateGuard, GateTimeout};
use crate::protocol::{codes, ErrPacket};
use crate::topology::{self, Override, Role, Route, RouteInput, Topology};

/// A statement the rules let through: the deciding rule (if any) and its gate place, held
/// until this is dropped (after the statement's answer).
#[derive(Default)]
pub struct Admitted {
    rule: Option<(usize, Arc<Rule>)>,
    _place: Option<GateGuard>,
}

impl Decision<'_> {
    /// Counts the hit and logs it (sampled); refuses the statement with the rule's error, or
    /// after `queue_timeout` at a full gate. `holds_locks`: the session is in a transaction
    /// or holds a lock (others may wait on it); then the gate is not waited for.
    pub async fn admit(
        self,
        facts: &Facts<'_>,
        queue_timeout: Duration,
        holds_locks: bool,
    ) -> Result<Admitted, ErrPacket> {
        let Some((index, rule)) = self.rule else {
            return Ok(Admitted::default());
        };
        let c = &rule.counters;
        let n = bump(&c.hits);
        if rule.def.log.is_some_and(|rate| sampled(n, rate)) {
            bump(&c.logged);
            log_match(index, rule, facts);
        }
        if let Some(message) = &rule.def.error {
            bump(&c.blocked);
            return Err(ErrPacket::from_code(
                codes::NOT_ALLOWED_COMMAND,
                message.as_bytes(),
            ));
        }
        let place = match rule.gate() {
            None => None,
            Some(gate) if holds_locks => gate.enter(Duration::ZERO).await.ok().map(|e| e.guard),
            Some(gate) => match gate.enter(queue_timeout).await {
                Ok(entered) => {
                    if entered.queued {
                        bump(&c.throttled);
                    }
                    Some(entered.guard)
                }
                Err(timeout) => {
                    bump(&c.queue_timeouts);
                    return Err(gate_timeout(index, rule, timeout));
                }
            },
        };
        Ok(Admitted {
            rule: Some((index, rule.clone())),
            _place: place,
        })
    }
}

impl Admitted {
    /// The deciding rule and its index.
    pub fn rule(&self) -> Option<(usize, &Rule)> {
        self.rule.as_ref().map(|(i, r)| (*i, &**r))
    }

    /// The statement's deadline (the rule's `timeout`).
    pub fn timeout(&self) -> Option<Duration> {
        self.rule.as_ref().and_then(|(_, r)| r.def.timeout)
    }

    /// What the router needs of the rule (a cheap handle the routing step can keep).
    pub fn route_wish(&self) -> RouteWish {
        RouteWish {
            rule: self.rule.clone().filter(|(_, r)| r.def.route.is_some()),
        }
    }

    /// The rule's timeout ended the statement (the server's 1969 / 3024, or a kill).
    pub fn timed_out(&self) {
        if let Some((_, r)) = &self.rule {
            bump(&r.counters.timed_out);
        }
    }
}

/// A rule's `route`, for the routing step: `route` in place of `topology::route`, or
/// `stays_on` where the statement is not routed. Empty (the plain router) without one.
#[derive(Clone, Default)]
pub struct RouteWish {
    rule: Option<(usize, Arc<Rule>)>,
}

impl RouteWish {
    fn wish(&self) -> Option<RouteTarget> {
        self.rule.as_ref().and_then(|(_, r)| r.def.route)
    }

    /// Where the statement goes: `topology::route`, or with the rule's `route` the router's
    /// `route_wished`, counting `overridden` when correctness kept it elsewhere.
    pub fn route(&self, input: &RouteInput<'_>) -> Route {
        let Some(wish) = self.wish() else {
            return topology::route(input);
        };
        let (route, outcome) = topology::route_wished(input, wish);
        if let Err(why) = outcome {
            self.overridden(why);
        }
        route
    }

    /// The statement runs on `server` without routing (the session holds its slot or
    /// backend there, or there is nothing to route between): a wish for elsewhere is
    /// overridden, for reason `why`.
    pub fn stays_on(&self, server: usize, topology: &Topology, why: Override) {
        let Some(wish) = self.wish() else {
            return;
        };
        let fits = match wish {
            RouteTarget::Writer => topology.writer() == Some(server),
            RouteTarget::Replica => {
                topology.servers.get(server).map(|s| s.role) == Some(Role::Replica)
            }
            RouteTarget::Server(i) => i == server,
        };
        if !fits {
            self.overridden(why);
        }
    }

    fn overridden(&self, why: Override) {
        if let Some((index, r)) = &self.rule {
            bump(&r.counters.overridden);
            tracing::debug!(
                rule = index,
                name = %r.label(*index),
                why = why.label(),
                "query rule's route overridden"
            );
        }
    }
}

/// Whether the `n`-th hit (from 0) is logged at `rate`: exactly `rate` of them, evenly.
fn sampled(n: u64, rate: f64) -> bool {
    rate >= 1.0 || ((n + 1) as f64 * rate).floor() > (n as f64 * rate).floor()
}

/// The structured line of one match (`log_format = json` makes each field a key).
fn log_match(index: usize, rule: &Rule, f: &Facts<'_>) {
    let d = &rule.def;
    let mut actions = Vec::new();
    if let Some(r) = d.route {
        actions.push(format!("route={r}"));
    }
    if d.error.is_some() {
        actions.push("error".into());
    }
    if let Some(t) = d.timeout {
        actions.push(format!("timeout={}", crate::config::format_duration(t)));
    }
    if let Some(n) = d.max_concurrency {
        actions.push(format!("max_concurrency={n}"));
    }
    let text: String = f
        .digest
        .map(|g| {
            String::from_utf8_lossy(g.text())
                .chars()
                .take(200)
                .collect()
        })
        .unwrap_or_default();
    tracing::info!(
        target: "sluice::rules",
        rule = index,
        name = %rule.label(index),
        actions = %actions.join(","),
        digest = %f.digest.map(|g| g.id.to_string()).unwrap_or_default(),
        user = f.user,
        schema = %f.schema.map(String::from_utf8_lossy).unwrap_or_default(),
        client = %f.client.map(|c| c.to_string()).unwrap_or_default(),
        text = %text,
        "query rule matched"
    );
}

fn gate_timeout(index: usize, rule: &Rule, t: GateTimeout) -> ErrPacket {
    let n = rule.def.max_concurrency.unwrap_or(0);
    let msg = format!(
        "Query rule {} lets {n} of its statements run at once; this one waited {} ms (queue_timeout) for a place and did not run. Retry later, or raise the rule's max_concurrency",
        rule.label(index),
        t.waited.as_millis(),
    );
    ErrPacket::from_code(codes::QUEUE_TIMEOUT, msg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::sampled;

    #[test]
    fn sampling_logs_exactly_the_rate() {
        for (rate, want) in [(1.0, 1000), (0.5, 500), (0.25, 250), (0.01, 10), (0.3, 300)] {
            let n = (0..1000).filter(|&n| sampled(n, rate)).count();
            assert_eq!(n, want, "{rate}");
        }
        assert!(sampled(0, 1.0));
    }
}
