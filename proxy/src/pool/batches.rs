//! Pipelined batches (`pipeline_depth`): stateless autocommit reads of several sessions,
//! sent to one backend connection in one write and answered in order.
//!
//! A MySQL server reads a connection's commands one after another and answers each in
//! turn, so several statements can be written at once and their answers read back in the
//! same order. That saves, per statement after the first, one send to the server (sluice's
//! most expensive system call on a loopback or a LAN) and the server's own wake-up.
//!
//! How a batch forms: the first session whose statement may be pipelined opens a batch
//! ([`Batches::open`]) and queues for an execution slot like any statement. Sessions whose
//! next statement may be pipelined too, with the same pool key and the same movable state,
//! join it ([`Batches::join`]) while it has room and while nobody else has queued for a
//! slot since its leader did: a member takes its leader's place in the FIFO queue, so it
//! never overtakes a statement that queued before it. Once the leader has its slot and its
//! backend it closes the batch and writes every member's statement after its own.
//!
//! How the answers come back: the backend, its slot and the members still to answer form a
//! [`Chain`] that is handed from session to session ([`Baton`]). Each session relays its own
//! answer to its own client, with its own write timeout, then hands the chain on; the last
//! one gives backend and slot back as after any statement.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{PooledBackend, Slot};
use crate::conn::backend::{MovableState, PoolKey};
use crate::conn::BackendConn;
use crate::protocol::{ErrPacket, ResponseKind};
use crate::stats::{PipelineStats, Stats};

/// A statement that joined a batch: what it runs, and where its turn arrives.
pub(crate) struct Member {
    pub(crate) work: Work,
    pub(crate) tx: oneshot::Sender<Baton>,
}

/// What a member runs.
pub(crate) enum Work {
    /// A COM_QUERY, framed as it goes to the backend.
    Query(Bytes),
    /// A prepared statement's execution, whose packet names the statement by the batch
    /// backend's own id: it is built once the backend is known.
    Execute(Box<dyn ForBackend<'static> + Send>),
}

/// A statement addressed to one backend: a query goes as the client sent it, a prepared
/// statement's execution names the statement by that backend's own id. A session's own
/// statement (`session::statement::Request`) and a batch member's execution are both
/// built this way; `'a` is what a packet may borrow from (a query's bytes as the client sent
/// them).
pub(crate) trait ForBackend<'a> {
    /// The framed packet for `backend`, or `None` when it is an execution of a statement
    /// not prepared there.
    fn packet_for(&self, backend: &mut BackendConn) -> Option<Cow<'a, [u8]>>;
    /// The statement's text as the server shows it while running it (PROCESSLIST).
    fn text(&self) -> Option<&[u8]>;
}

impl Work {
    /// The answer it gets: a text result set, or a binary one.
    pub(crate) fn response(&self) -> ResponseKind {
        match self {
            Work::Query(_) => ResponseKind::Query,
            Work::Execute(_) => ResponseKind::Execute,
        }
    }

    /// The statement's text as the server shows it while running it (PROCESSLIST).
    pub(crate) fn text(&self) -> Option<&[u8]> {
        match self {
            Work::Query(packet) => query_text(packet),
            Work::Execute(e) => e.text(),
        }
    }

    /// Its packet for the batch's backend; `None`: an execution of a statement not prepared
    /// there, which then runs on its own (preparing it here would hold back the whole batch).
    pub(crate) fn packet_for(&self, backend: &mut BackendConn) -> Option<Bytes> {
        match self {
            Work::Query(packet) => Some(packet.clone()),
            Work::Execute(e) => e.packet_for(backend).map(|p| Bytes::from(p.into_owned())),
        }
    }
}

/// The SQL of a framed COM_QUERY in one packet.
pub(crate) fn query_text(packet: &[u8]) -> Option<&[u8]> {
    match packet {
        [l0, l1, l2, _, 0x03, sql @ ..]
            if usize::from_le_bytes([*l0, *l1, *l2, 0, 0, 0, 0, 0]) == sql.len() + 1 =>
        {
            Some(sql)
        }
        _ => None,
    }
}

/// What a member receives when its turn comes.
pub(crate) enum Baton {
    /// The backend is at this member's answer.
    Run(Box<Chain>),
    /// The batch's backend failed before this member's answer began. Its statement is a
    /// read, so it runs again on its own; the client has seen nothing of it.
    Retry,
    /// The leader got no slot or no backend: the error its own client got too.
    Fail(ErrPacket),
}

/// The members whose answers come after the current one, in order.
pub(crate) type Rest = std::vec::IntoIter<Member>;

/// The members still waiting behind an answer that holds them up (slow, or its client not
/// reading) stop waiting: each runs again on its own (`Baton::Retry`: a read whose client has
/// seen nothing), and its copy's answer in the batch is read and dropped when it comes
/// (`session::Session::hand_on` finds nobody waiting for it).
pub(crate) fn cut_loose(rest: &mut Rest, stats: &PipelineStats) {
    for m in rest.as_mut_slice() {
        let (dead, _) = oneshot::channel();
        if std::mem::replace(&mut m.tx, dead)
            .send(Baton::Retry)
            .is_ok()
        {
            Stats::incr(&stats.cuts);
        }
    }
}

/// The backend of a batch on its way through the batch's sessions.
pub(crate) struct Chain {
    pub(crate) backend: PooledBackend,
    pub(crate) slot: Slot,
    /// The members whose answers come after the current one, in order.
    pub(crate) rest: Rest,
    /// A statement of the batch changed session state nothing predicted: the backend is
    /// closed once the batch is over, never pooled.
    pub(crate) dirty: bool,
    /// When the batch was written, and when the answer before the next one ended.
    pub(crate) turn: Turn,
}

/// A batch's times as its backend goes from answer to answer. A member's statement time
/// (what its client waited for) counts from the write. The server runs the statements one
/// after another, so each holds the backend only from the end of the answer before it: that
/// is the time the pool's mean statement time counts, or batching would inflate it by the
/// statements ahead and so talk itself out of batching (`Slots::statement_cost`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    pub(crate) sent: Instant,
    /// Where the current answer's hold on the backend began.
    pub(crate) from: Instant,
}

impl Turn {
    /// A batch written at `sent`: its first answer holds the backend from then.
    pub(crate) fn new(sent: Instant) -> Turn {
        Turn { sent, from: sent }
    }
    /// The current answer ended at `ended`: returns where its hold began; the next one's
    /// begins at `ended`.
    pub(crate) fn answered(&mut self, ended: Instant) -> Instant {
        std::mem::replace(&mut self.from, ended)
    }
}

/// A pool's open batches (those whose leader has not written them yet).
#[derive(Default)]
pub(crate) struct Batches {
    open: Mutex<Vec<Open>>,
    next_id: AtomicU64,
}

struct Open {
    id: u64,
    key: PoolKey,
    state: MovableState,
    /// The slot queue's arrival count once the leader queued: joining is allowed while it
    /// has not grown past this (`Slots::arrivals`).
    ticket: u64,
    /// How many more members fit.
    room: usize,
    members: Vec<Member>,
}

impl Batches {
    /// Opens a batch led by a statement that is about to queue for a slot as arrival
    /// `ticket`, with room for `room` members.
    pub(crate) fn open(
        self: &Arc<Self>,
        key: &PoolKey,
        state: &MovableState,
        ticket: u64,
        room: usize,
    ) -> OpenBatch {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut open) = self.open.lock() {
            open.push(Open {
                id,
                key: key.clone(),
                state: state.clone(),
                ticket,
                room,
                members: Vec::new(),
            });
        }
        OpenBatch {
            batches: Arc::clone(self),
            id,
        }
    }

    /// Joins an open batch of the same key and state, if one has room and nobody queued
    /// for a slot since its leader (`arrivals` is the slot queue's count now).
    /// `work` is built only when the batch takes it.
    pub(crate) fn join(
        &self,
        key: &PoolKey,
        state: &MovableState,
        arrivals: u64,
        work: impl FnOnce() -> Work,
    ) -> Option<oneshot::Receiver<Baton>> {
        let mut open = self.open.lock().ok()?;
        let batch = open
            .iter_mut()
            .find(|b| b.room > 0 && arrivals <= b.ticket && b.key == *key && b.state == *state)?;
        let (tx, rx) = oneshot::channel();
        batch.members.push(Member { work: work(), tx });
        batch.room -= 1;
        Some(rx)
    }

    fn take(&self, id: u64) -> Vec<Member> {
        let Ok(mut open) = self.open.lock() else {
            return Vec::new();
        };
        match open.iter().position(|b| b.id == id) {
            Some(i) => open.swap_remove(i).members,
            None => Vec::new(),
        }
    }
}

/// A batch its leader has opened and not yet written. Dropped unclosed (the leader's
/// session ended first), its members run their statements on their own.
pub(crate) struct OpenBatch {
    batches: Arc<Batches>,
    id: u64,
}

impl OpenBatch {
    /// No more members: the ones that joined, in the order they did.
    pub(crate) fn close(self) -> Vec<Member> {
        let members = self.batches.take(self.id);
        std::mem::forget(self);
        members
    }

    /// The leader's statement failed before it ran: every member gets the same error.
    pub(crate) fn fail(self, err: &ErrPacket) {
        for m in self.close() {
            let _ = m.tx.send(Baton::Fail(err.clone()));
        }
    }
}

impl Drop for OpenBatch {
    fn drop(&mut self) {
        // Dropping the senders tells each member to run on its own (`Baton::Retry`).
        drop(self.batches.take(self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_holds_the_backend_from_the_end_of_the_one_before() {
        let sent = Instant::now();
        let ms = std::time::Duration::from_millis;
        let mut turn = Turn::new(sent);
        // Three answers ending 3, 4 and 9 ms after the write: holds of 3, 1 and 5 ms, which
        // add up to the batch's 9 ms, while every member's own wait counts from the write.
        assert_eq!(turn.answered(sent + ms(3)), sent);
        assert_eq!(turn.answered(sent + ms(4)), sent + ms(3));
        assert_eq!(turn.answered(sent + ms(9)), sent + ms(4));
        assert_eq!(turn.from, sent + ms(9));
        assert_eq!(turn.sent, sent);
    }

    fn q(sql: &'static [u8]) -> impl FnOnce() -> Work {
        move || Work::Query(Bytes::from_static(sql))
    }

    fn key(user: &str) -> PoolKey {
        PoolKey {
            user: Arc::from(user),
            caps: 0,
            collation: 45,
            globals: 0,
        }
    }

    #[test]
    fn members_join_in_order_while_there_is_room_and_nobody_queued_after_the_leader() {
        let batches = Arc::new(Batches::default());
        let state = MovableState::default();
        let open = batches.open(&key("app"), &state, 7, 2);
        assert!(batches.join(&key("app"), &state, 7, q(b"a")).is_some());
        // Someone else queued for a slot after the leader: joining now would overtake them.
        assert!(batches.join(&key("app"), &state, 8, q(b"x")).is_none());
        // Another key or another state never shares a backend.
        assert!(batches.join(&key("other"), &state, 7, q(b"x")).is_none());
        let other_state = MovableState {
            schema: Some(b"db2".to_vec()),
            ..MovableState::default()
        };
        assert!(batches
            .join(&key("app"), &other_state, 7, q(b"x"))
            .is_none());
        assert!(batches.join(&key("app"), &state, 6, q(b"b")).is_some());
        // Full.
        assert!(batches.join(&key("app"), &state, 7, q(b"c")).is_none());
        let members: Vec<Bytes> = open
            .close()
            .into_iter()
            .map(|m| match m.work {
                Work::Query(p) => p,
                Work::Execute(_) => panic!("only queries joined"),
            })
            .collect();
        assert_eq!(
            members,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
        // Closed: nobody joins any more.
        assert!(batches.join(&key("app"), &state, 7, q(b"d")).is_none());
    }

    #[test]
    fn a_batch_dropped_unwritten_sends_its_members_off_on_their_own() {
        let batches = Arc::new(Batches::default());
        let state = MovableState::default();
        let open = batches.open(&key("app"), &state, 1, 4);
        let mut rx = batches.join(&key("app"), &state, 1, q(b"a")).unwrap();
        drop(open);
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }

    #[test]
    fn a_failed_leader_gives_its_members_its_error() {
        let batches = Arc::new(Batches::default());
        let state = MovableState::default();
        let open = batches.open(&key("app"), &state, 1, 4);
        let mut rx = batches.join(&key("app"), &state, 1, q(b"a")).unwrap();
        let err = ErrPacket::from_code(crate::protocol::codes::QUEUE_TIMEOUT, b"no slot");
        open.fail(&err);
        match rx.try_recv() {
            Ok(Baton::Fail(e)) => assert_eq!(e, err),
            _ => panic!("expected the leader's error"),
        }
    }
}
