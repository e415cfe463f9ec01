//! Unit tests of loading, precedence, validation, masking and the generated docs.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use super::settings::{apply, is_scalar, render};
use super::*;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The backend credentials as text, for comparing.
fn creds<'a>(u: &'a UserConfig, cfg: &'a Config) -> (&'a str, &'a str) {
    let (name, password) = u.backend_credentials(cfg);
    (name, password.expose())
}

fn temp_config(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(text.as_bytes()).expect("write temp file");
    f
}

fn invalid(result: Result<Config, ConfigError>) -> Vec<String> {
    match result {
        Err(ConfigError::Invalid(v)) => v,
        Err(other) => panic!("expected Invalid, got {other}"),
        Ok(_) => panic!("expected Invalid, got a valid config"),
    }
}

const MINIMAL: &str = "[[users]]\nname = \"app\"\npassword = \"secret\"\n";

#[test]
fn every_default_parses_and_matches_the_spec() {
    for doc in SETTINGS
        .iter()
        .filter(|d| is_scalar(d) && !d.default.is_empty())
    {
        let mut cfg = Config::defaults();
        assert_eq!(
            apply(&mut cfg, doc.name, doc.default),
            Ok(()),
            "{}",
            doc.name
        );
    }
    let c = Config::defaults();
    assert_eq!(c.listen.to_string(), "127.0.0.1:6033");
    assert_eq!(c.backend, "127.0.0.1:3306");
    assert_eq!(c.pool_size, PoolSize::Fixed(4));
    assert_eq!(
        (c.min_pool_size, c.max_pool_size, c.max_backend_connections),
        (1, 64, BackendLimit::Auto)
    );
    assert_eq!(c.max_client_connections, 10_000);
    assert_eq!(c.queue_timeout, Duration::from_secs(30));
    assert_eq!(c.pin_wait, Duration::from_secs(2));
    assert_eq!(c.max_queue_wait, None);
    assert_eq!(c.connect_timeout, Duration::from_secs(5));
    assert_eq!(c.client_login_timeout, Duration::from_secs(10));
    assert_eq!(c.client_write_timeout, Duration::from_secs(30));
    assert_eq!(c.shutdown_timeout, Duration::from_secs(10));
    assert_eq!(c.max_allowed_packet, 64 << 20);
    assert_eq!(c.max_prepared_statements_per_backend, 256);
    assert_eq!(c.max_prepared_statements_per_client, 16382);
    assert_eq!(c.server_idle_timeout, Duration::from_secs(600));
    assert_eq!(c.server_lifetime, Duration::from_secs(3600));
    assert_eq!(c.health_check_interval, Duration::from_secs(30));
    assert_eq!(c.default_auth_plugin, AuthPluginName::Native);
    assert_eq!(c.log_format, LogFormat::Text);
    assert!(c.admin_listen.is_none() && c.metrics_listen.is_none());
}

#[test]
fn precedence_is_default_file_env_flag() {
    let file = temp_config(&format!(
        "pool_size = 8\nqueue_timeout = \"10s\"\nmax_backend_connections = 40\nmin_idle = 2\n{MINIMAL}"
    ));
    let path = file.path().to_str().expect("utf-8 path");
    let env = env(&[
        ("SLUICE_POOL_SIZE", "12"),
        ("SLUICE_QUEUE_TIMEOUT", "20s"),
        ("SLUICE_USERS", "envuser:pw1,other:pw:with:colons"),
    ]);
    let cli = Cli::try_parse_from(["sluice", "--config", path, "--pool-size", "16"]).expect("cli");
    let cfg = Config::load_with_env(&cli, &env).expect("valid");
    assert_eq!(
        cfg.pool_size,
        PoolSize::Fixed(16),
        "flag beats env and file"
    );
    assert_eq!(cfg.queue_timeout, Duration::from_secs(20), "env beats file");
    assert_eq!(
        cfg.max_backend_connections,
        BackendLimit::Fixed(40),
        "file beats default"
    );
    assert_eq!(cfg.connect_timeout, Duration::from_secs(5), "default");
    let names: Vec<&str> = cfg.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["envuser", "other"],
        "env users replace the file's list"
    );
    assert_eq!(cfg.users[1].password.expose(), "pw:with:colons");
    assert_eq!(cfg.config_path.as_deref(), Some(file.path()));

    let cli =
        Cli::try_parse_from(["sluice", "--config", path, "--user", "flaguser:x"]).expect("cli");
    let cfg = Config::load_with_env(&cli, &env).expect("valid");
    assert_eq!(cfg.users.len(), 1);
    assert_eq!(
        cfg.users[0].name, "flaguser",
        "flag users replace env users"
    );
    assert_eq!(cfg.pool_size, PoolSize::Fixed(12), "env beats file");
}

#[test]
fn config_path_can_come_from_env() {
    let file = temp_config(&format!("pool_size = 3\n{MINIMAL}"));
    let path = file.path().to_str().expect("utf-8 path");
    let cli = Cli::try_parse_from(["sluice"]).expect("cli");
    let cfg = Config::load_with_env(&cli, &env(&[("SLUICE_CONFIG", path)])).expect("valid");
    assert_eq!(cfg.pool_size, PoolSize::Fixed(3));
}

#[test]
fn reload_rereads_the_file_and_keeps_flags() {
    let mut file = temp_config(&format!("pool_size = 8\nqueue_timeout = 5\n{MINIMAL}"));
    let path = file.path().to_str().expect("utf-8 path").to_string();
    let cli =
        Cli::try_parse_from(["sluice", "--config", &path, "--queue-timeout", "7s"]).expect("cli");
    let cfg = Config::load_with_env(&cli, &HashMap::new()).expect("valid");
    assert_eq!(cfg.queue_timeout, Duration::from_secs(7));
    file.as_file_mut().set_len(0).expect("truncate");
    std::fs::write(
        &path,
        format!("pool_size = 6\nlisten = \"127.0.0.1:7000\"\n{MINIMAL}"),
    )
    .expect("rewrite");
    let new = cfg.reload().expect("reload");
    assert_eq!(new.pool_size, PoolSize::Fixed(6));
    assert_eq!(
        new.queue_timeout,
        Duration::from_secs(7),
        "the flag still wins after reload"
    );
    let changes = cfg.diff(&new);
    let pool = changes
        .iter()
        .find(|c| c.name == "pool_size")
        .expect("pool_size changed");
    assert_eq!(
        (pool.old.as_str(), pool.new.as_str(), pool.live),
        ("8", "6", true)
    );
    let listen = changes
        .iter()
        .find(|c| c.name == "listen")
        .expect("listen changed");
    assert!(!listen.live, "listen needs a restart");
    assert_eq!(changes.len(), 2, "{changes:?}");

    std::fs::write(&path, "pool_size = [").expect("rewrite");
    assert!(matches!(cfg.reload(), Err(ConfigError::Parse { .. })));
}

#[test]
fn a_backend_may_be_a_unix_socket_with_an_absolute_path_and_no_tls() {
    for ok in ["unix:/run/mysqld/mysqld.sock", "/tmp/mysql.sock"] {
        let text = format!("backend = \"{ok}\"\n{MINIMAL}");
        let cfg = Config::from_toml_str(&text).expect(ok);
        assert_eq!(cfg.backend, ok);
    }
    let errs = invalid(Config::from_toml_str(&format!(
        "backend = \"unix:mysqld.sock\"\n{MINIMAL}"
    )));
    assert!(
        errs.iter().any(|m| m.contains("needs an absolute path")),
        "{errs:?}"
    );
    let errs = invalid(Config::from_toml_str(&format!(
        "backend = \"unix:/run/mysqld/mysqld.sock\"\nbackend_tls = \"required\"\n{MINIMAL}"
    )));
    assert!(
        errs.iter().any(|m| m.contains("carries no TLS")),
        "{errs:?}"
    );
}

#[test]
fn validation_reports_every_problem_with_advice() {
    let text = r#"
pool_size = 0
min_pool_size = 9
max_pool_size = 3
backend = "db.example"
tls_cert = "/etc/cert.pem"
listen = "127.0.0.1:6033"
admin_listen = "127.0.0.1:6033"
queue_timeout = "soon"
[[users]]
name = "app"
password = "a"
[[users]]
name = "app"
password = "b"
[[users]]
name = "nopass"
"#;
    let errs = invalid(Config::from_toml_str(text));
    let expect = [
        "pool_size is 0; set it to at least 1",
        "min_pool_size (9) is greater than max_pool_size (3)",
        "\"db.example\" is not a host:port address (no port)",
        "tls_cert is set without tls_key",
        "admin_listen and listen are both 127.0.0.1:6033",
        "queue_timeout: expected a duration such as 30s",
        "user \"app\" is listed twice",
        "user \"nopass\" has no password",
        "admin_listen is set but no admin_users",
    ];
    for e in expect {
        assert!(
            errs.iter().any(|m| m.contains(e)),
            "missing {e:?} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");

    let errs = invalid(Config::from_toml_str(
        "pool_size = 80\nmax_backend_connections = 64\n",
    ));
    assert!(
        errs.iter().any(|m| m.contains("no users are configured")),
        "{errs:?}"
    );
    assert!(errs
        .iter()
        .any(|m| m.contains("max_backend_connections (64) is less than pool_size (80)")));
}

#[test]
fn hashed_passwords_need_native_auth_and_a_plaintext_backend_password() {
    let hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19";
    let text = format!(
        "backend_password = \"{hash}\"\n[[users]]\nname = \"h\"\npassword = \"{hash}\"\nauth_plugin = \"caching_sha2_password\"\n"
    );
    let errs = invalid(Config::from_toml_str(&text));
    assert!(
        errs.iter()
            .any(|m| m.contains("cannot verify caching_sha2_password")),
        "{errs:?}"
    );
    assert!(errs
        .iter()
        .any(|m| m.contains("a password hash as backend_password")));
    let ok = format!("backend_user = \"svc\"\nbackend_password = \"pw\"\n[[users]]\nname = \"h\"\npassword = \"{hash}\"\n");
    let cfg = Config::from_toml_str(&ok).expect("valid");
    assert!(cfg.users[0].password.is_native_hash());
    assert_eq!(creds(&cfg.users[0], &cfg), ("svc", "pw"));
    // Pass-through with a hash: the login recovers SHA1(password) for the backend.
    let own = format!("[[users]]\nname = \"h\"\npassword = \"{hash}\"\n");
    assert!(Config::from_toml_str(&own).is_ok());
}

#[test]
fn accounts_from_the_server_need_a_service_account() {
    // auth_user and no users list: the server's accounts, no list needed.
    let cfg = Config::from_toml_str("auth_user = \"svc:pw\"\n").expect("valid");
    assert_eq!(cfg.auth_source(), AuthSource::Server);
    assert_eq!(cfg.auth_cache_ttl, Duration::from_secs(30));
    assert!(cfg.find_user(b"app").is_none());
    let errs = invalid(Config::from_toml_str("auth_source = \"server\"\n"));
    assert!(
        errs.iter().any(|m| m.contains("needs auth_user")),
        "{errs:?}"
    );
    let errs = invalid(Config::from_toml_str(&format!(
        "auth_source = \"server\"\nauth_user = \"svc:pw\"\n{MINIMAL}"
    )));
    assert!(
        errs.iter().any(|m| m.contains("set auth_source = both")),
        "{errs:?}"
    );
    let both = Config::from_toml_str(&format!(
        "auth_source = \"both\"\nauth_user = \"svc:pw\"\n{MINIMAL}"
    ))
    .expect("valid");
    assert!(both.find_user(b"app").is_some());
    // A list and auth_user: the list only, with a warning.
    let listed = Config::from_toml_str(&format!("auth_user = \"svc:pw\"\n{MINIMAL}")).unwrap();
    assert_eq!(listed.auth_source(), AuthSource::List);
    assert!(listed
        .warnings()
        .iter()
        .any(|w| w.contains("auth_source = both")));
    let errs = invalid(Config::from_toml_str("auth_user = \"nocolon\"\n"));
    assert!(errs.iter().any(|m| m.contains("NAME:PASSWORD")), "{errs:?}");
    let errs = invalid(Config::from_toml_str(
        "auth_user = \"svc:pw\"\nauth_cache_ttl = \"2d\"\n",
    ));
    assert!(
        errs.iter().any(|m| m.contains("auth_cache_ttl")),
        "{errs:?}"
    );
    let errs = invalid(Config::from_toml_str(""));
    assert!(
        errs.iter().any(|m| m.contains("--auth-source server")),
        "{errs:?}"
    );
    // The flag and the env var.
    let cli = Cli::try_parse_from([
        "sluice",
        "--auth-user",
        "svc:flag-pw",
        "--auth-cache-ttl",
        "5s",
    ])
    .unwrap();
    let cfg =
        Config::load_with_env(&cli, &env(&[("SLUICE_AUTH_SOURCE", "server")])).expect("valid");
    assert_eq!(
        cfg.auth_user.as_ref().map(|u| u.password.expose()),
        Some("flag-pw")
    );
    assert_eq!(
        (cfg.auth_source(), cfg.auth_cache_ttl),
        (AuthSource::Server, Duration::from_secs(5))
    );
    assert!(cfg.masked_toml().contains("auth_user = \"svc:***\""));
}

#[test]
fn unknown_keys_and_bad_types_are_parse_errors() {
    let err = Config::from_toml_str("pool_sise = 4\n").expect_err("error");
    assert!(
        matches!(&err, ConfigError::Parse { message, .. } if message.contains("pool_sise")),
        "{err}"
    );
    let err =
        Config::from_toml_str("[[users]]\nname = \"a\"\npasword = \"x\"\n").expect_err("error");
    assert!(err.to_string().contains("pasword"), "{err}");
}

#[test]
fn bad_flag_and_env_values_name_their_source() {
    let cli =
        Cli::try_parse_from(["sluice", "--user", "a:b", "--listen", "localhost:1"]).expect("cli");
    let errs = invalid(Config::load_with_env(
        &cli,
        &env(&[("SLUICE_MAX_ALLOWED_PACKET", "lots")]),
    ));
    assert!(
        errs.iter()
            .any(|m| m.starts_with("listen:") && m.contains("--listen or env SLUICE_LISTEN")),
        "{errs:?}"
    );
    assert!(errs
        .iter()
        .any(|m| m.contains("max_allowed_packet") && m.contains("env SLUICE_MAX_ALLOWED_PACKET")));
    let cli = Cli::try_parse_from(["sluice", "--user", "nocolon"]).expect("cli");
    let errs = invalid(Config::load_with_env(&cli, &HashMap::new()));
    assert!(
        errs.iter().any(|m| m.contains("write it as NAME:PASSWORD")),
        "{errs:?}"
    );
}

#[test]
fn masked_toml_hides_secrets_and_round_trips() {
    let text = r#"
pool_size = "auto"
max_queue_wait = "250ms"
backend_user = "svc"
backend_password = "backend-pw"
admin_listen = "127.0.0.1:6032"
metrics_listen = "127.0.0.1:9187"
server_version = "8.0.36-sluice"
tls_cert = "/c.pem"
tls_key = "/k.pem"
require_secure_transport = true
backend_tls = "verify_ca"
backend_tls_ca = "/ca.pem"
log_format = "json"
monitor_user = "mon"
monitor_password = "mon-pw"
auth_source = "both"
auth_user = "svc_auth:auth-pw"
[[users]]
name = "app"
password = "app-pw"
auth_plugin = "caching_sha2_password"
backend_user = "app_rw"
backend_password = "rw-pw"
[[admin_users]]
name = "admin"
password = "admin-pw"
"#;
    let cfg = Config::from_toml_str(text).expect("valid");
    let masked = cfg.masked_toml();
    for secret in [
        "backend-pw",
        "app-pw",
        "rw-pw",
        "admin-pw",
        "mon-pw",
        "auth-pw",
    ] {
        assert!(!masked.contains(secret), "{secret} leaked:\n{masked}");
    }
    assert!(masked.contains("password = \"***\""));
    assert!(!format!("{cfg:?}").contains("app-pw"), "Debug must mask");
    // Every scalar setting has a value here, so render covers every row.
    for doc in SETTINGS.iter().filter(|d| is_scalar(d)) {
        assert!(
            render(&cfg, doc.name, true).is_some(),
            "{} not rendered",
            doc.name
        );
    }
    let plain = docs::to_toml(&cfg, false);
    let again = Config::from_toml_str(&plain).expect("round trip");
    assert_eq!(docs::to_toml(&again, false), plain);
    assert!(cfg.diff(&again).is_empty());
}

#[test]
fn value_parsers() {
    let d = parse_duration;
    assert_eq!(d("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(d("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(d("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(d("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(d("45"), Ok(Duration::from_secs(45)));
    assert_eq!(d("0.25"), Ok(Duration::from_millis(250)));
    assert!(d("").is_err() && d("5 parsecs").is_err() && d("-1").is_err() && d("s").is_err());
    for ms in [0u64, 250, 1000, 90_000, 600_000, 3_600_000] {
        let v = Duration::from_millis(ms);
        assert_eq!(d(&format_duration(v)), Ok(v));
    }
    assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
    assert_eq!(parse_bytes("16M"), Ok(16 << 20));
    assert_eq!(parse_bytes("1k"), Ok(1024));
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert!(parse_bytes("8G").is_err() && parse_bytes("x").is_err());
    assert_eq!("auto".parse::<PoolSize>(), Ok(PoolSize::Auto));
    assert_eq!(" 8 ".parse::<PoolSize>(), Ok(PoolSize::Fixed(8)));
    assert!("-1".parse::<PoolSize>().is_err());
    assert_eq!("AUTO".parse::<BackendLimit>(), Ok(BackendLimit::Auto));
    assert_eq!("300".parse::<BackendLimit>(), Ok(BackendLimit::Fixed(300)));
    assert!("many".parse::<BackendLimit>().is_err());
    assert_eq!(BackendLimit::Fixed(2).max(4), BackendLimit::Fixed(4));
    assert_eq!(BackendLimit::Auto.max(4), BackendLimit::Auto);
    assert_eq!("auto".parse::<ServerCpus>(), Ok(ServerCpus::Auto));
    assert_eq!("16".parse::<ServerCpus>(), Ok(ServerCpus::Fixed(16)));
    // No server runs statements on no CPU.
    assert!("0"
        .parse::<ServerCpus>()
        .unwrap_err()
        .contains("number of CPUs"));
    assert_eq!("AUTO".parse::<WorkerThreads>(), Ok(WorkerThreads::Auto));
    assert_eq!("1".parse::<WorkerThreads>(), Ok(WorkerThreads::Fixed(1)));
    assert_eq!(WorkerThreads::Fixed(3).resolve(), 3);
    assert!(WorkerThreads::Auto.resolve() >= 1);
    assert!("0"
        .parse::<WorkerThreads>()
        .unwrap_err()
        .contains("number of threads"));
    assert_eq!(
        "caching_sha2_password".parse(),
        Ok(AuthPluginName::CachingSha2)
    );
    assert_eq!("MYSQL_NATIVE_PASSWORD".parse(), Ok(AuthPluginName::Native));
    assert!("sha256_password".parse::<AuthPluginName>().is_err());
    assert_eq!("JSON".parse(), Ok(LogFormat::Json));
    let s = Secret::new("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19".into());
    assert!(s.is_native_hash());
    assert!(!Secret::new("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1".into()).is_native_hash());
    assert_eq!(format!("{s} {s:?}"), "*** ***");
}

#[test]
fn backend_credentials_fall_back_in_order() {
    let mut cfg = Config::for_backend("127.0.0.1:3306", "app", "pw");
    cfg.validate().expect("for_backend is valid");
    assert_eq!(cfg.listen.port(), 0);
    let u = cfg.users[0].clone();
    assert_eq!(creds(&u, &cfg), ("app", "pw"), "pass-through");
    cfg.backend_user = Some("svc".into());
    cfg.backend_password = Some(Secret::new("svc-pw".into()));
    assert_eq!(creds(&u, &cfg), ("svc", "svc-pw"), "global");
    let mut own = u.clone();
    own.backend_user = Some("own".into());
    own.backend_password = Some(Secret::new("own-pw".into()));
    assert_eq!(creds(&own, &cfg), ("own", "own-pw"), "per user");
    assert!(cfg.find_user(b"app").is_some() && cfg.find_user(b"APP").is_none());
    assert!(cfg.find_admin(b"app").is_none());
}

#[cfg(unix)]
#[test]
fn warns_about_a_readable_file_with_plaintext_passwords() {
    use std::os::unix::fs::PermissionsExt;
    let file = temp_config(MINIMAL);
    let set_mode = |m| std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(m));
    set_mode(0o644).expect("chmod");
    let cli = Cli::try_parse_from(["sluice", "--config", file.path().to_str().expect("path")])
        .expect("cli");
    let cfg = Config::load_with_env(&cli, &HashMap::new()).expect("valid");
    let w = cfg.warnings();
    assert!(
        w.iter()
            .any(|w| w.contains("plaintext password") && w.contains("chmod 600")),
        "{w:?}"
    );
    set_mode(0o600).expect("chmod");
    assert!(cfg.warnings().is_empty());
}

#[test]
fn every_flag_has_an_env_var_and_a_settings_row() {
    Cli::command().debug_assert();
    let cmd = Cli::command();
    let mut flags = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let flag = format!("--{long}");
        if ACTION_FLAGS.contains(&flag.as_str()) {
            continue;
        }
        let env = arg.get_env().and_then(|e| e.to_str()).unwrap_or("");
        let row = SETTINGS.iter().find(|s| s.flag == flag);
        let row = row.unwrap_or_else(|| panic!("{flag} has no SETTINGS row"));
        assert_eq!(row.env, env, "{flag} env var");
        flags.push(flag);
    }
    for s in SETTINGS {
        assert!(flags.iter().any(|f| f == s.flag), "{} has no flag", s.name);
        assert!(
            s.env.starts_with("SLUICE_") && !s.description.is_empty(),
            "{}",
            s.name
        );
    }
}

#[test]
fn every_flag_reaches_the_config() {
    // A sample value per unit that differs from every default.
    let sample = |unit: &str| match unit {
        "address" => "127.0.0.1:7777",
        "host:port" | "host:port or unix:/path" => "db:3307",
        "duration" => "3s",
        "bytes" => "2MiB",
        "bool" => "true",
        "plugin" => "caching_sha2_password",
        "format" => "json",
        "mode" => "verify_identity",
        "path" => "/x",
        "statements" | "connections" => "5",
        "failures" => "7",
        "CPUs" | "threads" => "6",
        "id" => "7",
        "off|on" => "on",
        "on|off" => "off",
        "rows" => "5",
        "never|fallback|always" => "always",
        "off|session|wait" => "wait",
        "list|server|both" => "server",
        "NAME:PASSWORD" => "svc:pw",
        _ => "sample",
    };
    let base = Config::for_backend("127.0.0.1:3306", "app", "pw");
    for doc in SETTINGS.iter().filter(|d| is_scalar(d)) {
        let args = ["sluice", doc.flag, sample(doc.unit)];
        let cli = Cli::try_parse_from(args).expect("cli");
        let o = Overrides::new(&cli, &HashMap::new());
        assert_eq!(o.values.len(), 1, "{} not mapped", doc.flag);
        let mut cfg = base.clone();
        apply(&mut cfg, o.values[0].0, &o.values[0].1).expect("sample parses");
        assert_ne!(
            render(&cfg, doc.name, false),
            render(&base, doc.name, false),
            "{}",
            doc.name
        );
    }
}

#[test]
fn instance_id_and_reuse_port_default_off_and_instance_id_is_checked() {
    let c = Config::defaults();
    assert_eq!((c.instance_id, c.reuse_port), (0, false));
    let ok = Config::from_toml_str(&format!("instance_id = 255\nreuse_port = true\n{MINIMAL}"))
        .expect("valid");
    assert_eq!((ok.instance_id, ok.reuse_port), (255, true));
    let problems = invalid(Config::from_toml_str(&format!(
        "instance_id = 256\n{MINIMAL}"
    )));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("instance_id 256 is over 255")),
        "{problems:?}"
    );
    let cli = Cli::try_parse_from(["sluice", "--reuse-port", "--instance-id", "4"]).expect("cli");
    let o = Overrides::new(&cli, &env(&[("SLUICE_INSTANCE_ID", "9")]));
    let mut cfg = Config::defaults();
    for (k, v, _) in &o.values {
        apply(&mut cfg, k, v).expect("applies");
    }
    // The flag wins over the environment.
    assert_eq!((cfg.instance_id, cfg.reuse_port), (4, true));
}

/// `SLUICE_BLESS=1 cargo test -p sluice config::` rewrites the generated files.
fn check_generated(rel: &str, expected: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, expected).expect("write generated file");
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} is out of date; run `SLUICE_BLESS=1 cargo test -p sluice config::`",
        path.display()
    );
}

/// A help text (`--help`, the docs table, the example file) says what the setting does, its
/// unit, its default and when to change it, in at most 300 characters; the long explanation
/// is in `details.rs` (docs/config.md's "Settings in detail"), keyed by a setting's name.
#[test]
fn help_texts_are_short_and_every_detail_belongs_to_a_setting() {
    for s in SETTINGS {
        let n = s.description.chars().count();
        assert!(
            n <= 300,
            "{}'s help text has {n} characters (at most 300): move the rest to config/details.rs",
            s.name
        );
    }
    let mut seen: Vec<&str> = Vec::new();
    for (name, text) in super::details::DETAILS {
        assert!(
            setting(name).is_some(),
            "details for {name}, which is no setting"
        );
        assert!(!seen.contains(name), "details for {name} twice");
        assert!(!text.trim().is_empty(), "empty details for {name}");
        seen.push(name);
    }
}

#[test]
fn docs_config_md_is_generated_from_settings() {
    check_generated("../docs/config.md", &config_docs_markdown());
}

#[test]
fn example_toml_is_generated_and_parses() {
    let example = example_toml();
    check_generated("sluice.example.toml", &example);
    // Uncommenting every default line must give a valid file with the defaults.
    let settings_part = example.split("# [[users]]").next().unwrap_or_default();
    let mut text: String = settings_part
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.contains(" = ") && !l.contains("# unset by default"))
        .filter(|l| {
            SETTINGS
                .iter()
                .any(|s| l.starts_with(&format!("{} = ", s.name)))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    text.push_str(MINIMAL);
    let cfg = Config::from_toml_str(&text).expect("example defaults are valid");
    let diff = Config::defaults().diff(&cfg);
    assert!(diff.iter().all(|c| c.name == "users"), "{diff:?}");
}

#[test]
fn servers_come_from_file_env_and_flags_and_default_to_backend() {
    let cfg = Config::from_toml_str(MINIMAL).expect("valid");
    assert_eq!(cfg.endpoints(), &[Endpoint::parse("127.0.0.1:3306")]);
    assert!(!cfg.uses_topology(), "one server, split off: no monitor");
    let text = format!("servers = [\"db1:3306\", \"unix:/run/db2.sock\"]\n{MINIMAL}");
    let cfg = Config::from_toml_str(&text).expect("valid");
    assert_eq!(
        cfg.endpoints(),
        &[
            Endpoint::parse("db1:3306"),
            Endpoint::parse("/run/db2.sock")
        ]
    );
    assert!(cfg.uses_topology());
    let round_trip = Config::from_toml_str(&docs::to_toml(&cfg, false)).expect("reads back");
    assert_eq!(round_trip.endpoints(), cfg.endpoints());

    let file = temp_config(&text);
    let path = file.path().to_str().unwrap_or_default();
    let cli = Cli::try_parse_from(["sluice", "--config", path]).expect("cli");
    let cfg =
        Config::load_with_env(&cli, &env(&[("SLUICE_SERVERS", "a:1,b:2,c:3")])).expect("valid");
    assert_eq!(cfg.endpoints().len(), 3, "env replaces the file's list");
    let cli = Cli::try_parse_from([
        "sluice", "--config", path, "--server", "x:1", "--server", "y:2",
    ])
    .expect("cli");
    let cfg =
        Config::load_with_env(&cli, &env(&[("SLUICE_SERVERS", "a:1,b:2,c:3")])).expect("valid");
    assert_eq!(
        cfg.endpoints(),
        &[Endpoint::parse("x:1"), Endpoint::parse("y:2")],
        "flags replace env"
    );
}

#[test]
fn servers_and_backend_together_say_which_to_drop() {
    let text = format!("backend = \"db0:3306\"\nservers = [\"db1:3306\"]\n{MINIMAL}");
    let errs = invalid(Config::from_toml_str(&text));
    assert!(
        errs.iter()
            .any(|m| m.contains("both backend") && m.contains("drop backend")),
        "{errs:?}"
    );
    let text = format!("servers = [\"db1\", \"db2:3306\", \"db2:3306\"]\n{MINIMAL}");
    let errs = invalid(Config::from_toml_str(&text));
    assert!(errs.iter().any(|m| m.contains("servers: ")), "{errs:?}");
    assert!(errs.iter().any(|m| m.contains("twice")), "{errs:?}");
}

#[test]
fn replica_settings_parse_and_default() {
    let c = Config::defaults();
    assert_eq!(c.monitor_interval, Duration::from_millis(500));
    assert_eq!(c.read_write_split, ReadWriteSplit::Off);
    assert_eq!(c.primary_reads, PrimaryReads::Fallback);
    assert_eq!(c.max_replica_lag, Duration::from_secs(5));
    assert_eq!(c.read_your_writes, ReadYourWrites::Session);
    assert_eq!(c.gtid_wait_timeout, Duration::from_millis(100));
    assert_eq!(c.writer_wait_timeout, Duration::from_secs(10));
    let text = format!(
        "backend_user = \"svc\"\nbackend_password = \"pw\"\nread_write_split = \"on\"\nprimary_reads = \"never\"\nread_your_writes = \"wait\"\n{MINIMAL}"
    );
    let cfg = Config::from_toml_str(&text).expect("valid");
    assert!(cfg.uses_topology(), "the split asks for the monitor");
    assert_eq!(cfg.primary_reads, PrimaryReads::Never);
    assert_eq!(cfg.read_your_writes, ReadYourWrites::Wait);
    assert_eq!(cfg.monitor_credentials(), ("svc".into(), "pw".into()));
    let text = format!("monitor_user = \"mon\"\nmonitor_password = \"m\"\n{text}");
    let cfg = Config::from_toml_str(&text).expect("valid");
    assert_eq!(cfg.monitor_credentials(), ("mon".into(), "m".into()));
    let errs = invalid(Config::from_toml_str(&format!(
        "read_write_split = \"maybe\"\n{MINIMAL}"
    )));
    assert!(errs.iter().any(|m| m.contains("off, on")), "{errs:?}");
}
