"""One login with PyMySQL, for the tests of accounts read from the server: it can bind the
client's own address (so the server, or sluice, sees 127.0.0.2) and speaks
caching_sha2_password (full authentication over RSA needs the `cryptography` package).

usage: login_check.py HOST PORT USER PASSWORD BIND_ADDRESS [SQL]
With LOGIN_CHECK_TLS=1 in the environment it uses TLS (certificate not checked). Prints `ok <first column of SQL's first row>` (SQL defaults to SELECT CURRENT_USER()), or
`error <code> <message>`.
"""

import os
import sys

import pymysql


def main():
    host, port, user, password, bind = sys.argv[1:6]
    sql = sys.argv[6] if len(sys.argv) > 6 else "SELECT CURRENT_USER()"
    try:
        conn = pymysql.connect(
            host=host,
            port=int(port),
            user=user,
            password=password,
            bind_address=bind or None,
            connect_timeout=10,
            # No CA given: TLS without checking the certificate.
            ssl={"fake_flag_to_enable_tls": True} if os.environ.get("LOGIN_CHECK_TLS") else None,
        )
    except pymysql.err.MySQLError as e:
        print("error", e.args[0], e.args[1] if len(e.args) > 1 else "")
        return
    try:
        with conn.cursor() as c:
            c.execute(sql)
            print("ok", c.fetchone()[0])
    except pymysql.err.MySQLError as e:
        print("error", e.args[0], e.args[1] if len(e.args) > 1 else "")
    finally:
        conn.close()


if __name__ == "__main__":
    main()
