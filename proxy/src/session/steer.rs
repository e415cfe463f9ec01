//! What digests, query rules and per-user limits do to a statement, in the order the one
//! statement path (`Session::run_statement`) asks:
//!
//! 1. its digest, only when something reads it (digests on, or a rule that matches on it):
//!    a query's with its classification in one lexing (`Session::classify_query`, from
//!    `dispatch`), or, for the same text as the session's last query, that one's
//!    ([`LastDigest`]: a digest is a function of the text and its quoting alone); a
//!    prepared statement's once, at PREPARE, kept in its definition
//!    (`prepared::StmtDef::digest`) for every execution;
//! 2. admission, before anything is acquired (`Session::admit_statement`): the user's
//!    `max_concurrency` gate, then the query rules' decision (the hit, the log line, a
//!    block, the rule's gate); the user's gate comes first, so that no waiting cycle forms
//!    between the two; the places are the statement's, dropped with it;
//! 3. its rule's route, in the statement's `route::Routing` (`session::route`);
//! 4. its rule's deadline (`Session::deadline`), just before the relay: written into the
//!    statement for the server (`classify::with_time_limit`), or, where the server cannot
//!    take it so, a KILL QUERY at the deadline ([`KillAtDeadline`]), whose 1317 the client
//!    gets as the server's own timeout error;
//! 5. the digest record once the answer is relayed and what the statement held given back
//!    (`Session::record_digest`); a statement sluice answered itself (a block, a queue
//!    timeout) is recorded as an error with no server time.
//!
//! With digests off, no rules and no user limits, a statement reads no clock, allocates
//! nothing and is lexed once, as before any of this: each step starts with a flag or an
//! `Option` it finds empty.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::errors::statement_timeout;
use super::kill::kill_running_statement;
use super::statement::{Request, Statement};
use super::Session;
use crate::classify::{
    classify_digested, classify_in, Classification, Digest, Quoting, TimeLimitSyntax,
};
use crate::digests::StatementRecord;
use crate::protocol::ErrPacket;
use crate::rules::{Decision, Facts, RuleSet};
use crate::topology::Flavor;

/// What a statement's rule deadline becomes on the backend that runs it.
pub(super) enum Deadline {
    /// The statement's text with the deadline written in (framed): the server ends it.
    InText(bytes::Bytes),
    /// A KILL QUERY at the deadline.
    Kill(KillAtDeadline),
}

/// A KILL QUERY of the session's running statement at its deadline, from a task of its
/// own. `fired` is set before the KILL goes out, so the relay knows the ER_QUERY_INTERRUPTED
/// that follows for the deadline's, and gives the client `err` in its place. Dropped (the
/// answer is in) before the deadline, the task stops before it sends anything; after it,
/// the task runs to its end, so that the backend's fence (`pool::Pool::fence`) stays until
/// the KILL has landed.
pub(super) struct KillAtDeadline {
    task: tokio::task::JoinHandle<()>,
    pub(crate) fired: Arc<AtomicBool>,
    pub(crate) err: ErrPacket,
}

impl Drop for KillAtDeadline {
    fn drop(&mut self) {
        // Not fired: the task is asleep, or before its first await since, which is the
        // control connection's connect: cancelled there, it has sent nothing.
        if !self.fired.load(Ordering::SeqCst) {
            self.task.abort();
        }
    }
}

/// Query texts longer than this are not kept in [`LastDigest`]: a long text is rarely sent
/// twice in a row, and comparing it would cost what it saves.
const LAST_DIGEST_MAX: usize = 512;

/// The digest of the session's last query text (up to [`LAST_DIGEST_MAX`] bytes), so that
/// the same text sent again (a health check, `BEGIN`, `COMMIT`, a statement without
/// literals) costs a comparison of its bytes instead of the normaliser's pass.
#[derive(Default)]
pub(super) struct LastDigest(Option<Box<(Vec<u8>, Quoting, Digest)>>);

impl LastDigest {
    /// The kept digest, if `sql` lexed by `quoting` is the kept text.
    fn get(&self, sql: &[u8], quoting: Quoting) -> Option<&Digest> {
        let (text, q, digest) = self.0.as_deref()?;
        (*q == quoting && text.as_slice() == sql).then_some(digest)
    }

    /// Keeps `digest` as the digest of `sql` (the buffer is reused from text to text).
    fn keep(&mut self, sql: &[u8], quoting: Quoting, digest: &Digest) {
        if sql.len() > LAST_DIGEST_MAX {
            return;
        }
        match &mut self.0 {
            Some(kept) => {
                kept.0.clear();
                kept.0.extend_from_slice(sql);
                kept.1 = quoting;
                kept.2.clone_from(digest);
            }
            None => self.0 = Some(Box::new((sql.to_vec(), quoting, digest.clone()))),
        }
    }
}

impl Session {
    /// A query's classification, and its digest (into `digest`) when something reads
    /// digests (the one lexing serves both where the classifier reads the text in full).
    /// `rules`: the query rules in force.
    pub(super) fn classify_query(
        &mut self,
        sql: &[u8],
        rules: Option<&RuleSet>,
        digest: &mut Option<Digest>,
    ) -> Classification {
        let quoting = self.state.quoting();
        if self.ctx.digests.enabled() || rules.is_some_and(RuleSet::needs_digest) {
            if let Some(known) = self.memory.last_digest.get(sql, quoting) {
                *digest = Some(known.clone());
                return classify_in(sql, quoting);
            }
            let (class, made) = classify_digested(sql, quoting);
            self.memory.last_digest.keep(sql, quoting, &made);
            *digest = Some(made);
            class
        } else {
            // Written in place: nothing of the digest's size is moved.
            classify_in(sql, quoting)
        }
    }

    /// Before admission: the rules in force, an execution's digest (its definition's, made
    /// now if digests were off at PREPARE), and the arrival time when its digest is
    /// recorded. Only for a statement that runs SQL. True when it has a gate or a rule to
    /// pass (`admit_statement`).
    #[inline]
    pub(super) fn steer_ahead(&self, st: &mut Statement<'_>) -> bool {
        if !st.runs_sql() {
            return false;
        }
        if st.ruleset.is_none() {
            st.ruleset = self.ctx.rules();
        }
        let recording = self.ctx.digests.enabled();
        if st.digest.is_none() {
            if let Request::Prepared { stmt, .. } = st.request {
                if recording || st.ruleset.as_deref().is_some_and(RuleSet::needs_digest) {
                    let quoting = self.state.quoting();
                    let def = &stmt.def;
                    let sql = def.sql();
                    st.digest = Some(
                        def.digest
                            .get_or_init(|| crate::classify::digest(sql, quoting)),
                    );
                }
            }
        }
        if recording && st.digest.is_some() {
            st.tally.arrived = Some(Instant::now());
        }
        st.ruleset.is_some()
            || self
                .login
                .user
                .limits(&self.config)
                .max_concurrency
                .is_some()
    }

    /// Admission, before anything is acquired: the user's `max_concurrency` gate, then the
    /// query rules' decision. `Err`: the statement does not run (1226 at the user's limit,
    /// 1148 for a rule's block, 9001 at a rule's gate), and the client gets the error. A
    /// session that others may wait on (a transaction, a lock) waits at neither gate: the
    /// statements it would wait for may be waiting for what it holds.
    pub(super) async fn admit_statement(
        &mut self,
        st: &mut Statement<'_>,
    ) -> Result<(), ErrPacket> {
        let holds_locks = self.state.holds_locks();
        let queue_timeout = self.config.queue_timeout;
        let limits = self.login.user.limits(&self.config);
        if limits.max_concurrency.is_some() {
            let user = &self.login.user.name;
            let gates = &self.ctx.user_gates;
            st.user_place = gates
                .enter(user, limits, queue_timeout, holds_locks)
                .await?;
        }
        let Some(set) = st.ruleset.take() else {
            return Ok(());
        };
        let facts = Facts {
            digest: st.digest,
            user: &self.login.user.name,
            schema: self.state.movable.schema.as_deref(),
            client: self.reg.info.ip,
        };
        let decision: Decision<'_> = set.decide(&facts);
        let wishes = decision.route().is_some();
        let admitted = decision.admit(&facts, queue_timeout, holds_locks).await?;
        if wishes {
            st.route.wish = Some(admitted.route_wish());
        }
        st.admitted = admitted;
        Ok(())
    }

    /// The statement's rule deadline (`limit`) on the backend the session holds:
    /// written into a query's text (MariaDB's `SET STATEMENT max_statement_time`, MySQL's
    /// hint on a SELECT), else a KILL QUERY at the deadline (an execution, or a statement
    /// the server takes no limit on).
    pub(super) fn deadline(&self, st: &Statement<'_>, packet: &[u8], limit: Duration) -> Deadline {
        let flavor = self
            .held
            .backend
            .as_ref()
            .map_or(Flavor::MariaDb, |b| Flavor::from_version(&b.server.version));
        let syntax = match flavor {
            Flavor::MariaDb => TimeLimitSyntax::MariaDb,
            Flavor::MySql => TimeLimitSyntax::MySql,
        };
        let quoting = self.state.quoting();
        let in_text = match (st.request, st.class) {
            (Request::AsSent(_), Some(class)) => {
                crate::pool::batches::query_text(packet).and_then(|sql| {
                    crate::classify::with_time_limit(sql, class, limit, syntax, quoting)
                })
            }
            _ => None,
        };
        match in_text {
            Some(sql) => Deadline::InText(super::commands::query_packet(&sql)),
            None => Deadline::Kill(self.kill_at(limit, flavor)),
        }
    }

    /// Arms the KILL QUERY of the statement about to run, `limit` from now.
    fn kill_at(&self, limit: Duration, flavor: Flavor) -> KillAtDeadline {
        let fired = Arc::new(AtomicBool::new(false));
        let (ctx, info) = (Arc::clone(&self.ctx), Arc::clone(&self.reg.info));
        let (target, key) = (self.held.target.clone(), self.login.key.clone());
        let (server, flag) = (self.held.server, Arc::clone(&fired));
        let task = tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            flag.store(true, Ordering::SeqCst);
            let pool = ctx.pool_for(server).unwrap_or(&ctx.pool);
            let target = std::borrow::Cow::Owned(target);
            let killed = kill_running_statement(|_| target, |_| pool, &key, &info).await;
            if let Err(e) = killed {
                tracing::warn!(
                    client = info.id,
                    "a query rule's timeout could not KILL QUERY: {e}"
                );
            }
        });
        KillAtDeadline {
            task,
            fired,
            err: statement_timeout(flavor),
        }
    }

    /// Counts the statement in its digest's row, if it is recorded: once its answer is
    /// relayed and what it held given back, or (no answer from the server: sluice answered
    /// it, or the answer did not come whole) as an error with no server time.
    pub(super) fn record_digest(&self, st: &Statement<'_>) {
        let (Some(arrived), Some(digest)) = (st.tally.arrived, st.digest) else {
            return;
        };
        // Queued until the relay's start (now, for a statement that never got that far).
        let (outcome, queued, server, at) = match st.tally.answer {
            Some((outcome, took)) => (
                Some(outcome),
                took.started.saturating_duration_since(arrived),
                took.ended.saturating_duration_since(took.started),
                took.ended,
            ),
            None => {
                let now = Instant::now();
                (
                    None,
                    now.saturating_duration_since(arrived),
                    Duration::ZERO,
                    now,
                )
            }
        };
        self.ctx.digests.record(&StatementRecord {
            digest,
            user: &self.login.user.name,
            schema: self.state.movable.schema.as_deref(),
            server: self.held.server,
            queued,
            server_time: server,
            rows_sent: outcome.map_or(0, |o| o.rows),
            rows_affected: outcome.map_or(0, |o| o.affected),
            error: outcome.is_none_or(|o| o.error),
            pinned: self.state.pin_reason().is_some(),
            replica: st.route.on_replica,
            pipelined: st.turn.is_some(),
            retried: st.tally.retried,
            at,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::digest;

    #[test]
    fn the_last_digest_serves_the_same_text_under_the_same_quoting_only() {
        let mut last = LastDigest::default();
        let d = digest(b"SELECT 1", Quoting::Backslash);
        assert!(last.get(b"SELECT 1", Quoting::Backslash).is_none());
        last.keep(b"SELECT 1", Quoting::Backslash, &d);
        assert_eq!(last.get(b"SELECT 1", Quoting::Backslash), Some(&d));
        assert!(last.get(b"SELECT 1", Quoting::QuotesOnly).is_none());
        assert!(last.get(b"SELECT 2", Quoting::Backslash).is_none());
        // The next text replaces it.
        let e = digest(b"SELECT 'a\\'b'", Quoting::QuotesOnly);
        last.keep(b"SELECT 'a\\'b'", Quoting::QuotesOnly, &e);
        assert!(last.get(b"SELECT 1", Quoting::Backslash).is_none());
        assert_eq!(last.get(b"SELECT 'a\\'b'", Quoting::QuotesOnly), Some(&e));
        // A long text is not kept, and leaves what was.
        let long = vec![b'1'; LAST_DIGEST_MAX + 1];
        last.keep(&long, Quoting::Backslash, &d);
        assert!(last.get(&long, Quoting::Backslash).is_none());
        assert_eq!(last.get(b"SELECT 'a\\'b'", Quoting::QuotesOnly), Some(&e));
    }
}
