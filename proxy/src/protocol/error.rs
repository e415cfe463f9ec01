//! Errors of the pure wire-format layer.
//!
//! Decoders see untrusted bytes from clients and backends; every failure is one of these
//! values, never a panic. The session layer maps them to client-visible ERR packets
//! (`codes::NET_PACKETS_OUT_OF_ORDER`, `codes::NET_PACKET_TOO_LARGE`, ...) or closes the socket.

/// A wire-format error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The packet ended before a field that must be present.
    #[error("truncated packet: {what}")]
    Truncated { what: &'static str },
    /// A field has a value the protocol does not allow.
    #[error("malformed packet: {what}")]
    Malformed { what: &'static str },
    /// A chunk of a logical packet (or a reply) carried an unexpected sequence id.
    #[error("packets out of order: expected sequence id {expected}, got {got}")]
    SequenceMismatch { expected: u8, got: u8 },
    /// A logical packet is larger than the configured limit.
    #[error("packet of {len} bytes is larger than the limit of {max} bytes")]
    PacketTooLarge { len: usize, max: usize },
}

/// Result alias of the protocol layer.
pub type Result<T> = std::result::Result<T, Error>;
