//! The answers sluice gives a client itself: an OK, an ERR for the current command, and the
//! end of a session it ends (a protocol error, a shutdown, a KILL, the session's
//! wait_timeout).

use bytes::BytesMut;

use super::{errors, Session};
use crate::conn::{self, client::send_err};
use crate::protocol::{ErrPacket, OkPacket};
use crate::stats::{ClientCloseReason, Stats};

impl Session {
    pub(super) async fn send_ok(&mut self, seq: u8) -> Result<(), conn::Error> {
        let mut ok = OkPacket::new(self.state.local_status());
        ok.session_state.clear();
        let mut out = BytesMut::new();
        ok.encode(self.login.caps, &mut out);
        self.client.send_packet(seq, &out).await.map(|_| ())
    }

    /// Sends an ERR for the current command; a client that is gone ends the session.
    pub(super) async fn reply_err(
        &mut self,
        seq: u8,
        err: &ErrPacket,
    ) -> Result<(), ClientCloseReason> {
        Stats::incr(&self.ctx.stats.client_errors);
        let mut out = BytesMut::new();
        err.encode(&mut out);
        self.client
            .send_packet(seq, &out)
            .await
            .map(|_| ())
            .map_err(|_| ClientCloseReason::Eof)
    }

    pub(super) async fn fatal(&mut self, err: &ErrPacket, seq: u8) -> ClientCloseReason {
        tracing::info!(
            client = self.reg.info.id,
            code = err.code,
            "closing client: {}",
            String::from_utf8_lossy(&err.message)
        );
        send_err(&mut self.client, seq, err).await;
        ClientCloseReason::ProtocolError
    }

    pub(super) async fn protocol_error(&mut self, e: conn::Error) -> ClientCloseReason {
        use crate::protocol::Error as P;
        match e {
            conn::Error::Protocol(P::PacketTooLarge { len, max }) => {
                // The answer's sequence id follows the command's last packet, as the
                // server's does: read (and dropped) up to that packet's header, answered at
                // once, and the rest dropped as it comes (briefly), so that the client,
                // still writing, reads the answer before the connection ends, as the
                // server ends it.
                let stall = self.config.client_login_timeout;
                let mut skip = crate::protocol::frame::Skip::default();
                let Ok(last) = self.client.discard_packet(&mut skip, stall, false).await else {
                    return ClientCloseReason::ProtocolError;
                };
                let err = errors::packet_too_large(len, max);
                let reason = self.fatal(&err, last.wrapping_add(1)).await;
                let _ = self.client.discard_packet(&mut skip, stall, true).await;
                reason
            }
            conn::Error::Protocol(P::SequenceMismatch { expected, got }) => {
                let err = errors::packets_out_of_order(expected, got);
                self.fatal(&err, got.wrapping_add(1)).await
            }
            conn::Error::Timeout(_) => self.fatal(&errors::read_timeout(), 1).await,
            conn::Error::Truncated | conn::Error::Closed => ClientCloseReason::Eof,
            _ => ClientCloseReason::IoError,
        }
    }

    /// The client sent nothing for its session's wait_timeout: the connection ends as the
    /// server ends it. MariaDB says nothing and resets it (the driver's next command then
    /// finds the server gone, 2006); MySQL first sends ER_CLIENT_INTERACTION_TIMEOUT.
    pub(super) async fn idle_timed_out(&mut self) -> ClientCloseReason {
        tracing::info!(
            client = self.reg.info.id,
            "idle for the session's wait_timeout; closing the client's connection"
        );
        let server = self.ctx.handshake.server.get();
        if server.is_some_and(|s| !s.is_mariadb()) {
            send_err(&mut self.client, 0, &errors::interaction_timeout()).await;
            self.client.shutdown().await;
        } else {
            self.client.reset_on_close();
        }
        ClientCloseReason::IdleTimeout
    }

    /// Ends the session between statements (shutdown, KILL) with `err` and `reason`.
    pub(super) async fn goodbye(
        &mut self,
        err: ErrPacket,
        reason: ClientCloseReason,
    ) -> ClientCloseReason {
        send_err(&mut self.client, 0, &err).await;
        self.client.shutdown().await;
        reason
    }
}
