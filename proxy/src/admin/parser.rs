//! Admin console text -> [`AdminCommand`]. The only place that reads the operator's text:
//! keywords are case-insensitive, whitespace is free, and trailing `;` are ignored.

use std::fmt;

use crate::digests::Order;

/// Everything the admin console understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminCommand {
    Show(ShowWhat),
    /// `SET <setting> = <value>`; the value is checked when applied.
    Set {
        setting: LiveSetting,
        value: String,
    },
    /// `SHOW DIGESTS [ORDER BY total_time|count|p99|queued] [LIMIT n]`.
    ShowDigests {
        order: Order,
        limit: Option<usize>,
    },
    ResetDigests,
    Pause,
    Resume,
    Reload,
    /// `RELOAD RULES`: the file's `[[rules]]` only.
    ReloadRules,
    /// `RECONNECT`: the server's globals changed (a SET GLOBAL made on the server directly):
    /// logins from now on get backends opened under them.
    Reconnect,
    Shutdown,
    /// `KILL [CONNECTION] <client id>`.
    Kill(u32),
    Help,
    /// `SELECT @@name [LIMIT n]`: MySQL clients send a few of these when they connect.
    SelectVariable(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowWhat {
    Pools,
    Clients,
    Servers,
    Stats,
    Config,
    Version,
    Latency,
    Rules,
    Users,
}

/// Settings `SET` can change on the running proxy. `RELOAD` covers every live setting; these
/// are the ones an operator turns while watching the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveSetting {
    PoolSize,
    MaxBackendConnections,
    MaxClientConnections,
    QueueTimeout,
    ConnectTimeout,
    ClientWriteTimeout,
    ShutdownTimeout,
    ServerIdleTimeout,
    ServerLifetime,
    HealthCheckInterval,
}

impl LiveSetting {
    pub const ALL: &'static [LiveSetting] = &[
        LiveSetting::PoolSize,
        LiveSetting::MaxBackendConnections,
        LiveSetting::MaxClientConnections,
        LiveSetting::QueueTimeout,
        LiveSetting::ConnectTimeout,
        LiveSetting::ClientWriteTimeout,
        LiveSetting::ShutdownTimeout,
        LiveSetting::ServerIdleTimeout,
        LiveSetting::ServerLifetime,
        LiveSetting::HealthCheckInterval,
    ];

    /// The setting's name in the config file (and in SHOW CONFIG).
    pub fn name(self) -> &'static str {
        match self {
            LiveSetting::PoolSize => "pool_size",
            LiveSetting::MaxBackendConnections => "max_backend_connections",
            LiveSetting::MaxClientConnections => "max_client_connections",
            LiveSetting::QueueTimeout => "queue_timeout",
            LiveSetting::ConnectTimeout => "connect_timeout",
            LiveSetting::ClientWriteTimeout => "client_write_timeout",
            LiveSetting::ShutdownTimeout => "shutdown_timeout",
            LiveSetting::ServerIdleTimeout => "server_idle_timeout",
            LiveSetting::ServerLifetime => "server_lifetime",
            LiveSetting::HealthCheckInterval => "health_check_interval",
        }
    }

    fn from_name(name: &str) -> Option<LiveSetting> {
        LiveSetting::ALL
            .iter()
            .copied()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for LiveSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The command list, shown by HELP and in every parse error.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "SHOW POOLS",
        "execution slots and backend connections per backend group",
    ),
    (
        "SHOW CLIENTS",
        "every client session: state, pin reason, queries",
    ),
    (
        "SHOW SERVERS",
        "every idle backend connection, and how many are checked out",
    ),
    ("SHOW STATS", "counters since start, with rates"),
    ("SHOW CONFIG", "the running configuration (secrets masked)"),
    ("SHOW VERSION", "sluice and backend versions"),
    ("SHOW LATENCY", "queue-wait and backend-time percentiles"),
    (
        "SHOW DIGESTS [ORDER BY total_time|count|p99|queued] [LIMIT n]",
        "per statement shape, user, schema and server: counts, times, rows",
    ),
    ("RESET DIGESTS", "empty the digest table"),
    (
        "SHOW RULES",
        "the query rules in force, with their counters",
    ),
    (
        "SHOW USERS",
        "the accounts logins are checked against (listed, and read from the server): source, plugin, state, last refresh",
    ),
    (
        "SET <setting> = <value>",
        "change a live setting, e.g. SET pool_size = 8",
    ),
    (
        "PAUSE",
        "stop handing out backends and wait for running statements",
    ),
    ("RESUME", "undo PAUSE"),
    ("RELOAD", "re-read the config file"),
    ("RELOAD RULES", "re-read the config file's [[rules]] only"),
    (
        "RECONNECT",
        "after a SET GLOBAL made on the server directly: new logins get fresh backend \
         connections that see it; sessions already logged in keep what they saw (a SET GLOBAL \
         through sluice does this by itself)",
    ),
    ("SHUTDOWN", "drain and stop sluice"),
    ("KILL <client id>", "disconnect one client"),
    ("HELP", "this list"),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty command; {}", command_list())]
    Empty,
    #[error("unknown admin command {0:?}; {list}", list = command_list())]
    Unknown(String),
    #[error("cannot SET {0:?}: settable are {list}; others change with RELOAD", list = settable_list())]
    UnknownSetting(String),
    #[error("{what}; write it as {usage}")]
    Usage { what: String, usage: &'static str },
}

fn command_list() -> String {
    let names: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).collect();
    format!("the commands are: {}", names.join(", "))
}

fn settable_list() -> String {
    let names: Vec<&str> = LiveSetting::ALL.iter().map(|s| s.name()).collect();
    names.join(", ")
}

/// Parses one admin command.
pub fn parse(text: &str) -> Result<AdminCommand, ParseError> {
    let text = text
        .trim()
        .trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some(first) = words.first() else {
        return Err(ParseError::Empty);
    };
    let first = first.to_ascii_uppercase();
    let rest = &words[1..];
    let single = |cmd: AdminCommand| {
        if rest.is_empty() {
            Ok(cmd)
        } else {
            Err(ParseError::Unknown(text.to_string()))
        }
    };
    match first.as_str() {
        "SHOW" => parse_show(rest, text),
        "SET" => parse_set(text),
        "PAUSE" => single(AdminCommand::Pause),
        "RESUME" => single(AdminCommand::Resume),
        "RELOAD" if matches!(rest, [w] if w.eq_ignore_ascii_case("RULES")) => {
            Ok(AdminCommand::ReloadRules)
        }
        "RELOAD" => single(AdminCommand::Reload),
        "RESET" if matches!(rest, [w] if w.eq_ignore_ascii_case("DIGESTS")) => {
            Ok(AdminCommand::ResetDigests)
        }
        "RECONNECT" => single(AdminCommand::Reconnect),
        "SHUTDOWN" => single(AdminCommand::Shutdown),
        "HELP" => single(AdminCommand::Help),
        "KILL" => parse_kill(rest),
        "SELECT" => parse_select(rest, text),
        _ => Err(ParseError::Unknown(text.to_string())),
    }
}

fn parse_show(rest: &[&str], text: &str) -> Result<AdminCommand, ParseError> {
    if let Some((first, more)) = rest.split_first() {
        if first.eq_ignore_ascii_case("DIGESTS") {
            return parse_show_digests(more);
        }
    }
    let [what] = rest else {
        return Err(ParseError::Unknown(text.to_string()));
    };
    let what = match what.to_ascii_uppercase().as_str() {
        "POOLS" => ShowWhat::Pools,
        "CLIENTS" => ShowWhat::Clients,
        "SERVERS" => ShowWhat::Servers,
        "STATS" => ShowWhat::Stats,
        "CONFIG" => ShowWhat::Config,
        "VERSION" => ShowWhat::Version,
        "LATENCY" => ShowWhat::Latency,
        "RULES" => ShowWhat::Rules,
        "USERS" => ShowWhat::Users,
        "HELP" | "COMMANDS" => return Ok(AdminCommand::Help),
        _ => return Err(ParseError::Unknown(text.to_string())),
    };
    Ok(AdminCommand::Show(what))
}

/// The words after `SHOW DIGESTS`: `[ORDER BY <column>] [LIMIT n]`, in that order.
fn parse_show_digests(words: &[&str]) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "SHOW DIGESTS [ORDER BY total_time|count|p99|queued] [LIMIT n]";
    let usage = |what: String| ParseError::Usage { what, usage: USAGE };
    let is = |w: &&str, kw: &str| w.eq_ignore_ascii_case(kw);
    let (mut order, mut limit) = (Order::default(), None);
    let mut rest = words;
    if let [o, by, column, more @ ..] = rest {
        if is(o, "ORDER") && is(by, "BY") {
            order = match column.to_ascii_lowercase().as_str() {
                "total_time" => Order::TotalTime,
                "count" => Order::Count,
                "p99" => Order::P99,
                "queued" => Order::Queued,
                other => return Err(usage(format!("SHOW DIGESTS cannot order by {other:?}"))),
            };
            rest = more;
        }
    }
    match rest {
        [] => {}
        [l, n] if is(l, "LIMIT") => {
            limit = Some(
                n.parse()
                    .map_err(|_| usage(format!("{n:?} is not a row count")))?,
            );
        }
        _ => {
            return Err(usage(format!(
                "SHOW DIGESTS does not take {:?}",
                rest.join(" ")
            )))
        }
    }
    Ok(AdminCommand::ShowDigests { order, limit })
}

/// `SET name = value`, `SET name value` or `SET name TO value`; `SET GLOBAL name = value` too,
/// since that is what a MySQL operator types.
fn parse_set(text: &str) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "SET pool_size = 8";
    let body = text[3..].trim();
    let body = strip_keyword(body, "GLOBAL").unwrap_or(body);
    let (name, value) = match body.split_once('=') {
        Some((n, v)) => (n.trim(), v.trim()),
        None => {
            let mut parts = body.splitn(2, char::is_whitespace);
            let name = parts.next().unwrap_or("").trim();
            let value = parts.next().unwrap_or("").trim();
            (name, strip_keyword(value, "TO").unwrap_or(value))
        }
    };
    if name.is_empty() || value.is_empty() {
        return Err(ParseError::Usage {
            what: "SET needs a setting and a value".into(),
            usage: USAGE,
        });
    }
    let setting =
        LiveSetting::from_name(name).ok_or_else(|| ParseError::UnknownSetting(name.to_string()))?;
    let value = value
        .trim_matches(|c| c == '\'' || c == '"')
        .trim()
        .to_string();
    Ok(AdminCommand::Set { setting, value })
}

fn parse_kill(rest: &[&str]) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "KILL <client id> (the id column of SHOW CLIENTS)";
    let id = match rest {
        [id] => id,
        [conn, id] if conn.eq_ignore_ascii_case("CONNECTION") => id,
        _ => {
            return Err(ParseError::Usage {
                what: "KILL takes one client id".into(),
                usage: USAGE,
            })
        }
    };
    id.parse()
        .map(AdminCommand::Kill)
        .map_err(|_| ParseError::Usage {
            what: format!("{id:?} is not a client id"),
            usage: USAGE,
        })
}

/// `SELECT @@version_comment LIMIT 1` and friends.
fn parse_select(rest: &[&str], text: &str) -> Result<AdminCommand, ParseError> {
    let unknown = || ParseError::Unknown(text.to_string());
    let (var, tail) = rest.split_first().ok_or_else(unknown)?;
    let name = var
        .strip_prefix("@@")
        .ok_or_else(unknown)?
        .to_ascii_lowercase();
    let name = name
        .strip_prefix("session.")
        .or_else(|| name.strip_prefix("global."))
        .unwrap_or(&name);
    let limit_ok = match tail {
        [] => true,
        [limit, n] => limit.eq_ignore_ascii_case("LIMIT") && n.parse::<u64>().is_ok(),
        _ => false,
    };
    if name.is_empty() || !limit_ok || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(unknown());
    }
    Ok(AdminCommand::SelectVariable(name.to_string()))
}

/// `rest` after a leading keyword (case-insensitive, followed by whitespace).
fn strip_keyword<'a>(text: &'a str, keyword: &str) -> Option<&'a str> {
    let head = text.get(..keyword.len())?;
    let tail = &text[keyword.len()..];
    (head.eq_ignore_ascii_case(keyword) && tail.starts_with(char::is_whitespace))
        .then(|| tail.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_commands_ignore_case_whitespace_and_semicolons() {
        assert_eq!(parse("SHOW POOLS"), Ok(AdminCommand::Show(ShowWhat::Pools)));
        assert_eq!(
            parse("  show   clients ;; "),
            Ok(AdminCommand::Show(ShowWhat::Clients))
        );
        assert_eq!(
            parse("Show Latency;"),
            Ok(AdminCommand::Show(ShowWhat::Latency))
        );
        assert_eq!(
            parse("show\tservers"),
            Ok(AdminCommand::Show(ShowWhat::Servers))
        );
        for (text, what) in [
            ("stats", ShowWhat::Stats),
            ("config", ShowWhat::Config),
            ("version", ShowWhat::Version),
            ("users", ShowWhat::Users),
        ] {
            assert_eq!(parse(&format!("show {text}")), Ok(AdminCommand::Show(what)));
        }
    }

    #[test]
    fn set_accepts_the_usual_spellings() {
        let want = Ok(AdminCommand::Set {
            setting: LiveSetting::PoolSize,
            value: "8".into(),
        });
        assert_eq!(parse("SET pool_size = 8"), want);
        assert_eq!(parse("set POOL_SIZE=8;"), want);
        assert_eq!(parse("SET pool_size 8"), want);
        assert_eq!(parse("SET pool_size TO 8"), want);
        assert_eq!(parse("SET GLOBAL pool_size = '8'"), want);
        assert_eq!(
            parse("SET queue_timeout = 2s"),
            Ok(AdminCommand::Set {
                setting: LiveSetting::QueueTimeout,
                value: "2s".into()
            })
        );
    }

    #[test]
    fn set_rejects_unknown_settings_and_missing_values() {
        assert_eq!(
            parse("SET listen = 1.2.3.4:5"),
            Err(ParseError::UnknownSetting("listen".into()))
        );
        assert!(matches!(
            parse("SET pool_size ="),
            Err(ParseError::Usage { .. })
        ));
        assert!(matches!(parse("SET"), Err(ParseError::Usage { .. })));
        let msg = parse("SET nope = 1").unwrap_err().to_string();
        assert!(msg.contains("pool_size") && msg.contains("RELOAD"), "{msg}");
    }

    #[test]
    fn single_word_commands_take_no_arguments() {
        assert_eq!(parse("pause"), Ok(AdminCommand::Pause));
        assert_eq!(parse("RESUME;"), Ok(AdminCommand::Resume));
        assert_eq!(parse("reload"), Ok(AdminCommand::Reload));
        assert_eq!(parse("reconnect;"), Ok(AdminCommand::Reconnect));
        assert_eq!(parse("Shutdown"), Ok(AdminCommand::Shutdown));
        assert_eq!(parse("help"), Ok(AdminCommand::Help));
        assert!(matches!(parse("pause now"), Err(ParseError::Unknown(_))));
    }

    #[test]
    fn kill_takes_a_client_id() {
        assert_eq!(parse("KILL 42"), Ok(AdminCommand::Kill(42)));
        assert_eq!(parse("kill connection 7;"), Ok(AdminCommand::Kill(7)));
        assert!(matches!(parse("KILL abc"), Err(ParseError::Usage { .. })));
        assert!(matches!(parse("KILL"), Err(ParseError::Usage { .. })));
        assert!(matches!(parse("KILL -1"), Err(ParseError::Usage { .. })));
    }

    #[test]
    fn client_probes_are_understood() {
        assert_eq!(
            parse("select @@version_comment limit 1"),
            Ok(AdminCommand::SelectVariable("version_comment".into()))
        );
        assert_eq!(
            parse("SELECT @@SESSION.Version"),
            Ok(AdminCommand::SelectVariable("version".into()))
        );
        assert!(matches!(parse("SELECT 1"), Err(ParseError::Unknown(_))));
        assert!(matches!(
            parse("SELECT @@a, @@b"),
            Err(ParseError::Unknown(_))
        ));
    }

    #[test]
    fn digests_and_rules_commands() {
        let show = |order, limit| Ok(AdminCommand::ShowDigests { order, limit });
        assert_eq!(parse("SHOW DIGESTS"), show(Order::TotalTime, None));
        assert_eq!(
            parse("show digests order by count;"),
            show(Order::Count, None)
        );
        assert_eq!(
            parse("SHOW DIGESTS ORDER BY P99 LIMIT 5"),
            show(Order::P99, Some(5))
        );
        assert_eq!(
            parse("show digests limit 10"),
            show(Order::TotalTime, Some(10))
        );
        assert_eq!(
            parse("SHOW DIGESTS ORDER BY queued"),
            show(Order::Queued, None)
        );
        for bad in [
            "SHOW DIGESTS ORDER BY name",
            "SHOW DIGESTS LIMIT x",
            "SHOW DIGESTS LIMIT 5 ORDER BY count",
            "SHOW DIGESTS extra",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(matches!(e, ParseError::Usage { .. }), "{bad}: {e}");
            assert!(
                e.to_string().contains("total_time|count|p99|queued"),
                "{bad}: {e}"
            );
        }
        assert_eq!(parse("RESET DIGESTS"), Ok(AdminCommand::ResetDigests));
        assert_eq!(parse("show rules"), Ok(AdminCommand::Show(ShowWhat::Rules)));
        assert_eq!(parse("reload rules;"), Ok(AdminCommand::ReloadRules));
        assert!(matches!(parse("RESET"), Err(ParseError::Unknown(_))));
        assert!(matches!(
            parse("RELOAD everything"),
            Err(ParseError::Unknown(_))
        ));
    }

    #[test]
    fn unknown_commands_list_every_command() {
        let msg = parse("FLUSH HOSTS").unwrap_err().to_string();
        for (cmd, _) in COMMANDS {
            assert!(msg.contains(cmd), "{cmd} missing from {msg}");
        }
        assert_eq!(parse(" ; "), Err(ParseError::Empty));
        assert!(matches!(parse("SHOW TABLES"), Err(ParseError::Unknown(_))));
    }
}
