// node mysql2 through sluice or directly: prepared statements (`execute`), session variables,
// `changeUser` and `reset` (COM_RESET_CONNECTION); prints one line per result so both runs can be compared.
//
// Usage: node mysql2_check.js HOST PORT USER PASSWORD DATABASE
'use strict';
const mysql = require('mysql2/promise');

const show = (v) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));

async function main() {
  const [host, port, user, password, database] = process.argv.slice(2);
  const conn = await mysql.createConnection({
    host, port: Number(port), user, password, database,
    charset: 'UTF8MB4_UNICODE_CI', dateStrings: true, supportBigNumbers: true, bigNumberStrings: true,
  });
  const out = [];
  const q = async (sql, params) => (await conn.query(sql, params))[0];
  const x = async (sql, params) => (await conn.execute(sql, params))[0];
  // CONNECTION_ID() against the id of the handshake (threadId), over text and binary, with
  // the column names and types a direct session gets (ids differ, so only equality prints).
  const identity = async (c, label) => {
    for (const [proto, run] of [['text', c.query.bind(c)], ['binary', c.execute.bind(c)]]) {
      const [rows, fields] = await run('SELECT CONNECTION_ID(), CONNECTION_ID() + 0, CONNECTION_ID() IS NOT NULL');
      const v = Object.values(rows[0]).map(String);
      const me = String(c.threadId);
      out.push(`${label} ${proto}: CONNECTION_ID() is the handshake's id ${show([v[0] === me, v[1] === me, v[2]])}` +
        ` columns ${show(fields.map((f) => [f.name, f.columnType, f.columnLength]))}`);
    }
  };
  await identity(conn, 'at login');

  await q('DROP TABLE IF EXISTS m2_t');
  await q('CREATE TABLE m2_t (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(10,2), ' +
          'd DATETIME(3), b VARBINARY(10)) CHARSET utf8mb4');
  // Binary protocol: mysql2 caches statements per connection and reuses them.
  for (let i = 1; i <= 20; i++) {
    await x('INSERT INTO m2_t VALUES (?, ?, ?, ?, ?)',
      [i, i % 5 ? `név-${i}-𝄞` : null, `${i * 7}.${String(i).padStart(2, '0')}`,
        `2024-02-29 12:34:${String(i).padStart(2, '0')}.125`, Buffer.from([i, 0, 255])]);
  }
  for (const [lo, hi] of [[1, 3], [18, 25], [40, 50]]) {
    out.push(`range ${lo} ${hi} ${show(await x('SELECT id, name, amount, d, HEX(b) h FROM m2_t WHERE id BETWEEN ? AND ? ORDER BY id', [lo, hi]))}`);
  }
  out.push(`agg ${show(await x('SELECT COUNT(*) n, SUM(amount) s, MAX(name) m, ? p FROM m2_t', ['param ✓']))}`);
  try {
    await x('INSERT INTO m2_t (id) VALUES (?)', [1]);
    out.push('no duplicate error');
  } catch (e) {
    out.push(`execute error ${e.errno} ${e.sqlState}`);
  }
  out.push(`after error ${show(await x('SELECT name FROM m2_t WHERE id = ?', [7]))}`);
  await identity(conn, 'after an error');
  const stmt = await conn.prepare('SELECT id * ? AS v FROM m2_t WHERE id <= ? ORDER BY id');
  out.push(`prepare ${show((await stmt.execute([3, 4]))[0])}`);
  await stmt.close();

  // Session variables, read back on every statement (each may run on another backend).
  await q("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci");
  await q("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE', time_zone = '+05:30'");
  const firstId = conn.threadId;
  let stable = true;
  for (let i = 0; i < 30; i++) {
    const r = await x('SELECT @@sql_mode m, @@time_zone tz, @@collation_connection c, FROM_UNIXTIME(0) t, ? i', [i]);
    if (i === 0 || i === 29) out.push(`state ${show(r)}`);
    const [{ id }] = await x('SELECT CONNECTION_ID() id');
    stable = stable && String(id) === String(firstId);
  }
  out.push(`CONNECTION_ID() stayed the handshake's id ${stable}`);
  try {
    await x('INSERT INTO m2_t (id, name) VALUES (?, ?)', [100, 'x'.repeat(60)]);
    out.push('strict mode did not reject');
  } catch (e) {
    out.push(`strict error ${e.errno}`);
  }

  // changeUser: a fresh session (user variables and session settings gone), same schema.
  await q("SET @who = 'before'");
  await conn.changeUser({ user, password, database });
  out.push(`after changeUser ${show(await q('SELECT @who w, @@time_zone = @@global.time_zone g, DATABASE() = ? d', [database]))}`);
  out.push(`execute after changeUser ${show(await x('SELECT COUNT(*) n FROM m2_t WHERE id > ?', [10]))}`);
  await identity(conn, 'after changeUser');
  try {
    await conn.changeUser({ user, password: password + 'x', database });
    out.push('changeUser with a wrong password succeeded');
  } catch (e) {
    out.push(`changeUser wrong password ${e.errno}`);
  }
  await conn.end().catch(() => {});

  const c2 = await mysql.createConnection({ host, port: Number(port), user, password, database });
  await c2.query("SET @who = 'again', SESSION sql_mode = 'ANSI_QUOTES'");
  await c2.execute('SELECT ? + 1 AS v', [1]);
  await c2.reset(); // COM_RESET_CONNECTION
  out.push(`after reset ${show((await c2.query("SELECT @who w, @@sql_mode LIKE '%ANSI_QUOTES%' a"))[0])}`);
  out.push(`execute after reset ${show((await c2.execute('SELECT ? + 1 AS v', [41]))[0])}`);
  await identity(c2, 'after reset');
  await c2.query('DROP TABLE m2_t');
  await c2.end();
  console.log(out.join('\n'));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
