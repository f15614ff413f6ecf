//! The simulator driven from outside: no agents of its own, a driver (the `sim` engine's
//! message ring, `engine/sim/ring.rs`) hands it TLPs at the times its own state machine decides
//! and learns from the delivery counters when they arrived. Time only moves forward: a TLP is
//! queued at the simulator's present, after every earlier event has been handled.

use super::{Direction, LinkSim, SimConfig, Tlp};
use crate::error::InvalidInput;

impl LinkSim {
    /// An idle link with no agents: nothing moves until [`LinkSim::send`].
    pub fn driven(config: &SimConfig) -> Result<Self, InvalidInput> {
        Self::with_agents(config, None)
    }

    /// Now, in ns.
    pub fn now_ns(&self) -> f64 {
        self.phy.ns(self.now)
    }

    /// When the next queued event happens, in ns (None: the link is idle and nothing is due).
    pub fn next_event_ns(&self) -> Option<f64> {
        self.events.peek().map(|(time, _)| self.phy.ns(time))
    }

    /// Handle the next event (whatever its time). False when none is queued.
    pub fn step_event(&mut self) -> bool {
        if self.events.is_empty() {
            return false;
        }
        self.step()
    }

    /// Handle every event due at or before `at_ns`, then move the clock to `at_ns` (never back).
    pub fn run_until_ns(&mut self, at_ns: f64) {
        let at = self.phy.ticks(at_ns);
        while self.events.peek().is_some_and(|(time, _)| time <= at) {
            self.step();
        }
        self.now = self.now.max(at);
    }

    /// Queue `tlp` in the transmitter of `direction` now; it goes out when the lanes, the
    /// credits and the replay buffer allow, as any TLP the agents make.
    pub fn send(&mut self, direction: Direction, tlp: Tlp) {
        self.tx[direction.index()].tlps.push_back(tlp);
        self.wake(direction);
    }

    /// TLPs queued in `direction`'s transmitter, not yet on the lanes.
    pub fn queued_tlps(&self, direction: Direction) -> usize {
        self.tx[direction.index()].tlps.len()
    }

    /// TLPs the receiver of `direction` has passed to its transaction layer so far.
    pub fn delivered_tlps(&self, direction: Direction) -> u64 {
        self.delivered_tlps[direction.index()]
    }

    /// Completions among [`LinkSim::delivered_tlps`] (the completer on the far side answers a
    /// driver's reads on its own, so the driver counts its own writes as the rest).
    pub fn delivered_completions(&self, direction: Direction) -> u64 {
        self.delivered_completions[direction.index()]
    }

    /// When the last TLP put on `direction`'s lanes ended there, in ns.
    pub fn last_tlp_end_ns(&self, direction: Direction) -> f64 {
        self.outcome.stats[direction.index()].last_tlp_end_ns
    }

    /// The run's totals so far (per direction) and data link layer retries.
    pub fn outcome(&self) -> &super::Outcome {
        &self.outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{transaction, TlpKind, Workload};

    /// Driving the link by hand gives the agents' times: a DMA write queued TLP by TLP at time
    /// 0 ends when the DmaWrite workload ends.
    #[test]
    fn driven_write_matches_the_dma_agent() {
        let config = SimConfig::new("gen1x4".parse().unwrap());
        let bytes = 4096;
        let agent = crate::link::simulate(&config, &Workload::DmaWrite { addr: 0, bytes }).unwrap();
        let mut sim = LinkSim::driven(&config).unwrap();
        let mut split = transaction::Splitter::new(0, bytes, config.mps_bytes);
        let mut count = 0;
        while let Some((addr, len)) = split.next_piece() {
            sim.send(Direction::Upstream, transaction::tlp(TlpKind::MemWrite, addr, len, 0));
            count += 1;
        }
        while sim.delivered_tlps(Direction::Upstream) < count {
            assert!(sim.step_event(), "the link stopped before delivering");
        }
        assert_eq!(sim.now_ns(), agent.done_ns);
    }
}
