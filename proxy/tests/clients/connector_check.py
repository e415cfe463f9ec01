"""mysql-connector-python (pure Python, or its C extension: connector_cext_check.py) through
sluice or directly: server-side prepared statements (`cursor(prepared=True)`), COM_CHANGE_USER,
COM_RESET_CONNECTION and the shared session-variable checks; prints one line per result.

Usage: connector_check.py HOST PORT USER PASSWORD DATABASE
"""
import sys

import mysql.connector

import session_checks


def prepared_identity(conn, out, label):
    """CONNECTION_ID() over the binary protocol."""
    ps = conn.cursor(prepared=True)
    ps.execute("SELECT CONNECTION_ID(), CONNECTION_ID() = %s", (session_checks.handshake_id(conn),))
    got = ps.fetchall()
    out.append("%s: prepared CONNECTION_ID() is the handshake's id %r, columns %r" % (
        label, [got[0][0] == session_checks.handshake_id(conn), got[0][1]],
        [d[0] for d in ps.description]))
    ps.close()


def main(use_pure=True):
    host, port, user, password, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    conn = mysql.connector.connect(host=host, port=port, user=user, password=password, database=db,
                                   charset="utf8mb4", collation="utf8mb4_general_ci", use_pure=use_pure,
                                   autocommit=True, ssl_disabled=True)
    out = ["implementation %s" % type(conn).__name__]
    cur = conn.cursor()
    session_checks.identity(conn, cur, out, "at login")
    prepared_identity(conn, out, "at login")
    cur.execute("DROP TABLE IF EXISTS mcp_t")
    cur.execute("CREATE TABLE mcp_t (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(10,2), "
                "d DATETIME(3), b VARBINARY(10)) CHARSET utf8mb4")
    cur.close()
    # Binary protocol: one statement executed many times, with NULLs and typed values.
    ps = conn.cursor(prepared=True)
    for i in range(1, 21):
        ps.execute("INSERT INTO mcp_t VALUES (%s, %s, %s, %s, %s)",
                   (i, "név-%d-𝄞" % i if i % 5 else None, "%d.%02d" % (i * 7, i),
                    "2024-02-29 12:34:%02d.125" % i, bytes([i, 0, 255])))
    for lo, hi in [(1, 3), (18, 25), (40, 50)]:
        ps.execute("SELECT id, name, amount, d, b FROM mcp_t WHERE id BETWEEN %s AND %s ORDER BY id", (lo, hi))
        out.append("range %d %d %r" % (lo, hi, ps.fetchall()))
    ps.execute("SELECT COUNT(*), SUM(amount), MAX(name), %s FROM mcp_t", ("param ✓",))
    out.append("agg %r" % ps.fetchall())
    try:
        ps.execute("INSERT INTO mcp_t (id) VALUES (%s)", (1,))
        out.append("no duplicate error")
    except mysql.connector.Error as e:
        out.append("prepared error %d" % e.errno)
    ps.execute("SELECT name FROM mcp_t WHERE id = %s", (7,))
    out.append("after error %r" % ps.fetchall())
    ps.close()
    # COM_CHANGE_USER: the new session forgets user variables and session settings.
    cur = conn.cursor()
    cur.execute("SET @who = 'before', time_zone = '+02:00'")
    conn.cmd_change_user(username=user, password=password, database=db)
    out.append("after change_user %r" % session_checks.rows(cur, "SELECT @who, @@time_zone, DATABASE() = %s", (db,)))
    session_checks.identity(conn, cur, out, "after change_user")
    # COM_RESET_CONNECTION.
    cur.execute("SET @who = 'again', SESSION sql_mode = 'ANSI_QUOTES'")
    conn.cmd_reset_connection()
    out.append("after reset %r" % session_checks.rows(cur, "SELECT @who, @@sql_mode LIKE '%%ANSI_QUOTES%%'"))
    session_checks.identity(conn, cur, out, "after reset")
    prepared_identity(conn, out, "after reset")
    ps = conn.cursor(prepared=True)
    ps.execute("SELECT COUNT(*) FROM mcp_t WHERE id > %s", (10,))
    out.append("prepared after reset %r" % ps.fetchall())
    ps.close()
    cur.execute("DROP TABLE mcp_t")
    cur.close()
    session_checks.session_variables(conn, out, mysql.connector.Error)
    conn.close()
    print("\n".join(out))


if __name__ == "__main__":
    main()
