//! A fresh datadir (`mariadb-install-db` or `mysqld --initialize-insecure`) and the init
//! file every start runs (the bench account and database, plus a caller's statements).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::binary::{self, Flavor};
use crate::error::tail_of;
use crate::server::{is_root, BENCH_DB, BENCH_PASSWORD, BENCH_USER};
use crate::spawn::{spawn, SpawnOptions};
use crate::Error;

pub(crate) fn init_datadir(
    binary: &Path,
    flavor: Flavor,
    datadir: &Path,
    dir: &Path,
) -> Result<(), Error> {
    let mut cmd;
    let tool;
    match flavor {
        Flavor::MariaDb => {
            let install = binary::find_install_db(binary).ok_or_else(|| Error::NotFound {
                looked_for: "mariadb-install-db / mysql_install_db (needed to initialise MariaDB)"
                    .into(),
            })?;
            tool = install.display().to_string();
            cmd = Command::new(&install);
            let tmp = dir.join("tmp");
            std::fs::create_dir_all(&tmp)
                .map_err(|e| Error::io("creating the server tmpdir", e))?;
            cmd.arg("--no-defaults")
                .arg(format!("--datadir={}", datadir.display()))
                // Concurrent initialisations collide on temporary-table files in a shared /tmp.
                .arg(format!("--tmpdir={}", tmp.display()))
                .arg("--auth-root-authentication-method=normal")
                .arg("--skip-test-db")
                .arg("--skip-name-resolve");
            if let Some(sbin) = binary.parent() {
                // Lets install-db find a server outside its compiled-in path.
                if let Some(base) = sbin.parent() {
                    if binary != Path::new("/usr/sbin/mariadbd") {
                        cmd.arg(format!("--basedir={}", base.display()));
                    }
                }
            }
        }
        Flavor::MySql => {
            tool = format!("{} --initialize-insecure", binary.display());
            cmd = Command::new(binary);
            let tmp = dir.join("tmp");
            std::fs::create_dir_all(&tmp)
                .map_err(|e| Error::io("creating the server tmpdir", e))?;
            cmd.arg("--no-defaults")
                .arg("--initialize-insecure")
                .arg(format!("--datadir={}", datadir.display()))
                .arg(format!("--tmpdir={}", tmp.display()));
        }
    }
    if is_root() {
        cmd.arg("--user=root");
    }
    let log = dir.join("init.log");
    let out = std::fs::File::create(&log).map_err(|e| Error::io("creating init.log", e))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::io("cloning init.log", e))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let mut child = spawn(cmd, SpawnOptions::default()).map_err(|e| Error::Init {
        tool: tool.clone(),
        datadir: datadir.to_path_buf(),
        detail: format!("spawn failed: {e}"),
    })?;
    let status = child
        .wait()
        .map_err(|e| Error::io("waiting for the datadir initialiser", e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Init {
            tool,
            datadir: datadir.to_path_buf(),
            detail: format!("{status}; output tail:\n{}", tail_of(&log, 2000)),
        })
    }
}

/// SQL run by the server at every start (so it also holds after a restart of a datadir
/// restored from elsewhere). One statement per line, as `--init-file` requires. The binary
/// log is off for it: on a replica, a logged account change would be a transaction of its
/// own that its primary never had (and gtid_strict_mode then stops replication).
pub(crate) fn init_sql(flavor: Flavor, version_line: &str, extra: &[String]) -> String {
    // MySQL 8.0 defaults to caching_sha2_password, which needs TLS or RSA for a full auth;
    // native keeps every client (and the proxy) simple. 8.4+ no longer loads it by default.
    let auth = if flavor == Flavor::MySql && version_line.contains("Ver 8.0") {
        "IDENTIFIED WITH mysql_native_password BY"
    } else {
        "IDENTIFIED BY"
    };
    let mut sql = String::from("SET SESSION sql_log_bin=0;\n");
    sql.push_str(&format!("CREATE DATABASE IF NOT EXISTS `{BENCH_DB}`;\n"));
    for host in ["%", "localhost"] {
        sql.push_str(&format!(
            "CREATE USER IF NOT EXISTS '{BENCH_USER}'@'{host}' {auth} '{BENCH_PASSWORD}';\n"
        ));
        sql.push_str(&format!(
            "GRANT ALL PRIVILEGES ON *.* TO '{BENCH_USER}'@'{host}' WITH GRANT OPTION;\n"
        ));
    }
    for statement in extra {
        // A newline would split the statement in two for --init-file.
        sql.push_str(&statement.replace(['\n', '\r'], " "));
        sql.push_str(";\n");
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_sql_creates_user_and_database_one_statement_per_line() {
        let extra = ["CREATE USER 'x'@'%'\nIDENTIFIED BY 'y'".to_string()];
        let sql = init_sql(Flavor::MariaDb, "mariadbd Ver 10.11", &extra);
        assert_eq!(sql.lines().count(), 7);
        assert_eq!(sql.lines().next(), Some("SET SESSION sql_log_bin=0;"));
        assert_eq!(
            sql.lines().last(),
            Some("CREATE USER 'x'@'%' IDENTIFIED BY 'y';")
        );
        assert!(sql.lines().all(|l| l.ends_with(';')));
        assert!(sql.contains("'bench'@'%' IDENTIFIED BY 'bench'"));
        assert!(sql.contains("WITH GRANT OPTION"));
        let mysql = init_sql(Flavor::MySql, "mysqld  Ver 8.0.36", &[]);
        assert!(mysql.contains("mysql_native_password"));
    }
}
