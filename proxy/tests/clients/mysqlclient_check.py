"""mysqlclient (MySQLdb, libmariadb) through sluice or directly: prints one line per result.

Usage: mysqlclient_check.py HOST PORT USER PASSWORD DATABASE
"""
import sys

import MySQLdb
from MySQLdb.constants import CLIENT

import session_checks


def main():
    host, port, user, password, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    conn = MySQLdb.connect(host=host, port=port, user=user, password=password, database=db,
                           charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    out = []
    cur = conn.cursor()
    session_checks.identity(conn, cur, out, "at login")
    out.append("%r" % session_checks.rows(
        cur, "SELECT 1 + 1, NULL, 'ünïcødé 𝄞', CAST(18446744073709551615 AS UNSIGNED), 3.25, "
             "DATE('2024-02-29'), %s, %s", ("param ✓", None)))
    cur.execute("DROP TABLE IF EXISTS mc_t")
    cur.execute("CREATE TABLE mc_t (id INT PRIMARY KEY, name VARCHAR(50), b BLOB) CHARSET utf8mb4")
    cur.executemany("INSERT INTO mc_t VALUES (%s, %s, %s)",
                    [(i, "name-%d-ß" % i, bytes([i, 0, 255])) for i in range(1, 21)])
    out.append("rowcount %d" % cur.rowcount)
    cur.execute("SELECT COUNT(*) FROM mc_t; SELECT name, b FROM mc_t WHERE id = 7")
    results = [cur.fetchall()]
    while cur.nextset():
        results.append(cur.fetchall())
    out.append(repr(results))
    for sql in ["INSERT INTO mc_t VALUES (1, 'dup', '')", "SELECT * FROM no_such_table"]:
        try:
            cur.execute(sql)
            out.append("no error for " + sql)
        except MySQLdb.MySQLError as e:
            out.append("error %d" % e.args[0])
    session_checks.identity(conn, cur, out, "after errors")
    # The C client's own session calls: charset and schema switches, ping.
    conn.set_character_set("latin1")
    out.append("charset %r" % session_checks.rows(cur, "SELECT @@character_set_client"))
    conn.set_character_set("utf8mb4")
    conn.select_db("information_schema")
    out.append("select_db %r" % session_checks.rows(cur, "SELECT DATABASE()"))
    conn.select_db(db)
    conn.ping()
    out.append("ping ok, db %r" % session_checks.rows(cur, "SELECT DATABASE(), COUNT(*) FROM mc_t"))
    session_checks.identity(conn, cur, out, "after select_db and ping")
    cur.execute("DROP TABLE mc_t")
    cur.close()
    session_checks.session_variables(conn, out, MySQLdb.MySQLError)
    # COM_SET_OPTION (mysql_set_server_option): multi-statements off, then on again. Through
    # sluice the option follows the session to whichever backend runs the next statement.
    for option, label in ((1, "off"), (0, "on")):
        MySQLdb._mysql.connection.set_server_option(conn, option)
        cur = conn.cursor()
        try:
            cur.execute("SELECT 1; SELECT 2")
            results = [cur.fetchall()]
            while cur.nextset():
                results.append(cur.fetchall())
            out.append("multi-statements %s: %r" % (label, results))
        except MySQLdb.MySQLError as e:
            out.append("multi-statements %s: error %d" % (label, e.args[0]))
        cur.close()
    conn.close()
    print("\n".join(out))


if __name__ == "__main__":
    main()
