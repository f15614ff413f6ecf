//! A transfer's data time from the link simulator ([`crate::link`]), not from the model.
//!
//! The endpoint's link parameters (link, MaxPayload, MaxReadRequest, RCB, header format, ECRC,
//! tags, completion latency, DLLP coalescing) become a [`link::SimConfig`]; each DMA transfer is
//! simulated packet by packet, long ones through the steady-state fast-forward
//! ([`link::steady`]), and CPU register accesses are the link's `Cpu` agent. The simulation is
//! deterministic, so the result of each distinct question is cached: procedures repeat the same
//! transfer many times.

use std::collections::HashMap;

use crate::error::InvalidInput;
use crate::link::{self, AckPolicy, Credits, FcPolicy, Receiver, Workload};
use crate::model::LinkParams;

/// Most distinct questions kept (a property test asks thousands; each answer is a few bytes).
const CACHE_ENTRIES: usize = 4096;

/// Data times of one DMA run, in ns from its start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DmaTimes {
    /// When the last byte written to host memory arrived (0 without writes).
    pub d2h_ns: f64,
    /// When the last completion of the reads arrived at the device (0 without reads).
    pub h2d_ns: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Question {
    Dma { write_bytes: u64, read_bytes: u64 },
    CpuRead { bytes: u64 },
    CpuWrite { bytes: u64 },
}

/// The simulated link of one endpoint, with the answers it gave so far.
#[derive(Debug, Clone)]
pub struct LinkTimes {
    /// The link simulator's configuration, or why these parameters cannot be simulated.
    config: Result<link::SimConfig, InvalidInput>,
    answers: HashMap<Question, DmaTimes>,
}

impl LinkTimes {
    pub fn new(params: &LinkParams) -> Self {
        LinkTimes { config: link_config(params), answers: HashMap::new() }
    }

    /// Data time of `write_bytes` device→host and `read_bytes` host→device, both at once when
    /// both are non-zero (two DMA channels sharing the device's transmit queue).
    pub fn dma(&mut self, write_bytes: u64, read_bytes: u64) -> Result<DmaTimes, InvalidInput> {
        self.answer(Question::Dma { write_bytes, read_bytes })
    }

    /// A CPU read of `bytes` of device registers: from the request leaving the root complex to
    /// its completion arriving back, in ns.
    pub fn cpu_read_ns(&mut self, bytes: u64) -> Result<f64, InvalidInput> {
        Ok(self.answer(Question::CpuRead { bytes })?.d2h_ns)
    }

    /// A CPU write of `bytes`: how long its TLP occupies the link, in ns.
    pub fn cpu_write_ns(&mut self, bytes: u64) -> Result<f64, InvalidInput> {
        Ok(self.answer(Question::CpuWrite { bytes })?.h2d_ns)
    }

    fn answer(&mut self, question: Question) -> Result<DmaTimes, InvalidInput> {
        if let Some(times) = self.answers.get(&question) {
            return Ok(*times);
        }
        let config = self.config.as_ref().map_err(Clone::clone)?;
        let times = simulate(config, question)?;
        if self.answers.len() >= CACHE_ENTRIES {
            self.answers.clear();
        }
        self.answers.insert(question, times);
        Ok(times)
    }
}

fn simulate(config: &link::SimConfig, question: Question) -> Result<DmaTimes, InvalidInput> {
    let up = link::Direction::Upstream.index();
    let down = link::Direction::Downstream.index();
    let workload = match question {
        Question::Dma { write_bytes, read_bytes: 0 } => Workload::DmaWrite { addr: 0, bytes: write_bytes },
        Question::Dma { write_bytes: 0, read_bytes } => Workload::DmaRead { addr: 0, bytes: read_bytes },
        Question::Dma { write_bytes, read_bytes } => Workload::DmaBoth { write_addr: 0, write_bytes, read_addr: 0, read_bytes },
        Question::CpuRead { bytes } => Workload::CpuReads { addr: 0, bytes, count: 1, gap_ns: 0.0 },
        Question::CpuWrite { bytes } => Workload::CpuWrites { addr: 0, bytes, count: 1, spacing_ns: 0.0 },
    };
    let outcome = link::simulate_steady(config, &workload)?;
    Ok(DmaTimes { d2h_ns: outcome.arrived_ns[up], h2d_ns: outcome.arrived_ns[down] })
}

/// The link simulator's configuration for the endpoint's link parameters. Acks and UpdateFCs
/// follow `dllp_every_tlps`, or by default the specification's AckNak latency limit as a timer
/// (the most coalescing a compliant receiver may do, as the model assumes); credits are large
/// (no flow-control starvation in the link itself: see docs/simulator.md).
pub fn link_config(params: &LinkParams) -> Result<link::SimConfig, InvalidInput> {
    if params.link.generation == crate::model::Generation::Gen6 {
        // The link simulates flits, but a stream of them has no fast-forward yet (flits pack TLPs
        // across their boundaries), and the engine's streams last seconds.
        return Err(InvalidInput::new(format!("invalid simulated link {}: the sim engine runs Gen1–Gen5 (Gen6 flit mode has no fast-forward yet)", params.link)));
    }
    let mut config = link::SimConfig::from_params(params);
    config.record = false;
    config.validate()?;
    let (ack, fc) = match params.dllp_every_tlps {
        Some(n) => (AckPolicy::EveryTlps(n), FcPolicy::EveryTlps(n)),
        None => {
            let symbol_ns = link::phy::Phy::new(params.link).ns(params.link.width as u64);
            let delay_ns = crate::model::dllp::ack_latency_limit_symbols(params.link, params.mps_bytes) as f64 * symbol_ns;
            (AckPolicy::Timer { delay_ns }, FcPolicy::Timer { delay_ns })
        }
    };
    let receiver = Receiver { ack, fc, credits: Credits::large() };
    config.host_rx = receiver;
    config.device_rx = receiver;
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc000_cpu_read_is_request_latency_completion() {
        let params = super::super::SimConfig::preset("doc000").unwrap().params;
        let mut link = LinkTimes::new(&params);
        // Gen1 x1: MRd 20 bytes = 80 ns, 500 ns latency, CplD of 4 bytes 24 bytes = 96 ns.
        assert_eq!(link.cpu_read_ns(4).unwrap(), 676.0);
        assert_eq!(link.cpu_write_ns(4).unwrap(), 96.0);
        let times = link.dma(4096, 0).unwrap();
        assert!(times.d2h_ns > 0.0 && times.h2d_ns == 0.0);
        assert_eq!(link.dma(4096, 0).unwrap(), times, "cached, deterministic");
    }

    #[test]
    fn gen6_is_refused_with_a_reason() {
        let params = LinkParams::typical("gen6x16".parse().unwrap());
        let error = LinkTimes::new(&params).dma(4096, 0).unwrap_err().0;
        assert!(error.contains("Gen1–Gen5"), "{error}");
    }
}
