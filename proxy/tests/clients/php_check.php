<?php
// PDO (emulated and server-side prepares) and mysqli through sluice or directly: one line per
// result, so the test can compare both transcripts.
// Usage: php php_check.php HOST PORT USER PASSWORD DATABASE
[, $host, $port, $user, $password, $db] = $argv;
$port = (int)$port;
$out = [];
function check($label, $fn) {
    global $out;
    try {
        $out[] = "$label: " . json_encode($fn());
    } catch (Throwable $e) {
        // Error codes and messages only: connection ids differ between direct and sluice.
        $out[] = "$label: error " . $e->getCode() . " " . preg_replace('/\(conn=\d+\)/', '', $e->getMessage());
    }
}
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
// CONNECTION_ID() and its column: the value against the handshake's id (mysqli's thread_id;
// PDO keeps none, so against the first value), since ids differ between direct and sluice.
function identity($label, $what, $got, $id, $meta) {
    global $out;
    $out[] = "$label: CONNECTION_ID() is $what: " . json_encode([(string)$got === (string)$id, $meta]);
}
function pdo_identity($pdo, $label, $expect) {
    $s = $pdo->query("SELECT CONNECTION_ID(), CONNECTION_ID() IS NOT NULL");
    $row = $s->fetch(PDO::FETCH_NUM);
    $meta = array_map(fn($i) => [$s->getColumnMeta($i)['name'], $s->getColumnMeta($i)['native_type'] ?? null], [0, 1]);
    identity($label, "the first one", $row[0], $expect ?? $row[0], [$meta, $row[1]]);
    return $row[0];
}
function mysqli_identity($m, $label) {
    $r = $m->query("SELECT CONNECTION_ID(), CONNECTION_ID() IS NOT NULL");
    $row = $r->fetch_row();
    $meta = array_map(fn($f) => [$f->name, $f->type, $f->length], $r->fetch_fields());
    identity($label, "the handshake's id", $row[0], $m->thread_id, [$meta, $row[1]]);
    $s = $m->prepare("SELECT CONNECTION_ID()");
    $s->execute();
    identity("$label (prepared)", "the handshake's id", $s->get_result()->fetch_row()[0], $m->thread_id, []);
}
foreach (["emulated" => true, "server" => false] as $mode => $emulate) {
    $pdo = new PDO("mysql:host=$host;port=$port;dbname=$db;charset=utf8mb4", $user, $password,
        [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_EMULATE_PREPARES => $emulate]);
    $pdo_id = pdo_identity($pdo, "$mode at login", null);
    check("$mode create", fn() => $pdo->exec("CREATE TABLE IF NOT EXISTS php_t (id INT AUTO_INCREMENT PRIMARY KEY, s VARCHAR(50), d DATETIME, f DOUBLE, b BLOB) CHARSET utf8mb4"));
    check("$mode truncate", fn() => $pdo->exec("TRUNCATE php_t"));
    check("$mode insert", function () use ($pdo) {
        $s = $pdo->prepare("INSERT INTO php_t (s, d, f, b) VALUES (?, ?, ?, ?)");
        $s->execute(["héllo ☃", "2024-02-29 12:34:56", 3.25, "\x00\x01\xff"]);
        $s->execute([null, null, null, null]);
        return [$pdo->lastInsertId(), $s->rowCount()];
    });
    check("$mode select", function () use ($pdo) {
        $s = $pdo->prepare("SELECT id, s, d, f, HEX(b) FROM php_t WHERE id > ? ORDER BY id");
        $s->execute([0]);
        return $s->fetchAll(PDO::FETCH_NUM);
    });
    check("$mode types", fn() => $pdo->query("SELECT 1, -9223372036854775808, 18446744073709551615, 1.5e300, NULL, 'x', CAST('2020-01-01' AS DATE), 0.1 + 0.2")->fetchAll(PDO::FETCH_NUM));
    check("$mode rollback", function () use ($pdo) {
        $pdo->beginTransaction();
        $pdo->exec("INSERT INTO php_t (s) VALUES ('rolled')");
        $pdo->rollBack();
        return $pdo->query("SELECT COUNT(*) FROM php_t WHERE s = 'rolled'")->fetchColumn();
    });
    check("$mode missing table", fn() => $pdo->query("SELECT * FROM nope"));
    check("$mode after error", fn() => $pdo->query("SELECT 42")->fetchColumn());
    pdo_identity($pdo, "$mode after an error", $pdo_id);
    check("$mode multi", function () use ($pdo) {
        $s = $pdo->query("SELECT 1; SELECT 2, 3");
        $r = [];
        do { $r[] = $s->fetchAll(PDO::FETCH_NUM); } while ($s->nextRowset());
        return $r;
    });
    check("$mode procedure", function () use ($pdo) {
        $pdo->exec("DROP PROCEDURE IF EXISTS php_p");
        $pdo->exec("CREATE PROCEDURE php_p(IN x INT) BEGIN SELECT x; SELECT x * 2; END");
        $s = $pdo->prepare("CALL php_p(?)");
        $s->execute([21]);
        $r = [];
        do { $r[] = $s->fetchAll(PDO::FETCH_NUM); } while ($s->nextRowset());
        return $r;
    });
    check("$mode session vars", function () use ($pdo) {
        $pdo->exec("SET time_zone = '+05:00', sql_mode = 'ANSI_QUOTES'");
        return $pdo->query("SELECT @@time_zone, @@sql_mode")->fetch(PDO::FETCH_NUM);
    });
    check("$mode user var", function () use ($pdo) {
        $pdo->exec("SET @a = 5");
        return $pdo->query("SELECT @a")->fetchColumn();
    });
    check("$mode warnings", function () use ($pdo) {
        $pdo->query("SELECT CAST('abc' AS UNSIGNED)")->fetchAll();
        return $pdo->query("SHOW WARNINGS")->fetchAll(PDO::FETCH_NUM);
    });
    check("$mode found rows", function () use ($pdo) {
        $pdo->query("SELECT SQL_CALC_FOUND_ROWS id FROM php_t LIMIT 1")->fetchAll();
        return $pdo->query("SELECT FOUND_ROWS()")->fetchColumn();
    });
    check("$mode 2 MB parameter", function () use ($pdo) {
        $s = $pdo->prepare("SELECT LENGTH(?)");
        $s->execute([str_repeat('z', 2000000)]);
        return $s->fetchColumn();
    });
    check("$mode duplicate", function () use ($pdo) {
        $pdo->exec("CREATE TABLE IF NOT EXISTS php_u (id INT PRIMARY KEY)");
        $pdo->exec("DELETE FROM php_u");
        $pdo->exec("INSERT INTO php_u VALUES (1)");
        return $pdo->exec("INSERT INTO php_u VALUES (1)");
    });
    check("$mode quote", fn() => $pdo->quote("it's"));
    pdo_identity($pdo, "$mode at the end", $pdo_id);
}
$m = new mysqli($host, $user, $password, $db, $port);
mysqli_identity($m, "mysqli at login");
check("mysqli multi_query", function () use ($m) {
    $m->multi_query("SELECT 1; SELECT 'a', 'b'; DO 1");
    $r = [];
    do { if ($res = $m->store_result()) { $r[] = $res->fetch_all(); } } while ($m->more_results() && $m->next_result());
    return $r;
});
check("mysqli prepared", function () use ($m) {
    $s = $m->prepare("SELECT ?, ? + 1");
    $a = "q"; $b = 41;
    $s->bind_param("si", $a, $b);
    $s->execute();
    return $s->get_result()->fetch_all();
});
check("mysqli cursor", function () use ($m) {
    $s = $m->prepare("SELECT seq FROM seq_1_to_5");
    $s->attr_set(MYSQLI_STMT_ATTR_CURSOR_TYPE, MYSQLI_CURSOR_TYPE_READ_ONLY);
    $s->execute();
    $s->bind_result($v);
    $r = [];
    while ($s->fetch()) { $r[] = $v; }
    return $r;
});
check("mysqli ping", fn() => $m->ping());
check("mysqli change_user", fn() => [$m->change_user($user, $password, $db), $m->query("SELECT @a")->fetch_row()]);
mysqli_identity($m, "mysqli after change_user");
check("mysqli change_user wrong password", function () use ($m, $user, $password, $db) {
    try {
        return $m->change_user($user, "wrong-$password", $db);
    } catch (mysqli_sql_exception $e) {
        return "error " . $e->getCode(); // the message names the user, which differs
    }
});
$m = new mysqli($host, $user, $password, $db, $port);
check("mysqli charset", fn() => [$m->set_charset("latin1"), $m->character_set_name(), $m->query("SELECT @@character_set_client")->fetch_row()]);
check("mysqli info", fn() => [$m->query("UPDATE php_t SET f = f WHERE 1 = 1"), $m->info, $m->affected_rows]);
echo implode("\n", $out), "\n";
