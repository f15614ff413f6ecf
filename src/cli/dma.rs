//! `pcieperf dma`.

use clap::Args;

#[derive(Debug, Args)]
pub struct DmaArgs {}

pub fn run(_args: DmaArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`pcieperf dma` is not built yet")
}
