//! `pcieperf crosscheck`: the model against the link simulator over a grid
//! ([`crate::bench::crosscheck`]); rendering in [`crate::report::crosscheck`].

use clap::Args;

use super::values::named;
use crate::bench::crosscheck::{self, Grid, Kind};
use crate::model::{Generation, HeaderFormat};
use crate::report::view::{self, Document, Format, ViewOptions};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf crosscheck                         the whole grid (2,160 points: Gen1–6, writes, reads, both)
  pcieperf crosscheck --gen 3 --width 8 --kind read --outside
  pcieperf crosscheck --kind both --outside   writes and reads at once against model::bidir
  pcieperf crosscheck --mps 256 --credits 32 --wire-delay-ns 500 --kind write   a credit-limited loop, told to the model

Exit codes: 0 every point within 0.5 % or its gap explained, 1 a point outside unexplained,
2 bad input.")]
pub struct CrosscheckArgs {
    /// Generations, e.g. 1,2,3 (6 is flit mode).
    #[arg(long = "gen", value_delimiter = ',', default_values_t = [1, 2, 3, 4, 5, 6])]
    pub generations: Vec<u32>,
    #[arg(long = "width", value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16])]
    pub widths: Vec<u32>,
    #[arg(long, value_delimiter = ',', default_values_t = [128, 256, 512, 1024, 2048, 4096])]
    pub mps: Vec<u64>,
    #[arg(long = "header", value_delimiter = ',', value_parser = named::<HeaderFormat>(), default_values = ["3dw", "4dw"])]
    pub headers: Vec<HeaderFormat>,
    /// write, read, both (writes and reads at once).
    #[arg(long = "kind", value_delimiter = ',', value_parser = named::<Kind>(), default_values = ["write", "read", "both"])]
    pub kinds: Vec<Kind>,
    /// Transfer sizes, taken in turn (e.g. 64,4KiB,16MiB).
    #[arg(long, default_value = "64,1000,4KiB,64KiB,1MiB,16MiB")]
    pub sizes: String,
    #[arg(long, value_delimiter = ',', default_values_t = [128, 512, 4096])]
    pub mrrs: Vec<u64>,
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32, 256])]
    pub tags: Vec<u32>,
    /// Host completion latencies in ns, taken in turn.
    #[arg(long = "latency-ns", value_delimiter = ',', default_values_t = [100.0, 500.0, 2000.0])]
    pub latencies_ns: Vec<f64>,
    /// Sizes per combination of generation, width, MPS, header and kind.
    #[arg(long, default_value_t = 2)]
    pub sizes_per_point: usize,
    /// Largest TLP count of one point (a size needing more is lowered).
    #[arg(long, default_value_t = 20_000)]
    pub max_tlps: u64,
    /// One Ack and one UpdateFC per this many TLPs, in the simulation and the model.
    #[arg(long, default_value_t = 1)]
    pub ack_every: u32,
    /// Posted and non-posted data credits (16 B each) both sides advertise (default: so many
    /// that flow control never stalls).
    #[arg(long)]
    pub credits: Option<u64>,
    /// Flight time plus receive pipeline, one way, in ns.
    #[arg(long, default_value_t = 0.0)]
    pub wire_delay_ns: f64,
    /// Print only the points outside 0.5 %, then the summary.
    #[arg(long)]
    pub outside: bool,
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    #[arg(long)]
    pub csv: bool,
}

impl CrosscheckArgs {
    fn grid(&self) -> anyhow::Result<Grid> {
        let generations = self.generations.iter().map(|&n| Generation::from_number(n)).collect::<Result<_, _>>()?;
        Ok(Grid {
            generations,
            widths: self.widths.clone(),
            mps_bytes: self.mps.clone(),
            headers: self.headers.clone(),
            kinds: self.kinds.clone(),
            sizes_bytes: crate::units::parse_size_list(&self.sizes)?,
            mrrs_bytes: self.mrrs.clone(),
            tags: self.tags.clone(),
            latencies_ns: self.latencies_ns.clone(),
            sizes_per_point: self.sizes_per_point,
            max_tlps_per_point: self.max_tlps,
            ack_every_tlps: self.ack_every,
            credits: self.credits,
            wire_delay_ns: self.wire_delay_ns,
        })
    }
}

pub fn run(args: CrosscheckArgs) -> anyhow::Result<i32> {
    let document = crosscheck::run(&args.grid()?)?;
    let format = if args.json { Format::Json } else if args.csv { Format::Csv } else { Format::Text };
    let unexplained = document.unexplained();
    view::print(&Document::Crosscheck(document), format, &ViewOptions { outside_only: args.outside, ..ViewOptions::default() })?;
    Ok(if unexplained > 0 { 1 } else { 0 })
}
