//! The original study's data and query: `reads_test`, bulk seeding, warming, the moving-window query,
//! and how every loadgen connection is configured.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use rand::Rng;

/// The table every experiment reads.
pub const TABLE: &str = "reads_test";
/// The query as documented (parameters shown as `?`; loadgen sends literals over the text
/// protocol, as the original study's client-side `%s` interpolation did).
pub const QUERY_SHAPE: &str =
    "SELECT id, val FROM reads_test WHERE id BETWEEN ? AND ? AND val >= ? ORDER BY val DESC LIMIT 50";
/// `val >= ?` draws its threshold below this, so about 99 % of the scanned rows feed the
/// filesort (val ranges over 0..100000).
const VAL_FLOOR_MAX: u32 = 1000;
/// Rows per INSERT statement while seeding (about 0.6 MB of SQL each).
const SEED_BATCH: u32 = 5000;

/// The point-select mix's shapes, for the binary protocol.
const POINT_SHAPE: &str = "SELECT id, val FROM reads_test WHERE id = ?";
const RANGE_SHAPE: &str = "SELECT id, val FROM reads_test WHERE id BETWEEN ? AND ?";

/// One statement to send: SQL text with literals (COM_QUERY), or a shape and its
/// parameters (COM_STMT_PREPARE once per connection, then COM_STMT_EXECUTE).
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    Text(String),
    Prepared(&'static str, Vec<mysql_async::Value>),
}

/// Which statements a workload sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mix {
    /// The original study's knee query (a `scan_w`-row range scan and filesort).
    #[default]
    Knee,
    /// OLTP-style primary-key reads: 9 in 10 fetch one row, 1 in 10 a 10-row range.
    PointSelect,
}

impl Mix {
    /// The `workload` column of the CSVs.
    pub fn label(self) -> &'static str {
        match self {
            Mix::Knee => "knee",
            Mix::PointSelect => "point_select",
        }
    }
}

/// The query generator.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Rows in the table.
    pub rows: u32,
    /// Rows in the scanned id window.
    pub scan_w: u32,
    /// Which statements.
    pub mix: Mix,
}

impl Workload {
    /// The next statement, with random parameters so no two calls are identical.
    pub fn query(&self, rng: &mut impl Rng) -> String {
        match self.mix {
            Mix::Knee => self.knee(rng),
            Mix::PointSelect => {
                let id = rng.gen_range(1..=self.rows);
                if rng.gen_range(0..10) == 0 {
                    let hi = (id + 9).min(self.rows);
                    format!("SELECT id, val FROM reads_test WHERE id BETWEEN {id} AND {hi}")
                } else {
                    format!("SELECT id, val FROM reads_test WHERE id = {id}")
                }
            }
        }
    }

    /// The next statement as a prepared statement (binary protocol): the same shapes and
    /// parameter draws as [`Workload::query`], with `?` placeholders.
    pub fn prepared(&self, rng: &mut impl Rng) -> Stmt {
        match self.mix {
            Mix::Knee => {
                let (lo, hi, floor) = self.knee_params(rng);
                Stmt::Prepared(QUERY_SHAPE, vec![lo.into(), hi.into(), floor.into()])
            }
            Mix::PointSelect => {
                let id = rng.gen_range(1..=self.rows);
                if rng.gen_range(0..10) == 0 {
                    let hi = (id + 9).min(self.rows);
                    Stmt::Prepared(RANGE_SHAPE, vec![id.into(), hi.into()])
                } else {
                    Stmt::Prepared(POINT_SHAPE, vec![id.into()])
                }
            }
        }
    }

    /// `(lo, hi, floor)` of a knee query over a random window of `scan_w` ids.
    fn knee_params(&self, rng: &mut impl Rng) -> (u32, u32, u32) {
        let last_start = self.rows.saturating_sub(self.scan_w) + 1;
        let lo = rng.gen_range(1..=last_start);
        (lo, lo + self.scan_w - 1, rng.gen_range(0..VAL_FLOOR_MAX))
    }

    /// A query over a random window of `scan_w` ids.
    fn knee(&self, rng: &mut impl Rng) -> String {
        let (lo, hi, floor) = self.knee_params(rng);
        format!(
            "SELECT id, val FROM reads_test WHERE id BETWEEN {lo} AND {hi} \
             AND val >= {floor} ORDER BY val DESC LIMIT 50"
        )
    }
}

/// `val` for row `id`, exactly as in the original study: `id * 2654435761 % 100000`.
pub fn val_for(id: u32) -> u64 {
    u64::from(id) * 2_654_435_761 % 100_000
}

/// Connection options for every loadgen connection.
pub fn conn_opts(url: &str) -> Result<Opts> {
    let base = Opts::from_url(url).with_context(|| format!("parsing MySQL URL {url}"))?;
    Ok(OptsBuilder::from_opts(base)
        // Otherwise mysql_async silently reconnects over the server's Unix socket and
        // bypasses TCP (and any proxy in between).
        .prefer_socket(false)
        // Setting both means no `SELECT @@max_allowed_packet, ...` round trip at connect.
        .max_allowed_packet(Some(64 << 20))
        .wait_timeout(Some(28_800))
        .tcp_nodelay(true)
        .into())
}

/// Opens one connection, retrying briefly (a burst of hundreds of connects can overflow an
/// accept queue and cost a SYN retransmit).
pub async fn connect(opts: &Opts) -> Result<Conn> {
    let mut last = None;
    for attempt in 0..4u32 {
        match tokio::time::timeout(Duration::from_secs(15), Conn::new(opts.clone())).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(e)) => last = Some(anyhow::Error::new(e)),
            Err(_) => last = Some(anyhow::anyhow!("connect timed out after 15 s")),
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    Err(last
        .unwrap_or_else(|| anyhow::anyhow!("connect failed"))
        .context(format!(
            "connecting to {}:{}",
            opts.ip_or_hostname(),
            opts.tcp_port()
        )))
}

/// What seeding found and did.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// Human sentence for the log and summary.
    pub action: String,
    /// Seconds spent creating and loading (0 when the table was kept).
    pub seed_secs: f64,
    /// Seconds spent warming the buffer pool.
    pub warm_secs: f64,
}

/// Makes sure `reads_test` has exactly `rows` rows (creating or reloading it if not),
/// then warms the buffer pool.
pub async fn prepare(conn: &mut Conn, rows: u32) -> Result<SeedReport> {
    let count: Option<u64> = match conn
        .query_first::<u64, _>(format!("SELECT COUNT(*) FROM {TABLE}"))
        .await
    {
        Ok(c) => c,
        // 1146 = ER_NO_SUCH_TABLE
        Err(mysql_async::Error::Server(e)) if e.code == 1146 => None,
        Err(e) => return Err(e).context("checking reads_test"),
    };
    let started = Instant::now();
    let action = match count {
        Some(n) if n == u64::from(rows) => format!("kept the existing {TABLE} ({n} rows)"),
        found => {
            seed(conn, rows).await?;
            match found {
                None => format!("created and seeded {TABLE} with {rows} rows"),
                Some(n) => {
                    format!("{TABLE} had {n} rows, expected {rows}: recreated and reseeded it")
                }
            }
        }
    };
    let seed_secs = if count == Some(u64::from(rows)) {
        0.0
    } else {
        started.elapsed().as_secs_f64()
    };
    let warm_started = Instant::now();
    warm(conn).await?;
    Ok(SeedReport {
        action,
        seed_secs,
        warm_secs: warm_started.elapsed().as_secs_f64(),
    })
}

async fn seed(conn: &mut Conn, rows: u32) -> Result<()> {
    conn.query_drop(format!("DROP TABLE IF EXISTS {TABLE}"))
        .await?;
    conn.query_drop(format!(
        "CREATE TABLE {TABLE} (id INT PRIMARY KEY, val INT NOT NULL, payload VARCHAR(255)) \
         ENGINE=InnoDB"
    ))
    .await
    .context("creating reads_test")?;
    // One transaction, multi-row INSERTs in id order: one commit, sequential PK appends.
    conn.query_drop("START TRANSACTION").await?;
    let mut sql = String::with_capacity(SEED_BATCH as usize * 140);
    let mut id = 1u32;
    while id <= rows {
        let end = (id + SEED_BATCH - 1).min(rows);
        sql.clear();
        sql.push_str("INSERT INTO reads_test (id, val, payload) VALUES ");
        for i in id..=end {
            if i > id {
                sql.push(',');
            }
            // The payload gives rows realistic weight (about 100 bytes).
            let _ = write!(
                sql,
                "({i},{},'row-{i:08}-payload-abcdefghijklmnopqrstuvwxyz-0123456789-abcdefghijklmnopqrstuvwxyz-012345')",
                val_for(i)
            );
        }
        conn.query_drop(&sql).await.context("inserting seed rows")?;
        id = end + 1;
    }
    conn.query_drop("COMMIT").await?;
    let n: Option<u64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {TABLE}"))
        .await?;
    if n != Some(u64::from(rows)) {
        bail!("seeding left {n:?} rows in {TABLE}, expected {rows}");
    }
    Ok(())
}

/// Reads every row and page once so the measured windows never touch the disk.
async fn warm(conn: &mut Conn) -> Result<()> {
    conn.query_drop(format!(
        "SELECT COUNT(*), SUM(val), SUM(LENGTH(payload)) FROM {TABLE}"
    ))
    .await
    .context("warming the buffer pool")?;
    conn.query_drop(format!(
        "SELECT COUNT(*) FROM {TABLE} FORCE INDEX (PRIMARY) WHERE val >= 0"
    ))
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn val_follows_the_seed_formula() {
        assert_eq!(val_for(1), 35761);
        assert_eq!(val_for(200_000), 200_000u64 * 2_654_435_761 % 100_000);
    }

    #[test]
    fn queries_stay_inside_the_table_and_move() {
        let w = Workload {
            rows: 100,
            scan_w: 20,
            mix: Mix::Knee,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let q = w.query(&mut rng);
            let nums: Vec<u32> = q
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|s| s.parse().ok())
                .collect();
            // BETWEEN lo AND hi AND val >= floor LIMIT 50
            let (lo, hi) = (nums[0], nums[1]);
            assert!(lo >= 1 && hi <= 100 && hi - lo + 1 == 20, "{q}");
            seen.insert(q);
        }
        assert!(seen.len() > 150, "queries repeat too often");
    }

    #[test]
    fn point_selects_read_existing_ids_mostly_one_at_a_time() {
        let w = Workload {
            rows: 100,
            scan_w: 20,
            mix: Mix::PointSelect,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let qs: Vec<String> = (0..1000).map(|_| w.query(&mut rng)).collect();
        let ranges = qs.iter().filter(|q| q.contains("BETWEEN")).count();
        assert!((50..=150).contains(&ranges), "{ranges} ranges in 1000");
        for q in &qs {
            let nums: Vec<u32> = q
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|s| s.parse().ok())
                .collect();
            assert!(nums.iter().all(|&n| (1..=100).contains(&n)), "{q}");
        }
    }
}
