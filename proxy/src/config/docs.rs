//! Text generated from the settings table: `docs/config.md`, `sluice.example.toml`, and the
//! effective config as TOML (for `--check-config` and the admin `SHOW CONFIG`).

use std::fmt::Write;

use super::settings::{is_scalar, render, SETTINGS};
use super::{Config, UserConfig};

const INTRO: &str = "\
# sluice configuration reference

<!-- Generated from proxy/src/config/settings.rs by `sluice --print-config-docs`; do not edit by hand. -->

Every setting can come from four places, lowest to highest: the built-in default, the TOML file
given with `--config` (or `SLUICE_CONFIG`), an environment variable `SLUICE_*`, and a command-line
flag. A higher source replaces a lower one; `sluice --check-config` prints the result with secrets
masked. Unknown keys in the file are an error, and every problem is reported at once.

* **Durations** are written `30s`, `500ms`, `2m`, `1h` or `1m30s`; a plain number means seconds.
* **Sizes** are bytes, or use `K`, `M`, `G` (powers of 1024, as MySQL does): `64M`, `64MiB`.
* **Optional settings** (default \"unset\") are switched off again with an empty value or `off`.
* **Live** settings are applied to the running proxy by `RELOAD` (admin console) or `SIGHUP`, for
  new clients, statements and backend connections. The others need a restart; a reload reports
  them instead of ignoring them silently. An invalid file is rejected whole.

";

const USERS: &str = "
## Users and passwords

```toml
[[users]]
name = \"app\"
password = \"secret\"
# optional:
auth_plugin = \"caching_sha2_password\"    # default: default_auth_plugin
backend_user = \"app_rw\"                  # default: backend_user, else the user's own name
backend_password = \"backend-secret\"      # default: backend_password, else the user's own password

[[admin_users]]
name = \"admin\"
password = \"admin-secret\"
```

sluice authenticates clients itself and logs in to the backend with the backend credentials
(`UserConfig::backend_credentials`). Without `backend_user`/`backend_password`, the client's own
name and password are used on the backend (pass-through), so the account must exist there too.

A password written as `*` followed by 40 hex digits is a mysql_native_password hash (the value
of `SELECT authentication_string FROM mysql.user`), so the file need not hold the plaintext. Such a
user can only log in with mysql_native_password, and needs `backend_user` and `backend_password`
(for the user or globally), because sluice cannot log in to the backend with a hash. sluice
warns at start-up when the config file holds a plaintext password and is readable by other users.

On the command line, `--user NAME:PASSWORD` (repeatable) and `SLUICE_USERS=a:pw1,b:pw2` replace
the file's whole `[[users]]` list; the password is everything after the first `:` (and, in
`SLUICE_USERS`, cannot contain a comma). Passwords on the command line are visible to other local
users in the process list: prefer the file or the environment.
";

/// `docs/config.md`, generated from `SETTINGS`.
pub fn config_docs_markdown() -> String {
    let mut out = String::from(INTRO);
    out.push_str("| Setting | Env | Flag | Default | Unit | Live | Description |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
    for s in SETTINGS {
        let default = if s.default.is_empty() {
            "unset".to_string()
        } else {
            format!("`{}`", s.default)
        };
        let _ = writeln!(
            out,
            "| `{}` | `{}` | `{}` | {} | {} | {} | {} |",
            s.name,
            s.env,
            s.flag,
            default,
            s.unit,
            if s.live { "yes" } else { "no" },
            s.description.replace('|', "\\|")
        );
    }
    out.push_str(USERS);
    out
}

/// `proxy/sluice.example.toml`: every setting commented out, with its default and unit.
pub fn example_toml() -> String {
    let defaults = Config::defaults();
    let mut out = String::from(
        "# sluice example configuration: every setting, commented out, with its default.\n\
         # Reference: docs/config.md. Sources, lowest to highest: defaults < this file <\n\
         # SLUICE_* environment < command-line flags. Durations: \"30s\", \"500ms\", \"2m\", \"1h\"\n\
         # (a plain number means seconds). Sizes: bytes, or K/M/G (powers of 1024).\n",
    );
    for s in SETTINGS.iter().filter(|s| is_scalar(s)) {
        out.push('\n');
        let live = if s.live { "live" } else { "restart needed" };
        for line in wrap(&format!("{} [unit: {}; {live}]", s.description, s.unit), 94) {
            let _ = writeln!(out, "# {line}");
        }
        match render(&defaults, s.name, false) {
            Some(v) => {
                let _ = writeln!(out, "# {} = {v}", s.name);
            }
            None => {
                let _ = writeln!(out, "# {} = \"<{}>\"    # unset by default", s.name, s.unit);
            }
        }
    }
    out.push_str(
        "\n# Every server of a replication setup (instead of backend; roles are discovered).\n\
         # servers = [\"db1:3306\", \"db2:3306\", \"db3:3306\"]    # unset by default\n",
    );
    out.push_str(
        "\n# Clients sluice accepts (at least one). Repeat the table for more users.\n\
         # auth_plugin, backend_user and backend_password are optional.\n\
         # [[users]]\n# name = \"app\"\n# password = \"secret\"\n\
         # auth_plugin = \"caching_sha2_password\"\n# backend_user = \"app_rw\"\n\
         # backend_password = \"backend-secret\"\n\
         \n# Admin console users (needed when admin_listen is set).\n\
         # [[admin_users]]\n# name = \"admin\"\n# password = \"admin-secret\"\n",
    );
    out
}

/// The config as TOML that `Config::from_toml_str` reads back (secrets as `***` when masked).
pub(crate) fn to_toml(cfg: &Config, mask: bool) -> String {
    let mut out = String::from("# effective sluice configuration");
    out.push_str(if mask { " (secrets masked)\n" } else { "\n" });
    if let Some(p) = &cfg.config_path {
        let _ = writeln!(out, "# config file: {}", p.display());
    }
    for s in SETTINGS.iter().filter(|s| is_scalar(s)) {
        if s.name == "backend" && !cfg.servers.is_empty() {
            // `servers` replaces it; writing both would not read back.
            let list: Vec<toml::Value> = cfg
                .servers
                .iter()
                .map(|e| toml::Value::String(e.to_string()))
                .collect();
            let _ = writeln!(out, "servers = {}", toml::Value::Array(list));
            continue;
        }
        match render(cfg, s.name, mask) {
            Some(v) => {
                let _ = writeln!(out, "{} = {v}", s.name);
            }
            None => {
                let _ = writeln!(out, "# {} is unset", s.name);
            }
        }
    }
    write_users(&mut out, "users", &cfg.users, mask);
    write_users(&mut out, "admin_users", &cfg.admin_users, mask);
    out
}

fn write_users(out: &mut String, table: &str, users: &[UserConfig], mask: bool) {
    let text = |s: &str| toml::Value::String(s.to_string()).to_string();
    let secret = |s: &super::Secret| text(if mask { "***" } else { s.expose() });
    for u in users {
        let _ = writeln!(out, "\n[[{table}]]\nname = {}", text(&u.name));
        let _ = writeln!(out, "password = {}", secret(&u.password));
        if let Some(p) = u.auth_plugin {
            let _ = writeln!(out, "auth_plugin = {}", text(p.as_str()));
        }
        if let Some(b) = &u.backend_user {
            let _ = writeln!(out, "backend_user = {}", text(b));
        }
        if let Some(b) = &u.backend_password {
            let _ = writeln!(out, "backend_password = {}", secret(b));
        }
    }
}

/// Greedy word wrap for comment blocks.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
