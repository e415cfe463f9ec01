"""PyMySQL through sluice or directly: prints one line per result, so the test can compare both.

Usage: pymysql_check.py HOST PORT USER PASSWORD DATABASE
"""
import sys

import pymysql
from pymysql.constants import CLIENT

import session_checks


def main():
    host, port, user, password, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    conn = pymysql.connect(host=host, port=port, user=user, password=password, database=db,
                           charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    out = []
    with conn.cursor() as cur:
        session_checks.identity(conn, cur, out, "at login")
        cur.execute("SELECT DATABASE(), 1 + 1, NULL, 'ünïcødé 𝄞', CAST(-9223372036854775808 AS SIGNED), "
                    "CAST(18446744073709551615 AS UNSIGNED), 3.25, DATE('2024-02-29')")
        out.append(repr(cur.fetchall()))
        cur.execute("DROP TABLE IF EXISTS py_t")
        cur.execute("CREATE TABLE py_t (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(10,2)) CHARSET utf8mb4")
        cur.executemany("INSERT INTO py_t VALUES (%s, %s, %s)",
                        [(i, "name-%d-ß" % i, "%d.%02d" % (i * 3, i)) for i in range(1, 51)])
        out.append("rowcount %d" % cur.rowcount)
        # Multi-statement: every result set, in order.
        cur.execute("SELECT COUNT(*) FROM py_t; SELECT name FROM py_t WHERE id = 7; UPDATE py_t SET amount = 0 WHERE id = 1")
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall())
        out.append(repr(results))
        # A transaction rolled back leaves nothing behind.
        conn.begin()
        cur.execute("INSERT INTO py_t VALUES (100, 'rolled back', 1)")
        conn.rollback()
        cur.execute("SELECT COUNT(*) FROM py_t WHERE id = 100")
        out.append(repr(cur.fetchall()))
        # Errors keep the session usable.
        for sql in ["INSERT INTO py_t VALUES (1, 'dup', 0)", "SELECT * FROM no_such_table", "SELEKT 1"]:
            try:
                cur.execute(sql)
                out.append("no error for " + sql)
            except pymysql.MySQLError as e:
                out.append("error %d" % e.args[0])
        session_checks.identity(conn, cur, out, "after errors")
        cur.execute("SELECT id, name, amount FROM py_t ORDER BY id LIMIT 5")
        out.append(repr(cur.fetchall()))
        cur.execute("SELECT SUM(amount), MAX(name) FROM py_t")
        out.append(repr(cur.fetchall()))
        cur.execute("DROP TABLE py_t")
    session_checks.session_variables(conn, out, pymysql.MySQLError)
    conn.close()
    print("\n".join(out))


if __name__ == "__main__":
    main()
