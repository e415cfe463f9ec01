//! Cross-setting checks. Every problem is collected, each with a message that says what to do.

use std::collections::HashSet;
use std::time::Duration;

use super::{AuthPluginName, AuthSource, Config, ConfigError, PoolSize, UserConfig};

/// The MySQL protocol cannot carry a statement larger than 1 GiB (the server's own maximum).
const MAX_PACKET_LIMIT: u32 = 1 << 30;

impl Config {
    /// Checks the whole config; returns every problem at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut e = Vec::new();
        self.check_pool(&mut e);
        self.check_users(&mut e);
        self.check_listeners(&mut e);
        self.check_limits(&mut e);
        self.check_instance(&mut e);
        self.check_servers(&mut e);
        if e.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(e))
        }
    }

    /// Problems that do not stop sluice but that an operator should know about.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(path) = &self.config_path {
            if self.file_has_plaintext_password && readable_by_others(path) {
                w.push(format!(
                    "{} contains a plaintext password and is readable by other users; run `chmod 600 {}` or store mysql_native_password hashes (*<40 hex>)",
                    path.display(),
                    path.display()
                ));
            }
        }
        if self.auth_user.is_some() && self.auth_source() == AuthSource::List {
            w.push("auth_user is set, but auth_source is list (a users list is given): the server's accounts are not read; set auth_source = both to read them after the list".into());
        }
        if let Some(addr) = self.admin_listen {
            if !addr.ip().is_loopback() {
                w.push(format!("admin_listen {addr} is not a loopback address; the admin console can change the running proxy, so keep it on 127.0.0.1 unless a firewall protects it"));
            }
        }
        w
    }

    fn check_pool(&self, e: &mut Vec<String>) {
        // `auto` is derived from the server at run time and never leaves pool_size short.
        let cap = self.max_backend_connections.fixed();
        match (self.pool_size, cap) {
            (PoolSize::Fixed(0), _) => e.push("pool_size is 0; set it to at least 1 (or \"auto\")".into()),
            (PoolSize::Fixed(p), Some(cap)) if cap < p => e.push(format!(
                "max_backend_connections ({cap}) is less than pool_size ({p}); raise max_backend_connections to at least {p} or lower pool_size"
            )),
            (PoolSize::Auto, Some(cap)) if cap < self.min_pool_size => e.push(format!(
                "max_backend_connections ({cap}) is less than min_pool_size ({}); raise max_backend_connections or lower min_pool_size",
                self.min_pool_size
            )),
            _ => {}
        }
        if self.min_pool_size == 0 {
            e.push("min_pool_size is 0; set it to at least 1".into());
        }
        if self.min_pool_size > self.max_pool_size {
            e.push(format!(
                "min_pool_size ({}) is greater than max_pool_size ({}); lower min_pool_size or raise max_pool_size",
                self.min_pool_size, self.max_pool_size
            ));
        }
        if cap == Some(0) {
            e.push(
                "max_backend_connections is 0; set it to at least pool_size, or \"auto\"".into(),
            );
        }
        if let Some(cap) = cap.filter(|cap| self.min_idle > *cap) {
            e.push(format!(
                "min_idle ({}) is greater than max_backend_connections ({cap}); lower min_idle",
                self.min_idle
            ));
        }
    }

    fn check_users(&self, e: &mut Vec<String>) {
        self.check_auth_source(e);
        check_user_list(&self.users, "users", e);
        check_user_list(&self.admin_users, "admin_users", e);
        for u in &self.users {
            if u.password.is_native_hash() && u.auth_plugin(self) == AuthPluginName::CachingSha2 {
                e.push(format!(
                    "user {:?} has a mysql_native_password hash as password, which cannot verify caching_sha2_password; set auth_plugin = \"mysql_native_password\" for this user or give a plaintext password",
                    u.name
                ));
            }
            // A hash of the user's own password is fine: its login recovers SHA1(password)
            // for the backend. A hash given as the backend password cannot log in.
            let explicit = u
                .backend_password
                .as_ref()
                .or(self.backend_password.as_ref());
            if explicit.is_some_and(super::Secret::is_native_hash) {
                e.push(format!(
                    "user {:?} would log in to the backend with a password hash as backend_password, which cannot work; give backend_password in plaintext, or drop it so that the user's own login is used",
                    u.name
                ));
            }
        }
        if self.admin_listen.is_some() && self.admin_users.is_empty() {
            e.push("admin_listen is set but no admin_users are configured; add an [[admin_users]] table or pass --admin-user NAME:PASSWORD".into());
        }
        if let Some(u) = &self.backend_user {
            if u.trim().is_empty() {
                e.push("backend_user is empty; remove it or set a user name".into());
            }
        }
    }

    /// Where accounts come from, and what each source needs.
    fn check_auth_source(&self, e: &mut Vec<String>) {
        let source = self.auth_source();
        if source.uses_server() && self.auth_user.is_none() {
            e.push(format!(
                "auth_source = {source} reads the server's accounts, which needs auth_user: set --auth-user NAME:PASSWORD (a service account with GRANT SELECT ON mysql.global_priv on MariaDB, mysql.user on MySQL)"
            ));
        }
        if source == AuthSource::Server && !self.users.is_empty() {
            e.push("auth_source = server does not read the users list; set auth_source = both (the list first, then the server), or drop users".into());
        }
        if source == AuthSource::List && self.users.is_empty() {
            e.push("no users are configured; add a [[users]] table with name and password, or pass --user NAME:PASSWORD, or let the server's own accounts log in: --auth-source server --auth-user NAME:PASSWORD".into());
        }
        if let Some(u) = &self.auth_user {
            if u.password.is_native_hash() {
                e.push("auth_user needs its password in plaintext (sluice logs in with it); a *<40 hex> hash cannot log in".into());
            }
        }
        if self.auth_cache_ttl > Duration::from_secs(86_400) {
            e.push(format!(
                "auth_cache_ttl is {}; set at most 1d, so that account changes on the server reach sluice",
                super::format_duration(self.auth_cache_ttl)
            ));
        }
    }

    /// `instance_id` must fit the 8 bits above a connection id's per-instance counter.
    fn check_instance(&self, e: &mut Vec<String>) {
        let max = crate::registry::MAX_INSTANCE_ID;
        if self.instance_id > max {
            e.push(format!(
                "instance_id {} is over {max}; give each sluice instance a number from 0 to {max} (the top 8 bits of its client connection ids)",
                self.instance_id
            ));
        }
    }

    fn check_listeners(&self, e: &mut Vec<String>) {
        let same = |a: std::net::SocketAddr, b: std::net::SocketAddr| a.port() != 0 && a == b;
        if let Some(admin) = self.admin_listen {
            if same(admin, self.listen) {
                e.push(format!("admin_listen and listen are both {admin}; give the admin console its own port (e.g. 127.0.0.1:6032)"));
            }
        }
        if let Some(metrics) = self.metrics_listen {
            if same(metrics, self.listen) || self.admin_listen.is_some_and(|a| same(metrics, a)) {
                e.push(format!("metrics_listen {metrics} is already used by listen or admin_listen; give it its own port"));
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                e.push("tls_cert is set without tls_key; set both or neither".into())
            }
            (None, Some(_)) => {
                e.push("tls_key is set without tls_cert; set both or neither".into())
            }
            _ => {}
        }
        for endpoint in self.endpoints() {
            if self.backend_tls.requires_tls() && endpoint.is_unix() {
                e.push(format!(
                    "backend_tls = {} cannot be used with the Unix socket {:?}: a local socket carries no TLS (MySQL counts it as secure); use disabled or preferred, or a host:port backend",
                    self.backend_tls, endpoint
                ));
            }
        }
        if self.backend_tls.verifies() && self.backend_tls_ca.is_none() {
            e.push(format!(
                "backend_tls = {} needs backend_tls_ca (the PEM file of the CA that signed the backend's certificate)",
                self.backend_tls
            ));
        }
        if self.require_secure_transport && self.tls_cert.is_none() {
            e.push("require_secure_transport is true but TLS is not configured; set tls_cert and tls_key".into());
        }
    }

    fn check_limits(&self, e: &mut Vec<String>) {
        let positive = [
            ("queue_timeout", self.queue_timeout),
            ("connect_timeout", self.connect_timeout),
            ("client_login_timeout", self.client_login_timeout),
            ("client_write_timeout", self.client_write_timeout),
        ];
        for (name, d) in positive {
            if d == Duration::ZERO {
                e.push(format!("{name} is 0; set a positive duration such as 5s"));
            }
        }
        if self.max_queue_wait == Some(Duration::ZERO) {
            e.push("max_queue_wait is 0, which would reject every queued statement; set a positive duration such as 50ms, or \"off\"".into());
        }
        if !(1..=256).contains(&self.pipeline_depth) {
            e.push(format!(
                "pipeline_depth is {}; set it between 1 (off) and 256",
                self.pipeline_depth
            ));
        }
        if self.backend_busy_poll > Duration::from_millis(10) {
            e.push(format!(
                "backend_busy_poll is {:?}, which would keep a CPU busy that long per statement; set at most 10ms (100us is usually enough), or 0 to never poll",
                self.backend_busy_poll
            ));
        }
        if self.max_client_connections == 0 {
            e.push("max_client_connections is 0; set it to at least 1".into());
        }
        if self.max_prepared_statements_per_backend == 0 {
            e.push("max_prepared_statements_per_backend is 0; set it to at least 1".into());
        }
        if self.max_prepared_statements_per_client == 0 {
            e.push("max_prepared_statements_per_client is 0; set it to at least 1".into());
        }
        if !(1024..=MAX_PACKET_LIMIT).contains(&self.max_allowed_packet) {
            e.push(format!(
                "max_allowed_packet ({}) is out of range; use a value from 1KiB to 1GiB",
                self.max_allowed_packet
            ));
        }
        if let Some(v) = &self.server_version {
            if !v.bytes().all(|b| (0x20..0x7f).contains(&b)) || v.len() > 200 {
                e.push("server_version must be printable ASCII of at most 200 characters".into());
            }
        }
    }
}

impl Config {
    fn check_servers(&self, e: &mut Vec<String>) {
        let mut seen = HashSet::new();
        for s in &self.servers {
            if !seen.insert(s.to_string()) {
                e.push(format!(
                    "servers lists {s} twice; keep one entry per server"
                ));
            }
        }
        if self.uses_topology() && self.monitor_interval.is_zero() {
            e.push("monitor_interval is 0; set a positive duration such as 500ms".into());
        }
        if self.uses_topology() && self.monitor_credentials().0.is_empty() {
            e.push("the topology monitor has no account; set monitor_user and monitor_password (or backend_user)".into());
        }
    }
}

fn check_user_list(users: &[UserConfig], what: &str, e: &mut Vec<String>) {
    let mut seen = HashSet::new();
    for u in users {
        if u.name.is_empty() {
            e.push(format!("{what}: a user has an empty name; set name"));
            continue;
        }
        if !seen.insert(u.name.as_str()) {
            e.push(format!(
                "{what}: user {:?} is listed twice; keep one entry per name",
                u.name
            ));
        }
        if u.password.is_empty() {
            e.push(format!(
                "{what}: user {:?} has no password; set password (plaintext, or a *<40 hex> mysql_native_password hash)",
                u.name
            ));
        }
    }
}

#[cfg(unix)]
fn readable_by_others(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o044 != 0)
}

#[cfg(not(unix))]
fn readable_by_others(_path: &std::path::Path) -> bool {
    false
}
