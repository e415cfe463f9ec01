// MariaDB Connector/J through sluice or directly, with client-side and server-side prepared
// statements: one line per result, so the test can compare both transcripts.
// Usage: java -cp mariadb-java-client.jar:DIR JdbcCheck HOST PORT USER PASSWORD DATABASE
import java.sql.*;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class JdbcCheck {
    interface Check { Object run() throws Exception; }

    static final List<String> out = new ArrayList<>();

    static void check(String label, Check c) {
        try {
            out.add(label + ": " + c.run());
        } catch (SQLException e) {
            // Code and SQLSTATE only: messages carry connection ids and user names.
            out.add(label + ": error " + e.getErrorCode() + " " + e.getSQLState());
        } catch (Exception e) {
            out.add(label + ": exception " + e.getClass().getSimpleName());
        }
    }

    static String rows(ResultSet rs) throws SQLException {
        StringBuilder b = new StringBuilder();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            b.append('[');
            for (int i = 1; i <= n; i++) b.append(rs.getString(i)).append(i < n ? "," : "");
            b.append(']');
        }
        return b.toString();
    }

    /** CONNECTION_ID() against the id of the handshake (the driver's getServerThreadId()), over
     *  a statement and a prepared statement, with the column's name and type: ids differ
     *  between direct and sluice, so only the comparison prints. */
    static String identity(Connection c) throws SQLException {
        long me = c.unwrap(org.mariadb.jdbc.MariaDbConnection.class).getServerThreadId();
        StringBuilder b = new StringBuilder();
        ResultSet rs = c.createStatement().executeQuery("SELECT CONNECTION_ID(), CONNECTION_ID() IS NOT NULL");
        ResultSetMetaData md = rs.getMetaData();
        rs.next();
        b.append(rs.getLong(1) == me).append(' ').append(rs.getString(2));
        for (int i = 1; i <= 2; i++) b.append(" [").append(md.getColumnLabel(i)).append(' ').append(md.getColumnTypeName(i)).append(']');
        PreparedStatement ps = c.prepareStatement("SELECT CONNECTION_ID() = ?");
        ps.setLong(1, me);
        ResultSet p = ps.executeQuery();
        p.next();
        return b.append(" prepared ").append(p.getString(1)).toString();
    }

    public static void main(String[] a) throws Exception {
        String base = "jdbc:mariadb://" + a[0] + ":" + a[1] + "/" + a[4] + "?";
        for (String opts : new String[] {"useServerPrepStmts=false", "useServerPrepStmts=true&cachePrepStmts=true"}) {
            try (Connection c = DriverManager.getConnection(base + opts, a[2], a[3])) {
                String p = "[" + opts + "] ";
                check(p + "CONNECTION_ID() is the handshake's id", () -> identity(c));
                check(p + "create", () -> c.createStatement().executeUpdate(
                    "CREATE TABLE IF NOT EXISTS j_t (id INT AUTO_INCREMENT PRIMARY KEY, s VARCHAR(50), d DATETIME(3), n DECIMAL(20,6)) CHARSET utf8mb4"));
                check(p + "insert", () -> {
                    PreparedStatement s = c.prepareStatement("INSERT INTO j_t (s, d, n) VALUES (?, ?, ?)", Statement.RETURN_GENERATED_KEYS);
                    s.setString(1, "héllo ☃");
                    s.setTimestamp(2, Timestamp.valueOf("2024-02-29 12:34:56.789"));
                    s.setBigDecimal(3, new java.math.BigDecimal("12345.678901"));
                    int n = s.executeUpdate();
                    ResultSet k = s.getGeneratedKeys();
                    return n + " key " + (k.next() && k.getLong(1) > 0);
                });
                check(p + "batch", () -> {
                    PreparedStatement s = c.prepareStatement("INSERT INTO j_t (s) VALUES (?)");
                    for (int i = 0; i < 5; i++) { s.setString(1, "b" + i); s.addBatch(); }
                    return Arrays.toString(s.executeBatch());
                });
                check(p + "select", () -> {
                    PreparedStatement s = c.prepareStatement("SELECT s, d, n FROM j_t WHERE s = ?");
                    s.setString(1, "héllo ☃");
                    return rows(s.executeQuery());
                });
                check(p + "rollback", () -> {
                    c.setAutoCommit(false);
                    c.createStatement().executeUpdate("INSERT INTO j_t (s) VALUES ('rb')");
                    c.rollback();
                    c.setAutoCommit(true);
                    return rows(c.createStatement().executeQuery("SELECT COUNT(*) FROM j_t WHERE s = 'rb'"));
                });
                check(p + "isolation", () -> {
                    c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
                    return rows(c.createStatement().executeQuery("SELECT @@tx_isolation"));
                });
                check(p + "read only", () -> {
                    c.setReadOnly(true);
                    String r = rows(c.createStatement().executeQuery("SELECT @@tx_read_only"));
                    c.setReadOnly(false);
                    return r;
                });
                check(p + "missing table", () -> c.createStatement().executeQuery("SELECT * FROM nope"));
                check(p + "after error", () -> rows(c.createStatement().executeQuery("SELECT 42")));
                check(p + "callable", () -> {
                    c.createStatement().execute("DROP PROCEDURE IF EXISTS j_p");
                    c.createStatement().execute("CREATE PROCEDURE j_p(IN x INT, OUT y INT) BEGIN SELECT x; SET y = x * 2; END");
                    CallableStatement cs = c.prepareCall("{call j_p(?, ?)}");
                    cs.setInt(1, 21);
                    cs.registerOutParameter(2, Types.INTEGER);
                    cs.execute();
                    return rows(cs.getResultSet()) + " out " + cs.getInt(2);
                });
                check(p + "fetch size", () -> {
                    Statement s = c.createStatement();
                    s.setFetchSize(2);
                    return rows(s.executeQuery("SELECT seq FROM seq_1_to_7"));
                });
                check(p + "nulls and extremes", () -> {
                    PreparedStatement s = c.prepareStatement("SELECT ? IS NULL, ?, ?");
                    s.setNull(1, Types.INTEGER);
                    s.setLong(2, Long.MIN_VALUE);
                    s.setDouble(3, Double.MAX_VALUE);
                    return rows(s.executeQuery());
                });
                check(p + "3 MB parameter", () -> {
                    PreparedStatement s = c.prepareStatement("SELECT LENGTH(?)");
                    s.setBytes(1, new byte[3_000_000]);
                    return rows(s.executeQuery());
                });
                check(p + "time zone", () -> {
                    c.createStatement().execute("SET time_zone = '+03:00'");
                    return rows(c.createStatement().executeQuery("SELECT @@time_zone"));
                });
                check(p + "warning", () -> {
                    Statement s = c.createStatement();
                    s.executeQuery("SELECT CAST('abc' AS UNSIGNED)");
                    SQLWarning w = s.getWarnings();
                    return w == null ? "none" : w.getErrorCode() + " " + w.getMessage();
                });
                check(p + "valid", () -> c.isValid(2));
                check(p + "CONNECTION_ID() is still the handshake's id", () -> identity(c));
                check(p + "cleanup", () -> c.createStatement().executeUpdate("DELETE FROM j_t"));
            }
        }
        for (String line : out) System.out.println(line);
    }
}
