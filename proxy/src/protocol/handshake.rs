//! The server greeting (Protocol::HandshakeV10): sluice encodes it for clients and decodes
//! the one its backends send.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_handshake_v10.html>,
//! <https://mariadb.com/kb/en/connection/#initial-handshake-packet>.
//!
//! MariaDB prefixes its version with "5.5.5-" (old replication clients compare versions
//! textually) and, when it clears CLIENT_LONG_PASSWORD ("CLIENT_MYSQL"), puts its extended
//! capabilities in the last 4 of the 10 reserved bytes. Both are accepted and kept as is.

use bytes::{BufMut, BytesMut};

use super::buf::{put_nul_bytes, Reader};
use super::error::{Error, Result};
use super::flags::{mariadb_caps, Capabilities, StatusFlags};

const PROTOCOL_VERSION: u8 = 10;
const MARIADB_PREFIX: &[u8] = b"5.5.5-";

/// HandshakeV10.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub server_version: Vec<u8>,
    pub connection_id: u32,
    /// The 20-byte scramble (auth-plugin-data parts 1 and 2, without the trailing NUL).
    pub nonce: [u8; 20],
    pub capabilities: Capabilities,
    pub collation: u8,
    pub status: StatusFlags,
    pub auth_plugin: Vec<u8>,
    /// MariaDB's extended capabilities (`flags::mariadb_caps`); 0 from MySQL.
    pub mariadb_caps: u32,
}

impl Handshake {
    pub fn decode(payload: &[u8]) -> Result<Self> {
        let mut r = Reader::named(payload, "handshake");
        if r.u8()? != PROTOCOL_VERSION {
            return Err(Error::Malformed {
                what: "handshake protocol version",
            });
        }
        let server_version = r.nul_bytes()?.to_vec();
        let connection_id = r.u32()?;
        let mut nonce = [0u8; 20];
        nonce[..8].copy_from_slice(r.bytes(8)?);
        r.skip(1)?;
        let caps_low = r.u16()?;
        // Pre-4.1 servers stop here; sluice needs the 20-byte scramble, so they are refused.
        let collation = r.u8()?;
        let status = StatusFlags::from_bits_truncate(r.u16()?);
        let caps_high = r.u16()?;
        let capabilities =
            Capabilities::from_bits_truncate(u32::from(caps_low) | (u32::from(caps_high) << 16));
        let data_len = usize::from(r.u8()?);
        let filler = r.bytes(10)?;
        let mariadb_caps = if mariadb_caps::carried(capabilities) {
            u32::from_le_bytes([filler[6], filler[7], filler[8], filler[9]])
        } else {
            0
        };
        if !capabilities.contains(Capabilities::CLIENT_SECURE_CONNECTION) {
            return Err(Error::Malformed {
                what: "handshake without CLIENT_SECURE_CONNECTION",
            });
        }
        // Part 2 is max(13, data_len - 8) bytes; its 13th byte is a NUL terminator.
        let part2 = r.bytes(data_len.saturating_sub(8).max(13))?;
        nonce[8..].copy_from_slice(&part2[..12]);
        let auth_plugin = if capabilities.contains(Capabilities::CLIENT_PLUGIN_AUTH) {
            r.nul_or_eof_bytes().to_vec()
        } else {
            Vec::new()
        };
        Ok(Handshake {
            server_version,
            connection_id,
            nonce,
            capabilities,
            collation,
            status,
            auth_plugin,
            mariadb_caps,
        })
    }

    /// Writes the payload (no header).
    pub fn encode(&self, out: &mut BytesMut) {
        let caps = self.capabilities.bits();
        out.put_u8(PROTOCOL_VERSION);
        put_nul_bytes(out, &self.server_version);
        out.put_u32_le(self.connection_id);
        out.put_slice(&self.nonce[..8]);
        out.put_u8(0);
        out.put_u16_le(caps as u16);
        out.put_u8(self.collation);
        out.put_u16_le(self.status.bits());
        out.put_u16_le((caps >> 16) as u16);
        let plugin_auth = self.capabilities.contains(Capabilities::CLIENT_PLUGIN_AUTH);
        out.put_u8(if plugin_auth { 21 } else { 0 });
        out.put_bytes(0, 6);
        let carried = mariadb_caps::carried(self.capabilities);
        out.put_u32_le(if carried { self.mariadb_caps } else { 0 });
        out.put_slice(&self.nonce[8..]);
        out.put_u8(0);
        if plugin_auth {
            put_nul_bytes(out, &self.auth_plugin);
        }
    }

    /// True for a MariaDB server (which is also what decides its "5.5.5-" prefix).
    pub fn is_mariadb(&self) -> bool {
        self.server_version.windows(7).any(|w| w == b"MariaDB")
    }

    /// The version without MariaDB's "5.5.5-" compatibility prefix.
    pub fn display_version(&self) -> &[u8] {
        self.server_version
            .strip_prefix(MARIADB_PREFIX)
            .unwrap_or(&self.server_version)
    }
}

/// Which server family sent a greeting: their account tables, replication variables, GTIDs
/// and timeout errors differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql,
}

impl Flavor {
    /// From the greeting's version string (MariaDB's says so, e.g.
    /// `5.5.5-10.11.19-MariaDB-0+deb12u1`).
    pub fn from_version(version: &[u8]) -> Flavor {
        if version
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"MariaDB"))
        {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from MariaDB 10.11.19 (Debian 12) started with --no-defaults.
    const MARIADB_10_11: &[u8] = &[
        0x0a, // protocol 10
        b'5', b'.', b'5', b'.', b'5', b'-', b'1', b'0', b'.', b'1', b'1', b'.', b'1', b'9', b'-',
        b'M', b'a', b'r', b'i', b'a', b'D', b'B', b'-', b'0', b'+', b'd', b'e', b'b', b'1', b'2',
        b'u', b'1', 0x00, // server version
        0x04, 0x00, 0x00, 0x00, // connection id 4
        0x3d, 0x7c, 0x78, 0x67, 0x78, 0x4a, 0x45, 0x5c, // scramble part 1
        0x00, // filler
        0xfe,
        0xf7, // capabilities low: no CLIENT_LONG_PASSWORD ("CLIENT_MYSQL") => MariaDB ext
        0x08, // latin1_swedish_ci
        0x02, 0x00, // SERVER_STATUS_AUTOCOMMIT
        0xff, 0x81, // capabilities high
        0x15, // auth-plugin-data length 21
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // filler
        0x1d, 0x00, 0x00, 0x00, // MariaDB extended capabilities
        0x7e, 0x27, 0x41, 0x51, 0x57, 0x3e, 0x71, 0x3e, 0x21, 0x28, 0x44, 0x5f,
        0x00, // part 2
        b'm', b'y', b's', b'q', b'l', b'_', b'n', b'a', b't', b'i', b'v', b'e', b'_', b'p', b'a',
        b's', b's', b'w', b'o', b'r', b'd', 0x00,
    ];

    /// A MySQL 8.0 greeting written from the HandshakeV10 documentation.
    const MYSQL_8_0: &[u8] = &[
        0x0a, b'8', b'.', b'0', b'.', b'3', b'6', 0x00, // protocol, "8.0.36"
        0x0d, 0x00, 0x00, 0x00, // connection id 13
        0x3a, 0x23, 0x50, 0x3b, 0x79, 0x0e, 0x2d, 0x5e, 0x00, // part 1, filler
        0xff, 0xff, 0xff, 0x02, 0x00, 0xff,
        0xdf, // caps low, utf8mb4_0900_ai_ci, status, caps high
        0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // data length 21, reserved
        0x5b, 0x2e, 0x34, 0x1f, 0x5f, 0x6c, 0x0a, 0x27, 0x28, 0x13, 0x71, 0x1b,
        0x00, // part 2
        b'c', b'a', b'c', b'h', b'i', b'n', b'g', b'_', b's', b'h', b'a', b'2', b'_', b'p', b'a',
        b's', b's', b'w', b'o', b'r', b'd', 0x00,
    ];

    #[test]
    fn decodes_mariadb_10_11_greeting() {
        let hs = Handshake::decode(MARIADB_10_11).unwrap();
        assert_eq!(hs.server_version, b"5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert_eq!(hs.display_version(), b"10.11.19-MariaDB-0+deb12u1");
        assert!(hs.is_mariadb());
        assert_eq!(hs.connection_id, 4);
        assert_eq!(&hs.nonce[..8], &MARIADB_10_11[38..46]);
        assert_eq!(&hs.nonce[8..], &MARIADB_10_11[65..77]);
        assert_eq!(hs.capabilities.bits(), 0x81ff_f7fe);
        assert!(hs.capabilities.contains(Capabilities::CLIENT_DEPRECATE_EOF));
        assert_eq!(hs.collation, 8);
        assert_eq!(hs.status, StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        assert_eq!(hs.auth_plugin, b"mysql_native_password");
    }

    #[test]
    fn decodes_mysql_8_greeting_and_encodes_it_back_byte_for_byte() {
        let hs = Handshake::decode(MYSQL_8_0).unwrap();
        assert!(!hs.is_mariadb());
        assert_eq!(hs.connection_id, 13);
        assert_eq!(hs.collation, 255);
        assert_eq!(hs.capabilities.bits(), 0xdfff_ffff);
        assert_eq!(hs.auth_plugin, b"caching_sha2_password");
        let mut out = BytesMut::new();
        hs.encode(&mut out);
        assert_eq!(&out[..], MYSQL_8_0);
    }

    #[test]
    fn mariadb_greeting_round_trips_with_its_extended_capabilities() {
        let hs = Handshake::decode(MARIADB_10_11).unwrap();
        // PROGRESS | STMT_BULK_OPERATIONS | EXTENDED_TYPE_INFO | CACHE_METADATA.
        assert_eq!(hs.mariadb_caps, 0x1d);
        let mut out = BytesMut::new();
        hs.encode(&mut out);
        assert_eq!(&out[..], MARIADB_10_11);
    }

    #[test]
    fn extended_capabilities_are_not_written_for_a_mysql_greeting() {
        let mut hs = Handshake::decode(MYSQL_8_0).unwrap();
        hs.mariadb_caps = 0x1d;
        let mut out = BytesMut::new();
        hs.encode(&mut out);
        assert_eq!(&out[..], MYSQL_8_0);
        assert_eq!(Handshake::decode(&out).unwrap().mariadb_caps, 0);
    }

    #[test]
    fn rejects_an_err_packet_instead_of_a_greeting() {
        let too_many = [0xff, 0x10, 0x04, b'T', b'o', b'o'];
        assert!(matches!(
            Handshake::decode(&too_many),
            Err(Error::Malformed { .. })
        ));
    }

    #[test]
    fn no_prefix_panics() {
        for sample in [MARIADB_10_11, MYSQL_8_0] {
            for end in 0..sample.len() - 22 {
                assert!(Handshake::decode(&sample[..end]).is_err(), "prefix {end}");
            }
            // Without the plugin name's NUL (MySQL 5.5.7-5.5.9 style) the name still decodes.
            let hs = Handshake::decode(&sample[..sample.len() - 1]).unwrap();
            assert!(hs.auth_plugin.ends_with(b"_password"));
        }
    }
}
