//! `pcieperf run`.

use clap::Args;

#[derive(Debug, Args)]
pub struct RunArgs {}

pub fn run(_args: RunArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`pcieperf run` is not built yet")
}
