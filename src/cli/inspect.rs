//! `pcieperf inspect`.

use clap::Args;

#[derive(Debug, Args)]
pub struct InspectArgs {}

pub fn run(_args: InspectArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`pcieperf inspect` is not built yet")
}
