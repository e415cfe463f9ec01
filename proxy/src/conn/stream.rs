//! `PacketStream`: one socket (TCP, TLS over TCP, or a backend's Unix socket) with a read
//! buffer and a write buffer, framed as MySQL packets.
//!
//! It knows the 4-byte header (through `protocol::frame`) and nothing about what packets mean.
//! Reads hand out whole logical packets in place (no copy); writes are buffered until `flush`.

use bytes::{Buf, BytesMut};
use std::borrow::Cow;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::server::TlsStream;

use super::Error;

mod tls;
use crate::config::Endpoint;
use crate::protocol::frame::{self, LogicalSpan};

/// Read size for client sockets: commands are small, and ten thousand idle clients should
/// not each hold a large buffer.
pub const CLIENT_READ_CHUNK: usize = 4 * 1024;
/// Read size for backend sockets, which stream results.
pub const BACKEND_READ_CHUNK: usize = 64 * 1024;
/// Buffered output is flushed early once it grows past this, so big results stream.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

/// The byte transport under the framing. Plain is the hot path: one `match` away from the
/// `TcpStream`, no extra indirection.
enum Transport {
    Plain(TcpStream),
    /// Boxed: a rustls connection is ~1 KiB and most clients never use it.
    Tls(Box<TlsStream<TcpStream>>),
    /// sluice's side of a TLS backend connection.
    TlsClient(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// A backend on this host, through its Unix socket (no TCP stack on either side).
    Unix(UnixStream),
    /// Only while `upgrade_server_tls` moves the socket; a failed upgrade leaves it here.
    Detached,
}

pub struct PacketStream {
    socket: Transport,
    rbuf: BytesMut,
    wbuf: BytesMut,
    max_payload: usize,
    read_chunk: usize,
    /// Total bytes written, for the bytes counters.
    written: u64,
    /// `flush_within` gave up while TLS still held bytes it had taken: the next flush
    /// pushes them out even with nothing queued.
    unflushed: bool,
}

impl PacketStream {
    pub fn new(socket: TcpStream, max_payload: usize) -> Self {
        Self::with_read_chunk(socket, max_payload, CLIENT_READ_CHUNK)
    }

    pub fn with_read_chunk(socket: TcpStream, max_payload: usize, read_chunk: usize) -> Self {
        let _ = socket.set_nodelay(true);
        PacketStream {
            socket: Transport::Plain(socket),
            // Allocated on first use: an idle client costs (almost) nothing.
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            max_payload,
            read_chunk,
            written: 0,
            unflushed: false,
        }
    }

    /// Opens the socket to `endpoint`, framed, with `read_chunk`-sized reads.
    pub async fn connect(
        endpoint: &Endpoint,
        max_payload: usize,
        read_chunk: usize,
    ) -> std::io::Result<PacketStream> {
        Ok(match endpoint {
            Endpoint::Tcp(addr) => Self::with_read_chunk(
                TcpStream::connect(addr.as_str()).await?,
                max_payload,
                read_chunk,
            ),
            Endpoint::Unix(path) => {
                Self::unix(UnixStream::connect(path).await?, max_payload, read_chunk)
            }
        })
    }

    /// A backend connection over a Unix socket.
    pub fn unix(socket: UnixStream, max_payload: usize, read_chunk: usize) -> Self {
        PacketStream {
            socket: Transport::Unix(socket),
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            max_payload,
            read_chunk,
            written: 0,
            unflushed: false,
        }
    }

    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Releases buffer memory a big packet left behind (call between commands).
    pub fn trim(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > self.read_chunk {
            self.rbuf = BytesMut::new();
        }
        if self.wbuf.is_empty() && self.wbuf.capacity() > self.read_chunk {
            self.wbuf = BytesMut::new();
        }
    }

    /// This end's address (what a server sees the connection come from, without NAT).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match &self.socket {
            Transport::Plain(s) => s.local_addr().ok(),
            Transport::Tls(s) => s.get_ref().0.local_addr().ok(),
            Transport::TlsClient(s) => s.get_ref().0.local_addr().ok(),
            Transport::Unix(_) | Transport::Detached => None,
        }
    }

    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        match &self.socket {
            Transport::Plain(s) => s.peer_addr().ok(),
            Transport::Tls(s) => s.get_ref().0.peer_addr().ok(),
            Transport::TlsClient(s) => s.get_ref().0.peer_addr().ok(),
            Transport::Unix(_) | Transport::Detached => None,
        }
    }

    /// True once the socket carries TLS, or for a Unix socket, which MySQL counts as secure
    /// transport too (a password may cross it in clear).
    pub fn is_secure(&self) -> bool {
        matches!(
            self.socket,
            Transport::Tls(_) | Transport::TlsClient(_) | Transport::Unix(_)
        )
    }

    /// For a connection that sits idle between commands: has the peer closed it, or sent
    /// something unasked (a server's "connection killed" ERR before it closes)? Either way it
    /// cannot be used. Never waits; a socket with nothing to read is alive.
    pub fn closed_while_idle(&mut self) -> bool {
        if !self.rbuf.is_empty() {
            return true;
        }
        let mut probe = [0u8; 1];
        let read = match &self.socket {
            Transport::Plain(s) => s.try_read(&mut probe),
            Transport::Tls(s) => s.get_ref().0.try_read(&mut probe),
            Transport::TlsClient(s) => s.get_ref().0.try_read(&mut probe),
            Transport::Unix(s) => s.try_read(&mut probe),
            Transport::Detached => return true,
        };
        !matches!(read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    pub fn set_max_payload(&mut self, max: usize) {
        self.max_payload = max;
    }

    /// Waits until a whole logical packet is buffered and returns its span. The packet stays in
    /// the buffer (`raw`, `payload`) until `consume` is called. `Ok(None)` means a clean EOF
    /// between packets.
    pub async fn next_packet(&mut self) -> Result<Option<LogicalSpan>, Error> {
        loop {
            if let Some(span) = frame::scan_logical(&self.rbuf, self.max_payload)? {
                return Ok(Some(span));
            }
            if !self.fill().await? {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::Truncated)
                };
            }
        }
    }

    /// Like `next_packet`, but once part of a packet has arrived the rest must follow within
    /// `stall`: a client that stops mid-packet is dropped instead of held forever.
    pub async fn next_packet_within(
        &mut self,
        stall: Duration,
    ) -> Result<Option<LogicalSpan>, Error> {
        loop {
            if let Some(span) = frame::scan_logical(&self.rbuf, self.max_payload)? {
                return Ok(Some(span));
            }
            let more = if self.rbuf.is_empty() {
                self.fill().await?
            } else {
                tokio::time::timeout(stall, self.fill())
                    .await
                    .map_err(|_| Error::Timeout("reading a packet"))??
            };
            if !more {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::Truncated)
                };
            }
        }
    }

    /// Drops the logical packet at the start of the read buffer unread, reading the rest of
    /// it as it arrives (each read within `stall`) and keeping none of it: a packet over
    /// the payload limit, which the peer sends whole all the same. `skip` keeps where it got
    /// to: with `whole` this returns once all of the packet is dropped, without once its
    /// last chunk's sequence id is known (after which the answer to it comes): that id.
    pub async fn discard_packet(
        &mut self,
        skip: &mut frame::Skip,
        stall: Duration,
        whole: bool,
    ) -> Result<u8, Error> {
        loop {
            let (n, done) = skip.feed(&self.rbuf);
            self.rbuf.advance(n);
            match skip.last_seq() {
                Some(seq) if done || !whole => return Ok(seq),
                _ => {}
            }
            let more = tokio::time::timeout(stall, self.fill())
                .await
                .map_err(|_| Error::Timeout("reading a packet"))??;
            if !more {
                return Err(Error::Truncated);
            }
        }
    }

    /// Takes the buffered packet `span` out of the read buffer without copying.
    pub fn take(&mut self, span: &LogicalSpan) -> bytes::Bytes {
        self.rbuf.split_to(span.raw_len).freeze()
    }

    /// Like `next_packet`, but a clean EOF is an error (the peer owed us a packet).
    pub async fn expect_packet(&mut self) -> Result<LogicalSpan, Error> {
        self.next_packet().await?.ok_or(Error::Closed)
    }

    /// The next logical packet if it is already buffered; never reads.
    pub fn buffered_packet(&self) -> Result<Option<LogicalSpan>, Error> {
        Ok(frame::scan_logical(&self.rbuf, self.max_payload)?)
    }

    /// The logical packet that starts `offset` bytes into the read buffer, if it is all
    /// there; never reads. With `forward`, a relay passes a run of packets on in one copy.
    pub fn buffered_packet_at(&self, offset: usize) -> Result<Option<LogicalSpan>, Error> {
        let rest = self.rbuf.get(offset..).unwrap_or_default();
        Ok(frame::scan_logical(rest, self.max_payload)?)
    }

    /// The read buffer from `offset` on, and the payload limit its packets must keep
    /// (`ResponseTracker::skim` reads runs of packets in place).
    pub fn buffered_from(&self, offset: usize) -> (&[u8], usize) {
        (
            self.rbuf.get(offset..).unwrap_or_default(),
            self.max_payload,
        )
    }

    /// The raw bytes of the packet `span` found `offset` bytes into the read buffer.
    pub fn raw_at(&self, offset: usize, span: &LogicalSpan) -> &[u8] {
        &self.rbuf[offset..offset + span.raw_len]
    }

    /// The payload of the packet `span` found `offset` bytes into the read buffer.
    pub fn payload_at(&self, offset: usize, span: &LogicalSpan) -> Cow<'_, [u8]> {
        frame::payload(self.raw_at(offset, span), span)
    }

    /// Moves the first `len` buffered bytes, as they are, to the end of `to`'s write queue.
    pub fn forward(&mut self, len: usize, to: &mut PacketStream) {
        if len > 0 {
            to.wbuf.extend_from_slice(&self.rbuf[..len]);
            self.rbuf.advance(len);
        }
    }

    /// Reads more bytes from the socket. Returns false on EOF.
    pub async fn fill(&mut self) -> Result<bool, Error> {
        if self.rbuf.capacity() - self.rbuf.len() < self.read_chunk / 2 {
            self.rbuf.reserve(self.read_chunk);
        }
        let n = match &mut self.socket {
            Transport::Plain(s) => s.read_buf(&mut self.rbuf).await?,
            Transport::Tls(s) => s.read_buf(&mut self.rbuf).await?,
            Transport::TlsClient(s) => s.read_buf(&mut self.rbuf).await?,
            Transport::Unix(s) => s.read_buf(&mut self.rbuf).await?,
            Transport::Detached => return Err(Error::Closed),
        };
        Ok(n > 0)
    }

    /// `fill`, but without sleeping: polls the socket, and between polls lets every other
    /// task run (and the runtime poll its sockets without blocking), while `keep_polling`
    /// says so. `None`: it stopped with nothing read. The policy is `busy_poll`'s.
    pub async fn fill_polling(
        &mut self,
        mut keep_polling: impl FnMut() -> bool,
    ) -> Result<Option<bool>, Error> {
        loop {
            // Dropping a pending read loses nothing: tokio's socket reads are cancel-safe.
            if let Poll::Ready(r) = futures_util::poll!(std::pin::pin!(self.fill())) {
                return r.map(Some);
            }
            if !keep_polling() {
                return Ok(None);
            }
            tokio::task::yield_now().await;
        }
    }

    /// The raw bytes (headers included) of the buffered packet `span`.
    pub fn raw(&self, span: &LogicalSpan) -> &[u8] {
        &self.rbuf[..span.raw_len]
    }

    /// The payload (headers removed, chunks joined) of the buffered packet `span`.
    pub fn payload(&self, span: &LogicalSpan) -> Cow<'_, [u8]> {
        frame::payload(&self.rbuf[..span.raw_len], span)
    }

    /// Drops the buffered packet `span` from the read buffer.
    pub fn consume(&mut self, span: &LogicalSpan) {
        self.rbuf.advance(span.raw_len);
    }

    /// Bytes that arrived but were not consumed (e.g. a pipelined next command).
    pub fn has_buffered_input(&self) -> bool {
        !self.rbuf.is_empty()
    }

    /// Queues `payload` as a packet with sequence id `seq`; returns the next sequence id.
    pub fn queue_packet(&mut self, seq: u8, payload: &[u8]) -> u8 {
        frame::write_packet(&mut self.wbuf, seq, payload)
    }

    /// Queues bytes that are already framed.
    pub fn queue_raw(&mut self, raw: &[u8]) {
        self.wbuf.extend_from_slice(raw);
    }

    pub fn queued(&self) -> usize {
        self.wbuf.len()
    }

    /// Writes what is queued if a plain TCP socket takes it all at once, without a future
    /// or a timer: `Ok(true)`. `Ok(false)`: something is left (the socket is full, or the
    /// transport is not plain TCP), for `flush`. The bytes and their count are as `flush`'s.
    pub fn try_flush(&mut self) -> Result<bool, Error> {
        if self.wbuf.is_empty() {
            return Ok(!self.unflushed);
        }
        let Transport::Plain(s) = &self.socket else {
            return Ok(false);
        };
        loop {
            match s.try_write(&self.wbuf) {
                // As `write_all`: a socket that takes nothing has failed.
                Ok(0) => return Err(Error::Io(std::io::ErrorKind::WriteZero.into())),
                Ok(n) if n == self.wbuf.len() => {
                    self.written += n as u64;
                    self.wbuf.clear();
                    return Ok(true);
                }
                Ok(n) => {
                    self.written += n as u64;
                    self.wbuf.advance(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Writes everything queued. `timeout` bounds a peer that stops reading.
    pub async fn flush(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        if self.wbuf.is_empty() && !self.unflushed {
            return Ok(());
        }
        let write = async {
            match &mut self.socket {
                Transport::Plain(s) => s.write_all(&self.wbuf).await,
                Transport::Tls(s) => {
                    // rustls may hold the last record until flushed.
                    s.write_all(&self.wbuf).await?;
                    s.flush().await
                }
                Transport::TlsClient(s) => {
                    s.write_all(&self.wbuf).await?;
                    s.flush().await
                }
                Transport::Unix(s) => s.write_all(&self.wbuf).await,
                Transport::Detached => Err(std::io::ErrorKind::NotConnected.into()),
            }
        };
        let mut write = std::pin::pin!(write);
        // The socket almost always takes the bytes at once: try that before arming a timer
        // (a timer costs a clock read and a handle clone per flush on the hot path).
        match futures_util::poll!(write.as_mut()) {
            Poll::Ready(r) => r?,
            Poll::Pending => match timeout {
                Some(t) => tokio::time::timeout(t, write)
                    .await
                    .map_err(|_| Error::Timeout("write"))??,
                None => write.await?,
            },
        }
        self.written += self.wbuf.len() as u64;
        self.wbuf.clear();
        self.unflushed = false;
        Ok(())
    }

    /// Writes what is queued, waiting at most `within` for a peer that does not read:
    /// `Ok(false)` when it had not taken everything by then. Unlike `flush`, giving up loses
    /// nothing: what is left stays queued (and counted once written), for a later flush.
    pub async fn flush_within(&mut self, within: Duration) -> Result<bool, Error> {
        if self.try_flush()? {
            return Ok(true);
        }
        let deadline = tokio::time::Instant::now() + within;
        // One write at a time: each either writes some bytes or, cancelled, none.
        while !self.wbuf.is_empty() {
            match tokio::time::timeout_at(deadline, self.write_some()).await {
                Ok(Ok(0)) => return Err(Error::Io(std::io::ErrorKind::WriteZero.into())),
                Ok(Ok(n)) => {
                    self.written += n as u64;
                    self.wbuf.advance(n);
                }
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Ok(false),
            }
        }
        // TLS may hold the last record until flushed.
        self.unflushed = true;
        match tokio::time::timeout_at(deadline, self.flush_transport()).await {
            Ok(r) => r?,
            Err(_) => return Ok(false),
        }
        self.unflushed = false;
        Ok(true)
    }

    /// One write of the queued bytes: how many the socket took.
    async fn write_some(&mut self) -> std::io::Result<usize> {
        match &mut self.socket {
            Transport::Plain(s) => s.write(&self.wbuf).await,
            Transport::Tls(s) => s.write(&self.wbuf).await,
            Transport::TlsClient(s) => s.write(&self.wbuf).await,
            Transport::Unix(s) => s.write(&self.wbuf).await,
            Transport::Detached => Err(std::io::ErrorKind::NotConnected.into()),
        }
    }

    /// Pushes out what the transport itself holds (TLS records); nothing for plain sockets.
    async fn flush_transport(&mut self) -> std::io::Result<()> {
        match &mut self.socket {
            Transport::Tls(s) => s.flush().await,
            Transport::TlsClient(s) => s.flush().await,
            _ => Ok(()),
        }
    }

    /// Queues and flushes one packet.
    pub async fn send_packet(&mut self, seq: u8, payload: &[u8]) -> Result<u8, Error> {
        let next = self.queue_packet(seq, payload);
        self.flush(None).await?;
        Ok(next)
    }

    /// Makes the socket's close a reset (RST) rather than an orderly end: what MariaDB does
    /// to a connection idle past its wait_timeout, which drivers then report as "server has
    /// gone away" (2006) on their next command rather than as a lost connection (2013).
    pub fn reset_on_close(&mut self) {
        let _ = match &self.socket {
            Transport::Plain(s) => s.set_zero_linger(),
            Transport::Tls(s) => s.get_ref().0.set_zero_linger(),
            Transport::TlsClient(s) => s.get_ref().0.set_zero_linger(),
            Transport::Unix(_) | Transport::Detached => Ok(()),
        };
    }

    /// Bytes read and not yet taken (a command on its way, in part or whole).
    pub fn buffered(&self) -> usize {
        self.rbuf.len()
    }

    pub async fn shutdown(&mut self) {
        let _ = match &mut self.socket {
            Transport::Plain(s) => s.shutdown().await,
            // Sends close_notify, then shuts the TCP write side.
            Transport::Tls(s) => s.shutdown().await,
            Transport::TlsClient(s) => s.shutdown().await,
            Transport::Unix(s) => s.shutdown().await,
            Transport::Detached => Ok(()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_idle_connection_the_peer_closed_is_noticed_without_waiting() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let mut stream = PacketStream::new(client.unwrap(), 1 << 20);
        let (mut peer, _) = accepted.unwrap();
        assert!(
            !stream.closed_while_idle(),
            "an open, quiet socket is alive"
        );
        // Unasked bytes (a server's ERR before it closes) make it unusable too.
        peer.write_all(&[1, 0, 0, 0, 0xff]).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !stream.closed_while_idle() {
            assert!(std::time::Instant::now() < deadline, "data never noticed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(peer);
        let (client, accepted) = tokio::join!(
            TcpStream::connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        let mut stream = PacketStream::new(client.unwrap(), 1 << 20);
        drop(accepted.unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !stream.closed_while_idle() {
            assert!(std::time::Instant::now() < deadline, "close never noticed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
