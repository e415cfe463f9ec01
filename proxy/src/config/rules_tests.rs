//! `[[rules]]` and the per-user limits in the config file: what loads, what is refused (each
//! problem with the rule's index, the field and the reason), and the round trip.

use super::*;

const MINIMAL: &str = "[[users]]\nname = \"app\"\npassword = \"secret\"\n";

fn load(rules: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(&format!(
        "servers = [\"db1:3306\", \"db2:3306\"]\nmonitor_user = \"mon\"\n{MINIMAL}{rules}"
    ))
}

fn problems(rules: &str) -> Vec<String> {
    match load(rules) {
        Err(ConfigError::Invalid(p)) => p,
        other => panic!("expected invalid, got {other:?}"),
    }
}

const GOOD: &str = r#"
[[rules]]
name = "reports to the writer"
match_digest = "^SELECT .* FROM `?reports"
route = "writer"

[[rules]]
name = "no drops"
match_digest = "(?i)^drop table"
error = "DROP TABLE is not allowed through sluice"
log = true

[[rules]]
digest = "0x00000000000000ff"
user = "report"
schema = "shop"
client_addr = "10.0.0.0/8"
timeout = "1s"
max_concurrency = 2
log = 0.25

[[rules]]
route = "server:db2:3306"
user = "batch"
"#;

#[test]
fn rules_load_in_order() {
    let cfg = load(GOOD).expect("valid");
    let r = &cfg.rules;
    assert_eq!(r.len(), 4);
    assert_eq!(r[0].name.as_deref(), Some("reports to the writer"));
    assert_eq!(r[0].route, Some(RouteTarget::Writer));
    assert!(r[0]
        .match_digest
        .as_ref()
        .unwrap()
        .0
        .is_match(b"SELECT a FROM `reports` WHERE id = ?"));
    assert!(r[1]
        .match_digest
        .as_ref()
        .unwrap()
        .0
        .is_match(b"DROP TABLE t"));
    assert_eq!(r[1].log, Some(1.0));
    assert_eq!(r[2].digest, Some(255));
    assert_eq!(r[2].timeout, Some(Duration::from_secs(1)));
    assert_eq!((r[2].max_concurrency, r[2].log), (Some(2), Some(0.25)));
    assert!(r[2]
        .client_addr
        .unwrap()
        .contains("10.9.8.7".parse().unwrap()));
    assert_eq!(r[3].route, Some(RouteTarget::Server(1)));
}

#[test]
fn a_broken_rule_names_its_index_field_and_reason() {
    let cases = [
        (
            "[[rules]]\nmatch_digest = \"(unclosed\"\nroute = \"writer\"\n",
            "rules[0].match_digest: ",
            "regex",
        ),
        (
            "[[rules]]\nroute = \"writer\"\n[[rules]]\ndigest = \"0xzz\"\nroute = \"writer\"\n",
            "rules[1].digest: ",
            "SHOW DIGESTS",
        ),
        (
            "[[rules]]\nclient_addr = \"10.0.0.0/40\"\nroute = \"writer\"\n",
            "rules[0].client_addr: ",
            "10.0.0.0/8",
        ),
        (
            "[[rules]]\nroute = \"primary\"\n",
            "rules[0].route: ",
            "writer, replica or server:<name>",
        ),
        (
            "[[rules]]\nroute = \"server:db9:3306\"\n",
            "rules[0].route: ",
            "db1:3306, db2:3306",
        ),
        (
            "[[rules]]\ntimeout = \"soon\"\n",
            "rules[0].timeout: ",
            "soon",
        ),
        (
            "[[rules]]\ntimeout = \"0s\"\n",
            "rules[0].timeout: ",
            "positive",
        ),
        (
            "[[rules]]\nmax_concurrency = 0\n",
            "rules[0].max_concurrency: ",
            "at least 1",
        ),
        ("[[rules]]\nlog = 2.5\n", "rules[0].log: ", "sample rate"),
        (
            "[[rules]]\nuser = \"app\"\n",
            "rules[0].action: ",
            "route, error, timeout, max_concurrency or log",
        ),
        (
            "[[rules]]\nlog = false\n",
            "rules[0].action: ",
            "none given",
        ),
        (
            "[[rules]]\nerror = \"no\"\nroute = \"writer\"\n",
            "rules[0].error: ",
            "never apply",
        ),
        ("[[rules]]\nerror = \"\"\n", "rules[0].error: ", "empty"),
        (
            "[[rules]]\nuser = \"\"\nroute = \"writer\"\n",
            "rules[0].user: ",
            "empty",
        ),
    ];
    for (text, prefix, reason) in cases {
        let p = problems(text);
        assert!(
            p.iter()
                .any(|m| m.starts_with(prefix) && m.contains(reason)),
            "{text}: want {prefix}...{reason} in {p:?}"
        );
    }
    // Every problem at once, each with its rule.
    let p = problems("[[rules]]\nroute = \"x\"\n[[rules]]\nmax_concurrency = -1\n");
    assert_eq!(p.len(), 2, "{p:?}");
    // Unknown fields are a parse error that names the field.
    let e = load("[[rules]]\nrout = \"writer\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rout"), "{e}");
}

#[test]
fn rules_round_trip_and_their_changes_show_in_the_diff() {
    let cfg = load(GOOD).expect("valid");
    let plain = docs::to_toml(&cfg, false);
    let again = Config::from_toml_str(&plain).expect("round trip");
    assert_eq!(again.rules, cfg.rules);
    assert!(cfg.diff(&again).is_empty(), "{:?}", cfg.diff(&again));
    let fewer = load("[[rules]]\nroute = \"writer\"\n").unwrap();
    let change = cfg.diff(&fewer);
    let rules = change
        .iter()
        .find(|c| c.name == "rules")
        .expect("a rules change");
    assert_eq!(
        (rules.old.as_str(), rules.new.as_str(), rules.live),
        ("4 rules", "1 rules", true)
    );
}

#[test]
fn user_limits_fall_back_to_the_global_defaults() {
    let cfg = Config::from_toml_str(
        "max_user_client_connections = 100\nmax_user_concurrency = 4\n\
         [[users]]\nname = \"app\"\npassword = \"pw\"\nmax_client_connections = 2\n\
         [[users]]\nname = \"batch\"\npassword = \"pw\"\nmax_concurrency = 0\n\
         [[users]]\nname = \"plain\"\npassword = \"pw\"\n",
    )
    .expect("valid");
    let limits = |name: &str| cfg.find_user(name.as_bytes()).unwrap().limits(&cfg);
    assert_eq!(
        limits("app"),
        UserLimits {
            max_client_connections: Some(2),
            max_concurrency: Some(4)
        }
    );
    assert_eq!(
        limits("batch"),
        UserLimits {
            max_client_connections: Some(100),
            max_concurrency: None
        },
        "0 is no limit, whatever the default"
    );
    assert_eq!(limits("plain"), UserLimits::defaults(&cfg));
    assert_eq!(
        UserLimits::defaults(&Config::defaults()),
        UserLimits::default()
    );
    let again = Config::from_toml_str(&docs::to_toml(&cfg, false)).expect("round trip");
    assert_eq!(again.users, cfg.users);
}
