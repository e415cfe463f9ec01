//! SHOW USERS: the accounts logins are checked against: the `users` list (when auth_source
//! reads it), then every account row read from the server, with its plugin, state, whether a
//! login proved a credential for backend logins, and how long ago it was read. Never a
//! password or a stored hash.

use super::show::{Cell, Kind, Table};
use crate::accounts::row::AccountRow;
use crate::context::Context;

pub fn users(ctx: &Context) -> Table {
    use Kind::{Int, Text};
    let config = ctx.config();
    let mut t = Table::new(&[
        ("user", Text),
        ("host", Text),
        ("source", Text),
        ("plugin", Text),
        ("state", Text),
        ("backend_login", Text),
        ("max_user_connections", Int),
        ("last_refresh_s_ago", Int),
    ]);
    if config.auth_source().uses_list() {
        for u in &config.users {
            t.push(vec![
                u.name.as_str().into(),
                Cell::Null,
                "list".into(),
                u.auth_plugin(&config).as_str().into(),
                "ok".into(),
                "configured".into(),
                Cell::Null,
                Cell::Null,
            ]);
        }
    }
    for listed in ctx.handshake.accounts.listing() {
        let row = &listed.row;
        t.push(vec![
            row.user.as_str().into(),
            row.host.as_str().into(),
            "server".into(),
            row.method().map_or("", |m| m.plugin.name()).into(),
            state(row).into(),
            if listed.has_credential {
                "proven"
            } else {
                "not yet"
            }
            .into(),
            row.max_user_connections.into(),
            listed.read_age.as_secs().into(),
        ]);
    }
    t
}

/// What a login of the row meets first after its password.
fn state(row: &AccountRow) -> &'static str {
    use crate::accounts::row::Plugin;
    match row.method().map(|m| &m.plugin) {
        _ if row.locked => "locked",
        _ if row.expired => "expired",
        Some(Plugin::Native | Plugin::CachingSha2) => "ok",
        _ => "unsupported_plugin",
    }
}
