//! Query rules as configured: the `[[rules]]` tables of the file (`FileRule`), checked into
//! [`RuleDef`]s with every problem named by the rule's index, the field and the reason. What
//! a rule does at run time (matching, counters, the concurrency gate) is `crate::rules`; the
//! value types the router reads ([`RouteTarget`]) live here because config depends on
//! nothing above it.

use std::fmt::{self, Write};
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use super::file::Scalar;
use super::values::{format_duration, parse_duration};
use super::Endpoint;

/// One `[[rules]]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRule {
    pub name: Option<String>,
    pub digest: Option<String>,
    pub match_digest: Option<String>,
    pub user: Option<String>,
    pub schema: Option<String>,
    pub client_addr: Option<String>,
    pub route: Option<String>,
    pub error: Option<String>,
    pub timeout: Option<Scalar>,
    pub max_concurrency: Option<i64>,
    pub log: Option<toml::Value>,
}

/// A checked rule. Every matcher given must match (none given: every statement); the
/// first rule that matches decides (`crate::rules::RuleSet::decide`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    pub name: Option<String>,
    /// A digest id (`classify::DigestId`'s value).
    pub digest: Option<u64>,
    /// A regex on the normalised text.
    pub match_digest: Option<Pattern>,
    pub user: Option<String>,
    pub schema: Option<String>,
    pub client_addr: Option<Cidr>,
    pub route: Option<RouteTarget>,
    /// Block the statement with this message.
    pub error: Option<String>,
    pub timeout: Option<Duration>,
    pub max_concurrency: Option<u32>,
    /// The share of matches logged (1.0: every one).
    pub log: Option<f64>,
}

/// A rule's `route`: where it asks its statements to run. The router follows it only where
/// correctness allows (`topology::route::route_wished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteTarget {
    Writer,
    /// Any usable replica (the router's choice among them).
    Replica,
    /// One server, by its index in `Config::endpoints`.
    Server(usize),
}

impl fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteTarget::Writer => f.write_str("writer"),
            RouteTarget::Replica => f.write_str("replica"),
            RouteTarget::Server(i) => write!(f, "server:{i}"),
        }
    }
}

/// A compiled `match_digest` (byte regex: the text is the statement's, in any encoding).
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::bytes::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// An address block (`10.0.0.0/8`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in the block (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let masked = |bits: u128, width: u32| {
            let keep = u32::from(self.prefix);
            if keep == 0 {
                0
            } else {
                bits >> (width - keep)
            }
        };
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(net)), 32) == masked(u128::from(u32::from(ip)), 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), 128) == masked(u128::from(ip), 128)
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let t = s.trim();
        let bad = || {
            format!("{t:?} is not an address or address block; write e.g. 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32")
        };
        let (addr, prefix) = match t.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (t, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let addr = addr.to_canonical();
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(bad)?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// A digest id as SHOW DIGESTS prints it: `0x` and up to 16 hex digits (either case).
pub fn parse_digest_id(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let well_formed = (1..=16).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
    match u64::from_str_radix(hex, 16) {
        Ok(v) if well_formed => Ok(v),
        _ => Err(format!(
            "{t:?} is not a digest id; copy one from SHOW DIGESTS (0x and 16 hex digits)"
        )),
    }
}

/// Checks every rule; a problem is pushed as `rules[i].field: reason`.
pub(crate) fn rules_from_file(
    rules: &[FileRule],
    servers: &[Endpoint],
    errors: &mut Vec<String>,
) -> Vec<RuleDef> {
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let before = errors.len();
        let mut problem = |field: &str, reason: String| {
            errors.push(format!("rules[{i}].{field}: {reason}"));
        };
        let def = check_rule(r, servers, &mut problem);
        if errors.len() == before {
            out.push(def);
        }
    }
    out
}

fn check_rule(
    r: &FileRule,
    servers: &[Endpoint],
    problem: &mut dyn FnMut(&str, String),
) -> RuleDef {
    let text = |field: &str, v: &Option<String>, problem: &mut dyn FnMut(&str, String)| {
        let v = v.as_deref()?;
        if v.is_empty() {
            problem(field, "is empty; remove it or give a value".into());
        }
        Some(v.to_string())
    };
    let mut def = RuleDef {
        name: r.name.clone(),
        digest: None,
        match_digest: None,
        user: text("user", &r.user, problem),
        schema: text("schema", &r.schema, problem),
        client_addr: None,
        route: None,
        error: text("error", &r.error, problem),
        timeout: None,
        max_concurrency: None,
        log: None,
    };
    if let Some(d) = &r.digest {
        def.digest = parse_digest_id(d).map_err(|e| problem("digest", e)).ok();
    }
    if let Some(p) = &r.match_digest {
        let compiled = regex::bytes::RegexBuilder::new(p)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                let why = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
                problem("match_digest", format!("{why}; it is a regex (Rust syntax) on the normalised text, e.g. \"^SELECT .* FROM reports\""));
            });
        def.match_digest = compiled.ok().map(Pattern);
    }
    if let Some(c) = &r.client_addr {
        def.client_addr = c.parse().map_err(|e| problem("client_addr", e)).ok();
    }
    if let Some(route) = &r.route {
        def.route = route_target(route, servers)
            .map_err(|e| problem("route", e))
            .ok();
    }
    if let Some(t) = &r.timeout {
        match parse_duration(&t.0) {
            Ok(d) if d.is_zero() => problem(
                "timeout",
                "is 0; give a positive duration such as 5s".into(),
            ),
            Ok(d) => def.timeout = Some(d),
            Err(e) => problem("timeout", e),
        }
    }
    if let Some(n) = r.max_concurrency {
        match u32::try_from(n) {
            Ok(n) if n >= 1 => def.max_concurrency = Some(n),
            _ => problem(
                "max_concurrency",
                format!("is {n}; give at least 1 (statements of this rule running at once)"),
            ),
        }
    }
    if let Some(v) = &r.log {
        def.log = log_rate(v).map_err(|e| problem("log", e)).ok().flatten();
    }
    check_actions(r, problem);
    def
}

/// A rule needs an action (`log = false` is none), and an `error` rule blocks, so routing or
/// timing it is a mistake.
fn check_actions(r: &FileRule, problem: &mut dyn FnMut(&str, String)) {
    let acts = r.route.is_some() || r.timeout.is_some() || r.max_concurrency.is_some();
    if r.error.is_some() && acts {
        problem("error", "blocks the statement, so route, timeout and max_concurrency would never apply; drop them or the error".into());
    }
    let logs = r.log.as_ref().is_some_and(|v| v.as_bool() != Some(false));
    if !(acts || r.error.is_some() || logs) {
        problem(
            "action",
            "none given; set route, error, timeout, max_concurrency or log".into(),
        );
    }
}

fn route_target(text: &str, servers: &[Endpoint]) -> Result<RouteTarget, String> {
    let t = text.trim();
    let names: Vec<String> = servers.iter().map(Endpoint::to_string).collect();
    if t.eq_ignore_ascii_case("writer") {
        return Ok(RouteTarget::Writer);
    }
    if t.eq_ignore_ascii_case("replica") {
        return Ok(RouteTarget::Replica);
    }
    let Some(name) = t.strip_prefix("server:") else {
        return Err(format!(
            "{t:?} is not a route; use writer, replica or server:<name>"
        ));
    };
    let by_name = names.iter().position(|n| n == name.trim());
    let by_index = name
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|i| *i < names.len());
    by_name.or(by_index).map(RouteTarget::Server).ok_or_else(|| {
        format!(
            "{t:?} names no configured server; use server:<address as in servers> ({}) or server:<index from 0>",
            names.join(", ")
        )
    })
}

/// `log = true | false | <rate in (0, 1]>`; `false` is no log (`None`).
fn log_rate(v: &toml::Value) -> Result<Option<f64>, String> {
    let rate = match v {
        toml::Value::Boolean(b) => return Ok(b.then_some(1.0)),
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        _ => f64::NAN,
    };
    if rate > 0.0 && rate <= 1.0 {
        Ok(Some(rate))
    } else {
        Err(format!("{v} is not true, false or a sample rate above 0 and at most 1 (0.01 logs one match in a hundred)"))
    }
}

/// The rules as `[[rules]]` tables that read back to the same rules.
pub(crate) fn write_rules(out: &mut String, rules: &[RuleDef], servers: &[Endpoint]) {
    let text = |s: &str| toml::Value::String(s.to_string()).to_string();
    for r in rules {
        out.push_str("\n[[rules]]\n");
        let mut line = |key: &str, value: String| {
            let _ = writeln!(out, "{key} = {value}");
        };
        if let Some(v) = &r.name {
            line("name", text(v));
        }
        if let Some(v) = r.digest {
            line("digest", text(&format!("0x{v:016x}")));
        }
        if let Some(v) = &r.match_digest {
            line("match_digest", text(v.0.as_str()));
        }
        if let Some(v) = &r.user {
            line("user", text(v));
        }
        if let Some(v) = &r.schema {
            line("schema", text(v));
        }
        if let Some(v) = &r.client_addr {
            line("client_addr", text(&v.to_string()));
        }
        if let Some(v) = r.route {
            let shown = match v {
                RouteTarget::Server(i) => servers
                    .get(i)
                    .map_or(format!("server:{i}"), |e| format!("server:{e}")),
                other => other.to_string(),
            };
            line("route", text(&shown));
        }
        if let Some(v) = &r.error {
            line("error", text(v));
        }
        if let Some(v) = r.timeout {
            line("timeout", text(&format_duration(v)));
        }
        if let Some(v) = r.max_concurrency {
            line("max_concurrency", v.to_string());
        }
        if let Some(v) = r.log {
            line(
                "log",
                if v >= 1.0 {
                    "true".into()
                } else {
                    v.to_string()
                },
            );
        }
    }
}

/// The `[[rules]]` section of docs/config.md.
pub(crate) const RULES_DOC: &str = "
## Query rules

```toml
[[rules]]
name = \"reports to the writer\"          # optional, for SHOW RULES and the log
match_digest = \"^SELECT .* FROM `?reports\" # match: any of digest, match_digest, user, schema,
user = \"app\"                              # client_addr; all given must match
route = \"writer\"                          # action: route, error, timeout, max_concurrency, log
```

An ordered list, read from the config file only (RELOAD, RELOAD RULES and SIGHUP re-read it).
Matchers: `digest` (an id from SHOW DIGESTS), `match_digest` (a regex on the normalised text),
`user`, `schema` (the session's default database), `client_addr` (an address or CIDR block).
Actions: `route = \"writer\" | \"replica\" | \"server:<address or index>\"` (never against a
transaction, a pinned session or a write: then it counts as `overridden`), `error = \"<message>\"`
(blocks with error 1148), `timeout = \"<duration>\"`, `max_concurrency = <n>` (FIFO queue,
queue_timeout applies), `log = true` or a sample rate. The first rule that matches decides. A
broken rule is refused with its index, field and reason, and the rules in force stay.
docs/digests-and-rules.md explains each with examples.
";

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_blocks_contain_their_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(cidr("10.0.0.0/8").contains(ip("10.200.1.2")));
        assert!(!cidr("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(cidr("192.168.1.7").contains(ip("192.168.1.7")));
        assert!(!cidr("192.168.1.7").contains(ip("192.168.1.8")));
        assert!(cidr("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(
            cidr("10.0.0.0/8").contains(ip("::ffff:10.1.1.1")),
            "v4-mapped"
        );
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:1::5")));
        assert!(!cidr("2001:db8::/32").contains(ip("10.0.0.1")));
        assert_eq!(cidr("10.1.2.3/8").to_string(), "10.1.2.3/8");
        for bad in ["10.0.0.0/33", "10.0.0/8", "host", "", "::1/129"] {
            let e = bad.parse::<Cidr>().unwrap_err();
            assert!(e.contains("10.0.0.0/8"), "{bad}: {e}");
        }
    }

    #[test]
    fn digest_ids_parse_as_shown() {
        assert_eq!(parse_digest_id("0x00000000000000ff"), Ok(255));
        assert_eq!(
            parse_digest_id("0XABCDEF0123456789"),
            Ok(0xabcdef0123456789)
        );
        for bad in ["", "0x", "xyz", "0x12345678901234567", "-1"] {
            let e = parse_digest_id(bad).unwrap_err();
            assert!(e.contains("SHOW DIGESTS"), "{bad}: {e}");
        }
    }

    #[test]
    fn routes_name_a_configured_server() {
        let servers = vec![Endpoint::parse("db1:3306"), Endpoint::parse("db2:3306")];
        assert_eq!(route_target("writer", &servers), Ok(RouteTarget::Writer));
        assert_eq!(
            route_target(" Replica ", &servers),
            Ok(RouteTarget::Replica)
        );
        assert_eq!(
            route_target("server:db2:3306", &servers),
            Ok(RouteTarget::Server(1))
        );
        assert_eq!(
            route_target("server:0", &servers),
            Ok(RouteTarget::Server(0))
        );
        let e = route_target("server:db9:3306", &servers).unwrap_err();
        assert!(e.contains("db1:3306, db2:3306"), "{e}");
        let e = route_target("primary", &servers).unwrap_err();
        assert!(e.contains("writer, replica or server:<name>"), "{e}");
    }
}
