//! The directory's cache rules over a fake account table.

use std::sync::atomic::AtomicUsize;

use super::*;
use crate::accounts::host::{ClientHost, HostPattern};
use crate::accounts::loader::TableRead;
use crate::accounts::row::{Flavor, Method, Plugin};

/// An account table in memory that counts its reads and can be slowed or broken.
#[derive(Default)]
struct FakeTable {
    rows: Mutex<Vec<AccountRow>>,
    reads: AtomicUsize,
    per_name: Mutex<HashMap<String, usize>>,
    delay: Mutex<Duration>,
    /// A read asking for this name takes 2 s.
    slow: Mutex<Option<String>>,
    broken: std::sync::atomic::AtomicBool,
}

fn view() -> Arc<ServerView> {
    Arc::new(ServerView {
        flavor: Flavor::MariaDb,
        resolves_names: false,
        sluice_host: ClientHost::at("127.0.0.1".parse().unwrap(), false),
        default_lifetime_days: 0,
        service_account: "svc@%".into(),
    })
}

#[async_trait::async_trait]
impl TableReader for FakeTable {
    async fn read(&self, _config: &Config, names: &[String]) -> Result<TableRead, LoadError> {
        self.reads.fetch_add(1, Relaxed);
        for n in names {
            *self.per_name.lock().unwrap().entry(n.clone()).or_default() += 1;
        }
        let slow = self.slow.lock().unwrap().clone();
        let delay = match slow {
            Some(s) if names.contains(&s) => Duration::from_secs(2),
            _ => *self.delay.lock().unwrap(),
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if self.broken.load(Relaxed) {
            return Err(LoadError::Abandoned);
        }
        let rows = self.rows.lock().unwrap().clone();
        Ok(TableRead {
            rows,
            server: view(),
        })
    }
}

fn row(user: &str, password: &str) -> AccountRow {
    AccountRow {
        user: user.into(),
        host: HostPattern::parse("%", false),
        methods: vec![Method {
            plugin: Plugin::Native,
            auth: crate::protocol::auth::native_hash(password.as_bytes()).into_bytes(),
        }],
        locked: false,
        expired: false,
        max_user_connections: 0,
    }
}

fn config(ttl: Duration) -> Arc<Config> {
    let mut c = Config::defaults();
    c.auth_cache_ttl = ttl;
    Arc::new(c)
}

fn setup(rows: Vec<AccountRow>) -> (Arc<FakeTable>, Arc<Directory>) {
    let table = Arc::new(FakeTable::default());
    *table.rows.lock().unwrap() = rows;
    let dir = Directory::new(table.clone());
    (table, dir)
}

#[tokio::test]
async fn a_read_serves_logins_until_the_ttl_then_reads_again() {
    let (table, dir) = setup(vec![row("app", "a"), row("other", "o")]);
    let cfg = config(Duration::from_millis(200));
    let a = dir.lookup("app", &cfg).await.unwrap();
    assert_eq!(a.rows.len(), 1, "only the name's own rows");
    dir.lookup("app", &cfg).await.unwrap();
    assert_eq!(table.reads.load(Relaxed), 1);
    assert_eq!(dir.stats.hits.load(Relaxed), 1);
    tokio::time::sleep(Duration::from_millis(250)).await;
    dir.lookup("app", &cfg).await.unwrap();
    assert_eq!(table.reads.load(Relaxed), 2, "read again after the TTL");
    // TTL 0: every login reads.
    let zero = config(Duration::ZERO);
    dir.lookup("app", &zero).await.unwrap();
    assert_eq!(table.reads.load(Relaxed), 3);
}

#[tokio::test]
async fn logins_of_many_names_at_once_read_each_name_once() {
    let rows: Vec<AccountRow> = (0..50).map(|i| row(&format!("u{i}"), "pw")).collect();
    let (table, dir) = setup(rows);
    *table.delay.lock().unwrap() = Duration::from_millis(20);
    let cfg = config(Duration::from_secs(30));
    let logins: Vec<_> = (0..1000)
        .map(|i| {
            let (dir, cfg) = (dir.clone(), cfg.clone());
            tokio::spawn(async move { dir.lookup(&format!("u{}", i % 50), &cfg).await })
        })
        .collect();
    for l in logins {
        let account = l.await.unwrap().unwrap();
        assert_eq!(account.rows.len(), 1);
    }
    let per_name = table.per_name.lock().unwrap().clone();
    assert_eq!(per_name.len(), 50);
    assert!(per_name.values().all(|n| *n == 1), "{per_name:?}");
    let queries = table.reads.load(Relaxed);
    assert!(
        (1..=50).contains(&queries),
        "batched into {queries} queries"
    );
}

#[tokio::test]
async fn a_slow_read_does_not_hold_up_another_names_login() {
    let (table, dir) = setup(vec![row("slow", "s"), row("quick", "q")]);
    let cfg = config(Duration::from_secs(30));
    *table.slow.lock().unwrap() = Some("slow".into());
    *table.delay.lock().unwrap() = Duration::from_millis(10);
    let slow = tokio::spawn({
        let (dir, cfg) = (dir.clone(), cfg.clone());
        async move { dir.lookup("slow", &cfg).await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let started = tokio::time::Instant::now();
    dir.lookup("quick", &cfg).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "quick waited for slow"
    );
    slow.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_refresh_reads_at_most_once_a_second() {
    let (table, dir) = setup(vec![row("app", "old")]);
    let cfg = config(Duration::from_secs(30));
    dir.lookup("app", &cfg).await.unwrap();
    // A password changed just after the read: the first failed login re-reads at once.
    *table.rows.lock().unwrap() = vec![row("app", "new")];
    let fresh = dir.refresh("app", &cfg).await.expect("re-read");
    assert_eq!(fresh.rows[0], row("app", "new"));
    assert!(
        dir.refresh("app", &cfg).await.is_none(),
        "again within a second"
    );
    tokio::time::sleep(REFRESH_EVERY).await;
    assert!(dir.refresh("app", &cfg).await.is_some());
    assert_eq!(table.reads.load(Relaxed), 3);
    assert_eq!(dir.stats.refreshes.load(Relaxed), 2);
}

#[tokio::test]
async fn unknown_names_are_cached_with_a_bound_and_dropping_forgets_the_credential() {
    let (table, dir) = setup(vec![row("app", "a")]);
    let cfg = config(Duration::from_secs(30));
    for i in 0..(MAX_UNKNOWN + 10) {
        dir.lookup(&format!("nobody{i}"), &cfg).await.unwrap();
    }
    assert_eq!(dir.counts(), (0, MAX_UNKNOWN));
    let reads = table.reads.load(Relaxed);
    dir.lookup(&format!("nobody{}", MAX_UNKNOWN + 9), &cfg)
        .await
        .unwrap();
    assert_eq!(
        table.reads.load(Relaxed),
        reads,
        "the newest unknown name is cached"
    );
    dir.lookup("app", &cfg).await.unwrap();
    dir.record_login("app", &Secret::new("a".into()), None);
    assert!(dir.credential("app").is_some());
    assert!(dir
        .lookup(&"x".repeat(MAX_NAME_LEN + 1), &cfg)
        .await
        .unwrap()
        .rows
        .is_empty());
    // DROP USER, then a refresh: the account and its credential are gone.
    *table.rows.lock().unwrap() = Vec::new();
    tokio::time::sleep(REFRESH_EVERY).await;
    let gone = dir.refresh("app", &cfg).await.expect("re-read");
    assert!(gone.rows.is_empty() && dir.credential("app").is_none());
}

#[tokio::test]
async fn an_unreadable_table_keeps_cached_accounts_until_their_ttl() {
    let (table, dir) = setup(vec![row("app", "a")]);
    let cfg = config(Duration::from_millis(300));
    dir.lookup("app", &cfg).await.unwrap();
    table.broken.store(true, Relaxed);
    assert!(dir.lookup("app", &cfg).await.is_ok(), "within the TTL");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(matches!(
        dir.lookup("app", &cfg).await,
        Err(LoadError::Abandoned)
    ));
    assert_eq!(dir.stats.read_errors.load(Relaxed), 1);
    assert!(dir.first_warning("app") && !dir.first_warning("app"));
    assert_eq!(dir.listing().len(), 1);
}
