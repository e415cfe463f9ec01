//! The host half of an account (`'app'@'10.0.0.%'`) and which row the server picks for a
//! client: patterns with `%` and `_` (and `\` escaping them), literal IPs and host names, IPv4
//! netmasks (`10.0.0.0/255.255.255.0`), CIDR prefixes on MySQL (`10.0.0.0/24`, 8.0.23+), and
//! anonymous users. Pure: no I/O, no clock.
//!
//! The order is the server's: among the rows of the client's user name, the most specific
//! host that matches wins; an anonymous row (user `''`) wins only when its host is strictly
//! more specific than that. Specificity follows MariaDB's documented weighting of a pattern:
//! a literal (IP, name, netmask) is the most specific, `_` patterns come next, then `%`
//! patterns, those with more literal characters first, and `%` alone last; equal weights
//! fall back to the host text, higher first (so `localhost` precedes `127.0.0.1`). MySQL
//! orders the common shapes (`10.0.0.5`, `10.0.0.%`, `10.0.%`, `%`) the same way.

use std::net::IpAddr;

/// Longest host name a pattern is weighed against (MariaDB's HOSTNAME_LENGTH).
const MAX_HOST_LEN: u64 = 60;

/// A client as the server would see it: its address, and the name the server would resolve
/// for it (only `localhost` for a loopback address, and only when the server resolves
/// names: sluice does not query DNS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHost {
    pub ip: Option<IpAddr>,
    /// The address as the server prints it (`10.0.0.5`, `::1`).
    pub ip_text: String,
    pub name: Option<String>,
}

impl ClientHost {
    /// A client at `ip`; `resolves_names` is the server's `skip_name_resolve = OFF`.
    pub fn at(ip: IpAddr, resolves_names: bool) -> ClientHost {
        // An IPv4 client on a dual-stack socket is the IPv4 address to the server.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let name = (resolves_names && ip.is_loopback()).then(|| "localhost".to_string());
        ClientHost {
            ip: Some(ip),
            ip_text: ip.to_string(),
            name,
        }
    }

    /// How the server names sluice's own connections: the host part of `USER()` (an address,
    /// or the name the server resolved), with `local_ip` when it is a name.
    pub fn from_user_host(host: &str, local_ip: Option<IpAddr>, resolves_names: bool) -> Self {
        match host.parse::<IpAddr>() {
            Ok(ip) => ClientHost::at(ip, resolves_names),
            Err(_) => ClientHost {
                ip: local_ip,
                ip_text: local_ip.map(|ip| ip.to_string()).unwrap_or_default(),
                name: Some(host.to_string()),
            },
        }
    }

    /// What an access-denied message names: the address.
    pub fn shown(&self) -> &str {
        &self.ip_text
    }
}

/// A parsed host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    kind: Kind,
    weight: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `''`: any host, after `%`.
    Empty,
    /// A literal or a `%`/`_` pattern, matched against the address text and the name.
    Pattern,
    /// `a.b.c.d/m.m.m.m`.
    Netmask { net: u32, mask: u32 },
    /// `a.b.c.d/n` (MySQL).
    Cidr { net: IpAddr, prefix: u8 },
}

impl HostPattern {
    /// `cidr`: whether the server reads `a.b.c.d/n` as a prefix (MySQL 8.0.23+); MariaDB takes
    /// it as a literal no address equals.
    pub fn parse(text: &str, cidr: bool) -> HostPattern {
        let kind = if text.is_empty() {
            Kind::Empty
        } else if let Some((ip, mask)) = netmask(text) {
            Kind::Netmask { net: ip, mask }
        } else if let Some((net, prefix)) = cidr.then(|| cidr_prefix(text)).flatten() {
            Kind::Cidr { net, prefix }
        } else {
            Kind::Pattern
        };
        let weight = match kind {
            Kind::Pattern => weight(text),
            Kind::Empty => u64::MAX,
            _ => 0,
        };
        HostPattern {
            text: text.to_string(),
            kind,
            weight,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Lower is more specific.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    pub fn matches(&self, client: &ClientHost) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Pattern => {
                wild_match(self.text.as_bytes(), client.ip_text.as_bytes(), false)
                    || client
                        .name
                        .as_deref()
                        .is_some_and(|n| wild_match(self.text.as_bytes(), n.as_bytes(), true))
            }
            Kind::Netmask { net, mask } => match client.ip {
                Some(IpAddr::V4(v4)) => u32::from(v4) & mask == *net,
                _ => false,
            },
            Kind::Cidr { net, prefix } => match (client.ip, net) {
                (Some(IpAddr::V4(c)), IpAddr::V4(n)) => same_prefix(
                    u128::from(u32::from(c)),
                    u128::from(u32::from(*n)),
                    *prefix,
                    32,
                ),
                (Some(IpAddr::V6(c)), IpAddr::V6(n)) => {
                    same_prefix(u128::from(c), u128::from(*n), *prefix, 128)
                }
                _ => false,
            },
        }
    }

    /// The server's order of two rows' hosts: more specific first, then the higher text.
    pub fn order(&self, other: &HostPattern) -> std::cmp::Ordering {
        self.weight
            .cmp(&other.weight)
            .then_with(|| other.text.cmp(&self.text))
    }
}

fn same_prefix(a: u128, b: u128, prefix: u8, bits: u8) -> bool {
    if prefix == 0 {
        return true;
    }
    let shift = u32::from(bits - prefix.min(bits));
    (a >> shift) == (b >> shift)
}

/// `a.b.c.d/m.m.m.m` with both halves full dotted quads; the address must lie on the mask.
fn netmask(text: &str) -> Option<(u32, u32)> {
    let (ip, mask) = text.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let mask: std::net::Ipv4Addr = mask.parse().ok()?;
    Some((u32::from(ip) & u32::from(mask), u32::from(mask)))
}

fn cidr_prefix(text: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = text.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

/// MariaDB's weight of a `%`/`_` pattern: the more strings it can match, the higher. From the
/// count of literal characters N, of `_` M, of `%` runs K, and the literal prefix P:
/// L = maxlen - N - M when there is a `%`; patterns compare by L (or M, whichever is larger),
/// then K, then the other, then P.
fn weight(pattern: &str) -> u64 {
    let (mut n, mut m, mut k, mut p) = (0u64, 0u64, 0u64, 0u64);
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                if k == 0 && m == 0 {
                    p = n;
                }
                k += 1;
                while bytes.get(i + 1) == Some(&b'%') {
                    i += 1;
                }
            }
            b'_' => {
                if k == 0 && m == 0 {
                    p = n;
                }
                m += 1;
            }
            b'\\' if i + 1 < bytes.len() => {
                i += 1;
                n += 1;
            }
            _ => n += 1,
        }
        i += 1;
    }
    let l = if k > 0 {
        MAX_HOST_LEN.saturating_sub(n + m)
    } else {
        0
    };
    let d = MAX_HOST_LEN + 1;
    if l > m {
        (((l * 2 + 1) * d + k) * d + m) * d + p
    } else {
        ((m * 2 * d + l) * d + k) * d + p
    }
}

/// One element of a pattern.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(u8),
    /// `_`
    One,
    /// `%`
    Any,
}

fn tokens(pattern: &[u8]) -> Vec<Token> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        out.push(match pattern[i] {
            b'%' => Token::Any,
            b'_' => Token::One,
            b'\\' if i + 1 < pattern.len() => {
                i += 1;
                Token::Literal(pattern[i])
            }
            c => Token::Literal(c),
        });
        i += 1;
    }
    out
}

/// SQL LIKE-style matching of `text` against `pattern`: `%` any run, `_` one character,
/// `\` escapes the next. `fold`: ASCII case-insensitive (host names; addresses are not).
pub fn wild_match(pattern: &[u8], text: &[u8], fold: bool) -> bool {
    let pattern = tokens(pattern);
    let eq = |a: u8, b: u8| {
        if fold {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0usize, 0usize);
    // The last `%` and the text position it is tried at: backtracking to it is enough.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Token::Any) => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(Token::One) => {
                p += 1;
                t += 1;
                continue;
            }
            Some(Token::Literal(c)) if eq(*c, text[t]) => {
                p += 1;
                t += 1;
                continue;
            }
            _ => {}
        }
        let Some((sp, st)) = star else {
            return false;
        };
        p = sp + 1;
        t = st + 1;
        star = Some((sp, st + 1));
    }
    pattern[p..].iter().all(|&c| c == Token::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> ClientHost {
        ClientHost::at(ip.parse().unwrap(), false)
    }

    fn matches(pattern: &str, ip: &str) -> bool {
        HostPattern::parse(pattern, false).matches(&client(ip))
    }

    #[test]
    fn wildcards_escapes_and_literals() {
        assert!(matches("%", "10.1.2.3"));
        assert!(matches("10.0.0.%", "10.0.0.77"));
        assert!(!matches("10.0.0.%", "10.0.1.7"));
        assert!(matches("10.0.0._", "10.0.0.7"));
        assert!(!matches("10.0.0._", "10.0.0.77"));
        assert!(matches("10.%.5", "10.20.30.5"));
        assert!(matches("127.0.0.1", "127.0.0.1"));
        assert!(!matches("127.0.0.1", "127.0.0.10"));
        assert!(matches("::1", "::1"));
        assert!(wild_match(b"a\\_b", b"a_b", false));
        assert!(!wild_match(b"a\\_b", b"axb", false));
        assert!(wild_match(b"a\\%", b"a%", false));
        assert!(wild_match(b"%%x%", b"abxcd", false));
        assert!(!wild_match(b"%x", b"abc", false));
        assert!(wild_match(b"", b"", false));
        assert!(!wild_match(b"", b"a", false));
        assert!(wild_match(b"HOST.example", b"host.EXAMPLE", true));
        assert!(!wild_match(b"HOST.example", b"host.EXAMPLE", false));
    }

    #[test]
    fn netmasks_and_cidr_prefixes() {
        assert!(matches("10.0.0.0/255.255.255.0", "10.0.0.200"));
        assert!(!matches("10.0.0.0/255.255.255.0", "10.0.1.2"));
        assert!(!matches("10.0.0.0/255.255.255.0", "::1"));
        // MariaDB reads a CIDR suffix as literal text, MySQL as a prefix.
        assert!(!matches("10.0.0.0/24", "10.0.0.9"));
        let cidr = HostPattern::parse("10.0.0.0/24", true);
        assert!(cidr.matches(&client("10.0.0.9")) && !cidr.matches(&client("10.0.1.9")));
        let v6 = HostPattern::parse("fd00::/16", true);
        assert!(v6.matches(&client("fd00::5")) && !v6.matches(&client("fe80::1")));
        assert_eq!(
            HostPattern::parse("10.0.0.0/255.255.255.0", false).weight(),
            0
        );
    }

    #[test]
    fn localhost_matches_loopback_only_when_the_server_resolves_names() {
        let p = HostPattern::parse("localhost", false);
        assert!(!p.matches(&client("127.0.0.1")));
        assert!(p.matches(&ClientHost::at("127.0.0.1".parse().unwrap(), true)));
        assert!(!p.matches(&ClientHost::at("10.0.0.1".parse().unwrap(), true)));
        let mapped = ClientHost::at("::ffff:10.0.0.1".parse().unwrap(), false);
        assert_eq!(mapped.ip_text, "10.0.0.1");
        let named = ClientHost::from_user_host("app1.example", None, true);
        assert!(HostPattern::parse("%.example", false).matches(&named));
    }

    #[test]
    fn more_specific_hosts_sort_first() {
        let ordered = [
            "localhost",
            "127.0.0.1",
            "10.0.0.0/255.255.255.0",
            "10.0.0._",
            "10.0.0.%",
            "10.0.%",
            "%",
            "",
        ];
        let mut shuffled: Vec<HostPattern> = ordered
            .iter()
            .rev()
            .map(|h| HostPattern::parse(h, false))
            .collect();
        shuffled.sort_by(|a, b| a.order(b));
        let got: Vec<&str> = shuffled.iter().map(HostPattern::as_str).collect();
        assert_eq!(got, ordered);
    }
}
