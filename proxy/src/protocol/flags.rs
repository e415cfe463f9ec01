//! Capability and status flags, and the command byte.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__capabilities__flags.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html>,
//! <https://mariadb.com/kb/en/connection/#capabilities>.
//!
//! The flag types are mysql_common's bitflags types, re-exported under our names so the rest
//! of the crate depends on `crate::protocol` only.

pub use mysql_common::constants::CapabilityFlags as Capabilities;
pub use mysql_common::constants::StatusFlags;

/// Capabilities sluice advertises to clients (MySQL 8.0-like; no COMPRESS, no SSL unless TLS is configured,
/// no MariaDB extensions, no OPTIONAL_RESULTSET_METADATA, no QUERY_ATTRIBUTES).
/// MariaDB's extended capabilities (the last 4 filler bytes of the greeting and of the
/// handshake response, used when CLIENT_LONG_PASSWORD, MariaDB's "CLIENT_MYSQL", is clear).
pub mod mariadb_caps {
    /// Progress report packets during long statements.
    pub const PROGRESS: u32 = 1;
    /// COM_STMT_BULK_EXECUTE: one prepared statement run for many parameter rows.
    pub const STMT_BULK_OPERATIONS: u32 = 1 << 2;
    /// What sluice relays: bulk execution, which changes no response layout (progress
    /// packets, extended type info and cached metadata would).
    pub const RELAYED: u32 = STMT_BULK_OPERATIONS;

    /// Whether a greeting or handshake response with `caps` carries the extended ones.
    pub fn carried(caps: super::Capabilities) -> bool {
        !caps.contains(super::Capabilities::CLIENT_LONG_PASSWORD)
    }
}

pub fn server_capabilities() -> Capabilities {
    // Everything here is either layout the relay understands (DEPRECATE_EOF, SESSION_TRACK,
    // multi-results) or a flag that only changes server-side semantics; the shaping ones are
    // matched per backend connection (see `shaping_mask`).
    Capabilities::CLIENT_LONG_PASSWORD
        | Capabilities::CLIENT_FOUND_ROWS
        | Capabilities::CLIENT_LONG_FLAG
        | Capabilities::CLIENT_CONNECT_WITH_DB
        | Capabilities::CLIENT_NO_SCHEMA
        | Capabilities::CLIENT_ODBC
        | Capabilities::CLIENT_LOCAL_FILES
        | Capabilities::CLIENT_IGNORE_SPACE
        | Capabilities::CLIENT_PROTOCOL_41
        | Capabilities::CLIENT_INTERACTIVE
        | Capabilities::CLIENT_IGNORE_SIGPIPE
        | Capabilities::CLIENT_TRANSACTIONS
        | Capabilities::CLIENT_SECURE_CONNECTION
        | Capabilities::CLIENT_MULTI_STATEMENTS
        | Capabilities::CLIENT_MULTI_RESULTS
        | Capabilities::CLIENT_PS_MULTI_RESULTS
        | Capabilities::CLIENT_PLUGIN_AUTH
        | Capabilities::CLIENT_CONNECT_ATTRS
        | Capabilities::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | Capabilities::CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS
        | Capabilities::CLIENT_SESSION_TRACK
        | Capabilities::CLIENT_DEPRECATE_EOF
}

/// The capabilities that change the wire layout or semantics of responses and must be equal between a client and
/// the backend connection serving it: FOUND_ROWS, IGNORE_SPACE, LOCAL_FILES, MULTI_STATEMENTS, MULTI_RESULTS,
/// PS_MULTI_RESULTS, DEPRECATE_EOF, (NO_SCHEMA).
pub fn shaping_mask() -> Capabilities {
    Capabilities::CLIENT_FOUND_ROWS
        | Capabilities::CLIENT_IGNORE_SPACE
        | Capabilities::CLIENT_LOCAL_FILES
        | Capabilities::CLIENT_MULTI_STATEMENTS
        | Capabilities::CLIENT_MULTI_RESULTS
        | Capabilities::CLIENT_PS_MULTI_RESULTS
        | Capabilities::CLIENT_DEPRECATE_EOF
        | Capabilities::CLIENT_NO_SCHEMA
}

/// The first byte of a client command packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CommandCode {
    Sleep = 0x00,
    Quit = 0x01,
    InitDb = 0x02,
    Query = 0x03,
    FieldList = 0x04,
    CreateDb = 0x05,
    DropDb = 0x06,
    Refresh = 0x07,
    Shutdown = 0x08,
    Statistics = 0x09,
    ProcessInfo = 0x0A,
    Connect = 0x0B,
    ProcessKill = 0x0C,
    Debug = 0x0D,
    Ping = 0x0E,
    Time = 0x0F,
    DelayedInsert = 0x10,
    ChangeUser = 0x11,
    BinlogDump = 0x12,
    TableDump = 0x13,
    ConnectOut = 0x14,
    RegisterSlave = 0x15,
    StmtPrepare = 0x16,
    StmtExecute = 0x17,
    StmtSendLongData = 0x18,
    StmtClose = 0x19,
    StmtReset = 0x1A,
    SetOption = 0x1B,
    StmtFetch = 0x1C,
    Daemon = 0x1D,
    BinlogDumpGtid = 0x1E,
    ResetConnection = 0x1F,
    /// MySQL 8.0.17+ clone plugin.
    Clone = 0x20,
    /// MySQL 8.0.31+ group replication stream.
    SubscribeGroupReplicationStream = 0x21,
    /// MariaDB array binding (needs MARIADB_CLIENT_STMT_BULK_OPERATIONS, which sluice does not advertise).
    StmtBulkExecute = 0xFA,
}

impl CommandCode {
    pub fn from_u8(byte: u8) -> Option<CommandCode> {
        use CommandCode::*;
        const TABLE: [CommandCode; 0x22] = [
            Sleep,
            Quit,
            InitDb,
            Query,
            FieldList,
            CreateDb,
            DropDb,
            Refresh,
            Shutdown,
            Statistics,
            ProcessInfo,
            Connect,
            ProcessKill,
            Debug,
            Ping,
            Time,
            DelayedInsert,
            ChangeUser,
            BinlogDump,
            TableDump,
            ConnectOut,
            RegisterSlave,
            StmtPrepare,
            StmtExecute,
            StmtSendLongData,
            StmtClose,
            StmtReset,
            SetOption,
            StmtFetch,
            Daemon,
            BinlogDumpGtid,
            ResetConnection,
            Clone,
            SubscribeGroupReplicationStream,
        ];
        match byte {
            0xFA => Some(StmtBulkExecute),
            _ => TABLE.get(usize::from(byte)).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_codes_round_trip_through_their_byte() {
        for byte in 0..=u8::MAX {
            if let Some(code) = CommandCode::from_u8(byte) {
                assert_eq!(code as u8, byte);
            }
        }
        assert_eq!(CommandCode::from_u8(0x03), Some(CommandCode::Query));
        assert_eq!(
            CommandCode::from_u8(0x1F),
            Some(CommandCode::ResetConnection)
        );
        assert_eq!(
            CommandCode::from_u8(0xFA),
            Some(CommandCode::StmtBulkExecute)
        );
        assert_eq!(CommandCode::from_u8(0x22), None);
        assert_eq!(CommandCode::from_u8(0xFF), None);
    }

    #[test]
    fn advertised_capabilities_exclude_what_the_relay_cannot_pass_through() {
        let caps = server_capabilities();
        assert!(
            caps.contains(Capabilities::CLIENT_PROTOCOL_41 | Capabilities::CLIENT_DEPRECATE_EOF)
        );
        for bad in [
            Capabilities::CLIENT_COMPRESS,
            Capabilities::CLIENT_SSL,
            Capabilities::CLIENT_OPTIONAL_RESULTSET_METADATA,
            Capabilities::CLIENT_QUERY_ATTRIBUTES,
            Capabilities::CLIENT_ZSTD_COMPRESSION_ALGORITHM,
        ] {
            assert!(!caps.intersects(bad), "{bad:?}");
        }
        assert!(caps.contains(shaping_mask()));
        // The low 16 bits as MySQL 8.0 sends them in its greeting, minus COMPRESS and SSL.
        assert_eq!(caps.bits() & 0xFFFF, 0xFFFF & !0x0020 & !0x0800 & !0x4000);
    }
}
