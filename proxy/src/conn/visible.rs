//! What a client could read on a backend connection besides its movable state, as sluice
//! knows it per connection: the value LAST_INSERT_ID() returns there, what its diagnostics
//! area may hold (and whose it is), and whose statements ROW_COUNT() and FOUND_ROWS() there
//! come from. The rules that use it are `session::values` (and `session::identity`).

/// What a connection's diagnostics area may hold. MariaDB replaces it with a statement's
/// conditions when the statement raises any, clears it before a statement that names a
/// table, and otherwise leaves it as it was (whatever the answer's warning count says), so
/// it stays "someone's" until sluice clears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnostics {
    /// Empty.
    Clean,
    /// May hold conditions of someone who no longer holds the connection, or of sluice's
    /// own statements.
    Foreign,
    /// May hold conditions the session with this client id raised while it held the
    /// connection, and nobody else's.
    Of(u32),
}

/// The per-connection values (`BackendParts::visible`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visible {
    /// What LAST_INSERT_ID() returns here; `None`: unknown (a statement may have changed it).
    pub last_insert_id: Option<u64>,
    pub diagnostics: Diagnostics,
    /// The client whose statement ROW_COUNT() returns here; `None`: sluice's own statement
    /// ran last, or nobody's is known.
    pub row_count_of: Option<u32>,
    /// The client whose statement FOUND_ROWS() returns here (statements without a result
    /// set leave it as it was); `None` as for `row_count_of`.
    pub found_rows_of: Option<u32>,
}

impl Visible {
    /// A new (or reset) connection: LAST_INSERT_ID() 0, nothing in the diagnostics area.
    pub fn fresh() -> Visible {
        Visible {
            last_insert_id: Some(0),
            diagnostics: Diagnostics::Clean,
            row_count_of: None,
            found_rows_of: None,
        }
    }

    /// sluice ran a statement of its own here; `conditions`: it raised warnings or an error.
    pub fn ran_own(&mut self, conditions: bool) {
        self.row_count_of = None;
        self.found_rows_of = None;
        if conditions {
            self.diagnostics = Diagnostics::Foreign;
        }
    }

    /// A session takes the connection: what another one left there is nobody's now.
    pub fn taken(&mut self) {
        if let Diagnostics::Of(_) = self.diagnostics {
            self.diagnostics = Diagnostics::Foreign;
        }
    }

    /// Whether a diagnostics read by client `client` must find the area cleared first.
    pub fn foreign_to(&self, client: u32) -> bool {
        match self.diagnostics {
            Diagnostics::Clean => false,
            Diagnostics::Foreign => true,
            Diagnostics::Of(owner) => owner != client,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_their_sessions_until_another_takes_the_connection() {
        let mut v = Visible::fresh();
        assert!(!v.foreign_to(7));
        v.diagnostics = Diagnostics::Of(7);
        assert!(!v.foreign_to(7) && v.foreign_to(8));
        v.taken();
        assert!(
            v.foreign_to(7),
            "7's, from before it took the connection again"
        );
        v.diagnostics = Diagnostics::Clean;
        v.row_count_of = Some(8);
        v.ran_own(false);
        assert!(v.row_count_of.is_none() && !v.foreign_to(8));
        v.ran_own(true);
        assert_eq!(v.diagnostics, Diagnostics::Foreign);
    }
}
