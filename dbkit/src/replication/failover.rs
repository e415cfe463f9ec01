//! Moving the primary role: a planned [`switchover`](Cluster::switchover), a
//! [`failover`](Cluster::failover) after the primary died, and
//! [`rejoin`](Cluster::rejoin) of a server as a replica.
//!
//! These are the steps an operator or a replication tool takes; dbkit scripts them so tests
//! can check that a proxy follows what the servers report. None of them is a proxy's job.

use std::time::Duration;

use super::{Cluster, REPLICATING_TIMEOUT};
use crate::error::ReplicationProblem;
use crate::Error;

impl Cluster {
    /// A planned switchover to replica `new`, losing nothing:
    /// 1. stop writes: `read_only=ON` on the primary (this waits for running commits; later
    ///    writes by accounts without READ_ONLY ADMIN fail with 1290);
    /// 2. wait until every replica has applied the primary's `gtid_binlog_pos`;
    /// 3. promote `new`: `STOP SLAVE`, `RESET SLAVE ALL`, `read_only=OFF`;
    /// 4. point the old primary (its `gtid_slave_pos` set to its binlog position) and the
    ///    other replicas at `new`, and wait until they replicate.
    ///
    /// Each server's `read_only` at restart follows its new role. Returns the GTID position
    /// at which the role moved. `timeout` bounds each wait.
    pub fn switchover(&mut self, new: usize, timeout: Duration) -> Result<String, Error> {
        self.replica(new)?;
        let old = self.primary;
        self.set_read_only(old, true)?;
        let position = self.gtid_binlog_pos(old)?;
        for index in self.replicas() {
            self.wait_for_position(index, &position, timeout)?;
        }
        self.promote(new)?;
        self.demote(old, new)?;
        for index in self.replicas_of_old(old, new) {
            self.repoint(index, new)?;
        }
        self.primary = new;
        for index in self.replicas() {
            self.wait_replicating(index, timeout.max(REPLICATING_TIMEOUT))?;
        }
        Ok(position)
    }

    /// A failover to replica `new` after the primary died (or was
    /// [`kill`](Cluster::kill)ed): `new` first applies everything it had fetched, then is
    /// promoted; the other replicas apply what they fetched and follow it. The dead primary
    /// is left alone with its configuration (`read_only=OFF`), as a real one would come back;
    /// [`rejoin`](Cluster::rejoin) makes it a replica.
    ///
    /// The caller picks `new`; if another replica had fetched more, its extra transactions
    /// conflict under gtid_strict_mode, as they would in production.
    pub fn failover(&mut self, new: usize, timeout: Duration) -> Result<(), Error> {
        self.replica(new)?;
        let old = self.primary;
        self.apply_fetched(new, timeout)?;
        self.promote(new)?;
        for index in self.replicas_of_old(old, new) {
            self.apply_fetched(index, timeout)?;
            self.repoint(index, new)?;
        }
        self.primary = new;
        for index in self.replicas_of_old(old, new) {
            self.wait_replicating(index, timeout.max(REPLICATING_TIMEOUT))?;
        }
        Ok(())
    }

    /// Makes server `index` (typically a returned old primary) a read-only replica of the
    /// current primary, from the position its own binary log reached.
    pub fn rejoin(&mut self, index: usize, timeout: Duration) -> Result<(), Error> {
        self.replica(index)?;
        self.demote(index, self.primary)?;
        self.wait_replicating(index, timeout.max(REPLICATING_TIMEOUT))
    }

    /// Every server but the old and the new primary.
    fn replicas_of_old(&self, old: usize, new: usize) -> Vec<usize> {
        (0..self.len()).filter(|&i| i != old && i != new).collect()
    }

    /// Waits until replica `index` has applied what its IO thread fetched (`Gtid_IO_Pos`).
    fn apply_fetched(&self, index: usize, timeout: Duration) -> Result<(), Error> {
        self.exec(index, "STOP SLAVE IO_THREAD")?;
        let status = self.slave_status(index)?.unwrap_or_default();
        let fetched = status.get("Gtid_IO_Pos").cloned().flatten();
        match fetched {
            Some(position) if !position.is_empty() => {
                self.wait_for_position(index, &position, timeout)
            }
            _ => Ok(()),
        }
    }

    fn promote(&mut self, index: usize) -> Result<(), Error> {
        let mut sql = self.admin(index, Duration::ZERO)?;
        sql.exec("STOP SLAVE")?;
        sql.exec("RESET SLAVE ALL")?;
        sql.exec("SET GLOBAL read_only=OFF")?;
        self.servers[index].set_setting("read-only", "OFF");
        Ok(())
    }

    /// Turns server `index` into a read-only replica of `target`, starting from everything it
    /// has itself (its binlog position; a former primary never replicated, so its
    /// `gtid_slave_pos` alone would be empty and it would fetch its own history again).
    fn demote(&mut self, index: usize, target: usize) -> Result<(), Error> {
        if index == target {
            return Err(ReplicationProblem::IsPrimary { index }.into());
        }
        let mut sql = self.admin(index, Duration::ZERO)?;
        sql.exec("SET GLOBAL read_only=ON")?;
        if self.slave_status(index)?.is_some() {
            sql.exec("STOP SLAVE")?;
        }
        let binlog = self.gtid_binlog_pos(index)?;
        if !binlog.is_empty() {
            sql.exec("SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos")?;
        }
        drop(sql);
        self.servers[index].set_setting("read-only", "ON");
        self.follow(index, target)
    }

    fn repoint(&self, index: usize, new: usize) -> Result<(), Error> {
        self.exec(index, "STOP SLAVE")?;
        self.follow(index, new)
    }
}
