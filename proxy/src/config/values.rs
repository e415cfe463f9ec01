//! Value types of individual settings and their text parsers.
//!
//! Every setting reaches us as text (flag, env var, or a TOML scalar turned into text), so each
//! type here parses from `&str` with an error message that tells the user what is accepted.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A password. Never printed: `Debug` and `Display` show `***`.
///
/// A value of the form `*<40 hex digits>` is a mysql_native_password hash (as stored in
/// `mysql.user.authentication_string`) rather than plaintext. Such a user can only log in with
/// mysql_native_password.
///
/// A secret can also be SHA1(password) itself, recovered from a client's
/// mysql_native_password answer against that hash ([`Secret::native_stage1`]): it answers any
/// backend's mysql_native_password scramble as the password would. It lives in memory only
/// and has no text ([`Secret::expose`] is empty for it).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(SecretValue);

#[derive(Clone, PartialEq, Eq)]
enum SecretValue {
    Text(String),
    NativeStage1([u8; 20]),
}

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(SecretValue::Text(value))
    }

    /// SHA1(password), recovered from a client's mysql_native_password answer.
    pub fn native_stage1(stage1: [u8; 20]) -> Self {
        Secret(SecretValue::NativeStage1(stage1))
    }

    /// The password text (or hash) itself. Call only where it is really needed (auth).
    /// Empty for a recovered SHA1(password): callers that log in check [`Self::stage1`] first.
    pub fn expose(&self) -> &str {
        match &self.0 {
            SecretValue::Text(t) => t,
            SecretValue::NativeStage1(_) => "",
        }
    }

    /// The recovered SHA1(password), when this secret is one.
    pub fn stage1(&self) -> Option<&[u8; 20]> {
        match &self.0 {
            SecretValue::NativeStage1(s) => Some(s),
            SecretValue::Text(_) => None,
        }
    }

    /// True when the value is a mysql_native_password hash (`*` + 40 hex digits).
    pub fn is_native_hash(&self) -> bool {
        let b = self.expose().as_bytes();
        b.len() == 41 && b[0] == b'*' && b[1..].iter().all(u8::is_ascii_hexdigit)
    }

    /// No password at all (an empty text; a recovered SHA1 is never empty).
    pub fn is_empty(&self) -> bool {
        matches!(&self.0, SecretValue::Text(t) if t.is_empty())
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Secret::new(text.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How many statements may run on the backend at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// A fixed number of execution slots (validated to be >= 1).
    Fixed(u32),
    /// Sized automatically between `min_pool_size` and `max_pool_size`.
    Auto,
}

impl FromStr for PoolSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(PoolSize::Auto);
        }
        s.parse::<u32>()
            .map(PoolSize::Fixed)
            .map_err(|_| format!("expected a whole number such as 8, or \"auto\"; got {s:?}"))
    }
}

impl fmt::Display for PoolSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolSize::Fixed(n) => write!(f, "{n}"),
            PoolSize::Auto => f.write_str("auto"),
        }
    }
}

/// The cap on open backend connections (`max_backend_connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendLimit {
    /// Derived from the server's `@@max_connections`, less headroom for other clients
    /// (`pool::limits`).
    Auto,
    /// A fixed number (validated to be >= pool_size).
    Fixed(u32),
}

impl BackendLimit {
    /// The configured number, if it is not `auto`.
    pub fn fixed(self) -> Option<u32> {
        match self {
            BackendLimit::Fixed(n) => Some(n),
            BackendLimit::Auto => None,
        }
    }

    /// At least `floor` connections: a fixed cap is raised to it, `auto` stays `auto` (the
    /// derived cap never leaves pool_size short of connections anyway).
    pub fn max(self, floor: u32) -> BackendLimit {
        match self {
            BackendLimit::Fixed(n) => BackendLimit::Fixed(n.max(floor)),
            BackendLimit::Auto => BackendLimit::Auto,
        }
    }
}

impl FromStr for BackendLimit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(BackendLimit::Auto);
        }
        s.parse::<u32>().map(BackendLimit::Fixed).map_err(|_| {
            format!("expected a whole number such as 200, or \"auto\" (from the server's max_connections); got {s:?}")
        })
    }
}

impl fmt::Display for BackendLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendLimit::Fixed(n) => write!(f, "{n}"),
            BackendLimit::Auto => f.write_str("auto"),
        }
    }
}

/// How many CPUs the backend server runs statements on (`server_cpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerCpus {
    /// Read from the server where it says (MariaDB's `@@thread_pool_size`); unknown elsewhere.
    Auto,
    /// A fixed number (at least 1).
    Fixed(u32),
}

/// `FromStr`, `Display` and `fixed()` of a setting that is `auto` or a count of at least 1
/// (an enum of `Auto` and `Fixed(u32)`); `$what` and `$auto_means` word the parse error.
macro_rules! auto_or_count {
    ($ty:ident, $what:literal, $auto_means:literal) => {
        impl $ty {
            /// The configured number, if it is not `auto`.
            pub fn fixed(self) -> Option<u32> {
                match self {
                    $ty::Fixed(n) => Some(n),
                    $ty::Auto => None,
                }
            }
        }

        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let s = s.trim();
                if s.eq_ignore_ascii_case("auto") {
                    return Ok($ty::Auto);
                }
                match s.parse::<u32>() {
                    Ok(n) if n > 0 => Ok($ty::Fixed(n)),
                    _ => Err(format!(
                        concat!(
                            "expected a number of ",
                            $what,
                            ", or \"auto\" (",
                            $auto_means,
                            "); got {:?}"
                        ),
                        s
                    )),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $ty::Fixed(n) => write!(f, "{n}"),
                    $ty::Auto => f.write_str("auto"),
                }
            }
        }
    };
}

auto_or_count!(ServerCpus, "CPUs such as 8", "read from the server");

/// How many threads the `sluice` binary runs clients on (`worker_threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerThreads {
    /// One per CPU the process may run on (its affinity and cgroup quota).
    Auto,
    /// A fixed number (at least 1).
    Fixed(u32),
}

impl WorkerThreads {
    /// The number of threads: `Auto` asks the OS, and 1 when it cannot say.
    pub fn resolve(self) -> u32 {
        match self {
            WorkerThreads::Fixed(n) => n,
            WorkerThreads::Auto => std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
        }
    }
}

auto_or_count!(
    WorkerThreads,
    "threads such as 4",
    "one per CPU sluice may run on"
);

/// The MySQL authentication plugins sluice speaks to clients and backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthPluginName {
    Native,
    CachingSha2,
}

impl AuthPluginName {
    /// The plugin name as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthPluginName::Native => "mysql_native_password",
            AuthPluginName::CachingSha2 => "caching_sha2_password",
        }
    }
}

impl FromStr for AuthPluginName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mysql_native_password" | "native" => Ok(AuthPluginName::Native),
            "caching_sha2_password" | "caching_sha2" => Ok(AuthPluginName::CachingSha2),
            other => Err(format!(
                "expected mysql_native_password or caching_sha2_password; got {other:?}"
            )),
        }
    }
}

impl fmt::Display for AuthPluginName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How sluice uses TLS towards the backend server (MySQL's `--ssl-mode` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendTlsMode {
    Disabled,
    Preferred,
    Required,
    VerifyCa,
    VerifyIdentity,
}

impl BackendTlsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendTlsMode::Disabled => "disabled",
            BackendTlsMode::Preferred => "preferred",
            BackendTlsMode::Required => "required",
            BackendTlsMode::VerifyCa => "verify_ca",
            BackendTlsMode::VerifyIdentity => "verify_identity",
        }
    }

    /// A server without TLS is refused.
    pub fn requires_tls(self) -> bool {
        !matches!(self, BackendTlsMode::Disabled | BackendTlsMode::Preferred)
    }

    /// The certificate is checked against `backend_tls_ca`.
    pub fn verifies(self) -> bool {
        matches!(
            self,
            BackendTlsMode::VerifyCa | BackendTlsMode::VerifyIdentity
        )
    }
}

impl FromStr for BackendTlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let all = [
            BackendTlsMode::Disabled,
            BackendTlsMode::Preferred,
            BackendTlsMode::Required,
            BackendTlsMode::VerifyCa,
            BackendTlsMode::VerifyIdentity,
        ];
        let want = s.trim().to_ascii_lowercase().replace('-', "_");
        all.into_iter().find(|m| m.as_str() == want).ok_or_else(|| {
            format!(
                "expected disabled, preferred, required, verify_ca or verify_identity; got {s:?}"
            )
        })
    }
}

impl fmt::Display for BackendTlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("expected text or json; got {other:?}")),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// Parses "30s", "500ms", "2m", "1h", "1m30s", "250us", or a plain number of seconds ("30", "0.5").
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let bad = || {
        format!("expected a duration such as 30s, 500ms, 2m or 1h (a plain number means seconds); got {s:?}")
    };
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return if (0.0..1e12).contains(&secs) {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(bad())
        };
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = rest[num_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "us" | "µs" => Duration::from_micros(1),
            "ms" => Duration::from_millis(1),
            "s" | "sec" | "secs" => Duration::from_secs(1),
            "m" | "min" | "mins" => Duration::from_secs(60),
            "h" | "hr" | "hours" => Duration::from_secs(3600),
            "d" | "days" => Duration::from_secs(86_400),
            _ => return Err(bad()),
        };
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| unit.checked_mul(n))
            .ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = rest[unit_len..].trim_start();
    }
    Ok(total)
}

/// Formats a duration the way `parse_duration` reads it, in the largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}us", d.as_micros());
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    if s != 0 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s != 0 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Parses a byte size: a plain number of bytes, or with K/M/G (powers of 1024, as MySQL does;
/// "KiB", "KB", "k" are all accepted).
pub fn parse_bytes(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let bad = || format!("expected a size in bytes such as 67108864, 64M or 64MiB; got {t:?}");
    let num_len = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..num_len].parse().map_err(|_| bad())?;
    let mult: u64 = match t[num_len..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("{t:?} is too large (at most 4 GiB - 1)"))
}

/// Formats a byte size in the largest exact binary unit ("64MiB").
pub fn format_bytes(n: u32) -> String {
    match n {
        0 => "0".to_string(),
        n if n.is_multiple_of(1 << 30) => format!("{}GiB", n >> 30),
        n if n.is_multiple_of(1 << 20) => format!("{}MiB", n >> 20),
        n if n.is_multiple_of(1 << 10) => format!("{}KiB", n >> 10),
        n => n.to_string(),
    }
}

/// Parses a boolean setting ("true/false", "on/off", "1/0", "yes/no").
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "1" | "yes" => Ok(true),
        "false" | "off" | "0" | "no" => Ok(false),
        other => Err(format!("expected true or false; got {other:?}")),
    }
}

/// Parses a whole number.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("expected a whole number from 0 to {}; got {s:?}", u32::MAX))
}

/// True for the words that switch an optional setting off ("off", "none", or empty).
pub fn is_off(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || t.eq_ignore_ascii_case("off") || t.eq_ignore_ascii_case("none")
}

/// Checks a `host:port` backend address ("db1:3306", "10.0.0.5:3306", "[::1]:3306").
/// Host names are not resolved here: that happens at connect time, so DNS changes are honoured.
pub fn check_host_port(s: &str) -> Result<(), String> {
    let bad = |why: &str| {
        format!("{s:?} is not a host:port address ({why}); write it like 127.0.0.1:3306 or db.example:3306")
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    if host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(bad("an IPv6 address must be in brackets"));
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'))
    {
        return Err(bad("bad character in host"));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad("port must be 1-65535")),
        Ok(_) => Ok(()),
    }
}

/// Splits a `NAME:PASSWORD` user spec (from `--user` or `SLUICE_USERS`). The password may contain ':'.
pub fn parse_user_spec(s: &str) -> Result<(String, Secret), String> {
    match s.split_once(':') {
        Some((name, password)) => Ok((name.trim().to_string(), Secret::new(password.to_string()))),
        None => Err(format!(
            "user {:?} has no password; write it as NAME:PASSWORD",
            s.trim()
        )),
    }
}
