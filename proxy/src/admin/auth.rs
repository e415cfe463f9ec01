//! Admin login: checks mysql_native_password scrambles against `admin_users`, and fixes up
//! what opensrv-mysql sends when a login fails.
//!
//! opensrv answers a failed `authenticate` with error 1698 and a message of its own. MySQL
//! answers a wrong password with 1045 / 28000 "Access denied for user ...", which is what
//! scripts and operators check for. opensrv offers no hook for that packet, so the console's
//! socket writer ([`AdminOutput`]) buffers each response until flush and, after a failed
//! login, replaces the ERR packet it finds with the MySQL one.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context as TaskContext, Poll};

use bytes::BytesMut;
use tokio::io::AsyncWrite;

use crate::config::Config;
use crate::conn::password::{self, Proof};
use crate::protocol::frame::write_packet;

/// Past this many buffered bytes a write pushes the buffer out first, so a large result set
/// does not sit in memory whole.
const MAX_BUFFERED: usize = 256 * 1024;

/// True if `response` is the native scramble of an admin user's password with `salt`.
pub fn verify(config: &Config, user: &[u8], salt: &[u8], response: &[u8]) -> bool {
    let proof = Proof::Native {
        nonce: salt,
        response,
    };
    config
        .find_admin(user)
        .is_some_and(|admin| password::verify(&admin.password, proof))
}

/// The ERR payload MySQL sends for a failed login.
pub fn access_denied(user: &[u8], host: &str, used_password: bool) -> Vec<u8> {
    let mut out = BytesMut::new();
    password::access_denied(user, host, used_password).encode(&mut out);
    out.to_vec()
}

/// Shared between the shim (which knows when a login failed) and the writer.
pub type Denial = Arc<Mutex<Option<Vec<u8>>>>;

/// A buffering writer that replaces the first ERR packet after a failed login.
pub struct AdminOutput<W> {
    inner: W,
    buf: Vec<u8>,
    written: usize,
    denial: Denial,
}

impl<W: AsyncWrite + Unpin> AdminOutput<W> {
    pub fn new(inner: W, denial: Denial) -> Self {
        AdminOutput {
            inner,
            buf: Vec::new(),
            written: 0,
            denial,
        }
    }

    /// Writes out everything buffered.
    fn drain(&mut self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        if self.written == 0 {
            self.rewrite_denial();
        }
        while self.written < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buf.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// After a failed login the buffer starts with opensrv's ERR packet: swap in ours,
    /// keeping its sequence id.
    fn rewrite_denial(&mut self) {
        let Ok(mut denial) = self.denial.lock() else {
            return;
        };
        let Some(payload) = denial.as_ref() else {
            return;
        };
        if self.buf.len() < 5 || self.buf[4] != 0xFF {
            return;
        }
        let len = usize::from(self.buf[0])
            | usize::from(self.buf[1]) << 8
            | usize::from(self.buf[2]) << 16;
        let end = (4 + len).min(self.buf.len());
        let seq = self.buf[3];
        let mut packet = BytesMut::new();
        write_packet(&mut packet, seq, payload);
        self.buf.splice(..end, packet.iter().copied());
        *denial = None;
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for AdminOutput<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.buf.len() >= MAX_BUFFERED {
            ready!(self.drain(cx))?;
        }
        self.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UserConfig;
    use crate::protocol::auth::native_scramble;
    use tokio::io::AsyncWriteExt;

    fn config() -> Config {
        let mut c = Config::for_backend("127.0.0.1:3306", "app", "pw");
        c.admin_users = vec![UserConfig::new("admin", "secret")];
        c
    }

    #[test]
    fn only_the_right_scramble_of_an_admin_user_passes() {
        let c = config();
        let salt = b"abcdefghijklmnopqrst";
        assert!(verify(
            &c,
            b"admin",
            salt,
            &native_scramble(salt, b"secret")
        ));
        assert!(!verify(
            &c,
            b"admin",
            salt,
            &native_scramble(salt, b"wrong")
        ));
        assert!(!verify(
            &c,
            b"admin",
            b"another-salt-0123456",
            &native_scramble(salt, b"secret")
        ));
        assert!(
            !verify(&c, b"app", salt, &native_scramble(salt, b"pw")),
            "a client user is not an admin"
        );
        assert!(!verify(&c, b"admin", salt, b""));
    }

    #[tokio::test]
    async fn a_failed_login_turns_opensrvs_error_into_1045() {
        let denial: Denial = Arc::default();
        let mut out = AdminOutput::new(Vec::new(), denial.clone());
        *denial.lock().unwrap() = Some(access_denied(b"admin", "127.0.0.1", true));
        // opensrv's packet: seq 2, 0xFF, code 1698, '#', sqlstate, message.
        out.write_all(&[
            14, 0, 0, 2, 0xFF, 0xA2, 0x06, b'#', b'2', b'8', b'0', b'0', b'0', b'x', b'y', b'z',
        ])
        .await
        .unwrap();
        out.flush().await.unwrap();
        let bytes = out.inner.clone();
        assert_eq!(bytes[3], 2, "sequence id kept");
        assert_eq!(&bytes[4..7], &[0xFF, 0x15, 0x04], "ERR 1045 (0x0415)");
        assert_eq!(&bytes[7..13], b"#28000");
        let len = usize::from(bytes[0]) | usize::from(bytes[1]) << 8;
        assert_eq!(bytes.len(), 4 + len);
        assert!(String::from_utf8_lossy(&bytes[13..])
            .starts_with("Access denied for user 'admin'@'127.0.0.1'"));
    }

    #[tokio::test]
    async fn other_output_passes_unchanged() {
        let denial: Denial = Arc::default();
        let mut out = AdminOutput::new(Vec::new(), denial);
        let ok = [7, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0];
        out.write_all(&ok).await.unwrap();
        out.flush().await.unwrap();
        assert_eq!(out.inner, ok);
    }
}
