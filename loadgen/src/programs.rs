//! The external programs loadgen runs (sysbench, HAProxy): where their binary is, and the
//! version line each prints, kept in a run's metadata.

use std::path::{Path, PathBuf};

/// One external program: its binary's name, the flag that names it explicitly, and how to
/// install it.
pub struct Program {
    pub name: &'static str,
    pub flag: &'static str,
    pub install: &'static str,
    /// The argument that prints its version on stdout's first line.
    pub version_arg: &'static str,
}

impl Program {
    /// Its binary: `explicit` (given by the flag), else `name` on PATH, in /usr/sbin or in
    /// /usr/local/sbin (Debian installs daemons in /usr/sbin, which a non-root PATH lacks).
    pub fn find(&self, explicit: Option<&Path>) -> Result<PathBuf, String> {
        if let Some(p) = explicit {
            return if p.is_file() {
                Ok(p.to_path_buf())
            } else {
                Err(format!("{} {} does not exist", self.flag, p.display()))
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
            .map(|d| d.join(self.name))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "no {} binary (install it with {}, or pass {})",
                    self.name, self.install, self.flag
                )
            })
    }

    /// The first line it prints for its version argument, or `unknown`.
    pub fn version(&self, bin: &Path) -> String {
        std::process::Command::new(bin)
            .arg(self.version_arg)
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "unknown".into())
    }
}
