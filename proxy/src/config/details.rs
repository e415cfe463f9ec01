//! The long form of the settings' documentation: what a setting's help text (at most 300
//! characters, `settings.rs`) leaves out. `docs/config.md` prints it under "Settings in
//! detail", and the table row links to it. Markdown; paragraphs are separated by blank lines.

/// (setting name, its long explanation), in the order of `SETTINGS`.
pub(crate) const DETAILS: &[(&str, &str)] = &[
    (
        "users",
        "A `[[users]]` table has `name`, `password` and optional `auth_plugin`, \
         `backend_user`, `backend_password`, `max_client_connections`, `max_concurrency`.\n\n\
         A password `*<40 hex>` is a mysql_native_password hash: that user can only use \
         mysql_native_password, and without backend credentials logs in to the backend with \
         the SHA1(password) its login proves. See [Users and passwords](#users-and-passwords) \
         below.",
    ),
    (
        "servers",
        "Every monitor_interval sluice reads each server's read_only, replica status and GTID \
         position; the writer is the one server with read_only=OFF that replicates from \
         nobody. Each server gets its own pool_size slots, its own `auto` limiter and its own \
         max_backend_connections. Setting both `servers` and `backend` is an error. \
         [Replicas](replicas.md) has the rest.",
    ),
    (
        "auth_source",
        "The account table is `mysql.global_priv` on MariaDB and `mysql.user` on MySQL. A \
         server account is matched to the client's address as the server would (most specific \
         host first, then user), verified against its stored hash (mysql_native_password, \
         caching_sha2_password), and sluice logs in to the backend as that same account with \
         the credential the client's login proved, so no list needs keeping in sync. With \
         `both`, a listed name wins over the server's row.\n\n\
         Other plugins (ed25519, PAM, GSSAPI, unix_socket, ...) are refused with error 1045 \
         naming the fix; a locked account gets 4151, an expired password 1862. See [Accounts \
         from the server](#accounts-from-the-server) below.",
    ),
    (
        "auth_user",
        "The grant: `GRANT SELECT ON mysql.global_priv TO 'NAME'@'<sluice host>'` (MariaDB \
         10.4+) or `GRANT SELECT ON mysql.user TO ...` (MySQL). When it refuses to start, \
         sluice says which GRANT to run.",
    ),
    (
        "auth_cache_ttl",
        "At most 10,000 unknown names are cached. A failed login re-reads its account at most \
         once a second per account, so a password changed with ALTER USER works at the next \
         login and a dropped account is refused. Once a cached account has expired while the \
         table cannot be read, its logins are refused with error 9003.",
    ),
    (
        "pool_size",
        "`auto` never goes above max_backend_connections.",
    ),
    (
        "max_backend_connections",
        "`auto` leaves that tenth to other clients, monitoring and sluice's own control \
         connections. max_connections is read at start or, when sluice starts before its \
         server, at the first connection (151, the MySQL default, is assumed until then).\n\n\
         pool_size connections always stay for statements that do not pin: at most \
         max_backend_connections - pool_size sessions can be pinned (temporary tables, user \
         variables, named locks, ...). SHOW POOLS and /metrics show the pinned ones against \
         that cap.",
    ),
    (
        "max_queue_wait",
        "The expected wait is queued statements x mean slot time / pool size; a statement \
         admitted on a wrong estimate is refused once it has waited this long. The error is \
         9002 (HY000).\n\n\
         The expected wait may reach 40% of this for a session just served, growing with the \
         time since the session last got a slot to 80% after 10 x max_queue_wait: under \
         sustained overload the clients that waited longest get the next places, and the \
         margin absorbs the estimate's error.",
    ),
    (
        "pipeline_depth",
        "Which reads join a batch: autocommit reads (queries, and executions of prepared \
         statements without a cursor that are prepared on the batch's backend already) that \
         the classifier proves stateless: replica-safe, no CONNECTION_ID() or \
         LAST_INSERT_ID() to present, nothing that pins. Each client still gets its own \
         answer, relayed with its own write timeout; a member only joins a batch while nobody \
         else has queued for a slot since its leader did, so FIFO order holds.\n\n\
         A KILL QUERY of a pipelined statement ends its answer with 1317 (Query execution was \
         interrupted) without touching the server, where another session's statement may be \
         running. A read that raised warnings and was not the batch's last loses them (SHOW \
         WARNINGS then finds none, as when every pinned place is taken).\n\n\
         With `servers` and the split on, each server has its own batches: a read is routed \
         first and joins a batch of that server's (a read that waits for a replica to reach \
         the session's writes runs on its own).\n\n\
         The default, 16, lets one batch take every read queued for a slot when clients \
         outnumber slots 16 to 1 (64 clients on 4 slots); with a smaller depth, such a queue \
         needs more than one round trip to the server per slot. [What individual design \
         choices saved](benchmarks.md#what-individual-design-choices-saved) has what a depth \
         of 8 cost.",
    ),
    (
        "pipeline_max_delay",
        "One statement's server time is the pool's mean statement time, divided by how many \
         statements share each server CPU when sluice runs more of them than the server has \
         CPUs (`server_cpus`). A read that does not join runs on a backend of its own, beside \
         the others.",
    ),
    (
        "server_cpus",
        "With more statements running than the server has CPUs, each waits for a CPU inside \
         the server anyway, so batching them (see pipeline_max_delay) does the same work with \
         fewer sends and server wake-ups.\n\n\
         `auto` reads @@thread_pool_size (MariaDB's, and Percona Server's thread pool), which \
         defaults to the number of CPUs the server may run on, together with max_connections. \
         MySQL Community does not say, so there `auto` means unknown, and reads with a slot \
         free batch only when the mean statement time alone is short. SHOW POOLS shows the \
         value in force.",
    ),
    (
        "backend_busy_poll",
        "On a virtual machine, a CPU left idle while the process sleeps is halted, and waking \
         it when the reply lands takes tens of microseconds, more than relaying the reply; \
         polling keeps it awake. HAProxy's busy-polling makes the same trade always; sluice \
         makes it only for this wait.\n\n\
         Each backend connection measures how long its replies take when polled and when \
         slept for (every 16th wait goes the other way) and polls only while that has been \
         the quicker, so a slow or distant server, or a host where the polling CPU slows the \
         server's down, soon gets sleeping waits again. SHOW STATS counts busy_poll_hits, \
         busy_poll_misses and busy_poll_skipped.",
    ),
    (
        "pin_wait",
        "There are max_backend_connections - pool_size pinned places. The error, 9005 \
         (HY000), names the cap and the pinned sessions by reason; nothing is lost, since the \
         statement did not run.",
    ),
    (
        "max_prepared_statements_per_client",
        "Error 1461 is ER_MAX_PREPARED_STMT_COUNT_REACHED, as from the server's \
         max_prepared_stmt_count; the default is all one session can hold directly on a \
         server with its default settings. sluice keeps each open statement's text (a \
         statement prepared again shares it) and closes backend copies by itself \
         (max_prepared_statements_per_backend).",
    ),
    (
        "globals_check_interval",
        "The check reads a digest of the globals that sessions take as their own values at \
         connect (MariaDB's information_schema.SYSTEM_VARIABLES, a short read), on the login \
         check's control connection. When it changed, logins from then on run on backend \
         connections opened under the new values, as a new direct connection would see them, \
         while sessions already logged in keep what they saw (until COM_RESET_CONNECTION); \
         backends opened before close once those sessions are gone.\n\n\
         A SET GLOBAL through sluice takes effect for the next login at once, and the admin \
         console's RECONNECT does it on demand (MySQL has no such table: use RECONNECT \
         there).",
    ),
    (
        "instance_id",
        "Client connection ids (the handshake's thread id, CONNECTION_ID(), what KILL takes) \
         are instance_id * 2^24 + n with n from 1 to 2^24 - 1, so ids of different instances \
         never collide and the owner of an id is id >> 24. A KILL of another instance's id \
         gets error 1094 (unknown thread id; the admin console's KILL names the owning \
         instance): send it through the owning instance.",
    ),
    (
        "reuse_port",
        "Without it a second process fails to start with \"address in use\". The admin \
         console and /metrics never share their ports, so that each instance can be inspected \
         and scraped.",
    ),
    (
        "backend_tls",
        "`preferred` is the mysql client's default. `required`: TLS or no connection. \
         `verify_identity`: as verify_ca, and the certificate must name the backend host or \
         IP. Over TLS, caching_sha2_password full authentication sends the password inside \
         TLS instead of RSA-encrypting it. `disabled` saves the encryption CPU on both sides.",
    ),
    (
        "worker_threads",
        "With one, sluice runs everything on a single thread without cross-thread scheduling, \
         as PgBouncer does; with more, tasks move between threads as load requires. A program \
         that embeds sluice brings its own runtime.",
    ),
    (
        "read_your_writes",
        "`session`: a replica qualifies when its monitored GTID position covers the session's \
         last write. `wait`: as session, but a replica lagging less than gtid_wait_timeout \
         may first wait for the write (MASTER_GTID_WAIT / WAIT_FOR_EXECUTED_GTID_SET), \
         falling back to the writer on timeout.\n\n\
         A `/* sluice:min_gtid=<position> */` comment in a statement asks for that position \
         in every mode; without such a token there is no guarantee across sessions.",
    ),
    (
        "digests",
        "IN and VALUES lists fold into one digest. Each row counts statements, errors, \
         total/min/max/p50/p99 time, time queued apart from time on the server, rows, and how \
         often its statements were pinned, sent to a replica, pipelined or retried. [Digests \
         and rules](digests-and-rules.md) has the rest.",
    ),
    (
        "digest_table_size",
        "The overflow row is SHOW DIGESTS' last, and SHOW STATS counts digests_evicted. A \
         smaller value evicts at once.",
    ),
];
