//! Text generated from the settings table: `docs/config.md`, `sluice.example.toml`, and the
//! effective config as TOML (for `--check-config` and the admin `SHOW CONFIG`).

use std::fmt::Write;

use super::details::DETAILS;
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
max_client_connections = 50               # default: max_user_client_connections (0: no limit)
max_concurrency = 8                       # default: max_user_concurrency (0: no limit)

[[admin_users]]
name = \"admin\"
password = \"admin-secret\"
```

sluice authenticates clients itself and logs in to the backend with the backend credentials
(`UserConfig::backend_credentials`). Without `backend_user`/`backend_password`, the client's own
name and password are used on the backend (pass-through), so the account must exist there too.

A password written as `*` followed by 40 hex digits is a mysql_native_password hash (the value
of `SELECT authentication_string FROM mysql.user`), so the file need not hold the plaintext. Such a
user can only log in with mysql_native_password. Without backend credentials it logs in to the
backend as itself with SHA1(password), which sluice recovers from the client's answer (the answer
is SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw))), and the hash is SHA1(SHA1(pw))); a
`backend_password` must be plaintext. sluice warns at start-up when the config file holds a
plaintext password and is readable by other users.

On the command line, `--user NAME:PASSWORD` (repeatable) and `SLUICE_USERS=a:pw1,b:pw2` replace
the file's whole `[[users]]` list; the password is everything after the first `:` (and, in
`SLUICE_USERS`, cannot contain a comma). Passwords on the command line are visible to other local
users in the process list: prefer the file or the environment.

## Accounts from the server

With `auth_source = server` (or `both`, the list first), applications log in with the accounts
they already have on the server, and no password is copied into sluice:

```sh
mariadb -e \"CREATE USER 'sluice_auth'@'%' IDENTIFIED BY 'auth-pw';
            GRANT SELECT ON mysql.global_priv TO 'sluice_auth'@'%'\"    # MySQL: ON mysql.user
sluice --backend db:3306 --auth-source server --auth-user sluice_auth:auth-pw
```

The service account (`auth_user`) needs that one grant and nothing else: `SELECT` on
`mysql.global_priv` on MariaDB 10.4+, on `mysql.user` on MySQL. sluice refuses to start when it
cannot log in or lacks the grant, and prints the GRANT to run (with the host part the server
matched it to).

**How a login is checked.** sluice reads the client's account (its rows, and the anonymous rows)
and picks the row the server would: among the user's rows whose host matches the client's
address, the most specific host (a literal IP, name or netmask before `_` patterns, before `%`
patterns with more literal characters, before `%`); an anonymous row (`''@host`) only when its
host is more specific still. Patterns match the address as text (`10.0.0.%`), netmasks
(`10.0.0.0/255.255.255.0`) and, on MySQL 8.0.23+, CIDR prefixes. Host names in rows are not
resolved by sluice: `localhost` matches loopback clients when the server resolves names
(`skip_name_resolve = OFF`); other name rows match no client through sluice (use address rows).

| the row's plugin | what sluice does |
| --- | --- |
| mysql_native_password | verifies the client's answer against the stored `*<40 hex>` and recovers SHA1(password) from it, which answers any backend scramble |
| caching_sha2_password (MySQL 8, `$A$005$`) | full authentication (the password over TLS, or RSA-encrypted with sluice's key), checked against the stored SHA-256 crypt; the cleartext is kept for backend logins and for the fast path of later logins |
| ed25519, PAM, GSSAPI, unix_socket, sha256_password, others | error 1045 at once, naming the account and the fix (list it in `users` with its password, or change its plugin), logged once per account |

A locked account gets the server's 4151 (after its password is checked, as the server does). An
expired password gets 1862: sluice cannot offer the server's expired-password sandbox, so the
message says to change it on the server directly. Nothing the table says is ever read as \"allow\":
an unknown account, an unknown plugin or an unreadable table refuses.

**The backend login.** sluice logs in to the backend as the same account, with the credential the
login proved (kept in memory only; SHOW USERS, SHOW CONFIG and the logs never show it), for every
backend connection of that account, also those opened later for its other sessions (always with
the newest credential, so sessions that logged in before a password change keep working). The
server sees that login coming from sluice's address, not the client's, so it picks the row for
*sluice's* host (sluice reads how the server sees it from `USER()`): that row must take the same
password. Make it so with one of:

* rows whose hosts cover sluice with the same password as the clients' rows (the usual
  `'app'@'%'`, or `'app'@'10.0.%'` with sluice in that network), or
* a row `'app'@'<sluice host>'` with the same password as the clients' row, or
* listing the account in `users` with `backend_user`/`backend_password`.

When the row for sluice's host would refuse the password (another password, locked, expired, or
no row), the client gets 1045 at login saying which two rows differ, instead of a login that
fails at its first statement.

**Limits the server enforces.** `max_user_connections` counts sluice's backend connections of the
account (one per statement running at once, or per session in a transaction or pinned), not client
sessions: a statement that needs one more than the limit gets the server's own error (1226 on
MariaDB, 1203 on MySQL) in sluice's \"cannot log in to its backend\" message; the session stays
usable, and its next statement runs on a backend the account already has.

**Caching.** An account is read once and used for `auth_cache_ttl` (30 s); every login of a name
that needs a read waits for the same read, and up to four reads run at once, each for all the
names waiting, so 1,000 logins of 50 accounts cost at most 50 reads. A refused login re-reads its
account at once (at most once a second per account, and the login backoff still applies), so a
password changed with `ALTER USER`, an `ACCOUNT UNLOCK` or a `DROP USER` is seen at the next login;
a dropped account is otherwise refused once its cached copy expires. Unknown names are cached as
unknown (at most 10,000). While the table cannot be read (server down, grant revoked), cached
accounts keep logging in until their TTL, then their logins get error 9003. `COM_CHANGE_USER` to a
server account is checked the same way. A listed user wins over the server's row of the same name.

**Watching it.** `SHOW USERS` on the admin console lists the listed users and every account row
read, with its source, host, plugin, state (ok, locked, expired, unsupported_plugin), whether a
login has proved a backend credential, its max_user_connections and how long ago it was read.
`/metrics` has `sluice_account_lookups_total`, `_hits_total`, `_misses_total`,
`_refreshes_total`, `sluice_account_table_reads_total`, `sluice_account_table_read_errors_total`,
`sluice_account_unsupported_plugin_refusals_total` and the gauge `sluice_accounts_cached`.
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
            description_cell(s.name, s.description)
        );
    }
    out.push_str("\n## Settings in detail\n");
    for s in SETTINGS {
        if let Some(text) = details(s.name) {
            let _ = write!(out, "\n### `{}`\n\n{text}\n", s.name);
        }
    }
    out.push_str(USERS);
    out.push_str(super::rules::RULES_DOC);
    out
}

/// The long explanation of a setting, if it has one (`details.rs`).
pub(crate) fn details(name: &str) -> Option<&'static str> {
    DETAILS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// A table row's description: the help text, and a link to the setting's details.
fn description_cell(name: &str, description: &str) -> String {
    let cell = description.replace('|', "\\|");
    match details(name) {
        // GitHub gives the heading "### `name`" the anchor "#name".
        Some(_) => format!("{cell} [More](#{name})."),
        None => cell,
    }
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
         # [[admin_users]]\n# name = \"admin\"\n# password = \"admin-secret\"\n\
         \n# Query rules, in order; the first that matches decides (docs/digests-and-rules.md).\n\
         # [[rules]]\n# name = \"no drops\"\n# match_digest = \"^DROP TABLE\"\n\
         # error = \"DROP TABLE is not allowed through sluice\"\n",
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
    super::rules::write_rules(&mut out, &cfg.rules, cfg.endpoints());
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
        if let Some(n) = u.max_client_connections {
            let _ = writeln!(out, "max_client_connections = {n}");
        }
        if let Some(n) = u.max_concurrency {
            let _ = writeln!(out, "max_concurrency = {n}");
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
