//! MySQL GTID sets: `uuid:interval[:interval...]` entries joined by `,`, where an interval is
//! `n` or `first-last`; MySQL 8.3+ may put a tag before intervals (`uuid:tag:1-5`).
//!
//! Servers print sets with `,\n` between sources (`@@gtid_executed`, `session_track_gtids`
//! with ALL_GTIDS), so whitespace around entries is ignored. Intervals are kept sorted and
//! merged (`1-3:4-6` is `1-6`), so equality and [`covers`](GtidSet::covers) do not depend
//! on how the text was written.
//!
//! <https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-concepts.html>

use std::collections::BTreeMap;
use std::fmt;

use super::gtid_error::{number, GtidError, GtidField};

/// Transaction numbers are 1 to 2^63 - 1 (MySQL's GNO_END).
const MAX_TRANSACTION: u64 = i64::MAX as u64 - 1;
const MAX_TAG_LEN: usize = 32;

/// Who wrote a transaction: the source's server UUID and, since MySQL 8.3, an optional tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GtidSource {
    pub uuid: [u8; 16],
    /// Lower-case (MySQL compares tags without case).
    pub tag: Option<String>,
}

/// A set of MySQL transactions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidSet {
    /// Per source: inclusive `(first, last)` intervals, sorted, neither overlapping nor
    /// touching.
    intervals: BTreeMap<GtidSource, Vec<(u64, u64)>>,
}

impl GtidSet {
    /// Parses a GTID set; the empty string is the empty set.
    pub fn parse(text: &str) -> Result<Self, GtidError> {
        let mut set = GtidSet::default();
        for entry in text.split(',') {
            let entry = entry.trim();
            if entry.is_empty() {
                // `a:1,\n` and the empty set; MySQL accepts both.
                continue;
            }
            let mut parts = entry.split(':');
            let uuid = parse_uuid(parts.next().unwrap_or("").trim())?;
            let mut source = GtidSource { uuid, tag: None };
            let mut intervals_for_source = 0;
            for part in parts {
                let part = part.trim();
                if part.starts_with(|c: char| c.is_ascii_digit()) {
                    let (first, last) = parse_interval(part)?;
                    set.add(source.clone(), first, last);
                    intervals_for_source += 1;
                } else {
                    if source.tag.is_some() && intervals_for_source == 0 {
                        return Err(GtidError::NoInterval);
                    }
                    source.tag = Some(parse_tag(part)?);
                    intervals_for_source = 0;
                }
            }
            if intervals_for_source == 0 {
                return Err(GtidError::NoInterval);
            }
        }
        Ok(set)
    }

    /// Adds transactions `first..=last` of `source`, merging with what is there.
    pub fn add(&mut self, source: GtidSource, first: u64, last: u64) {
        let list = self.intervals.entry(source).or_default();
        list.push((first, last));
        list.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(list.len());
        for &(a, b) in list.iter() {
            match merged.last_mut() {
                // Overlapping or adjacent (`1-3` and `4-6`): one interval.
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *list = merged;
    }

    /// Adds every transaction of `other`.
    pub fn include(&mut self, other: &GtidSet) {
        for (source, list) in &other.intervals {
            for &(a, b) in list {
                self.add(source.clone(), a, b);
            }
        }
    }

    /// Is every transaction of `other` in this set?
    pub fn covers(&self, other: &GtidSet) -> bool {
        other.intervals.iter().all(|(source, needed)| {
            let Some(have) = self.intervals.get(source) else {
                return false;
            };
            // `have` is merged, so a needed interval is covered only by a single one of it.
            needed
                .iter()
                .all(|&(a, b)| have.iter().any(|&(x, y)| x <= a && b <= y))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// The merged intervals of `source`.
    pub fn intervals(&self, source: &GtidSource) -> &[(u64, u64)] {
        self.intervals.get(source).map(Vec::as_slice).unwrap_or(&[])
    }
}

impl fmt::Display for GtidSet {
    /// One entry per source and tag, UUIDs in lower case, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (source, list)) in self.intervals.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write_uuid(f, &source.uuid)?;
            if let Some(tag) = &source.tag {
                write!(f, ":{tag}")?;
            }
            for &(a, b) in list {
                if a == b {
                    write!(f, ":{a}")?;
                } else {
                    write!(f, ":{a}-{b}")?;
                }
            }
        }
        Ok(())
    }
}

/// `8-4-4-4-12` hex digits, either case.
fn parse_uuid(text: &str) -> Result<[u8; 16], GtidError> {
    let groups: Vec<&str> = text.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return Err(GtidError::BadUuid);
    }
    let hex: String = groups.concat();
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        let pair = hex.get(2 * i..2 * i + 2).ok_or(GtidError::BadUuid)?;
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GtidError::BadUuid);
        }
        *byte = u8::from_str_radix(pair, 16).map_err(|_| GtidError::BadUuid)?;
    }
    Ok(out)
}

fn write_uuid(f: &mut fmt::Formatter<'_>, uuid: &[u8; 16]) -> fmt::Result {
    for (i, b) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            f.write_str("-")?;
        }
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

fn parse_interval(text: &str) -> Result<(u64, u64), GtidError> {
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (a, b),
        None => (text, text),
    };
    let first: u64 = number(a, GtidField::Transaction)?;
    let last: u64 = number(b, GtidField::Transaction)?;
    if first > MAX_TRANSACTION || last > MAX_TRANSACTION {
        return Err(GtidError::BadNumber(GtidField::Transaction));
    }
    if first == 0 || last < first {
        return Err(GtidError::BadInterval {
            start: first,
            end: last,
        });
    }
    Ok((first, last))
}

fn parse_tag(text: &str) -> Result<String, GtidError> {
    let mut bytes = text.bytes();
    let starts_well = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !starts_well || !rest_ok || text.len() > MAX_TAG_LEN {
        return Err(GtidError::BadTag);
    }
    Ok(text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "a1b2c3d4-0000-1111-2222-333344445555";

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_and_prints_canonically() {
        let upper = "3E11FA47-71CA-11E1-9E33-C80AA9429562";
        for (text, shown) in [
            (String::new(), String::new()),
            (format!("{A}:5"), format!("{A}:5")),
            (format!("{upper}:1-5"), format!("{A}:1-5")),
            // Merging: overlapping, adjacent and out-of-order intervals.
            (format!("{A}:7-9:1-3:4-5"), format!("{A}:1-5:7-9")),
            (format!("{A}:1-10:3-4"), format!("{A}:1-10")),
            (format!("{A}:1-3,{A}:4"), format!("{A}:1-4")),
            // Several sources as servers print them, with ",\n".
            (format!("{B}:1-2,\n{A}:1-5"), format!("{A}:1-5,{B}:1-2")),
            (format!(" {A}:1-5 ,\n"), format!("{A}:1-5")),
            // MySQL 8.3+ tags, case-insensitive, printed after the untagged intervals.
            (
                format!("{A}:1-5:Blue:1-2:3:red:9"),
                format!("{A}:1-5,{A}:blue:1-3,{A}:red:9"),
            ),
        ] {
            assert_eq!(set(&text).to_string(), shown, "{text:?}");
            // What is printed parses back to the same set.
            assert_eq!(set(&shown), set(&text));
        }
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        use GtidError::*;
        for (text, err) in [
            (A.to_string(), NoInterval),
            (format!("{A}:"), BadTag),
            (format!("{A}:tag"), NoInterval),
            (format!("{A}:t1:t2:5"), NoInterval),
            (format!("{A}:0"), BadInterval { start: 0, end: 0 }),
            (format!("{A}:5-3"), BadInterval { start: 5, end: 3 }),
            (format!("{A}:1-"), BadNumber(GtidField::Transaction)),
            (format!("{A}:1-2-3"), BadNumber(GtidField::Transaction)),
            (
                format!("{A}:9223372036854775807"),
                BadNumber(GtidField::Transaction),
            ),
            (format!("{A}:1x"), BadNumber(GtidField::Transaction)),
            (format!("{A}:9tag:1"), BadNumber(GtidField::Transaction)),
            (format!("{A}:bad-tag:1"), BadTag),
            (format!("{A}:{}:1", "t".repeat(33)), BadTag),
            ("3e11fa47-71ca-11e1-9e33:1".to_string(), BadUuid),
            ("3e11fa4771ca11e19e33c80aa9429562:1".to_string(), BadUuid),
            (
                "3e11fa47-71ca-11e1-9e33-c80aa942956g:1".to_string(),
                BadUuid,
            ),
            ("0-1-42".to_string(), BadUuid),
        ] {
            assert_eq!(GtidSet::parse(&text), Err(err), "{text:?}");
        }
        assert!(GtidSet::parse(&format!("{A}:9223372036854775806")).is_ok());
    }

    #[test]
    fn covers_needs_every_transaction() {
        let cases = [
            (format!("{A}:1-10"), format!("{A}:5"), true),
            (format!("{A}:1-10"), format!("{A}:1-10"), true),
            (format!("{A}:1-10"), format!("{A}:10-11"), false),
            // A gap in the server's set (a transaction not applied yet).
            (format!("{A}:1-4:6-10"), format!("{A}:5"), false),
            (format!("{A}:1-4:6-10"), format!("{A}:3:7-8"), true),
            (format!("{A}:1-4:6-10"), format!("{A}:4-6"), false),
            // Written as touching pieces, still one run.
            (format!("{A}:1-4:5-10"), format!("{A}:4-6"), true),
            // Every source of the requirement.
            (format!("{A}:1-10,{B}:1-3"), format!("{A}:2,{B}:3"), true),
            (format!("{A}:1-10"), format!("{A}:2,{B}:1"), false),
            // A tag is a source of its own.
            (format!("{A}:1-10"), format!("{A}:x:1"), false),
            (format!("{A}:x:1-10"), format!("{A}:X:4"), true),
            (String::new(), String::new(), true),
            (format!("{A}:1"), String::new(), true),
            (String::new(), format!("{A}:1"), false),
        ];
        for (have, need, covered) in cases {
            assert_eq!(
                set(&have).covers(&set(&need)),
                covered,
                "{have} covers {need}"
            );
        }
    }

    #[test]
    fn include_merges_a_session_requirement() {
        let mut need = set(&format!("{A}:3"));
        need.include(&set(&format!("{A}:4,{B}:9")));
        need.include(&set(&format!("{A}:1")));
        assert_eq!(need.to_string(), format!("{A}:1:3-4,{B}:9"));
        let source = GtidSource {
            uuid: parse_uuid(A).unwrap(),
            tag: None,
        };
        assert_eq!(need.intervals(&source), &[(1, 1), (3, 4)]);
    }
}
