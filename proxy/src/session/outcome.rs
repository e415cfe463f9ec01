//! What a statement leaves for the session's next ones that sluice keeps per session:
//! ROW_COUNT() and FOUND_ROWS() (put in the text of a statement that runs elsewhere,
//! `identity`, or of a prepared statement's copy, `prepared::variants`), what the
//! diagnostics statements leave of them, the session's LAST_INSERT_ID() (`values` says when
//! it is read back).

/// What a statement leaves of ROW_COUNT() and FOUND_ROWS(): the diagnostics statements leave
/// the previous statement's values, all or in part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Leaves {
    /// Its own values (every other statement).
    #[default]
    Own,
    /// SHOW WARNINGS / ERRORS: ROW_COUNT() -1, the previous FOUND_ROWS().
    PreviousFoundRows,
    /// GET DIAGNOSTICS: both as the previous statement left them.
    Previous,
    /// A command that is no statement: COM_STMT_PREPARE leaves both; one answered with an
    /// OK (COM_INIT_DB, COM_PING) sets ROW_COUNT() to 0; others leave it unknown.
    Command,
}

/// The session's LAST_INSERT_ID().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LastInsertId {
    /// sluice knows it.
    Known(u64),
    /// It is what the backend the session holds returns (a statement there may have
    /// changed it); read back before the session lets that backend go.
    OnBackend,
}

/// The previous statement's outcome as ROW_COUNT() and FOUND_ROWS() report it; `None`:
/// not known (nothing ran yet, a prepare), and the call is left to the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) row_count: Option<i64>,
    pub(crate) found_rows: Option<u64>,
}

impl Outcome {
    /// A new connection's, as the server reports them before its first statement.
    pub(crate) const FRESH: Outcome = Outcome {
        row_count: Some(0),
        found_rows: Some(0),
    };

    /// After a statement answered with `summary`: an OK gives its affected rows, a result
    /// set -1 (and its rows to FOUND_ROWS()), an error -1; FOUND_ROWS() keeps the last
    /// SELECT's count through statements without a result set and through errors, as the
    /// server does (a SELECT that fails while it runs may change it there: the session keeps
    /// its backend after an error while it can, so the server answers). An answer with
    /// result sets leaves FOUND_ROWS() the last one's rows, and ROW_COUNT() -1, unless an OK
    /// ends it: a CALL's final OK (or a multi-statement's last statement's) gives its
    /// affected rows. What the diagnostics statements leave is `leaves`.
    pub(crate) fn after(
        self,
        summary: &crate::protocol::ResponseSummary,
        leaves: Leaves,
    ) -> Outcome {
        let ok = summary.error.is_none() && summary.result_sets == 0;
        match leaves {
            Leaves::Previous => return self,
            Leaves::Command if summary.prepare_ok.is_some() => return self,
            Leaves::Command => {
                return Outcome {
                    row_count: ok.then_some(0),
                    found_rows: self.found_rows,
                }
            }
            // Several results of a statement that reads the diagnostics: unknown.
            Leaves::PreviousFoundRows if summary.result_sets > 1 => return Outcome::default(),
            Leaves::PreviousFoundRows => {
                return Outcome {
                    row_count: Some(-1),
                    found_rows: self.found_rows,
                }
            }
            Leaves::Own => {}
        }
        if summary.prepare_ok.is_some() {
            return Outcome::default();
        }
        let affected = || i64::try_from(summary.affected_rows).ok();
        match (&summary.error, summary.result_sets) {
            (Some(_), _) => Outcome {
                row_count: Some(-1),
                found_rows: self.found_rows,
            },
            (None, 0) => Outcome {
                row_count: affected(),
                found_rows: self.found_rows,
            },
            (None, _) => Outcome {
                row_count: if summary.ends_with_ok {
                    affected()
                } else {
                    Some(-1)
                },
                found_rows: Some(summary.last_set_rows()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_follows_the_server() {
        use crate::protocol::ResponseSummary;
        let ok = |affected| ResponseSummary {
            affected_rows: affected,
            ..Default::default()
        };
        let select = |rows| ResponseSummary {
            result_sets: 1,
            rows,
            ..Default::default()
        };
        let o = Outcome::default().after(&select(4), Leaves::Own);
        assert_eq!((o.row_count, o.found_rows), (Some(-1), Some(4)));
        let o = o.after(&ok(3), Leaves::Own);
        assert_eq!(
            (o.row_count, o.found_rows),
            (Some(3), Some(4)),
            "FOUND_ROWS() stays"
        );
        let failed = ResponseSummary {
            error: Some(crate::protocol::ErrPacket::from_code(
                crate::protocol::codes::BAD_DB,
                &b"no table"[..],
            )),
            ..Default::default()
        };
        assert_eq!(
            o.after(&failed, Leaves::Own),
            Outcome {
                row_count: Some(-1),
                found_rows: Some(4)
            },
            "an error keeps FOUND_ROWS()"
        );
        assert_eq!(
            o.after(&select(0), Leaves::PreviousFoundRows),
            Outcome {
                row_count: Some(-1),
                found_rows: Some(4)
            },
            "SHOW WARNINGS"
        );
        assert_eq!(o.after(&ok(0), Leaves::Previous), o, "GET DIAGNOSTICS");
        let prepared = ResponseSummary {
            prepare_ok: Some(crate::protocol::PrepareOk {
                stmt_id: 1,
                columns: 0,
                params: 0,
                warnings: 0,
            }),
            ..Default::default()
        };
        assert_eq!(o.after(&prepared, Leaves::Command), o, "COM_STMT_PREPARE");
        assert_eq!(
            o.after(&ok(0), Leaves::Command),
            Outcome {
                row_count: Some(0),
                found_rows: Some(4)
            },
            "COM_INIT_DB"
        );
        // SELECT 1 (one row); SELECT 2 FROM seq_1_to_3 (three rows).
        let many = ResponseSummary {
            result_sets: 2,
            rows: 4,
            rows_before_last_set: 1,
            ..Default::default()
        };
        assert_eq!(
            o.after(&many, Leaves::Own),
            Outcome {
                row_count: Some(-1),
                found_rows: Some(3)
            },
            "several results: the last one's rows"
        );
        // CALL p(), p selecting three rows, then updating two: the final OK's.
        let call = ResponseSummary {
            result_sets: 1,
            rows: 3,
            affected_rows: 2,
            ends_with_ok: true,
            ..Default::default()
        };
        assert_eq!(
            o.after(&call, Leaves::Own),
            Outcome {
                row_count: Some(2),
                found_rows: Some(3)
            },
            "a CALL's final OK"
        );
        assert_eq!(
            o.after(&many, Leaves::PreviousFoundRows),
            Outcome::default(),
            "several results of a diagnostics read: unknown"
        );
    }
}
