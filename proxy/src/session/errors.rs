//! The ERR packets the session loop sends on its own account (login limits, framing
//! faults, shutdown, KILL, an interrupted pipelined statement, a query rule's deadline): each code from `protocol::codes`, each message
//! saying what to do, and what the client hears of a pool error ([`pool_error_packet`]).

use super::fmt_ms;
use crate::pool;
use crate::protocol::{codes, ErrPacket};

/// The client is over `max_client_connections`.
pub(crate) fn too_many_clients(max: u32) -> ErrPacket {
    let msg = format!(
        "Too many connections: sluice accepts at most max_client_connections={max} clients"
    );
    ErrPacket::from_code(codes::CON_COUNT, msg.as_bytes())
}

/// The login's bytes could not be framed (an oversized length, an HTTP request).
pub(crate) fn bad_handshake(p: &crate::protocol::Error) -> ErrPacket {
    let msg = format!("Bad handshake: {p}");
    ErrPacket::from_code(codes::HANDSHAKE, msg.as_bytes())
}

/// A command that does not start with sequence id 0.
pub(crate) fn command_out_of_order(first_seq: u8) -> ErrPacket {
    let msg = format!(
        "Got packets out of order: a command must start with sequence id 0, got {first_seq}"
    );
    ErrPacket::from_code(codes::NET_PACKETS_OUT_OF_ORDER, msg.as_bytes())
}

/// A packet inside a command with the wrong sequence id.
pub(crate) fn packets_out_of_order(expected: u8, got: u8) -> ErrPacket {
    let msg = format!("Got packets out of order (expected sequence id {expected}, got {got})");
    ErrPacket::from_code(codes::NET_PACKETS_OUT_OF_ORDER, msg.as_bytes())
}

/// A packet over `max_allowed_packet`.
pub(crate) fn packet_too_large(len: usize, max: usize) -> ErrPacket {
    let msg = format!(
        "Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max}); raise max_allowed_packet in sluice and the server"
    );
    ErrPacket::from_code(codes::NET_PACKET_TOO_LARGE, msg.as_bytes())
}

/// The client stalled mid-packet.
pub(crate) fn read_timeout() -> ErrPacket {
    ErrPacket::from_code(
        codes::NET_READ_INTERRUPTED,
        &b"Got timeout reading communication packets: the client stalled mid-packet"[..],
    )
}

/// Sent between statements when sluice stops.
pub(crate) fn shutdown() -> ErrPacket {
    ErrPacket::from_code(
        codes::SHUTDOWN,
        &b"Server shutdown in progress: sluice is stopping; reconnect to another instance"[..],
    )
}

/// Sent (MySQL only) when the client was idle for its session's wait_timeout, as MySQL
/// 8.0.24+ sends it before it closes the connection.
pub(crate) fn interaction_timeout() -> ErrPacket {
    ErrPacket::from_code(
        codes::CLIENT_INTERACTION_TIMEOUT,
        &b"The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior."[..],
    )
}

/// Sent when KILL CONNECTION ended this session.
pub(crate) fn killed() -> ErrPacket {
    ErrPacket::from_code(codes::CONNECTION_KILLED, &b"Connection was killed"[..])
}

/// A statement a KILL QUERY ended (sluice's own answer for a pipelined one, the text and
/// code the server gives).
pub(crate) fn interrupted() -> ErrPacket {
    ErrPacket::from_code(codes::QUERY_INTERRUPTED, b"Query execution was interrupted")
}

/// What the client gets in place of a final ERR `payload` (`relay::RelayOptions::
/// timed_out`): the server's timeout error when it is the ER_QUERY_INTERRUPTED of the KILL
/// at the statement's deadline (which set the flag before it went out).
pub(crate) fn deadline_err<'e>(
    timed_out: Option<(&std::sync::atomic::AtomicBool, &'e ErrPacket)>,
    payload: &[u8],
) -> Option<&'e ErrPacket> {
    let (fired, err) = timed_out?;
    let code = codes::QUERY_INTERRUPTED.code.to_le_bytes();
    let killed = payload.first() == Some(&0xFF) && payload.get(1..3) == Some(&code[..]);
    (killed && fired.load(std::sync::atomic::Ordering::SeqCst)).then_some(err)
}

/// Whether an answer is the server's own for a statement out of time (MariaDB's 1969,
/// MySQL's 3024).
pub(crate) fn out_of_time_code(code: u16) -> bool {
    code == codes::STATEMENT_TIMEOUT.code || code == codes::QUERY_TIMEOUT.code
}

/// The server's own error for a statement out of time, which a KILL at a rule's deadline
/// answers the client with.
pub(crate) fn statement_timeout(flavor: crate::topology::Flavor) -> ErrPacket {
    match flavor {
        crate::topology::Flavor::MariaDb => ErrPacket::from_code(
            codes::STATEMENT_TIMEOUT,
            &b"Query execution was interrupted (max_statement_time exceeded)"[..],
        ),
        crate::topology::Flavor::MySql => ErrPacket::from_code(
            codes::QUERY_TIMEOUT,
            &b"Query execution was interrupted, maximum statement execution time exceeded"[..],
        ),
    }
}

/// The one place pool errors become client-visible errors.
pub(crate) fn pool_error_packet(e: &pool::Error, config: &crate::config::Config) -> ErrPacket {
    match e {
        pool::Error::QueueTimeout { waited, pool_size, queued } => ErrPacket::from_code(
            codes::QUEUE_TIMEOUT,
            format!(
                "sluice: no backend became free within queue_timeout ({:?}, waited {:?}); \
                 pool_size={pool_size}, {queued} statements queued. Retry, raise pool_size or queue_timeout, \
                 or look for long transactions in SHOW CLIENTS",
                config.queue_timeout, waited
            )
            .as_bytes(),
        ),
        pool::Error::Connect { addr, user, kind, source } => {
            // A login refusal keeps the server's own code (1045, 1049 ...) so that drivers
            // treat it as the permanent error it is; the text says it is sluice's backend login.
            let (code, state) = match source {
                crate::conn::Error::Server(e) => (e.code, String::from_utf8_lossy(&e.sql_state).into_owned()),
                _ => (
                    codes::BACKEND_UNREACHABLE.code,
                    codes::BACKEND_UNREACHABLE.sql_state.to_string(),
                ),
            };
            ErrPacket::new(
                code,
                &state,
                format!(
                    "sluice cannot log in to its backend MySQL server at '{addr}' as '{user}' ({kind}): {source}; {}",
                    connect_advice(*kind)
                )
                .as_bytes(),
            )
        }
        pool::Error::BackendDown { view, waited } => {
            let down_for = view.down_since.map(|t| t.elapsed()).unwrap_or_default();
            let last = view.last_error.as_ref().map_or_else(
                || "none".to_string(),
                |e| format!("{} ({}, {} ago)", e.message, e.kind, fmt_ms(e.at.elapsed())),
            );
            ErrPacket::from_code(
                codes::BACKEND_UNREACHABLE,
                format!(
                    "sluice cannot reach its backend MySQL server at '{}' (down for {}, waited {} of backend_down_wait {}); \
                     last connect error: {last}. sluice keeps reconnecting; retry later",
                    view.addr,
                    fmt_ms(down_for),
                    fmt_ms(*waited),
                    fmt_ms(config.backend_down_wait),
                )
                .as_bytes(),
            )
        }
        pool::Error::PinLimit(r) => ErrPacket::from_code(codes::PIN_LIMIT, pin_refusal_text(r).as_bytes()),
        pool::Error::NoAnswer { addr, waited } => ErrPacket::from_code(
            codes::BACKEND_UNREACHABLE,
            format!(
                "sluice got no answer from its backend MySQL server at '{addr}' within {} while checking the \
                 default database of this login; retry",
                fmt_ms(*waited)
            )
            .as_bytes(),
        ),
        pool::Error::Closed => ErrPacket::from_code(codes::SHUTDOWN, b"Server shutdown in progress: sluice is stopping"),
    }
}

/// What an operator should look at after a connect failure.
fn connect_advice(kind: crate::stats::ConnectFailure) -> &'static str {
    use crate::stats::ConnectFailure as F;
    match kind {
        F::AccessDenied => {
            "check backend_user / backend_password in sluice's config and the account's grants"
        }
        F::UnknownDatabase => "check that the database exists on the backend",
        F::Tls => "check backend_tls, backend_tls_ca and the server's certificate",
        F::Protocol => "the backend speaks a protocol or auth plugin sluice does not support",
        F::ServerError => "the server refused this login; the message above says why",
        _ => "retry; sluice keeps reconnecting",
    }
}

/// What a client hears when its statement could not pin: the cap, where it came from, who
/// holds the places, and what to raise.
fn pin_refusal_text(r: &pool::PinRefusal) -> String {
    let from = r
        .from_server
        .map(|n| format!(", from the server's max_connections={n}"))
        .unwrap_or_default();
    let by: Vec<String> = r.by.iter().map(|(h, n)| format!("{h} {n}")).collect();
    format!(
        "sluice cannot pin this session to a backend connection for its {}: all {} connections that \
         pinned sessions may use are taken (max_backend_connections={}{from}, less pool_size={} kept \
         for statements that do not pin); {} sessions are pinned ({}). Waited {} (pin_wait). The \
         statement did not run. Raise max_backend_connections (and the server's max_connections), or \
         have sessions drop temporary tables, user variables and locks they no longer need; then retry",
        r.wanted,
        r.cap,
        r.max_open,
        r.pool_size,
        r.pinned,
        if by.is_empty() { "none".to_string() } else { by.join(", ") },
        fmt_ms(r.waited),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_carries_its_code() {
        assert_eq!(too_many_clients(5).code, 1040);
        assert_eq!(command_out_of_order(3).code, 1156);
        assert_eq!(packets_out_of_order(1, 3).code, 1156);
        assert_eq!(packet_too_large(9, 8).code, 1153);
        assert_eq!(read_timeout().code, 1159);
        assert_eq!(shutdown().code, 1053);
        assert_eq!(killed().code, 1927);
        assert_eq!(&killed().sql_state, b"70100");
    }

    use crate::topology::Flavor;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn payload(code: u16) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        ErrPacket::new(code, "70100", &b"Query execution was interrupted"[..]).encode(&mut out);
        out.to_vec()
    }

    #[test]
    fn only_the_deadlines_own_kill_becomes_the_timeout_error() {
        let err = statement_timeout(Flavor::MariaDb);
        assert_eq!(err.code, 1969);
        assert_eq!(statement_timeout(Flavor::MySql).code, 3024);
        let fired = AtomicBool::new(false);
        let interrupted = payload(codes::QUERY_INTERRUPTED.code);
        // Before the KILL went out, a 1317 is someone else's (a client's KILL QUERY).
        assert!(deadline_err(Some((&fired, &err)), &interrupted).is_none());
        fired.store(true, Ordering::SeqCst);
        let replaced = deadline_err(Some((&fired, &err)), &interrupted);
        assert_eq!(replaced.map(|e| e.code), Some(1969));
        // Any other answer is the statement's own.
        assert!(deadline_err(Some((&fired, &err)), &payload(1146)).is_none());
        assert!(deadline_err(Some((&fired, &err)), &[0x00, 0, 0]).is_none());
        assert!(deadline_err(None, &interrupted).is_none());
        assert!(out_of_time_code(1969) && out_of_time_code(3024) && !out_of_time_code(1317));
    }
}
