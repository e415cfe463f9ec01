//! Why a GTID text was refused ([`GtidError`]), and the number reader both GTID flavours
//! share. Its own file so that `gtid` (MariaDB positions) and `gtid_set` (MySQL sets) both
//! depend on it instead of on each other.

use std::fmt;

/// Why a GTID text was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GtidError {
    /// A MariaDB GTID that is not three numbers joined by `-`.
    #[error("a MariaDB GTID is domain-server-sequence, three numbers joined by '-' (e.g. 0-1-42)")]
    NotDomainServerSeq,
    /// A field that is not a decimal number in its range.
    #[error("the {0} of a GTID is not a number in range")]
    BadNumber(GtidField),
    /// A MySQL source that is not a UUID.
    #[error("a MySQL GTID starts with the source's server UUID (8-4-4-4-12 hex digits)")]
    BadUuid,
    /// A MySQL 8.3+ tag that is not a letter or `_` followed by up to 31 letters, digits
    /// or `_`.
    #[error("a GTID tag is a letter or '_' followed by up to 31 letters, digits or '_'")]
    BadTag,
    /// A MySQL source (or tag) without a transaction interval after it.
    #[error("a MySQL GTID needs at least one transaction number or interval after the UUID")]
    NoInterval,
    /// An interval that starts at 0 or ends before it starts.
    #[error("the GTID interval {start}-{end} is empty or starts at 0")]
    BadInterval {
        /// First transaction number.
        start: u64,
        /// Last transaction number.
        end: u64,
    },
}

/// Which field of a GTID a [`GtidError::BadNumber`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtidField {
    /// MariaDB replication domain id (32 bits).
    Domain,
    /// MariaDB server id (32 bits).
    ServerId,
    /// MariaDB sequence number (64 bits).
    Sequence,
    /// MySQL transaction number (1 to 2^63 - 1).
    Transaction,
}

impl fmt::Display for GtidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GtidField::Domain => "domain id",
            GtidField::ServerId => "server id",
            GtidField::Sequence => "sequence number",
            GtidField::Transaction => "transaction number",
        })
    }
}

/// Digits only (no sign, no spaces inside), in range for `T`.
pub(super) fn number<T: std::str::FromStr>(text: &str, field: GtidField) -> Result<T, GtidError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GtidError::BadNumber(field));
    }
    text.parse().map_err(|_| GtidError::BadNumber(field))
}
