//! The prepared statements one backend connection holds, keyed by (schema, SQL text), with
//! least-recently-used eviction so no server ever reaches `max_prepared_stmt_count`.

use std::collections::HashMap;
use std::sync::Arc;

/// (schema, SQL) of a statement: the same text prepared in another schema may name other tables.
pub type StmtKey = Arc<[u8]>;

pub fn stmt_key(schema: Option<&[u8]>, sql: &[u8]) -> StmtKey {
    let schema = schema.unwrap_or_default();
    let mut k = Vec::with_capacity(schema.len() + 1 + sql.len());
    k.extend_from_slice(schema);
    k.push(0);
    k.extend_from_slice(sql);
    k.into()
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
    map: HashMap<StmtKey, BackendStmt>,
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

    #[test]
    fn evicts_least_recently_used_beyond_cap() {
        let mut s = BackendStmts::default();
        let a = stmt_key(Some(b"db"), b"SELECT 1");
        let b = stmt_key(Some(b"db"), b"SELECT 2");
        let c = stmt_key(None, b"SELECT 3");
        assert!(s.insert(a.clone(), 1, 2).is_empty());
        assert!(s.insert(b.clone(), 2, 2).is_empty());
        s.get(&a); // b is now the oldest
        assert_eq!(s.insert(c, 3, 2), vec![2]);
        assert_eq!(s.len(), 2);
        assert!(s.get(&b).is_none());
        assert_eq!(s.get(&a).map(|x| x.id), Some(1));
    }

    #[test]
    fn same_sql_in_other_schema_is_another_statement() {
        assert_ne!(
            stmt_key(Some(b"a"), b"SELECT * FROM t"),
            stmt_key(Some(b"b"), b"SELECT * FROM t")
        );
        assert_ne!(stmt_key(None, b"x"), stmt_key(Some(b""), b"\0x"));
    }

    #[test]
    fn replacing_a_duplicate_closes_the_old_copy() {
        let mut s = BackendStmts::default();
        let a = stmt_key(None, b"SELECT 1");
        s.insert(a.clone(), 7, 10);
        assert_eq!(s.insert(a, 8, 10), vec![7]);
    }
}
