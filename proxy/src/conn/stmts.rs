//! The prepared statements one backend connection holds, keyed by the parse they were
//! prepared under and their SQL text, with least-recently-used eviction so no server ever
//! reaches `max_prepared_stmt_count`.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::movable::MovableState;

/// The session variables whose values decide how the server parses and types a statement
/// at PREPARE, besides the default database: `sql_mode` (ANSI_QUOTES, PIPES_AS_CONCAT,
/// IGNORE_SPACE, NO_BACKSLASH_ESCAPES, ORACLE ...), MariaDB's `old_mode`, the character set
/// the text is read in and the one and collation its literals take (`character_set_client`,
/// `character_set_connection`, `collation_connection`), the one the result's column
/// definitions are given in (`character_set_results`), and those that fix a result
/// column's type (`div_precision_increment`, `group_concat_max_len`). Everything else a
/// statement reads at execution, under the session's values then. In name order (a
/// replay's order: each character set before its collation).
pub const PARSE_VARIABLES: [&[u8]; 8] = [
    b"character_set_client",
    b"character_set_connection",
    b"character_set_results",
    b"collation_connection",
    b"div_precision_increment",
    b"group_concat_max_len",
    b"old_mode",
    b"sql_mode",
];

/// The state a statement was prepared under: the default database and each of
/// `PARSE_VARIABLES` (`None`: unknown, the server did not say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parse {
    pub schema: Option<Vec<u8>>,
    pub vars: Vec<Option<Vec<u8>>>,
}

impl Parse {
    /// The parse of a connection in `state` that started with `baseline` (its values of
    /// `PARSE_VARIABLES`, `conn::baseline`).
    pub fn of(state: &MovableState, baseline: &[Option<Vec<u8>>]) -> Parse {
        let vars = PARSE_VARIABLES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                state
                    .vars
                    .get(*name)
                    .cloned()
                    .or_else(|| baseline.get(i).cloned().flatten())
            })
            .collect();
        Parse {
            schema: state.schema.clone(),
            vars,
        }
    }

    /// `state` with this parse's values in place of its own (a schema only where this has
    /// one: a statement prepared with none names every table in full).
    pub fn over(&self, state: &MovableState) -> MovableState {
        let mut out = state.clone();
        for (name, value) in PARSE_VARIABLES.iter().zip(&self.vars) {
            if let Some(v) = value {
                out.vars.insert(name.to_vec(), v.clone());
            }
        }
        if self.schema.is_some() {
            out.schema.clone_from(&self.schema);
        }
        out
    }
}

/// (parse, SQL) of a statement: the same text under another parse is another statement.
pub type StmtKey = Arc<[u8]>;

pub fn stmt_key(parse: &Parse, sql: &[u8]) -> StmtKey {
    let mut k = Vec::with_capacity(64 + sql.len());
    let mut field = |v: Option<&[u8]>| match v {
        None => k.push(0),
        Some(v) => {
            k.push(1);
            k.extend_from_slice(&(v.len() as u32).to_le_bytes());
            k.extend_from_slice(v);
        }
    };
    field(parse.schema.as_deref());
    for v in &parse.vars {
        field(v.as_deref());
    }
    k.extend_from_slice(sql);
    k.into()
}

impl super::BackendConn {
    /// Prepares `sql` for sluice's own use (as `prepare_internal`) with the commands `to`
    /// before it and `back` after it, all in one write: a statement prepared under another
    /// parse than the connection's (`Parse::over`), which then returns to its own. The
    /// connection's recorded state stays as it was. `Ok(Err(_))` is the first refusal (a
    /// statement prepared under a switch that failed is closed again); a switch back that
    /// failed is an `Err`, as a failed connection is.
    pub async fn prepare_under(
        &mut self,
        to: &[Vec<u8>],
        sql: &[u8],
        back: &[Vec<u8>],
    ) -> Result<Result<crate::protocol::PrepareOk, crate::protocol::ErrPacket>, super::Error> {
        let state = self.state.clone();
        for c in to {
            self.stream.queue_packet(0, c);
        }
        self.stream
            .queue_packet(0, &crate::protocol::request::stmt_prepare(sql));
        for c in back {
            self.stream.queue_packet(0, c);
        }
        self.stream.flush(None).await?;
        let switched = self.read_answers(to.len()).await?;
        let prepared = self.read_prepare().await?;
        let returned = self.read_answers(back.len()).await?;
        self.state = state;
        if let Some(Err(e)) = returned.into_iter().find(Result::is_err) {
            // In a state nobody recorded: an error the caller closes the connection for.
            return Err(super::Error::Server(e));
        }
        if let Some(Err(e)) = switched.into_iter().find(Result::is_err) {
            if let Ok(ok) = &prepared {
                self.queue_stmt_close(ok.stmt_id);
            }
            return Ok(Err(e));
        }
        Ok(prepared)
    }
}

pub struct BackendStmt {
    pub id: u32,
    /// Parameter types this backend statement last received: a client executing without
    /// sending types needs its own sent first if they differ.
    pub types: Option<Vec<u8>>,
    last_used: u64,
}

#[derive(Default)]
pub struct BackendStmts {
    // FxHash: hashed on every execution (the key holds the statement's text), and the map
    // is bounded by its cap, so a crafted set of colliding texts costs a scan of at most
    // that many entries.
    map: FxHashMap<StmtKey, BackendStmt>,
    tick: u64,
}

impl BackendStmts {
    pub fn get(&mut self, key: &StmtKey) -> Option<&mut BackendStmt> {
        self.tick += 1;
        let tick = self.tick;
        let stmt = self.map.get_mut(key)?;
        stmt.last_used = tick;
        Some(stmt)
    }

    /// Records a statement; returns backend ids to close (a replaced duplicate, and the least
    /// recently used ones beyond `cap`).
    pub fn insert(&mut self, key: StmtKey, id: u32, cap: usize) -> Vec<u32> {
        self.tick += 1;
        let mut close = Vec::new();
        if let Some(old) = self.map.insert(
            key,
            BackendStmt {
                id,
                types: None,
                last_used: self.tick,
            },
        ) {
            if old.id != id {
                close.push(old.id);
            }
        }
        while self.map.len() > cap.max(1) {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = self.map.remove(&oldest) {
                close.push(s.id);
            }
        }
        close
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(schema: Option<&[u8]>, sql_mode: &[u8]) -> Parse {
        let mut state = MovableState {
            schema: schema.map(<[u8]>::to_vec),
            ..Default::default()
        };
        state.vars.insert(b"sql_mode".to_vec(), sql_mode.to_vec());
        Parse::of(&state, &[])
    }

    #[test]
    fn evicts_least_recently_used_beyond_cap() {
        let mut s = BackendStmts::default();
        let a = stmt_key(&parse(Some(b"db"), b""), b"SELECT 1");
        let b = stmt_key(&parse(Some(b"db"), b""), b"SELECT 2");
        let c = stmt_key(&parse(None, b""), b"SELECT 3");
        assert!(s.insert(a.clone(), 1, 2).is_empty());
        assert!(s.insert(b.clone(), 2, 2).is_empty());
        s.get(&a); // b is now the oldest
        assert_eq!(s.insert(c, 3, 2), vec![2]);
        assert_eq!(s.len(), 2);
        assert!(s.get(&b).is_none());
        assert_eq!(s.get(&a).map(|x| x.id), Some(1));
    }

    #[test]
    fn same_sql_under_another_parse_is_another_statement() {
        let sql = b"SELECT CONCAT(1 || 0), \"a\" FROM t";
        assert_ne!(
            stmt_key(&parse(Some(b"a"), b""), sql),
            stmt_key(&parse(Some(b"b"), b""), sql)
        );
        assert_ne!(
            stmt_key(&parse(Some(b"a"), b""), sql),
            stmt_key(&parse(Some(b"a"), b"PIPES_AS_CONCAT,ANSI_QUOTES"), sql)
        );
        assert_ne!(
            stmt_key(&parse(None, b""), b"x"),
            stmt_key(&parse(Some(b""), b""), b"\0x")
        );
        // A value set explicitly is the same parse as the same value at the baseline.
        let baseline = vec![None, None, None, None, None, None, None, Some(b"".to_vec())];
        assert_eq!(
            stmt_key(&parse(None, b""), b"x"),
            stmt_key(&Parse::of(&MovableState::default(), &baseline), b"x")
        );
    }

    #[test]
    fn a_parse_goes_over_a_state() {
        let mut now = MovableState::default();
        now.vars.insert(b"sql_mode".to_vec(), b"ANSI".to_vec());
        now.vars.insert(b"time_zone".to_vec(), b"+01:00".to_vec());
        now.schema = Some(b"now".to_vec());
        let then = parse(Some(b"then"), b"");
        let over = then.over(&now);
        assert_eq!(
            over.vars.get(&b"sql_mode"[..]).map(Vec::as_slice),
            Some(&b""[..])
        );
        assert_eq!(
            over.vars.get(&b"time_zone"[..]).map(Vec::as_slice),
            Some(&b"+01:00"[..])
        );
        assert_eq!(over.schema.as_deref(), Some(&b"then"[..]));
        assert_eq!(
            parse(None, b"").over(&now).schema.as_deref(),
            Some(&b"now"[..])
        );
    }

    #[test]
    fn replacing_a_duplicate_closes_the_old_copy() {
        let mut s = BackendStmts::default();
        let a = stmt_key(&parse(None, b""), b"SELECT 1");
        s.insert(a.clone(), 7, 10);
        assert_eq!(s.insert(a, 8, 10), vec![7]);
    }
}
