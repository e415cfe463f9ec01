//! Which row of the account table the server picks for a login: the most specific host of
//! the user's own rows that matches the client, unless an anonymous row (user `''`) has a
//! strictly more specific host that matches (`host` has the order). Pure.

use super::host::ClientHost;
use super::row::AccountRow;

/// The row the server would authenticate `user` from `client` against, if any.
pub fn pick<'a>(rows: &'a [AccountRow], user: &str, client: &ClientHost) -> Option<&'a AccountRow> {
    let best = |name: &str| {
        rows.iter()
            .filter(|r| r.user == name && r.host.matches(client))
            .min_by(|a, b| a.host.order(&b.host))
    };
    let named = best(user);
    if user.is_empty() {
        return named;
    }
    let anonymous = best("");
    match (named, anonymous) {
        (Some(n), Some(a)) if a.host.weight() < n.host.weight() => Some(a),
        (None, a) => a,
        (n, _) => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::host::HostPattern;

    fn row(user: &str, host: &str) -> AccountRow {
        AccountRow {
            user: user.into(),
            host: HostPattern::parse(host, false),
            methods: Vec::new(),
            locked: false,
            expired: false,
            max_user_connections: 0,
        }
    }

    fn picked(rows: &[AccountRow], user: &str, ip: &str) -> Option<String> {
        let client = ClientHost::at(ip.parse().unwrap(), false);
        pick(rows, user, &client).map(AccountRow::account)
    }

    #[test]
    fn the_most_specific_matching_host_wins() {
        let rows = [
            row("app", "%"),
            row("app", "10.0.0.%"),
            row("app", "10.0.0.5"),
            row("other", "10.0.0.5"),
        ];
        assert_eq!(
            picked(&rows, "app", "10.0.0.5").as_deref(),
            Some("'app'@'10.0.0.5'")
        );
        assert_eq!(
            picked(&rows, "app", "10.0.0.6").as_deref(),
            Some("'app'@'10.0.0.%'")
        );
        assert_eq!(
            picked(&rows, "app", "192.168.1.1").as_deref(),
            Some("'app'@'%'")
        );
        assert_eq!(picked(&rows, "nobody", "10.0.0.5"), None);
        assert_eq!(
            picked(&rows, "App", "10.0.0.5"),
            None,
            "user names are exact"
        );
    }

    #[test]
    fn an_anonymous_row_wins_only_with_a_more_specific_host() {
        let rows = [row("app", "%"), row("", "10.0.0.%"), row("", "%")];
        assert_eq!(
            picked(&rows, "app", "10.0.0.5").as_deref(),
            Some("''@'10.0.0.%'")
        );
        assert_eq!(
            picked(&rows, "app", "10.9.9.9").as_deref(),
            Some("'app'@'%'")
        );
        assert_eq!(
            picked(&rows, "stranger", "10.9.9.9").as_deref(),
            Some("''@'%'")
        );
        let same = [row("", "10.0.0.%"), row("app", "10.0.0.%")];
        assert_eq!(
            picked(&same, "app", "10.0.0.5").as_deref(),
            Some("'app'@'10.0.0.%'")
        );
    }
}
