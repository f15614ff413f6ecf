//! A transfer's data time from the link simulator ([`crate::link`]), not from the model.
//!
//! The endpoint's link parameters (link, MaxPayload, MaxReadRequest, RCB, header format, ECRC,
//! tags, completion latency, DLLP coalescing) become a [`link::SimConfig`]; each DMA transfer is
//! simulated packet by packet, long ones through the steady-state fast-forward
//! ([`link::steady`]), and CPU register accesses are the link's `Cpu` agent. The simulation is
//! deterministic, so the result of each distinct question is cached: procedures repeat the same
//! transfer many times.
//!
//! The host's flow-control stalls and the link's bit errors are injected into the link
//! ([`link::Injection`]): the root complex withholds its UpdateFCs for a while, a TLP arrives
//! corrupted. What they cost — the device's transmitter starving for credits, Naks and replays —
//! comes out of the simulation ([`DmaRun`]). A run in which no injected event falls is the
//! undisturbed run, answered from the cache.

use std::collections::HashMap;

use crate::error::InvalidInput;
use crate::engine::EngineError;
use crate::link::inject::{ErrorSchedule, HoldSchedule};
use crate::link::{self, AckPolicy, ClassCredits, Credits, FcPolicy, PayloadGaps, Receiver, Workload};
use crate::model::LinkParams;

/// Most distinct questions kept (a property test asks thousands; each answer is a few bytes).
const CACHE_ENTRIES: usize = 4096;

/// Data times of one DMA run, in ns from its start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DmaTimes {
    /// When the last byte written to host memory arrived (0 without writes).
    pub d2h_ns: f64,
    /// When the last completion of the reads arrived at the device (0 without reads).
    pub h2d_ns: f64,
}

/// One DMA run with injected events: its data times and what the link simulated of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DmaRun {
    pub times: DmaTimes,
    /// Pauses in each direction's payload longer than the undisturbed stream's, by
    /// [`link::Direction::index`] (upstream: the device's writes; downstream: the completions of
    /// its reads): the device's stalls. None in an undisturbed run.
    pub payload_gaps: [PayloadGaps; 2],
    /// TLPs corrupted by injected errors, by [`link::Direction::index`] (upstream: the device's
    /// writes; downstream: the completions of its reads).
    pub errors: [u64; 2],
    /// Replays they caused, per direction of the TLPs.
    pub replays: [u64; 2],
}

/// An undisturbed run: its times, when its last packet ended and the payload each direction
/// carried (to tell whether an injected event would fall inside it).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Answer {
    times: DmaTimes,
    last_ns: f64,
    payload_bytes: [u64; 2],
    payload_gaps: [PayloadGaps; 2],
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
    answers: HashMap<Question, Answer>,
}

impl LinkTimes {
    pub fn new(params: &LinkParams) -> Self {
        LinkTimes { config: link_config(params), answers: HashMap::new() }
    }

    /// Data time of `write_bytes` device→host and `read_bytes` host→device, both at once when
    /// both are non-zero (two DMA channels sharing the device's transmit queue).
    pub fn dma(&mut self, write_bytes: u64, read_bytes: u64) -> Result<DmaTimes, InvalidInput> {
        Ok(self.answer(Question::Dma { write_bytes, read_bytes })?.times)
    }

    /// [`LinkTimes::dma`] with `injection`'s credit holds and TLP errors. A run in which no
    /// injected event falls is the undisturbed one (the runs are the same up to the first event).
    /// The run is computed on a thread of its own ([`crate::cancel::compute`]): a signal ends the
    /// wait for it at once ([`EngineError::Interrupted`]), however long the stream.
    pub fn dma_injected(&mut self, write_bytes: u64, read_bytes: u64, injection: &link::Injection) -> Result<DmaRun, EngineError> {
        let undisturbed = self.answer(Question::Dma { write_bytes, read_bytes })?;
        if !injection.enabled() || !falls_inside(injection, &undisturbed) {
            return Ok(DmaRun { times: undisturbed.times, ..DmaRun::default() });
        }
        let mut config = self.config.as_ref().map_err(Clone::clone)?.clone();
        config.inject = injection.clone();
        let workload = dma_workload(write_bytes, read_bytes);
        let outcome = crate::cancel::compute(move || link::simulate_steady(&config, &workload)).ok_or(EngineError::Interrupted)??;
        Ok(DmaRun {
            times: times_of(&outcome),
            payload_gaps: stalls(outcome.payload_gaps, undisturbed.payload_gaps),
            errors: outcome.injected_errors,
            replays: outcome.replay.map(|r| r.replays),
        })
    }

    /// A CPU read of `bytes` of device registers: from the request leaving the root complex to
    /// its completion arriving back, in ns.
    pub fn cpu_read_ns(&mut self, bytes: u64) -> Result<f64, InvalidInput> {
        Ok(self.answer(Question::CpuRead { bytes })?.times.d2h_ns)
    }

    /// A CPU write of `bytes`: how long its TLP occupies the link, in ns.
    pub fn cpu_write_ns(&mut self, bytes: u64) -> Result<f64, InvalidInput> {
        Ok(self.answer(Question::CpuWrite { bytes })?.times.h2d_ns)
    }

    fn answer(&mut self, question: Question) -> Result<Answer, InvalidInput> {
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

fn dma_workload(write_bytes: u64, read_bytes: u64) -> Workload {
    match (write_bytes, read_bytes) {
        (_, 0) => Workload::DmaWrite { addr: 0, bytes: write_bytes },
        (0, _) => Workload::DmaRead { addr: 0, bytes: read_bytes },
        _ => Workload::DmaBoth { write_addr: 0, write_bytes, read_addr: 0, read_bytes },
    }
}

fn times_of(outcome: &link::Outcome) -> DmaTimes {
    let up = link::Direction::Upstream.index();
    let down = link::Direction::Downstream.index();
    DmaTimes { d2h_ns: outcome.arrived_ns[up], h2d_ns: outcome.arrived_ns[down] }
}

fn simulate(config: &link::SimConfig, question: Question) -> Result<Answer, InvalidInput> {
    let workload = match question {
        Question::Dma { write_bytes, read_bytes } => dma_workload(write_bytes, read_bytes),
        Question::CpuRead { bytes } => Workload::CpuReads { addr: 0, bytes, count: 1, gap_ns: 0.0 },
        Question::CpuWrite { bytes } => Workload::CpuWrites { addr: 0, bytes, count: 1, spacing_ns: 0.0 },
    };
    let outcome = link::simulate_steady(config, &workload)?;
    Ok(Answer {
        times: times_of(&outcome),
        last_ns: outcome.stats.iter().map(|s| s.last_end_ns).fold(0.0, f64::max),
        payload_bytes: outcome.stats.map(|s| s.payload_bytes),
        payload_gaps: outcome.payload_gaps,
    })
}

/// The pauses of a disturbed run that are stalls: only a pause longer than any the undisturbed
/// stream has (its packets' spacing, a read's round of tags) is one.
fn stalls(disturbed: [PayloadGaps; 2], undisturbed: [PayloadGaps; 2]) -> [PayloadGaps; 2] {
    std::array::from_fn(|d| if disturbed[d].longest_ns > undisturbed[d].longest_ns { disturbed[d] } else { PayloadGaps::default() })
}

/// Whether an injected event of `injection` falls inside the undisturbed run: a hold that
/// starts before its last packet ended, or an error within the payload of either direction.
fn falls_inside(injection: &link::Injection, undisturbed: &Answer) -> bool {
    let first_hold = HoldSchedule::new(injection).at(0.0).map_or(f64::INFINITY, |(start_ns, _)| start_ns);
    let errors = ErrorSchedule::new(injection);
    let error_inside = (0..2).any(|i| errors.next_at[i] < undisturbed.payload_bytes[i] as f64);
    first_hold < undisturbed.last_ns || (injection.tlp_errors_per_tb > 0.0 && error_inside)
}

/// Credits the host's receiver advertises for posted and non-posted TLPs: twice what its
/// UpdateFC loop has in flight (the UpdateFC interval, a TLP and an UpdateFC on the lanes each
/// way), so that nothing starves unless the host withholds its UpdateFCs. While it does, these
/// credits are what the device's queue can still send. Non-posted headers: as many again as the
/// device has tags (it may issue all its reads at once). Completions: infinite.
fn host_credits(config: &link::SimConfig, fc: FcPolicy) -> Credits {
    let phy = link::phy::Phy::new(config.link);
    let tlp_ticks = config.largest_replay_entry_bytes() as f64;
    let fc_ticks = match fc {
        FcPolicy::Timer { delay_ns } => phy.ticks(delay_ns) as f64,
        FcPolicy::EveryTlps(n) => n as f64 * tlp_ticks,
    };
    let loop_ticks = fc_ticks + 2.0 * tlp_ticks + 2.0 * phy.dllp_bytes() as f64;
    let header = (2.0 * loop_ticks / tlp_ticks).ceil() as u64 + 4;
    let data = header * config.mps_bytes.div_ceil(link::flow::DATA_CREDIT_BYTES);
    let non_posted = ClassCredits::Finite { header: header + config.tags as u64, data: header + config.tags as u64 };
    Credits { posted: ClassCredits::Finite { header, data }, non_posted, completion: ClassCredits::Infinite }
}

/// The link simulator's configuration for the endpoint's link parameters. Acks and UpdateFCs
/// follow `dllp_every_tlps`, or by default the specification's AckNak latency limit as a timer
/// (the most coalescing a compliant receiver may do, as the model assumes). The host advertises
/// finite credits ([`host_credits`]: enough that nothing starves without a credit hold), the
/// device large ones (its receive queue is never what stalls the demo).
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
    config.host_rx = Receiver { credits: host_credits(&config, fc), ..receiver };
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
