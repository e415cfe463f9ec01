//! The ERR packets the session loop sends on its own account (login limits, framing
//! faults, shutdown, KILL, a lost backend): each code from `protocol::codes`, each message
//! saying what to do. Pool and admission errors are `acquire::pool_error_packet`'s.

use crate::protocol::{codes, ErrPacket};

/// The client is over `max_client_connections`.
pub fn too_many_clients(max: u32) -> ErrPacket {
    let msg = format!(
        "Too many connections: sluice accepts at most max_client_connections={max} clients"
    );
    ErrPacket::from_code(codes::CON_COUNT, msg.as_bytes())
}

/// The login's bytes could not be framed (an oversized length, an HTTP request).
pub fn bad_handshake(p: &crate::protocol::Error) -> ErrPacket {
    let msg = format!("Bad handshake: {p}");
    ErrPacket::from_code(codes::HANDSHAKE, msg.as_bytes())
}

/// A command that does not start with sequence id 0.
pub fn command_out_of_order(first_seq: u8) -> ErrPacket {
    let msg = format!(
        "Got packets out of order: a command must start with sequence id 0, got {first_seq}"
    );
    ErrPacket::from_code(codes::NET_PACKETS_OUT_OF_ORDER, msg.as_bytes())
}

/// A packet inside a command with the wrong sequence id.
pub fn packets_out_of_order(expected: u8, got: u8) -> ErrPacket {
    let msg = format!("Got packets out of order (expected sequence id {expected}, got {got})");
    ErrPacket::from_code(codes::NET_PACKETS_OUT_OF_ORDER, msg.as_bytes())
}

/// A packet over `max_allowed_packet`.
pub fn packet_too_large(len: usize, max: usize) -> ErrPacket {
    let msg = format!(
        "Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max}); raise max_allowed_packet in sluice and the server"
    );
    ErrPacket::from_code(codes::NET_PACKET_TOO_LARGE, msg.as_bytes())
}

/// The client stalled mid-packet.
pub fn read_timeout() -> ErrPacket {
    ErrPacket::from_code(
        codes::NET_READ_INTERRUPTED,
        &b"Got timeout reading communication packets: the client stalled mid-packet"[..],
    )
}

/// Sent between statements when sluice stops.
pub fn shutdown() -> ErrPacket {
    ErrPacket::from_code(
        codes::SHUTDOWN,
        &b"Server shutdown in progress: sluice is stopping; reconnect to another instance"[..],
    )
}

/// Sent when KILL CONNECTION ended this session.
pub fn killed() -> ErrPacket {
    ErrPacket::from_code(codes::CONNECTION_KILLED, &b"Connection was killed"[..])
}

/// The backend died mid-statement; `lost_state`: a transaction or pinned state went with it.
pub fn backend_lost(addr: &str, lost_state: bool) -> ErrPacket {
    let msg = format!(
        "Lost connection to backend {addr} during query; {}",
        if lost_state {
            "the open transaction or session state is gone, reconnect"
        } else {
            "the statement may or may not have run, the next one gets a fresh backend"
        }
    );
    ErrPacket::from_code(codes::BACKEND_LOST, msg.as_bytes())
}

/// A statement a KILL QUERY ended (sluice's own answer for a pipelined one, the text and
/// code the server gives).
pub fn interrupted() -> ErrPacket {
    ErrPacket::from_code(codes::QUERY_INTERRUPTED, b"Query execution was interrupted")
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
        assert_eq!(backend_lost("h:1", true).code, 9004);
    }
}
