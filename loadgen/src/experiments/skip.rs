//! Stands in for an experiment that needs the in-process sluice when loadgen was built
//! without the `proxy` feature: it says so, or fails when nothing else could run.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::settings::Settings;

/// An experiment this build cannot run.
pub struct Skip {
    what: &'static str,
    fail: bool,
}

#[allow(dead_code)]
impl Skip {
    /// Logs that `what` was skipped.
    pub fn log(what: &'static str) -> Box<dyn Experiment> {
        Box::new(Skip { what, fail: false })
    }

    /// Fails the run: `what` is all the command does.
    pub fn fail(what: &'static str) -> Box<dyn Experiment> {
        Box::new(Skip { what, fail: true })
    }
}

#[async_trait(?Send)]
impl Experiment for Skip {
    fn name(&self) -> &'static str {
        self.what
    }

    fn plan(&self, _: &Settings, _: Duration) -> Plan {
        Plan::default()
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        if self.fail {
            anyhow::bail!("{} needs loadgen built with the `proxy` feature", self.what);
        }
        run.progress.log(format!(
            "{} skipped: loadgen was built without the `proxy` feature",
            self.what
        ));
        Ok(())
    }
}
