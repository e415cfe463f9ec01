"""Session-variable checks shared by the Python driver scripts (any DB-API 2 connection
whose paramstyle is `format`): each check appends canonical lines to `out`, which must be
the same through sluice as directly. Connection ids differ between the two, so what is
printed is whether CONNECTION_ID() is the id the driver got in the handshake, and stays it."""


def set_autocommit(conn, on):
    # PyMySQL and MySQLdb have a method, mysql-connector a property.
    if callable(getattr(conn, "autocommit", None)):
        conn.autocommit(on)
    else:
        conn.autocommit = on


def rows(cur, sql, params=None):
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def handshake_id(conn):
    """The connection id the server (or sluice) sent in the handshake, as the driver keeps it:
    PyMySQL and MySQLdb have thread_id(), mysql-connector (pure and C) connection_id."""
    thread_id = getattr(conn, "thread_id", None)
    return thread_id() if callable(thread_id) else conn.connection_id


def identity(conn, cur, out, label):
    """CONNECTION_ID() alone, in expressions and in a WHERE clause: the handshake's id, with
    the column names and types a direct session gets."""
    me = handshake_id(conn)
    got = rows(cur, "SELECT CONNECTION_ID(), CONNECTION_ID() + 0, CONNECTION_ID() IS NOT NULL, "
                    "(SELECT CONNECTION_ID()) AS sub")
    columns = [(d[0], d[1]) for d in cur.description]
    out.append("%s: CONNECTION_ID() is the handshake's id %r, columns %r" % (
        label, [v == me for v in got[0][:2]] + [got[0][2], got[0][3] == me], columns))
    where = rows(cur, "SELECT COUNT(*) FROM (SELECT 1) d WHERE CONNECTION_ID() = %s", (me,))
    out.append("%s: WHERE CONNECTION_ID() = handshake id matches %r" % (label, where))


def session_variables(conn, out, err_types):
    cur = conn.cursor()
    cur.execute("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")
    out.append("names %r" % rows(cur, "SELECT @@character_set_client, @@character_set_results, "
                                      "@@collation_connection"))
    cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,ONLY_FULL_GROUP_BY'")
    cur.execute("SET time_zone = '+05:30', SESSION sql_select_limit = 3")
    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
    first_id = handshake_id(conn)
    stable = True
    # Many statements: on a pool these run on whichever backend is free; the session's
    # state must follow them every time.
    for i in range(30):
        got = rows(cur, "SELECT @@sql_mode, @@time_zone, @@tx_isolation, FROM_UNIXTIME(0), %s",
                   (i,))
        if i in (0, 29):
            out.append("state %r" % got)
        stable = stable and rows(cur, "SELECT CONNECTION_ID()")[0][0] == first_id
    out.append("CONNECTION_ID() stayed the handshake's id %s" % stable)
    out.append("select limit %r" % rows(cur, "SELECT seq FROM seq_1_to_10"))
    cur.execute("SET SESSION sql_select_limit = DEFAULT")
    out.append("limit default %r" % rows(cur, "SELECT COUNT(*) FROM (SELECT seq FROM seq_1_to_10) t"))
    cur.execute("DROP TABLE IF EXISTS sv_t")
    cur.execute("CREATE TABLE sv_t (id INT PRIMARY KEY, s VARCHAR(3)) CHARSET utf8mb4")
    try:
        cur.execute("INSERT INTO sv_t VALUES (%s, %s)", (1, "too long"))
        out.append("strict mode did not reject")
    except err_types as e:
        out.append("strict error %d" % e.args[0])
    cur.execute("SET SESSION sql_mode = ''")
    cur.execute("INSERT INTO sv_t VALUES (%s, %s)", (1, "too long"))
    # Warnings belong to the statement just run, wherever it ran.
    out.append("warnings %r" % [r[1] for r in rows(cur, "SHOW WARNINGS")])
    out.append("relaxed %r" % rows(cur, "SELECT id, s FROM sv_t"))
    # Schema changes follow the session too.
    db = rows(cur, "SELECT DATABASE()")[0][0]
    cur.execute("USE information_schema")
    out.append("schema %r" % rows(cur, "SELECT DATABASE()"))
    cur.execute("USE `%s`" % db)
    out.append("schema back %r" % (rows(cur, "SELECT DATABASE()")[0][0] == db))
    # autocommit off: the transaction holds its backend until rollback.
    set_autocommit(conn, False)
    cur.execute("INSERT INTO sv_t VALUES (%s, %s)", (2, "tx"))
    out.append("in tx %r" % rows(cur, "SELECT COUNT(*) FROM sv_t"))
    conn.rollback()
    out.append("after rollback %r" % rows(cur, "SELECT COUNT(*) FROM sv_t"))
    conn.commit()
    set_autocommit(conn, True)
    cur.execute("DROP TABLE sv_t")
    cur.close()
