//! A discrete-event simulator of one PCI Express link, both directions, at symbol-time
//! resolution: an independent check of [`crate::model`].
//!
//! Packets are stepped through the simulated link one by one — physical layer ([`phy`]: 8b/10b
//! and 128b/130b framing, lane striping, SKP ordered sets between packets), data link layer
//! (sequence numbers, LCRC, Ack and UpdateFC DLLPs by policy), flow control ([`flow`]) and the
//! transaction layer ([`transaction`]: MaxPayload, MaxReadRequest, RCB, tags) — and a transfer
//! takes as long as its packets take to cross. No time here comes from the model's formulas;
//! the model's types only carry the parameters. Pure Rust, no I/O. See `docs/link-simulator.md`.

pub mod agents;
mod between;
pub mod config;
pub mod crc;
pub mod errors;
pub mod flit;
pub mod events;
pub mod flow;
pub mod inject;
pub mod packet;
pub mod phy;
pub mod record;
pub mod scenarios;
pub mod replay;
pub mod sim;
pub mod symbols;
pub mod steady;
pub mod transaction;
pub mod wire;

pub use agents::Workload;
pub use config::{AckPolicy, ClassCredits, Credits, FcPolicy, Receiver, SimConfig};
pub use errors::{Corrupt, ErrorConfig};
pub use inject::{Hold, Injection, PayloadGaps, Starvation};
pub use packet::{Direction, Dllp, FcClass, Packet, Tlp, TlpKind};
pub use record::{dump, Crossing, DirectionStats, LeftOut, LeftOutCounts};
pub use replay::{ReplayConfig, ReplayStats};
pub use sim::{LinkSim, Outcome};
pub use steady::{fast_forward, fast_forward_on_one_thread, simulate_steady, Steady, SteadyOptions};

use crate::error::InvalidInput;

/// Simulate `workload` on the link of `config`.
pub fn simulate(config: &SimConfig, workload: &Workload) -> Result<Outcome, InvalidInput> {
    Ok(LinkSim::new(config, workload)?.run())
}
