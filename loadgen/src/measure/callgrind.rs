//! Instructions per query, from valgrind's callgrind: a count that repeats from run to run
//! where time does not (`perf stat -e instructions` is not supported on this VM).
//!
//! The relay runs under `valgrind --tool=callgrind` ([`valgrind_args`]). Once its clients are
//! connected and warm, loadgen zeroes its counters (`callgrind_control --zero`), runs a fixed
//! number of queries and dumps them (`callgrind_control --dump`: a file whose `totals:` line
//! is the instructions since the zero); then it does the same over an idle stretch, so what
//! the relay does with no queries (timers, housekeeping) is subtracted at its rate per second.
//! Only user-space instructions count: the kernel's share of a query (the loopback sends and
//! the wake-ups) is what the syscall count stands for. valgrind runs the relay about 50x
//! slower and one thread at a time, so at 64 clients each wake-up finds more ready sockets
//! than it would natively; at 1 client every query takes the same path.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The valgrind command line (program first) that counts into `dir`; its FIFOs go there
/// too, so nothing is left in /tmp if the relay is killed.
pub fn valgrind_args(dir: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        format!(
            "--callgrind-out-file={}",
            dir.join("callgrind.out").display()
        ),
        format!("--vgdb-prefix={}", dir.join("vgdb").display()),
        "--dump-line=no".into(),
        "--dump-instr=no".into(),
        "--quiet".into(),
    ]
}

/// Whether valgrind and callgrind_control run here, or why not.
pub fn available() -> Result<String, String> {
    let version = |tool: &str| {
        std::process::Command::new(tool)
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let v = version("valgrind").ok_or(
        "no valgrind (install it with `scripts/install-test-deps.sh --overhead` or apt-get install valgrind)",
    )?;
    version("callgrind_control").ok_or("no callgrind_control (it comes with valgrind)")?;
    Ok(v)
}

/// Controls one relay running under callgrind.
pub struct Callgrind {
    pid: u32,
    dir: PathBuf,
}

impl Callgrind {
    /// The relay `pid` counting into `dir` (as [`valgrind_args`] set up).
    pub fn new(pid: u32, dir: &Path) -> Callgrind {
        Callgrind {
            pid,
            dir: dir.to_path_buf(),
        }
    }

    /// Zeroes its counters.
    pub async fn zero(&self) -> Result<()> {
        self.control("--zero").await
    }

    /// Dumps its counters and returns the instructions since the last zero or dump.
    pub async fn dump(&self) -> Result<u64> {
        let before = self.dumps();
        self.control("--dump").await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // The newest dump, once callgrind has finished writing its totals.
            let new = self
                .dumps()
                .into_iter()
                .filter(|d| !before.contains(d))
                .max();
            if let Some((n, path)) = new {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if let Ok(total) = parse_totals(&text) {
                    let _ = std::fs::remove_file(&path);
                    return Ok(total);
                }
                if Instant::now() > deadline {
                    bail!("callgrind dump {n} of {} has no totals line", self.pid);
                }
            } else if Instant::now() > deadline {
                bail!("callgrind wrote no dump for {} within 30 s", self.pid);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `callgrind.out.<n>` files in the dir, by number.
    fn dumps(&self) -> Vec<(u32, PathBuf)> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let n = name.strip_prefix("callgrind.out.")?.parse().ok()?;
                        Some((n, e.path()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn control(&self, what: &str) -> Result<()> {
        let out = tokio::process::Command::new("callgrind_control")
            .arg(format!("--vgdb-prefix={}", self.dir.join("vgdb").display()))
            .arg(what)
            .arg(self.pid.to_string())
            .output()
            .await
            .context("running callgrind_control")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !text.contains("OK") {
            bail!(
                "callgrind_control {what} {} failed: {text} {}",
                self.pid,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

/// The `totals:` (or, failing that, `summary:`) line of a callgrind dump: instructions (Ir,
/// the only event collected).
pub fn parse_totals(text: &str) -> Result<u64, String> {
    let find = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    find("totals:")
        .or_else(|| find("summary:"))
        .ok_or_else(|| "no totals: line in the callgrind dump".into())
}

/// Instructions per query: `total` over `queries` after taking off `idle_rate` (instructions
/// per second with no queries) for the `elapsed` seconds the queries took.
pub fn per_query(total: u64, queries: u64, idle_rate: f64, elapsed_s: f64) -> Option<f64> {
    if queries == 0 {
        return None;
    }
    let busy = total as f64 - idle_rate * elapsed_s;
    Some(busy.max(0.0) / queries as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_totals_of_a_dump() {
        // The head and tail of a dump of HAProxy after 2,000 queries.
        let dump = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 29370\n\
                    cmd:  haproxy -f hap2.cfg -db\npart: 1\n\ndesc: Timerange: Basic block 0 - 9380157\n\
                    positions: line\nevents: Ir\nsummary: 12520366\n\n\nfn=(1) 0x0000000000026100\n0 3\n\
                    \ntotals: 12520514\n";
        assert_eq!(parse_totals(dump), Ok(12520514));
        assert_eq!(parse_totals("events: Ir\nsummary: 5517\n"), Ok(5517));
        assert!(parse_totals("events: Ir\n").is_err());
    }

    #[test]
    fn idle_instructions_are_taken_off_at_their_rate() {
        // 12.52 M instructions for 2,000 queries in 0.55 s, idling at 1,839 per second.
        let ipq = per_query(12_520_514, 2000, 1839.0, 0.55).unwrap();
        assert!((ipq - 6259.75).abs() < 1.0, "{ipq}");
        assert_eq!(per_query(1000, 0, 0.0, 1.0), None);
        assert_eq!(per_query(10, 10, 1e6, 1.0), Some(0.0));
        let args = valgrind_args(Path::new("/tmp/x"));
        assert_eq!(args[0], "valgrind");
        assert!(args.contains(&"--callgrind-out-file=/tmp/x/callgrind.out".to_string()));
        assert!(args.contains(&"--vgdb-prefix=/tmp/x/vgdb".to_string()));
    }
}
