//! The scenario a trace simulates (`pcieperf trace`, docs/trace.md): a device DMA transfer on a
//! link given by name or by a simulator target's parameters, or one of document 000's records
//! ([`crate::link::scenarios`]).

use crate::error::InvalidInput;
use crate::link::{scenarios, SimConfig, Workload};
use crate::model::HeaderFormat;

/// Which transfer or record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Write,
    Read,
    Doc000Example1,
    Doc000Reads,
    Doc000Test3,
    Doc000Test4,
}

impl crate::named::Named for Scenario {
    const ALL: &'static [Self] = &[Scenario::Write, Scenario::Read, Scenario::Doc000Example1, Scenario::Doc000Reads, Scenario::Doc000Test3, Scenario::Doc000Test4];

    fn name(self) -> &'static str {
        match self {
            Scenario::Write => "write",
            Scenario::Read => "read",
            Scenario::Doc000Example1 => "doc000-example1",
            Scenario::Doc000Reads => "doc000-reads",
            Scenario::Doc000Test3 => "doc000-test3",
            Scenario::Doc000Test4 => "doc000-test4",
        }
    }
}

/// The DMA scenarios' link and transfer, as the user gave them (`None`: the default).
#[derive(Debug, Clone, Default)]
pub struct DmaOptions {
    /// A link name such as `gen3x8` (default Gen1 x1).
    pub link: Option<String>,
    /// A simulator target (`sim:PRESET,...`) whose link parameters are taken instead.
    pub target: Option<String>,
    pub bytes: u64,
    pub addr: u64,
    pub mps_bytes: Option<u64>,
    pub mrrs_bytes: Option<u64>,
    pub header: Option<HeaderFormat>,
    pub ecrc: bool,
    pub tags: Option<u32>,
}

impl DmaOptions {
    /// Whether any option describes the link (document 000's scenarios set their own).
    fn sets_the_link(&self) -> bool {
        self.link.is_some() || self.target.is_some() || self.mps_bytes.is_some() || self.mrrs_bytes.is_some() || self.header.is_some() || self.ecrc || self.tags.is_some()
    }
}

/// The simulator's inputs for `scenario`.
pub fn scenario(scenario: Scenario, dma: &DmaOptions) -> Result<(SimConfig, Workload), InvalidInput> {
    let is_dma = matches!(scenario, Scenario::Write | Scenario::Read);
    if !is_dma && dma.sets_the_link() {
        return Err(InvalidInput::new("document 000's scenarios set their own link: --link, --target, --mps, --mrrs, --header, --ecrc and --tags go with --scenario write or read"));
    }
    let (config, workload) = match scenario {
        Scenario::Write => (dma_config(dma)?, Workload::DmaWrite { addr: dma.addr, bytes: dma.bytes }),
        Scenario::Read => (dma_config(dma)?, Workload::DmaRead { addr: dma.addr, bytes: dma.bytes }),
        Scenario::Doc000Example1 => scenarios::example_1(),
        Scenario::Doc000Reads => scenarios::three_reads(),
        Scenario::Doc000Test3 => scenarios::test_3_writes(),
        Scenario::Doc000Test4 => scenarios::test_4_reads(0),
    };
    if is_dma && (dma.bytes == 0 || dma.addr.checked_add(dma.bytes).is_none()) {
        return Err(InvalidInput::new(format!("invalid DMA transfer of {} bytes at {:#x}: at least 1 byte, below 2^64", dma.bytes, dma.addr)));
    }
    if is_dma && config.header == HeaderFormat::Dw3 && dma.addr + dma.bytes > 1 << 32 {
        return Err(InvalidInput::new("a transfer beyond 4 GiB needs 64-bit addresses: pass --header 4dw"));
    }
    config.validate()?;
    Ok((config, workload))
}

/// The link of the DMA scenarios: the target's parameters or the named link's, then the options.
fn dma_config(dma: &DmaOptions) -> Result<SimConfig, InvalidInput> {
    let mut config = match &dma.target {
        Some(target) => {
            let Some(argument) = target.strip_prefix("sim:").or((target == "sim").then_some("")) else {
                return Err(InvalidInput::new(format!("invalid trace target '{target}': only simulator targets (sim:PRESET) describe a link to trace")));
            };
            SimConfig::from_params(&crate::engine::sim::config::SimConfig::parse(argument)?.params)
        }
        None => SimConfig::new(dma.link.as_deref().unwrap_or("gen1x1").parse()?),
    };
    config.mps_bytes = dma.mps_bytes.unwrap_or(config.mps_bytes);
    config.mrrs_bytes = dma.mrrs_bytes.unwrap_or(config.mrrs_bytes);
    config.header = dma.header.unwrap_or(config.header);
    config.ecrc |= dma.ecrc;
    config.tags = dma.tags.unwrap_or(config.tags);
    Ok(config)
}
