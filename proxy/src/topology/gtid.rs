//! GTID positions, typed: what a server has applied, and what a session's read requires.
//!
//! - MariaDB: a position is one `domain-server-seq` per replication domain
//!   (`@@gtid_slave_pos`, `@@gtid_binlog_pos`, a session's `last_gtid`), e.g. `0-1-42,1-3-7`.
//!   Within a domain transactions are ordered by their sequence number alone; the server id
//!   says who wrote it, not where it is in the order (MASTER_GTID_WAIT compares the same
//!   way). So position A covers B when, for every domain of B, A has a sequence number at
//!   least as high.
//! - MySQL: a GTID set ([`GtidSet`], in `gtid_set.rs`) of `uuid[:tag]:interval[:interval]`
//!   entries (`@@gtid_executed`, `session_track_gtids`). A covers B when every transaction
//!   of B is in A.
//!
//! Positions of different flavours never cover each other: a server of the other flavour
//! cannot have applied the transaction at all.
//!
//! <https://mariadb.com/kb/en/gtid/>,
//! <https://dev.mysql.com/doc/refman/8.0/en/replication-gtids-concepts.html>.

use std::collections::BTreeMap;
use std::fmt;

use super::gtid_error::number;
pub use super::gtid_error::{GtidError, GtidField};
pub use super::gtid_set::GtidSet;
use super::Flavor;

/// One MariaDB GTID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MariaDbGtid {
    pub domain: u32,
    pub server_id: u32,
    pub seq: u64,
}

impl MariaDbGtid {
    fn parse(text: &str) -> Result<Self, GtidError> {
        let mut parts = text.split('-');
        let (Some(d), Some(s), Some(n), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(GtidError::NotDomainServerSeq);
        };
        Ok(MariaDbGtid {
            domain: number(d, GtidField::Domain)?,
            server_id: number(s, GtidField::ServerId)?,
            seq: number(n, GtidField::Sequence)?,
        })
    }
}

impl fmt::Display for MariaDbGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server_id, self.seq)
    }
}

/// A MariaDB GTID position: the last GTID of each domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MariaDbPosition {
    by_domain: BTreeMap<u32, MariaDbGtid>,
}

impl MariaDbPosition {
    /// Parses `d-s-n[,d-s-n...]`; whitespace around entries is ignored (servers print none,
    /// people do) and the empty string is the empty position. A domain listed twice keeps
    /// its highest sequence number, the stricter reading for a requirement.
    pub fn parse(text: &str) -> Result<Self, GtidError> {
        let mut pos = MariaDbPosition::default();
        let text = text.trim();
        if text.is_empty() {
            return Ok(pos);
        }
        for entry in text.split(',') {
            pos.include_gtid(MariaDbGtid::parse(entry.trim())?);
        }
        Ok(pos)
    }

    /// Does this position include `gtid`?
    pub fn covers_gtid(&self, gtid: &MariaDbGtid) -> bool {
        self.by_domain
            .get(&gtid.domain)
            .is_some_and(|have| have.seq >= gtid.seq)
    }

    /// Does this position include every domain's GTID of `other`?
    pub fn covers(&self, other: &MariaDbPosition) -> bool {
        other.by_domain.values().all(|g| self.covers_gtid(g))
    }

    /// Raises this position to include `gtid` (a session's newest write).
    pub fn include_gtid(&mut self, gtid: MariaDbGtid) {
        let entry = self.by_domain.entry(gtid.domain).or_insert(gtid);
        if gtid.seq > entry.seq {
            *entry = gtid;
        }
    }

    /// The GTID of `domain`, if any.
    pub fn get(&self, domain: u32) -> Option<&MariaDbGtid> {
        self.by_domain.get(&domain)
    }

    pub fn is_empty(&self) -> bool {
        self.by_domain.is_empty()
    }

    /// The GTIDs, by domain.
    pub fn iter(&self) -> impl Iterator<Item = &MariaDbGtid> {
        self.by_domain.values()
    }
}

impl fmt::Display for MariaDbPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.by_domain.values().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

/// A position of either flavour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GtidPosition {
    MariaDb(MariaDbPosition),
    MySql(GtidSet),
}

impl GtidPosition {
    /// Parses a position as the given server flavour prints it.
    pub fn parse(flavor: Flavor, text: &str) -> Result<Self, GtidError> {
        match flavor {
            Flavor::MariaDb => MariaDbPosition::parse(text).map(GtidPosition::MariaDb),
            Flavor::MySql => GtidSet::parse(text).map(GtidPosition::MySql),
        }
    }

    /// Parses a position of either flavour, telling them apart by shape: MySQL GTIDs have a
    /// `:` after the UUID and MariaDB ones never have one (for a token an application
    /// passes, e.g. `/* sluice:min_gtid=0-1-42 */`).
    pub fn parse_any(text: &str) -> Result<Self, GtidError> {
        let flavor = if text.contains(':') {
            Flavor::MySql
        } else {
            Flavor::MariaDb
        };
        Self::parse(flavor, text)
    }

    pub fn flavor(&self) -> Flavor {
        match self {
            GtidPosition::MariaDb(_) => Flavor::MariaDb,
            GtidPosition::MySql(_) => Flavor::MySql,
        }
    }

    /// Does this position (a server's) include everything `required` names? An empty
    /// requirement is covered by anything; a requirement of the other flavour by nothing.
    pub fn covers(&self, required: &GtidPosition) -> bool {
        match (self, required) {
            (_, r) if r.is_empty() => true,
            (GtidPosition::MariaDb(a), GtidPosition::MariaDb(b)) => a.covers(b),
            (GtidPosition::MySql(a), GtidPosition::MySql(b)) => a.covers(b),
            _ => false,
        }
    }

    /// Adds `other` to this position (a session's requirement after another write). A
    /// position of the other flavour replaces it: the session now writes elsewhere.
    pub fn include(&mut self, other: &GtidPosition) {
        match (&mut *self, other) {
            (GtidPosition::MariaDb(a), GtidPosition::MariaDb(b)) => {
                for gtid in b.iter() {
                    a.include_gtid(*gtid);
                }
            }
            (GtidPosition::MySql(a), GtidPosition::MySql(b)) => a.include(b),
            (this, other) => *this = other.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            GtidPosition::MariaDb(p) => p.is_empty(),
            GtidPosition::MySql(s) => s.is_empty(),
        }
    }
}

impl fmt::Display for GtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GtidPosition::MariaDb(p) => p.fmt(f),
            GtidPosition::MySql(s) => s.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maria(text: &str) -> MariaDbPosition {
        MariaDbPosition::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn mariadb_positions_parse_and_print_in_domain_order() {
        for (text, shown) in [
            ("", ""),
            ("0-1-42", "0-1-42"),
            ("1-3-7,0-1-42", "0-1-42,1-3-7"),
            (" 0-1-42 , 1-3-7\n", "0-1-42,1-3-7"),
            (
                "4294967295-4294967295-18446744073709551615",
                "4294967295-4294967295-18446744073709551615",
            ),
            // A domain twice keeps the highest sequence number.
            ("0-1-5,0-2-9,0-3-7", "0-2-9"),
        ] {
            assert_eq!(maria(text).to_string(), shown, "{text:?}");
        }
    }

    #[test]
    fn mariadb_bad_input_is_a_typed_error() {
        use GtidError::*;
        use GtidField::*;
        for (text, err) in [
            ("0-1", NotDomainServerSeq),
            ("0-1-2-3", NotDomainServerSeq),
            ("0-1-42,", NotDomainServerSeq),
            ("abc", NotDomainServerSeq),
            ("x-1-2", BadNumber(Domain)),
            ("0--2", BadNumber(ServerId)),
            ("0-1-", BadNumber(Sequence)),
            ("0-1-+2", BadNumber(Sequence)),
            ("0-1- 2", BadNumber(Sequence)),
            ("4294967296-1-2", BadNumber(Domain)),
            ("0-4294967296-2", BadNumber(ServerId)),
            ("0-1-18446744073709551616", BadNumber(Sequence)),
            ("0-1-2;DROP", BadNumber(Sequence)),
        ] {
            assert_eq!(MariaDbPosition::parse(text), Err(err), "{text:?}");
        }
    }

    #[test]
    fn mariadb_covers_compares_sequence_per_domain_not_server_id() {
        let cases = [
            // (server position, requirement, covered)
            ("0-1-42", "0-1-42", true),
            ("0-1-43", "0-1-42", true),
            ("0-1-41", "0-1-42", false),
            // After a failover the new primary continues the domain under its own id.
            ("0-2-43", "0-1-42", true),
            ("0-2-41", "0-1-42", false),
            // Multi-domain: every domain of the requirement must be reached.
            ("0-1-42,1-1-7", "0-1-40,1-1-7", true),
            ("0-1-42,1-1-6", "0-1-40,1-1-7", false),
            ("0-1-42", "0-1-40,1-1-1", false),
            ("0-1-42,1-1-7,2-5-1", "1-1-7", true),
            // Nothing required is always covered; an empty server covers nothing else.
            ("", "", true),
            ("0-1-1", "", true),
            ("", "0-1-1", false),
        ];
        for (have, need, covered) in cases {
            let (a, b) = (maria(have), maria(need));
            assert_eq!(a.covers(&b), covered, "{have} covers {need}");
            let (a, b) = (GtidPosition::MariaDb(a), GtidPosition::MariaDb(b));
            assert_eq!(a.covers(&b), covered, "{have} covers {need} (enum)");
        }
    }

    #[test]
    fn a_session_requirement_grows_with_each_write() {
        let mut need = GtidPosition::parse(Flavor::MariaDb, "0-1-5").unwrap();
        need.include(&GtidPosition::parse_any("0-1-7").unwrap());
        need.include(&GtidPosition::parse_any("0-1-6,3-1-2").unwrap());
        assert_eq!(need.to_string(), "0-1-7,3-1-2");
        assert!(!GtidPosition::parse_any("0-1-7").unwrap().covers(&need));
        assert!(GtidPosition::parse_any("0-2-9,3-1-2")
            .unwrap()
            .covers(&need));
    }

    #[test]
    fn flavours_never_cover_each_other() {
        let maria = GtidPosition::parse_any("0-1-5").unwrap();
        let mysql = GtidPosition::parse_any("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5").unwrap();
        assert_eq!(
            (maria.flavor(), mysql.flavor()),
            (Flavor::MariaDb, Flavor::MySql)
        );
        assert!(!maria.covers(&mysql));
        assert!(!mysql.covers(&maria));
        assert!(mysql.covers(&GtidPosition::MariaDb(MariaDbPosition::default())));
        let mut need = maria.clone();
        need.include(&mysql);
        assert_eq!(need, mysql);
    }
}
