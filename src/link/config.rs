//! What the simulated link is made of: the link, the packet-size rules, the policies of each
//! receiver and the latencies of the agents. Every value is checked before a run starts, so a
//! bad value is an [`InvalidInput`] naming the allowed ones, never a panic in the middle.

use crate::error::InvalidInput;
use crate::model::{Generation, HeaderFormat, Link};

/// When a receiver acknowledges the TLPs it received.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AckPolicy {
    /// One Ack DLLP for every TLP, queued as soon as the TLP has arrived (document 000 §3.5).
    Immediate,
    /// One Ack for every `n` TLPs (and the rest when the timer of the last group runs out).
    EveryTlps(u32),
    /// One Ack, for everything received so far, this long after the first unacknowledged TLP.
    Timer { delay_ns: f64 },
}

/// When a receiver returns the flow-control credits of the TLPs it has consumed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FcPolicy {
    /// One UpdateFC for every `n` TLPs of a credit class.
    EveryTlps(u32),
    /// One UpdateFC, for everything freed so far, this long after the first freed TLP.
    Timer { delay_ns: f64 },
}

/// Header and data credits a receiver advertises for one class (a data credit is 16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassCredits {
    /// Never a stall, never an UpdateFC (endpoints must advertise infinite completion credits;
    /// root complexes usually do).
    Infinite,
    Finite { header: u64, data: u64 },
}

/// Credits of the three classes a receiver advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credits {
    pub posted: ClassCredits,
    pub non_posted: ClassCredits,
    pub completion: ClassCredits,
}

impl Credits {
    /// So many credits that flow control never stalls a transfer the tests run.
    /// Completions: infinite, as requesters advertise them.
    pub fn large() -> Self {
        let class = ClassCredits::Finite { header: 1 << 20, data: 1 << 24 };
        Credits { posted: class, non_posted: class, completion: ClassCredits::Infinite }
    }

    pub fn class(&self, class: crate::link::FcClass) -> ClassCredits {
        match class {
            crate::link::FcClass::Posted => self.posted,
            crate::link::FcClass::NonPosted => self.non_posted,
            crate::link::FcClass::Completion => self.completion,
        }
    }
}

/// The receiving half of one side of the link: its Ack and UpdateFC policies and credits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Receiver {
    pub ack: AckPolicy,
    pub fc: FcPolicy,
    pub credits: Credits,
}

impl Receiver {
    /// One Ack and one UpdateFC per TLP, large credits: document 000 §3.5's assumptions.
    pub fn immediate() -> Self {
        Receiver { ack: AckPolicy::Immediate, fc: FcPolicy::EveryTlps(1), credits: Credits::large() }
    }
}

/// Everything about the simulated link and its two ends.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub link: Link,
    pub mps_bytes: u64,
    pub mrrs_bytes: u64,
    pub rcb_bytes: u64,
    pub header: HeaderFormat,
    pub ecrc: bool,
    /// Outstanding read requests the DMA engine may have (tags).
    pub tags: u32,
    /// Time from the end of a read request at host memory to its first completion, in ns.
    pub host_completion_latency_ns: f64,
    /// The same for reads of the device's registers (document 000 §3.5: 500 ns).
    pub device_completion_latency_ns: f64,
    /// Flight time plus receive pipeline, one way, in ns: what makes the credit loop long.
    pub wire_delay_ns: f64,
    /// Symbol times between SKP ordered sets: 1180–1538 at 8b/10b, 370–375 blocks at 128b/130b
    /// (given here in blocks for those generations).
    pub skp_interval: u64,
    /// Symbol times (or blocks) already elapsed since the last SKP when the run starts: where
    /// in the SKP schedule the record begins (a trace starts at an arbitrary point of it).
    pub skp_phase: u64,
    /// Receiver of the host (root complex) side: acknowledges the device's TLPs.
    pub host_rx: Receiver,
    /// Receiver of the device side.
    pub device_rx: Receiver,
    /// Keep the record of every packet that crossed the link.
    pub record: bool,
    /// Replay buffer, REPLAY_TIMER and retrain time of both transmitters.
    pub replay: crate::link::ReplayConfig,
    /// Injected bit errors (none by default).
    pub errors: crate::link::ErrorConfig,
    /// Injected credit holds of the host's receiver and TLP errors (none by default).
    pub inject: crate::link::Injection,
}

impl SimConfig {
    /// Document 000's system with large credits: MPS 128, MRRS 512, RCB 64, 3DW headers,
    /// 500 ns completion latencies, immediate Acks and UpdateFCs, shortest SKP interval.
    pub fn new(link: Link) -> Self {
        SimConfig {
            link,
            mps_bytes: 128,
            mrrs_bytes: 512,
            rcb_bytes: 64,
            header: HeaderFormat::Dw3,
            ecrc: false,
            tags: 32,
            host_completion_latency_ns: 500.0,
            device_completion_latency_ns: 500.0,
            wire_delay_ns: 0.0,
            skp_interval: default_skp_interval(link.generation),
            skp_phase: 0,
            host_rx: Receiver::immediate(),
            device_rx: Receiver::immediate(),
            record: true,
            replay: crate::link::ReplayConfig::default(),
            errors: crate::link::ErrorConfig::default(),
            inject: crate::link::Injection::default(),
        }
    }

    /// The link the model's parameters describe: MPS, MRRS, RCB, headers, ECRC, tags, and the
    /// read latency as the completion latency of host memory and of the device's registers.
    /// Only the parameters are taken; nothing of the model's timing.
    pub fn from_params(params: &crate::model::LinkParams) -> Self {
        SimConfig {
            mps_bytes: params.mps_bytes,
            mrrs_bytes: params.mrrs_bytes,
            rcb_bytes: params.rcb_bytes,
            header: params.header,
            ecrc: params.ecrc,
            tags: params.tags,
            host_completion_latency_ns: params.read_latency_ns,
            device_completion_latency_ns: params.read_latency_ns,
            ..SimConfig::new(params.link)
        }
    }

    /// A configuration for a link named like `gen1x1` (an unknown generation is an error).
    pub fn for_link(name: &str) -> Result<Self, InvalidInput> {
        let config = SimConfig::new(name.parse()?);
        config.validate()?;
        Ok(config)
    }

    /// Refuse what the simulator cannot run, naming the allowed values.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        crate::model::link::check_width(self.link.width)?;
        for (what, bytes) in [("MaxPayload", self.mps_bytes), ("MaxReadRequest", self.mrrs_bytes)] {
            if !crate::model::PAYLOAD_SIZES.contains(&bytes) {
                return Err(InvalidInput::new(format!("invalid {what} {bytes}: allowed 128, 256, 512, 1024, 2048, 4096")));
            }
        }
        if ![64, 128].contains(&self.rcb_bytes) {
            return Err(InvalidInput::new(format!("invalid read completion boundary {}: allowed 64, 128", self.rcb_bytes)));
        }
        if !(1..=1024).contains(&self.tags) {
            return Err(InvalidInput::new(format!("invalid tag count {}: allowed 1 to 1024", self.tags)));
        }
        for (what, ns) in [
            ("host completion latency", self.host_completion_latency_ns),
            ("device completion latency", self.device_completion_latency_ns),
            ("wire delay", self.wire_delay_ns),
        ] {
            check_ns(what, ns)?;
        }
        let (low, high) = skp_interval_range(self.link.generation);
        if !(low..=high).contains(&self.skp_interval) {
            return Err(InvalidInput::new(format!("invalid SKP interval {}: allowed {low} to {high}", self.skp_interval)));
        }
        if self.skp_phase > self.skp_interval {
            return Err(InvalidInput::new(format!("invalid SKP phase {}: allowed 0 to the interval ({})", self.skp_phase, self.skp_interval)));
        }
        for (side, rx) in [("host", &self.host_rx), ("device", &self.device_rx)] {
            check_receiver(side, rx, self.mps_bytes.max(self.header.bytes()))?;
        }
        self.replay.validate(self.largest_replay_entry_bytes())?;
        self.inject.validate()?;
        self.errors.validate()
    }

    /// Link bytes of the largest TLP (or, in flit mode, one flit) a replay buffer holds.
    pub fn largest_replay_entry_bytes(&self) -> u64 {
        let phy = crate::link::phy::Phy::new(self.link);
        if self.link.generation == Generation::Gen6 {
            return crate::link::flit::FLIT_BYTES;
        }
        let ecrc = if self.ecrc { crate::link::phy::ECRC_BYTES } else { 0 };
        phy.tlp_framing_bytes() + self.header.bytes() + self.mps_bytes + ecrc
    }
}

/// The specification's shortest SKP interval: 1180 symbol times (8b/10b) or 370 blocks.
pub fn default_skp_interval(generation: Generation) -> u64 {
    skp_interval_range(generation).0
}

/// Allowed SKP intervals: symbol times at 8b/10b, data blocks at 128b/130b.
pub fn skp_interval_range(generation: Generation) -> (u64, u64) {
    match generation {
        Generation::Gen1 | Generation::Gen2 => (1180, 1538),
        _ => (370, 375),
    }
}

fn check_ns(what: &str, ns: f64) -> Result<(), InvalidInput> {
    if ns >= 0.0 && ns.is_finite() {
        Ok(())
    } else {
        Err(InvalidInput::new(format!("invalid {what} {ns} ns: must be 0 or more")))
    }
}

fn check_receiver(side: &str, rx: &Receiver, largest_payload_bytes: u64) -> Result<(), InvalidInput> {
    match rx.ack {
        AckPolicy::EveryTlps(0) => return Err(InvalidInput::new(format!("invalid {side} Ack policy: every 0 TLPs (allowed 1 or more)"))),
        AckPolicy::Timer { delay_ns } => check_ns(&format!("{side} Ack timer"), delay_ns)?,
        _ => {}
    }
    match rx.fc {
        FcPolicy::EveryTlps(0) => return Err(InvalidInput::new(format!("invalid {side} UpdateFC policy: every 0 TLPs (allowed 1 or more)"))),
        FcPolicy::Timer { delay_ns } => check_ns(&format!("{side} UpdateFC timer"), delay_ns)?,
        _ => {}
    }
    let needed_data = largest_payload_bytes.div_ceil(crate::link::flow::DATA_CREDIT_BYTES);
    for (class, credits) in [("posted", rx.credits.posted), ("non-posted", rx.credits.non_posted), ("completion", rx.credits.completion)] {
        let ClassCredits::Finite { header, data } = credits else { continue };
        if header == 0 || data == 0 {
            return Err(InvalidInput::new(format!(
                "invalid {side} {class} credits {header}/{data}: header and data credits must be 1 or more (or infinite)"
            )));
        }
        if class != "non-posted" && data < needed_data {
            return Err(InvalidInput::new(format!(
                "invalid {side} {class} data credits {data}: a largest TLP needs {needed_data} (16 bytes each)"
            )));
        }
    }
    Ok(())
}
