//! Error codes and SQLSTATEs of the errors sluice itself sends to clients.
//!
//! Spec: <https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html>,
//! <https://dev.mysql.com/doc/mysql-errors/8.0/en/client-error-reference.html>,
//! <https://mariadb.com/kb/en/mariadb-error-code-reference/>.
//!
//! Codes 9000+ are sluice's own (outside the server and client ranges), like ProxySQL's 9001.

/// An error number with its SQLSTATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    pub code: u16,
    pub sql_state: &'static str,
}

const fn code(code: u16, sql_state: &'static str) -> ErrorCode {
    ErrorCode { code, sql_state }
}

/// ER_CON_COUNT_ERROR: too many client connections.
pub const CON_COUNT: ErrorCode = code(1040, "08004");
/// ER_HANDSHAKE_ERROR: bad handshake.
pub const HANDSHAKE: ErrorCode = code(1043, "08S01");
/// ER_ACCESS_DENIED_ERROR.
pub const ACCESS_DENIED: ErrorCode = code(1045, "28000");
/// ER_UNKNOWN_COM_ERROR: command not supported.
pub const UNKNOWN_COM: ErrorCode = code(1047, "08S01");
/// ER_BAD_DB_ERROR: unknown database.
pub const BAD_DB: ErrorCode = code(1049, "42000");
/// ER_SERVER_SHUTDOWN.
pub const SHUTDOWN: ErrorCode = code(1053, "08S01");
/// ER_PARSE_ERROR: a command sluice cannot parse (the admin console).
pub const PARSE_ERROR: ErrorCode = code(1064, "42000");
/// ER_NO_SUCH_THREAD: KILL of an unknown connection id.
pub const NO_SUCH_THREAD: ErrorCode = code(1094, "HY000");
/// ER_KILL_DENIED_ERROR: KILL of a connection that is not yours.
pub const KILL_DENIED: ErrorCode = code(1095, "HY000");
/// ER_UNKNOWN_ERROR: a failure with no more specific code (the admin console's RELOAD).
pub const UNKNOWN_ERROR: ErrorCode = code(1105, "HY000");
/// ER_NET_PACKET_TOO_LARGE: larger than max_allowed_packet.
pub const NET_PACKET_TOO_LARGE: ErrorCode = code(1153, "08S01");
/// ER_NET_PACKETS_OUT_OF_ORDER.
pub const NET_PACKETS_OUT_OF_ORDER: ErrorCode = code(1156, "08S01");
/// ER_NET_READ_INTERRUPTED: client read timeout.
pub const NET_READ_INTERRUPTED: ErrorCode = code(1159, "08S01");
/// ER_WRONG_VALUE_FOR_VAR: e.g. a client character set the server cannot parse in.
pub const WRONG_VALUE_FOR_VAR: ErrorCode = code(1231, "42000");
/// ER_NOT_SUPPORTED_YET.
pub const NOT_SUPPORTED: ErrorCode = code(1235, "42000");
/// ER_UNKNOWN_STMT_HANDLER: unknown prepared statement id.
pub const UNKNOWN_STMT_HANDLER: ErrorCode = code(1243, "HY000");
/// ER_STMT_HAS_NO_OPEN_CURSOR: a COM_STMT_FETCH of a statement without a cursor.
pub const STMT_HAS_NO_OPEN_CURSOR: ErrorCode = code(1421, "HY000");
/// ER_SYNTAX_ERROR: the server's other parse error (as ER_PARSE_ERROR, nothing ran).
pub const SYNTAX_ERROR: ErrorCode = code(1149, "42000");
/// ER_UNSUPPORTED_PS: a prepared statement where only text commands are taken.
pub const UNSUPPORTED_PS: ErrorCode = code(1295, "HY000");
/// ER_QUERY_INTERRUPTED: the statement was killed.
pub const QUERY_INTERRUPTED: ErrorCode = code(1317, "70100");
/// ER_MAX_PREPARED_STMT_COUNT_REACHED: a session holds as many prepared statements as it may.
pub const MAX_PREPARED_STMT_COUNT_REACHED: ErrorCode = code(1461, "42000");
/// ER_DBACCESS_DENIED_ERROR: the account may not use that database.
pub const DBACCESS_DENIED: ErrorCode = code(1044, "42000");
/// ER_HOST_IS_BLOCKED: too many connection errors from this host.
pub const HOST_IS_BLOCKED: ErrorCode = code(1129, "HY000");
/// ER_NEW_ABORTING_CONNECTION: the server aborted the connection (often while starting).
pub const NEW_ABORTING_CONNECTION: ErrorCode = code(1184, "08S01");
/// ER_TOO_MANY_USER_CONNECTIONS: the account's max_user_connections is reached.
pub const TOO_MANY_USER_CONNECTIONS: ErrorCode = code(1203, "42000");
/// ER_NOT_SUPPORTED_AUTH_MODE: the client cannot speak the account's auth protocol.
pub const NOT_SUPPORTED_AUTH_MODE: ErrorCode = code(1251, "08004");
/// ER_SERVER_IS_IN_SECURE_AUTH_MODE: an old-style password refused.
pub const SERVER_IS_IN_SECURE_AUTH_MODE: ErrorCode = code(1275, "HY000");
/// ER_ACCESS_DENIED_NO_PASSWORD_ERROR: no such account for this plugin.
pub const ACCESS_DENIED_NO_PASSWORD: ErrorCode = code(1698, "28000");
/// ER_CONNECTION_KILLED (MariaDB): KILL CONNECTION ended this session.
pub const CONNECTION_KILLED: ErrorCode = code(1927, "70100");
/// ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8.0.24+): wait_timeout ended this session.
pub const CLIENT_INTERACTION_TIMEOUT: ErrorCode = code(4031, "HY000");
/// `ER_OPTION_PREVENTS_STATEMENT`: "running with the --read-only option"; sluice uses it
/// when no single writer exists within writer_wait_timeout.
pub const OPTION_PREVENTS_STATEMENT: ErrorCode = code(1290, "HY000");
/// ER_NOT_ALLOWED_COMMAND: a query rule's `error` blocked the statement (ProxySQL's code for
/// its rules' error_msg).
pub const NOT_ALLOWED_COMMAND: ErrorCode = code(1148, "42000");
/// ER_USER_LIMIT_REACHED: a per-user limit (max_client_connections, max_concurrency), as MySQL
/// answers an account's resource limit.
pub const USER_LIMIT_REACHED: ErrorCode = code(1226, "42000");
/// ER_STATEMENT_TIMEOUT (MariaDB): max_statement_time ended the statement.
pub const STATEMENT_TIMEOUT: ErrorCode = code(1969, "70100");
/// ER_QUERY_TIMEOUT (MySQL): max_execution_time ended the statement.
pub const QUERY_TIMEOUT: ErrorCode = code(3024, "HY000");
/// ER_MUST_CHANGE_PASSWORD_LOGIN: the account's password has expired.
pub const MUST_CHANGE_PASSWORD_LOGIN: ErrorCode = code(1862, "HY000");
/// ER_ACCOUNT_HAS_BEEN_LOCKED: the account is locked (ACCOUNT LOCK).
pub const ACCOUNT_LOCKED: ErrorCode = code(4151, "HY000");
/// ER_SECURE_TRANSPORT_REQUIRED: a plain client under `require_secure_transport`.
pub const SECURE_TRANSPORT_REQUIRED: ErrorCode = code(3159, "HY000");
// sluice's own conditions use 9001-9005, never the client-library range 2000-2999
// (CR_CONN_HOST_ERROR, CR_SERVER_LOST, ...): MariaDB Connector/C, under the `mariadb` CLI,
// mysqlclient and DBD::MariaDB, reports a server-sent ERR with such a code as "2027 Received
// malformed packet" and drops the message.
/// sluice: no execution slot became free within the queue timeout.
pub const QUEUE_TIMEOUT: ErrorCode = code(9001, "HY000");
/// sluice: admission control (`max_queue_wait`) refused the statement; retry shortly.
pub const OVERLOADED: ErrorCode = code(9002, "HY000");
/// sluice: the backend server cannot be reached (the role of CR_CONN_HOST_ERROR 2003).
pub const BACKEND_UNREACHABLE: ErrorCode = code(9003, "HY000");
/// sluice: the backend connection broke during a statement (the role of CR_SERVER_LOST 2013).
pub const BACKEND_LOST: ErrorCode = code(9004, "HY000");
/// sluice: the statement would pin its session to a backend, and every connection pinned
/// sessions may use (max_backend_connections - pool_size) stayed taken for `pin_wait`.
pub const PIN_LIMIT: ErrorCode = code(9005, "HY000");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_states_are_five_ascii_characters() {
        for c in [
            CON_COUNT,
            MUST_CHANGE_PASSWORD_LOGIN,
            ACCOUNT_LOCKED,
            HANDSHAKE,
            ACCESS_DENIED,
            UNKNOWN_COM,
            BAD_DB,
            SHUTDOWN,
            PARSE_ERROR,
            NO_SUCH_THREAD,
            KILL_DENIED,
            UNKNOWN_ERROR,
            NET_PACKET_TOO_LARGE,
            NET_PACKETS_OUT_OF_ORDER,
            NET_READ_INTERRUPTED,
            WRONG_VALUE_FOR_VAR,
            NOT_SUPPORTED,
            UNKNOWN_STMT_HANDLER,
            STMT_HAS_NO_OPEN_CURSOR,
            SYNTAX_ERROR,
            UNSUPPORTED_PS,
            QUERY_INTERRUPTED,
            MAX_PREPARED_STMT_COUNT_REACHED,
            DBACCESS_DENIED,
            HOST_IS_BLOCKED,
            NEW_ABORTING_CONNECTION,
            TOO_MANY_USER_CONNECTIONS,
            NOT_SUPPORTED_AUTH_MODE,
            SERVER_IS_IN_SECURE_AUTH_MODE,
            ACCESS_DENIED_NO_PASSWORD,
            CONNECTION_KILLED,
            CLIENT_INTERACTION_TIMEOUT,
            SECURE_TRANSPORT_REQUIRED,
            NOT_ALLOWED_COMMAND,
            USER_LIMIT_REACHED,
            STATEMENT_TIMEOUT,
            QUERY_TIMEOUT,
            BACKEND_UNREACHABLE,
            BACKEND_LOST,
            QUEUE_TIMEOUT,
            OVERLOADED,
            PIN_LIMIT,
        ] {
            assert_eq!(c.sql_state.len(), 5, "{c:?}");
            assert!(
                c.sql_state.bytes().all(|b| b.is_ascii_alphanumeric()),
                "{c:?}"
            );
        }
    }
}
