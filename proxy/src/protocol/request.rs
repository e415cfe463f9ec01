//! The command payloads sluice builds itself (to restore a backend's state, to prepare a
//! rewritten statement, to check or reset a pooled connection): COM_QUERY, COM_INIT_DB,
//! COM_SET_OPTION, COM_STMT_PREPARE, COM_PING, COM_RESET_CONNECTION.
//!
//! Spec: <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_init_db.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_set_option.html>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_prepare.html>.
//!
//! Payloads only (no header): `frame::write_packet` frames them.

use super::flags::CommandCode;

fn command(code: CommandCode, body: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(body.len() + 1);
    p.push(code as u8);
    p.extend_from_slice(body);
    p
}

/// COM_QUERY with `sql` (no attributes: sluice never sets CLIENT_QUERY_ATTRIBUTES on a
/// backend).
pub fn query(sql: &[u8]) -> Vec<u8> {
    command(CommandCode::Query, sql)
}

/// COM_INIT_DB selecting `schema`.
pub fn init_db(schema: &[u8]) -> Vec<u8> {
    command(CommandCode::InitDb, schema)
}

/// COM_STMT_PREPARE of `sql`.
pub fn stmt_prepare(sql: &[u8]) -> Vec<u8> {
    command(CommandCode::StmtPrepare, sql)
}

/// COM_SET_OPTION: MYSQL_OPTION_MULTI_STATEMENTS_ON is 0, _OFF is 1 (u16).
pub fn set_option(multi_statements: bool) -> [u8; 3] {
    [CommandCode::SetOption as u8, u8::from(!multi_statements), 0]
}

/// COM_PING (a health check).
pub fn ping() -> [u8; 1] {
    [CommandCode::Ping as u8]
}

/// COM_RESET_CONNECTION (back to the login's state, keeping the connection).
pub fn reset_connection() -> [u8; 1] {
    [CommandCode::ResetConnection as u8]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_bytes_a_client_library_sends() {
        assert_eq!(query(b"SELECT 1"), b"\x03SELECT 1");
        assert_eq!(init_db(b"shop"), b"\x02shop");
        assert_eq!(stmt_prepare(b"SELECT ?"), b"\x16SELECT ?");
        assert_eq!(set_option(true), [0x1b, 0x00, 0x00]);
        assert_eq!(set_option(false), [0x1b, 0x01, 0x00]);
        assert_eq!(ping(), [0x0e]);
        assert_eq!(reset_connection(), [0x1f]);
    }
}
