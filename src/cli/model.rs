//! `pcieperf model`.

use clap::Args;

#[derive(Debug, Args)]
pub struct ModelArgs {}

pub fn run(_args: ModelArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`pcieperf model` is not built yet")
}
