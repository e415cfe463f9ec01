//! Checked little-endian reads and writes of the MySQL basic data types.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_data_types.html>,
//! <https://mariadb.com/kb/en/protocol-data-types/>.
//!
//! `Reader` never panics: each read checks the remaining length and returns
//! `Error::Truncated` naming the packet being read (`Reader::named`).

use bytes::{BufMut, BytesMut};

use super::error::{Error, Result};

/// A cursor over an untrusted payload.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader whose errors say "packet".
    pub fn new(buf: &'a [u8]) -> Self {
        Self::named(buf, "packet")
    }

    /// A reader whose errors name the packet type (e.g. "OK packet").
    pub fn named(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    fn truncated(&self) -> Error {
        Error::Truncated { what: self.what }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let out = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u24(&mut self) -> Result<u32> {
        let [a, b, c] = self.array()?;
        Ok(u32::from_le_bytes([a, b, c, 0]))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length-encoded integer. 0xFB (NULL in rows) and 0xFF (ERR marker) are not integers.
    pub fn lenenc_int(&mut self) -> Result<u64> {
        match self.u8()? {
            n @ 0..=0xFA => Ok(u64::from(n)),
            0xFC => self.u16().map(u64::from),
            0xFD => self.u24().map(u64::from),
            0xFE => self.u64(),
            _ => Err(Error::Malformed {
                what: "length-encoded integer",
            }),
        }
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.lenenc_int()?;
        let len = usize::try_from(len).map_err(|_| self.truncated())?;
        self.bytes(len)
    }

    /// A NUL-terminated string (the NUL is consumed, not returned).
    pub fn nul_bytes(&mut self) -> Result<&'a [u8]> {
        let rest = self.rest_peek();
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.truncated())?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    /// A NUL-terminated string that some clients and servers end at the end of the packet
    /// instead (e.g. the plugin name of MySQL 5.5.7-5.5.9 and some connectors).
    pub fn nul_or_eof_bytes(&mut self) -> &'a [u8] {
        match self.nul_bytes() {
            Ok(s) => s,
            Err(_) => self.rest(),
        }
    }

    /// Everything not read yet; the reader is then empty.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = self.rest_peek();
        self.pos = self.buf.len();
        out
    }

    fn rest_peek(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// The next byte without consuming it.
    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
}

/// Appends a length-encoded integer.
pub fn put_lenenc_int(out: &mut BytesMut, n: u64) {
    match n {
        0..=0xFA => out.put_u8(n as u8),
        0xFB..=0xFFFF => {
            out.put_u8(0xFC);
            out.put_u16_le(n as u16);
        }
        0x1_0000..=0xFF_FFFF => {
            out.put_u8(0xFD);
            out.put_uint_le(n, 3);
        }
        _ => {
            out.put_u8(0xFE);
            out.put_u64_le(n);
        }
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(out: &mut BytesMut, s: &[u8]) {
    put_lenenc_int(out, s.len() as u64);
    out.put_slice(s);
}

/// Appends a NUL-terminated string.
pub fn put_nul_bytes(out: &mut BytesMut, s: &[u8]) {
    out.put_slice(s);
    out.put_u8(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fixed_ints_little_endian() {
        let mut r = Reader::new(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06]);
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert_eq!(r.u24().unwrap(), 0x05_0403);
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.u16(), Err(Error::Truncated { what: "packet" }));
        assert_eq!(r.u8().unwrap(), 0x06);
        assert!(r.is_empty());
    }

    #[test]
    fn lenenc_int_round_trips_at_every_width_boundary() {
        for n in [
            0,
            0xFA,
            0xFB,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = BytesMut::new();
            put_lenenc_int(&mut out, n);
            let mut r = Reader::new(&out);
            assert_eq!(r.lenenc_int().unwrap(), n);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn lenenc_int_wire_bytes() {
        let mut out = BytesMut::new();
        put_lenenc_int(&mut out, 0xFB);
        put_lenenc_int(&mut out, 0x01_0203);
        assert_eq!(&out[..], &[0xFC, 0xFB, 0x00, 0xFD, 0x03, 0x02, 0x01]);
    }

    #[test]
    fn rejects_null_and_err_markers_as_lenenc_int() {
        assert!(matches!(
            Reader::new(&[0xFB]).lenenc_int(),
            Err(Error::Malformed { .. })
        ));
        assert!(matches!(
            Reader::new(&[0xFF]).lenenc_int(),
            Err(Error::Malformed { .. })
        ));
    }

    #[test]
    fn lenenc_bytes_with_huge_length_is_truncated_not_a_panic() {
        let sample = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, b'a'];
        assert!(Reader::new(&sample).lenenc_bytes().is_err());
    }

    #[test]
    fn nul_strings() {
        let mut r = Reader::named(b"root\0db", "handshake");
        assert_eq!(r.nul_bytes().unwrap(), b"root");
        assert_eq!(r.nul_bytes(), Err(Error::Truncated { what: "handshake" }));
        assert_eq!(r.nul_or_eof_bytes(), b"db");
        assert!(r.is_empty());
    }

    #[test]
    fn every_prefix_of_a_lenenc_string_is_an_error_not_a_panic() {
        let mut full = BytesMut::new();
        put_lenenc_bytes(&mut full, &[7u8; 300]);
        for end in 0..full.len() {
            assert!(Reader::new(&full[..end]).lenenc_bytes().is_err());
        }
        assert_eq!(Reader::new(&full).lenenc_bytes().unwrap().len(), 300);
    }
}
