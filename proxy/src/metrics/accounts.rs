//! The account directory's counters (`auth_source = server | both`): lookups, cache hits and
//! misses, refreshes after failed logins, account-table queries and their errors, and logins
//! refused for a plugin sluice cannot verify; and the cached accounts as a gauge.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::encoding::DescriptorEncoder;

use super::{counter, gauge_family};
use crate::context::Context;

pub(super) fn encode(e: &mut DescriptorEncoder, ctx: &Context) -> fmt::Result {
    let dir = &ctx.handshake.accounts;
    let s = &dir.stats;
    let counters = [
        (
            "account_lookups",
            "Logins and COM_CHANGE_USERs that looked a server account up",
            &s.lookups,
        ),
        (
            "account_hits",
            "Account lookups answered from the cache",
            &s.hits,
        ),
        (
            "account_misses",
            "Account lookups that waited for a read of the account table",
            &s.misses,
        ),
        (
            "account_refreshes",
            "Accounts read again after a failed login",
            &s.refreshes,
        ),
        (
            "account_table_reads",
            "Queries of the server's account table",
            &s.queries,
        ),
        (
            "account_table_read_errors",
            "Queries of the account table that failed",
            &s.read_errors,
        ),
        (
            "account_unsupported_plugin_refusals",
            "Logins refused because the account's plugin cannot be verified by sluice",
            &s.unsupported_plugin,
        ),
    ];
    for (name, help, value) in counters {
        counter(e, name, help, value.load(Relaxed))?;
    }
    let (known, unknown) = dir.counts();
    gauge_family(
        e,
        "accounts_cached",
        "Account names cached: accounts the server has, and names it has not",
        "kind",
        [("account", known as i64), ("unknown", unknown as i64)],
    )
}
