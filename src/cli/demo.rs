//! `pcieperf demo`.

use clap::Args;

#[derive(Debug, Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<i32> {
    anyhow::bail!("`pcieperf demo` is not built yet")
}
