//! Which replica takes a read: the shortest FIFO queue, then the lowest lag, among the
//! replicas whose position covers what the session requires (read-your-writes).
//!
//! Queue lengths are inputs (the pool knows them); so is a rotating `tie_break`, because
//! idle replicas with equal lag (`Seconds_Behind_Master` is whole seconds, usually 0) would
//! otherwise always lose to the first one and reads would not spread.

use std::time::Duration;

use super::gtid::GtidPosition;

/// One usable replica, as the chooser needs it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The server's index.
    pub index: usize,
    /// Statements queued for (or running on) its execution slots.
    pub queued: usize,
    pub lag: Duration,
    /// What it has applied; `None` if unknown (it then serves only reads that require
    /// nothing).
    pub position: Option<&'a GtidPosition>,
}

/// The chosen replica's index, or `None` when no candidate covers `required` (the read then
/// goes to the writer, or waits for a replica in `wait` mode).
pub fn choose_replica(
    candidates: &[Candidate<'_>],
    required: Option<&GtidPosition>,
    tie_break: usize,
) -> Option<usize> {
    let covers = |c: &Candidate<'_>| match (required, c.position) {
        (None, _) => true,
        (Some(need), _) if need.is_empty() => true,
        (Some(need), Some(have)) => have.covers(need),
        (Some(_), None) => false,
    };
    let eligible: Vec<&Candidate<'_>> = candidates.iter().filter(|c| covers(c)).collect();
    let best = eligible.iter().map(|c| (c.queued, c.lag)).min()?;
    let tied: Vec<usize> = eligible
        .iter()
        .filter(|c| (c.queued, c.lag) == best)
        .map(|c| c.index)
        .collect();
    tied.get(tie_break % tied.len()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> GtidPosition {
        GtidPosition::parse_any(text).unwrap()
    }

    /// (name, candidates, required position, tie break, chosen).
    type Case<'a> = (
        &'static str,
        Vec<Candidate<'a>>,
        Option<GtidPosition>,
        usize,
        Option<usize>,
    );

    #[test]
    fn table() {
        let p40 = pos("0-1-40");
        let p42 = pos("0-1-42");
        let s = Duration::from_secs;
        let c = |index, queued, lag, position| Candidate {
            index,
            queued,
            lag: s(lag),
            position,
        };
        let cases: Vec<Case<'_>> = vec![
            ("no replica", vec![], None, 0, None),
            (
                "shortest queue wins over lag",
                vec![c(1, 3, 0, None), c(2, 1, 4, None)],
                None,
                0,
                Some(2),
            ),
            (
                "then the lowest lag",
                vec![c(1, 2, 3, None), c(2, 2, 1, None)],
                None,
                0,
                Some(2),
            ),
            (
                "ties rotate: 0",
                vec![c(1, 0, 0, None), c(2, 0, 0, None)],
                None,
                0,
                Some(1),
            ),
            (
                "ties rotate: 1",
                vec![c(1, 0, 0, None), c(2, 0, 0, None)],
                None,
                1,
                Some(2),
            ),
            (
                "ties rotate: 2",
                vec![c(1, 0, 0, None), c(2, 0, 0, None)],
                None,
                2,
                Some(1),
            ),
            (
                "a non-tie ignores the rotation",
                vec![c(1, 0, 1, None), c(2, 0, 0, None)],
                None,
                7,
                Some(2),
            ),
            (
                "read-your-writes: only a replica that has the write",
                vec![c(1, 0, 0, Some(&p40)), c(2, 5, 2, Some(&p42))],
                Some(pos("0-1-41")),
                0,
                Some(2),
            ),
            (
                "read-your-writes: none has it",
                vec![c(1, 0, 0, Some(&p40)), c(2, 0, 0, Some(&p40))],
                Some(pos("0-1-41")),
                0,
                None,
            ),
            (
                "read-your-writes: unknown position never qualifies",
                vec![c(1, 0, 0, None)],
                Some(pos("0-1-1")),
                0,
                None,
            ),
            (
                "an empty requirement is no requirement",
                vec![c(1, 0, 0, None)],
                Some(pos("")),
                0,
                Some(1),
            ),
            (
                "covering replicas still compete on queue then lag",
                vec![
                    c(1, 1, 0, Some(&p42)),
                    c(2, 0, 3, Some(&p42)),
                    c(3, 0, 1, Some(&p42)),
                ],
                Some(pos("0-1-42")),
                0,
                Some(3),
            ),
        ];
        for (name, candidates, required, tie, want) in cases {
            assert_eq!(
                choose_replica(&candidates, required.as_ref(), tie),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn rotation_spreads_ties_evenly() {
        let cands: Vec<Candidate<'_>> = (0..3)
            .map(|index| Candidate {
                index,
                queued: 0,
                lag: Duration::ZERO,
                position: None,
            })
            .collect();
        let mut counts = [0; 3];
        for tie in 0..300 {
            counts[choose_replica(&cands, None, tie).unwrap()] += 1;
        }
        assert_eq!(counts, [100, 100, 100]);
    }
}
