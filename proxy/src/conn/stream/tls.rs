//! Switching a `PacketStream` to TLS in place: the server side after a client's SSLRequest,
//! the client side towards a backend.

use tokio_rustls::TlsAcceptor;

use super::{PacketStream, Transport};
use crate::conn::Error;

impl PacketStream {
    /// Runs the server side of a TLS handshake on the plain socket (after the client's
    /// SSLRequest). Bytes already read past the SSLRequest are the start of the client's
    /// ClientHello (clients send it without waiting), so they are fed to rustls first.
    pub async fn upgrade_server_tls(&mut self, acceptor: &TlsAcceptor) -> Result<(), Error> {
        let Transport::Plain(tcp) = std::mem::replace(&mut self.socket, Transport::Detached) else {
            return Err(Error::Io(std::io::ErrorKind::InvalidInput.into()));
        };
        let early = self.rbuf.split();
        let mut fed: std::io::Result<()> = Ok(());
        let tls = acceptor
            .accept_with(tcp, |conn| fed = feed_early_bytes(conn, &early))
            .await?;
        fed?;
        self.socket = Transport::Tls(Box::new(tls));
        Ok(())
    }

    /// Runs the client side of a TLS handshake with a backend (after sluice's SSLRequest).
    /// The server says nothing between the SSLRequest and the handshake, so nothing is buffered.
    pub async fn upgrade_client_tls(
        &mut self,
        connector: &tokio_rustls::TlsConnector,
        name: rustls::pki_types::ServerName<'static>,
    ) -> Result<(), Error> {
        let Transport::Plain(tcp) = std::mem::replace(&mut self.socket, Transport::Detached) else {
            return Err(Error::Io(std::io::ErrorKind::InvalidInput.into()));
        };
        let tls = connector.connect(name, tcp).await.map_err(Error::Tls)?;
        self.socket = Transport::TlsClient(Box::new(tls));
        Ok(())
    }
}

/// Hands bytes that were read before the upgrade to rustls, as if they came off the socket.
fn feed_early_bytes(conn: &mut rustls::ServerConnection, mut early: &[u8]) -> std::io::Result<()> {
    while !early.is_empty() {
        if conn.read_tls(&mut early)? == 0 {
            break;
        }
        conn.process_new_packets()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    }
    Ok(())
}
