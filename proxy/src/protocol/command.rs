//! Client command packets, parsed into `Command` at the edge so session logic never matches
//! raw bytes.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_command_phase.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_command_phase_ps.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_change_user.html>,
//! <https://mariadb.com/kb/en/com_change_user/>.

use super::buf::Reader;
use super::error::{Error, Result};
use super::flags::{Capabilities, CommandCode};
use super::handshake_response::decode_connect_attrs;
use super::response::ResponseKind;

/// A client command, borrowing from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    Quit,
    InitDb(&'a [u8]),
    Query(&'a [u8]),
    FieldList {
        table: &'a [u8],
        wildcard: &'a [u8],
    },
    Statistics,
    ProcessKill(u32),
    Ping,
    /// The body after the command byte; decode it with `ChangeUser::decode`.
    ChangeUser(&'a [u8]),
    ResetConnection,
    SetOption(u16),
    Debug,
    Refresh(u8),
    StmtPrepare(&'a [u8]),
    /// `body` is the payload after the statement id (flags, iteration count, parameters).
    StmtExecute {
        stmt_id: u32,
        body: &'a [u8],
    },
    /// MariaDB's COM_STMT_BULK_EXECUTE; `body` as for `StmtExecute` (flags, types, rows).
    StmtBulkExecute {
        stmt_id: u32,
        body: &'a [u8],
    },
    StmtSendLongData {
        stmt_id: u32,
        param: u16,
        data: &'a [u8],
    },
    StmtClose(u32),
    StmtReset(u32),
    StmtFetch {
        stmt_id: u32,
        rows: u32,
    },
    /// A known command sluice refuses (binlog dump, register replica, table dump, daemon, connect, time, ...).
    Unsupported(CommandCode),
    Unknown(u8),
}

impl<'a> Command<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<Command<'a>> {
        let (&byte, body) = payload
            .split_first()
            .ok_or(Error::Truncated { what: "command" })?;
        let Some(code) = CommandCode::from_u8(byte) else {
            return Ok(Command::Unknown(byte));
        };
        let mut r = Reader::named(body, "command");
        let command = match code {
            CommandCode::Quit => Command::Quit,
            CommandCode::InitDb => Command::InitDb(body),
            CommandCode::Query => Command::Query(body),
            CommandCode::FieldList => {
                let table = r.nul_bytes()?;
                Command::FieldList {
                    table,
                    wildcard: r.rest(),
                }
            }
            CommandCode::Statistics => Command::Statistics,
            CommandCode::ProcessKill => Command::ProcessKill(r.u32()?),
            CommandCode::Ping => Command::Ping,
            CommandCode::ChangeUser => Command::ChangeUser(body),
            CommandCode::ResetConnection => Command::ResetConnection,
            CommandCode::SetOption => Command::SetOption(r.u16()?),
            CommandCode::Debug => Command::Debug,
            // Old clients send COM_REFRESH without the sub-command byte.
            CommandCode::Refresh => Command::Refresh(r.u8().unwrap_or(0)),
            CommandCode::StmtPrepare => Command::StmtPrepare(body),
            CommandCode::StmtExecute => Command::StmtExecute {
                stmt_id: r.u32()?,
                body: r.rest(),
            },
            CommandCode::StmtBulkExecute => Command::StmtBulkExecute {
                stmt_id: r.u32()?,
                body: r.rest(),
            },
            CommandCode::StmtSendLongData => {
                let stmt_id = r.u32()?;
                let param = r.u16()?;
                Command::StmtSendLongData {
                    stmt_id,
                    param,
                    data: r.rest(),
                }
            }
            CommandCode::StmtClose => Command::StmtClose(r.u32()?),
            CommandCode::StmtReset => Command::StmtReset(r.u32()?),
            CommandCode::StmtFetch => Command::StmtFetch {
                stmt_id: r.u32()?,
                rows: r.u32()?,
            },
            other => Command::Unsupported(other),
        };
        Ok(command)
    }

    /// The shape of the backend's response to this command (see `ResponseTracker`).
    pub fn response_kind(&self) -> ResponseKind {
        match self {
            Command::Quit | Command::StmtClose(_) | Command::StmtSendLongData { .. } => {
                ResponseKind::None
            }
            Command::Query(_) => ResponseKind::Query,
            // A bulk answers like an execute: OK, or a result set (RETURNING).
            Command::StmtExecute { .. } | Command::StmtBulkExecute { .. } => ResponseKind::Execute,
            Command::StmtFetch { .. } => ResponseKind::Fetch,
            Command::StmtPrepare(_) => ResponseKind::Prepare,
            Command::FieldList { .. } => ResponseKind::FieldList,
            Command::Statistics => ResponseKind::Statistics,
            // COM_CHANGE_USER answers with an auth exchange that sluice terminates itself;
            // Simple covers its last packet (OK or ERR).
            Command::InitDb(_)
            | Command::ProcessKill(_)
            | Command::Ping
            | Command::ChangeUser(_)
            | Command::ResetConnection
            | Command::SetOption(_)
            | Command::Debug
            | Command::Refresh(_)
            | Command::StmtReset(_)
            | Command::Unsupported(_)
            | Command::Unknown(_) => ResponseKind::Simple,
        }
    }
}

/// COM_CHANGE_USER body parsed with the client's capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeUser {
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    /// `None` when the schema name is empty.
    pub database: Option<Vec<u8>>,
    pub collation: Option<u16>,
    pub auth_plugin: Option<Vec<u8>>,
    pub connect_attrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ChangeUser {
    pub fn decode(body: &[u8], client_caps: Capabilities) -> Result<Self> {
        let mut r = Reader::named(body, "change user");
        let user = r.nul_bytes()?.to_vec();
        // COM_CHANGE_USER uses a 1-byte length even with PLUGIN_AUTH_LENENC_CLIENT_DATA.
        let auth_response = if client_caps.contains(Capabilities::CLIENT_SECURE_CONNECTION) {
            let len = r.u8()?;
            r.bytes(usize::from(len))?
        } else {
            r.nul_bytes()?
        }
        .to_vec();
        let database = r.nul_or_eof_bytes();
        let database = (!database.is_empty()).then(|| database.to_vec());
        let mut change = ChangeUser {
            user,
            auth_response,
            database,
            ..Default::default()
        };
        if r.is_empty() {
            return Ok(change);
        }
        change.collation = Some(r.u16()?);
        if client_caps.contains(Capabilities::CLIENT_PLUGIN_AUTH) && !r.is_empty() {
            change.auth_plugin = Some(r.nul_or_eof_bytes().to_vec());
        }
        if client_caps.contains(Capabilities::CLIENT_CONNECT_ATTRS) && !r.is_empty() {
            change.connect_attrs = decode_connect_attrs(&mut r)?;
        }
        Ok(change)
    }
}

/// Patch the 4-byte statement id at payload offset 1 (EXECUTE, CLOSE, RESET, SEND_LONG_DATA, FETCH).
pub fn set_stmt_id(payload: &mut [u8], id: u32) -> Result<()> {
    let slot = payload.get_mut(1..5).ok_or(Error::Truncated {
        what: "statement command",
    })?;
    slot.copy_from_slice(&id.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// COM_STMT_EXECUTE of statement 1, no cursor, one BIGINT parameter 41 (new-params-bound).
    const EXECUTE: &[u8] = &[
        0x17, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x29,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    /// COM_CHANGE_USER from libmysqlclient 8.0: user "bob", 20-byte scramble, schema "shop",
    /// utf8mb4_0900_ai_ci, plugin, attrs {"_os": "Linux"}.
    fn change_user_sample() -> Vec<u8> {
        let mut p = vec![0x11];
        p.extend_from_slice(b"bob\0");
        p.push(20);
        p.extend_from_slice(&[0x5A; 20]);
        p.extend_from_slice(b"shop\0");
        p.extend_from_slice(&[0xff, 0x00]);
        p.extend_from_slice(b"mysql_native_password\0");
        p.extend_from_slice(&[
            0x0a, 0x03, b'_', b'o', b's', 0x05, b'L', b'i', b'n', b'u', b'x',
        ]);
        p
    }

    fn client_caps() -> Capabilities {
        Capabilities::CLIENT_PROTOCOL_41
            | Capabilities::CLIENT_SECURE_CONNECTION
            | Capabilities::CLIENT_PLUGIN_AUTH
            | Capabilities::CLIENT_CONNECT_ATTRS
    }

    #[test]
    fn parses_text_commands() {
        assert_eq!(
            Command::parse(b"\x03SELECT 1").unwrap(),
            Command::Query(b"SELECT 1")
        );
        assert_eq!(
            Command::parse(b"\x02shop").unwrap(),
            Command::InitDb(b"shop")
        );
        assert_eq!(Command::parse(&[0x01]).unwrap(), Command::Quit);
        assert_eq!(
            Command::parse(&[0x0e]).unwrap().response_kind(),
            ResponseKind::Simple
        );
        assert_eq!(
            Command::parse(&[0x1b, 0x01, 0x00]).unwrap(),
            Command::SetOption(1)
        );
        assert_eq!(
            Command::parse(&[0x0c, 0x2a, 0, 0, 0]).unwrap(),
            Command::ProcessKill(42)
        );
        assert_eq!(
            Command::parse(b"\x04user\0Ho%").unwrap(),
            Command::FieldList {
                table: b"user",
                wildcard: b"Ho%"
            }
        );
    }

    #[test]
    fn parses_prepared_statement_commands() {
        let cmd = Command::parse(EXECUTE).unwrap();
        assert_eq!(
            cmd,
            Command::StmtExecute {
                stmt_id: 1,
                body: &EXECUTE[5..]
            }
        );
        assert_eq!(cmd.response_kind(), ResponseKind::Execute);
        let fetch = [0x1c, 0x07, 0, 0, 0, 0x05, 0, 0, 0];
        assert_eq!(
            Command::parse(&fetch).unwrap(),
            Command::StmtFetch {
                stmt_id: 7,
                rows: 5
            }
        );
        let close = [0x19, 0x07, 0, 0, 0];
        assert_eq!(
            Command::parse(&close).unwrap().response_kind(),
            ResponseKind::None
        );
        let long = [0x18, 0x07, 0, 0, 0, 0x01, 0x00, b'a', b'b'];
        assert_eq!(
            Command::parse(&long).unwrap(),
            Command::StmtSendLongData {
                stmt_id: 7,
                param: 1,
                data: b"ab"
            }
        );
    }

    #[test]
    fn unsupported_and_unknown_commands() {
        assert_eq!(
            Command::parse(&[0x12, 4, 0, 0, 0]).unwrap(),
            Command::Unsupported(CommandCode::BinlogDump)
        );
        assert_eq!(
            Command::parse(&[0x1E, 0, 0]).unwrap(),
            Command::Unsupported(CommandCode::BinlogDumpGtid)
        );
        // MariaDB's bulk execute: statement 7, flags SEND_TYPES.
        assert_eq!(
            Command::parse(&[0xFA, 7, 0, 0, 0, 0x80, 0]).unwrap(),
            Command::StmtBulkExecute {
                stmt_id: 7,
                body: &[0x80, 0]
            }
        );
        assert!(Command::parse(&[0xFA]).is_err());
        assert_eq!(Command::parse(&[0x7F]).unwrap(), Command::Unknown(0x7F));
        assert_eq!(
            Command::parse(&[]),
            Err(Error::Truncated { what: "command" })
        );
    }

    #[test]
    fn patches_statement_ids() {
        let mut exec = EXECUTE.to_vec();
        set_stmt_id(&mut exec, 0x0102_0304).unwrap();
        assert_eq!(&exec[1..5], &[0x04, 0x03, 0x02, 0x01]);
        assert_eq!(&exec[5..], &EXECUTE[5..]);
        assert!(set_stmt_id(&mut [0x19, 0, 0], 1).is_err());
    }

    #[test]
    fn decodes_change_user() {
        let payload = change_user_sample();
        let Command::ChangeUser(body) = Command::parse(&payload).unwrap() else {
            panic!("not a change user");
        };
        let cu = ChangeUser::decode(body, client_caps()).unwrap();
        assert_eq!(cu.user, b"bob");
        assert_eq!(cu.auth_response, [0x5A; 20]);
        assert_eq!(cu.database.as_deref(), Some(&b"shop"[..]));
        assert_eq!(cu.collation, Some(255));
        assert_eq!(
            cu.auth_plugin.as_deref(),
            Some(&b"mysql_native_password"[..])
        );
        assert_eq!(cu.connect_attrs, vec![(b"_os".to_vec(), b"Linux".to_vec())]);
    }

    #[test]
    fn change_user_without_optional_tail() {
        let cu = ChangeUser::decode(b"bob\0\0\0", client_caps()).unwrap();
        assert_eq!(
            (cu.user.as_slice(), cu.database, cu.collation),
            (&b"bob"[..], None, None)
        );
    }

    #[test]
    fn no_prefix_panics() {
        let samples = [
            EXECUTE.to_vec(),
            change_user_sample(),
            b"\x04user\0%".to_vec(),
        ];
        for sample in &samples {
            for end in 0..=sample.len() {
                let _ = Command::parse(&sample[..end]);
                let _ = ChangeUser::decode(&sample[..end], client_caps());
            }
        }
        let body = &change_user_sample()[1..];
        for end in 0..25 {
            assert!(
                ChangeUser::decode(&body[..end], client_caps()).is_err(),
                "prefix {end}"
            );
        }
    }
}
