//! Finding the server binary and its install tool, and telling MariaDB from MySQL.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// Directories searched after `PATH` (Debian puts `mariadbd` in /usr/sbin, which is not on
/// every user's PATH).
const EXTRA_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"];

/// Which server family a binary belongs to; their init tools and options differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// MariaDB (`mariadbd`, or a `mysqld` whose `--version` says MariaDB).
    MariaDb,
    /// Oracle MySQL (`mysqld --initialize-insecure`).
    MySql,
}

/// Finds a server binary: `explicit` if given (it must exist), else `mariadbd` then `mysqld`
/// on `PATH` and in /usr/sbin, /usr/local/sbin.
pub fn find_server_binary(explicit: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(Error::NotFound {
                looked_for: format!("{} (given explicitly)", path.display()),
            })
        };
    }
    for name in ["mariadbd", "mysqld"] {
        if let Some(found) = find_program(name) {
            return Ok(found);
        }
    }
    Err(Error::NotFound {
        looked_for: format!("mariadbd, mysqld on PATH and in {}", EXTRA_DIRS.join(", ")),
    })
}

/// Looks `name` up on `PATH`, then in the sbin directories.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(EXTRA_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `binary --version` and returns the flavour and the version line.
pub fn probe(binary: &Path) -> Result<(Flavor, String), Error> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| Error::io(format!("running {} --version", binary.display()), e))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let name_says_mariadb = binary
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("mariadb"));
    let flavor = if name_says_mariadb || text.contains("MariaDB") {
        Flavor::MariaDb
    } else {
        Flavor::MySql
    };
    Ok((flavor, text))
}

/// The MariaDB datadir initialiser: `mariadb-install-db` (or the old `mysql_install_db`),
/// preferring the one installed next to the server binary.
pub(crate) fn find_install_db(server: &Path) -> Option<PathBuf> {
    let names = ["mariadb-install-db", "mysql_install_db"];
    let near = server.parent().and_then(Path::parent).map(|prefix| {
        names
            .iter()
            .flat_map(|n| [prefix.join("bin").join(n), prefix.join("scripts").join(n)])
            .collect::<Vec<_>>()
    });
    near.into_iter()
        .flatten()
        .find(|p| is_executable(p))
        .or_else(|| names.iter().find_map(|n| find_program(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_missing_binary_is_not_found() {
        let err = find_server_binary(Some(Path::new("/nonexistent/mariadbd"))).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }));
    }

    #[test]
    fn not_found_message_names_the_three_ways_out() {
        let msg = Error::NotFound {
            looked_for: "x".into(),
        }
        .to_string();
        assert!(msg.contains("mariadb-server"), "{msg}");
        assert!(msg.contains("Docker"), "{msg}");
        assert!(msg.contains("--mysql-url"), "{msg}");
    }
}
