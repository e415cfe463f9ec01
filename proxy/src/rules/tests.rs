//! Matching, the first rule winning, carry-over across reloads, and admission (block, gate,
//! counters, route overrides).

use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::classify::{digest, Quoting};
use crate::classify::{ReadSafety, WriterOnly};
use crate::config::Config;
use crate::topology::{
    MinGtid, Override, Route, RouteConfig, RouteInput, SessionFacts, Topology, Transaction,
};

fn rules(text: &str) -> Vec<RuleDef> {
    let cfg = Config::from_toml_str(&format!(
        "servers = [\"db1:3306\", \"db2:3306\"]\nmonitor_user = \"m\"\n\
         [[users]]\nname = \"app\"\npassword = \"pw\"\n{text}"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    cfg.rules.to_vec()
}

fn facts<'a>(d: &'a Digest, user: &'a str, schema: Option<&'a str>, ip: &str) -> Facts<'a> {
    Facts {
        digest: Some(d),
        user,
        schema: schema.map(str::as_bytes),
        client: ip.parse().ok(),
    }
}

fn d(sql: &str) -> Digest {
    digest(sql.as_bytes(), Quoting::Backslash)
}

const SET: &str = r#"
[[rules]]
name = "no drops"
match_digest = "(?i)^drop table"
error = "DROP TABLE is not allowed here"

[[rules]]
name = "reports"
match_digest = "FROM reports"
user = "report"
schema = "shop"
client_addr = "10.0.0.0/8"
timeout = "1s"

[[rules]]
name = "by id"
digest = "DIGEST"
route = "replica"

[[rules]]
name = "everything of batch"
user = "batch"
max_concurrency = 1
"#;

fn set() -> RuleSet {
    let by_id = format!("{}", d("SELECT c FROM t WHERE id = 1").id);
    RuleSet::build(&rules(&SET.replace("DIGEST", &by_id)), None)
}

#[test]
fn the_first_rule_whose_matchers_all_match_decides() {
    let s = set();
    assert!(s.needs_digest());
    let drop_t = d("DROP TABLE t");
    let report = d("SELECT * FROM reports WHERE day = '2024-01-01'");
    let by_id = d("SELECT c FROM t WHERE id = 42");
    let other = d("SELECT 1");
    let who = |f: Facts<'_>| s.decide(&f).rule().map(|(i, _)| i);
    assert_eq!(who(facts(&drop_t, "app", None, "1.2.3.4")), Some(0));
    assert_eq!(
        who(facts(&report, "report", Some("shop"), "10.1.2.3")),
        Some(1)
    );
    assert_eq!(
        who(facts(&report, "report", Some("shop"), "192.168.0.1")),
        None,
        "address"
    );
    assert_eq!(
        who(facts(&report, "report", Some("other"), "10.1.2.3")),
        None,
        "schema"
    );
    assert_eq!(
        who(facts(&report, "report", None, "10.1.2.3")),
        None,
        "no schema"
    );
    assert_eq!(
        who(facts(&report, "app", Some("shop"), "10.1.2.3")),
        None,
        "user"
    );
    assert_eq!(who(facts(&by_id, "app", None, "")), Some(2), "by digest id");
    assert_eq!(who(facts(&other, "batch", None, "")), Some(3));
    // The drop rule comes first, whoever sends it.
    assert_eq!(who(facts(&drop_t, "batch", None, "")), Some(0));
    assert_eq!(who(facts(&other, "app", None, "")), None);
    // Without a digest, only rules that do not read it can match.
    let no_text = Facts {
        digest: None,
        user: "batch",
        schema: None,
        client: None,
    };
    assert_eq!(s.decide(&no_text).rule().map(|(i, _)| i), Some(3));
    let no_text = Facts {
        user: "app",
        ..no_text
    };
    assert!(s.decide(&no_text).rule().is_none());
    let dec = s.decide(&facts(&report, "report", Some("shop"), "10.1.2.3"));
    assert_eq!(dec.timeout(), Some(Duration::from_secs(1)));
    assert!(dec.block().is_none() && dec.gate().is_none() && dec.route().is_none());
    assert!(!RuleSet::build(&rules("[[rules]]\nuser = \"x\"\nlog = true\n"), None).needs_digest());
}

#[test]
fn a_reload_keeps_the_counters_and_gates_of_unchanged_rules() {
    let old = set();
    old.rules()[3].counters.hits.fetch_add(5, Relaxed);
    old.rules()[0].counters.hits.fetch_add(7, Relaxed);
    let mut defs: Vec<RuleDef> = old.rules().iter().map(|r| r.def.clone()).collect();
    defs.swap(0, 3);
    defs[1].timeout = Some(Duration::from_secs(2));
    let new = RuleSet::build(&defs, Some(&old));
    assert_eq!(new.rules()[0].counters.hits.load(Relaxed), 5, "moved, kept");
    assert_eq!(new.rules()[3].counters.hits.load(Relaxed), 7);
    assert!(
        Arc::ptr_eq(&new.rules()[0], &old.rules()[3]),
        "the same gate"
    );
    assert!(
        !Arc::ptr_eq(&new.rules()[1], &old.rules()[1]),
        "changed: new counters"
    );
}

#[tokio::test]
async fn admission_blocks_gates_and_counts() {
    let s = set();
    let drop_t = d("DROP TABLE t");
    let err = s
        .decide(&facts(&drop_t, "app", None, ""))
        .admit(
            &facts(&drop_t, "app", None, ""),
            Duration::from_secs(1),
            false,
        )
        .await
        .err()
        .expect("blocked");
    assert_eq!(
        (err.code, err.message.as_slice()),
        (1148, &b"DROP TABLE is not allowed here"[..])
    );
    let c = &s.rules()[0].counters;
    assert_eq!((c.hits.load(Relaxed), c.blocked.load(Relaxed)), (1, 1));

    let any = d("SELECT 1");
    let f = facts(&any, "batch", None, "");
    let first = s
        .decide(&f)
        .admit(&f, Duration::from_secs(1), false)
        .await
        .ok()
        .unwrap();
    assert_eq!(s.rules()[3].gate().unwrap().running(), 1);
    let t = std::time::Instant::now();
    let err = s
        .decide(&f)
        .admit(&f, Duration::from_millis(50), false)
        .await
        .err()
        .unwrap();
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert_eq!(err.code, 9001);
    let text = String::from_utf8_lossy(&err.message).into_owned();
    assert!(
        text.contains("everything of batch") && text.contains("max_concurrency"),
        "{text}"
    );
    // A session holding its slot does not wait (the one inside may wait for that slot).
    let in_tx = s.decide(&f).admit(&f, Duration::from_secs(5), true).await;
    assert!(in_tx.is_ok());
    let waiter = {
        let s = Arc::new(set_from(&s));
        let f_owned = (any.clone(), "batch");
        tokio::spawn(async move {
            let f = Facts {
                digest: Some(&f_owned.0),
                user: f_owned.1,
                schema: None,
                client: None,
            };
            s.decide(&f)
                .admit(&f, Duration::from_secs(5), false)
                .await
                .is_ok()
        })
    };
    drop(first);
    assert!(waiter.await.unwrap());
    let c = &s.rules()[3].counters;
    assert_eq!(c.queue_timeouts.load(Relaxed), 1);
    assert_eq!(c.hits.load(Relaxed), 4);
    assert_eq!(s.rules()[3].gate().unwrap().running(), 0);
}

/// A set sharing `s`'s rules (as a reload with the same file makes).
fn set_from(s: &RuleSet) -> RuleSet {
    let defs: Vec<RuleDef> = s.rules().iter().map(|r| r.def.clone()).collect();
    RuleSet::build(&defs, Some(s))
}

#[tokio::test]
async fn a_route_wish_is_followed_or_counted_as_overridden() {
    let by_id = d("SELECT c FROM t WHERE id = 1");
    let s = set();
    let f = facts(&by_id, "app", None, "");
    let admitted = s
        .decide(&f)
        .admit(&f, Duration::from_secs(1), false)
        .await
        .ok()
        .unwrap();
    let wish = admitted.route_wish();
    let topology = two_servers();
    let config = RouteConfig::default();
    let input = |statement, transaction| RouteInput {
        statement,
        session: SessionFacts {
            pinned: false,
            transaction,
            last_write: None,
            min_gtid: MinGtid::None,
        },
        config: &config,
        topology: &topology,
        queued: &[],
        tie_break: 0,
    };
    let read = ReadSafety::ReplicaSafe;
    assert_eq!(
        wish.route(&input(read, Transaction::None)),
        Route::Replica { index: 1 }
    );
    let in_tx = wish.route(&input(read, Transaction::ReadWrite));
    assert!(matches!(in_tx, Route::Writer { index: 0, .. }), "{in_tx:?}");
    let write = wish.route(&input(
        ReadSafety::WriterOnly(WriterOnly::NotARead),
        Transaction::None,
    ));
    assert!(matches!(write, Route::Writer { index: 0, .. }), "{write:?}");
    wish.stays_on(0, &topology, Override::Transaction);
    wish.stays_on(1, &topology, Override::Transaction);
    admitted.timed_out();
    let c = &s.rules()[2].counters;
    assert_eq!(
        c.overridden.load(Relaxed),
        3,
        "transaction, write, held on the writer"
    );
    assert_eq!(c.timed_out.load(Relaxed), 1);
    // Without a rule, the plain router.
    let none = Admitted::default().route_wish();
    let plain = none.route(&input(read, Transaction::None));
    assert!(
        matches!(plain, Route::Writer { index: 0, .. }),
        "split off: {plain:?}"
    );
}

fn two_servers() -> Topology {
    use crate::topology::{Memory, Role, ServerView, Verdict};
    let view = |role| ServerView {
        role,
        lag: Some(Duration::ZERO),
        position: None,
    };
    Topology {
        verdict: Verdict::Writer {
            index: 0,
            rivals: Vec::new(),
        },
        servers: vec![view(Role::Writer), view(Role::Replica)],
        memory: Memory::default(),
    }
}

/// The calls docs/architecture.md's "Wiring" section gives the statement path, in its order,
/// as written there (so that the section stays true).
#[tokio::test]
async fn the_wiring_sections_calls_run_in_order() {
    use crate::digests::{Digests, StatementRecord};
    use crate::user_limits::UserGates;
    let cfg = Config::from_toml_str(
        "[[users]]\nname = \"app\"\npassword = \"pw\"\nmax_concurrency = 2\n\
         [[rules]]\nmatch_digest = \"^SELECT\"\nmax_concurrency = 1\ntimeout = \"1s\"\n",
    )
    .unwrap();
    let user = cfg.find_user(b"app").unwrap().clone();
    let (digests, user_gates) = (Digests::new(true, 100), UserGates::default());
    let rules: Option<Arc<RuleSet>> = Some(Arc::new(RuleSet::build(&cfg.rules, None)));
    let sql = b"SELECT c FROM t WHERE id = 1";
    let wanted = digests.enabled() || rules.as_ref().is_some_and(|r| r.needs_digest());
    let (_class, d) = match wanted {
        true => {
            let (c, d) = crate::classify::classify_digested(sql, Quoting::Backslash);
            (c, Some(d))
        }
        false => (crate::classify::classify_in(sql, Quoting::Backslash), None),
    };
    let holds_locks = false;
    let _user = user_gates
        .enter(
            &user.name,
            user.limits(&cfg),
            cfg.queue_timeout,
            holds_locks,
        )
        .await
        .ok()
        .unwrap();
    let schema: Option<Vec<u8>> = Some(b"shop".to_vec());
    let facts = Facts {
        digest: d.as_ref(),
        user: &user.name,
        schema: schema.as_deref(),
        client: "10.0.0.1".parse().ok(),
    };
    let admitted = rules
        .as_deref()
        .map_or(Decision::none(), |r| r.decide(&facts))
        .admit(&facts, cfg.queue_timeout, holds_locks)
        .await
        .ok()
        .unwrap();
    let _wish = admitted.route_wish();
    assert_eq!(admitted.timeout(), Some(Duration::from_secs(1)));
    let now = std::time::Instant::now();
    digests.record(&StatementRecord {
        digest: d.as_ref().unwrap(),
        user: &user.name,
        schema: schema.as_deref(),
        server: 0,
        queued: Duration::ZERO,
        server_time: Duration::from_millis(1),
        rows_sent: 1,
        rows_affected: 0,
        error: false,
        pinned: false,
        replica: false,
        pipelined: false,
        retried: false,
        at: now,
    });
    assert_eq!(digests.len(), 1);
    let running = rules.iter().map(|r| r.rules()[0].gate().unwrap().running());
    assert_eq!(running.sum::<u32>(), 1);
}
