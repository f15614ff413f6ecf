//! What the host adds around the link: timer interrupts and CPU-initiated register accesses.
//!
//! Document 000 §4 traces CPU accesses to an FPGA RAM: posted 32-bit writes leave the CPU about
//! 110 ns apart, a 32-bit read takes about 1520 ns (the link's request + 500 ns latency +
//! completion, plus the host's own part), and every few milliseconds a timer interrupt holds the
//! CPU for microseconds. The simulator charges the same per access on its virtual clock (the
//! link's part simulated by the link's CPU agent), so a procedure that times accesses with
//! `now_ns()` sees the document's behaviour.

use crate::error::InvalidInput;

use super::config::SimConfig;
use super::link_time::LinkTimes;

/// A periodic host timer interrupt with a seeded phase; each occurrence lasts between half and
/// one and a half times `irq_ns` (drawn from the seed and its index), as the handler's work varies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostTimer {
    pub period_ns: f64,
    pub irq_ns: f64,
    pub phase_ns: f64,
    pub seed: u64,
}

impl HostTimer {
    /// How long occurrence `index` holds the CPU.
    pub fn duration_ns(&self, index: i64) -> f64 {
        let mut rng = super::rng::SimRng::new(self.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.irq_ns * rng.uniform(0.5, 1.5)
    }

    /// When code that wants to run at `at_ns` actually runs: after the interrupt if it lands in one.
    pub fn run_at(&self, at_ns: f64) -> f64 {
        if self.period_ns <= 0.0 || self.irq_ns <= 0.0 {
            return at_ns;
        }
        let index = ((at_ns - self.phase_ns) / self.period_ns).floor();
        let since = at_ns - self.phase_ns - index * self.period_ns;
        let busy = self.duration_ns(index as i64);
        if since < busy { at_ns + (busy - since) } else { at_ns }
    }

    /// Timer interrupts that start in [from_ns, to_ns).
    pub fn interrupts_between(&self, from_ns: f64, to_ns: f64) -> u64 {
        if self.period_ns <= 0.0 || to_ns <= from_ns {
            return 0;
        }
        let index = |t: f64| ((t - self.phase_ns) / self.period_ns).ceil();
        (index(to_ns) - index(from_ns)).max(0.0) as u64
    }
}

/// CPU time for one MMIO read of `bytes`: the simulated link's round trip plus the host's part
/// (the same for every width: document 000 Test 15 sees about 1540 ns for 1, 2, 4 and 8 bytes).
pub fn mmio_read_ns(config: &SimConfig, link: &mut LinkTimes, bytes: u64) -> Result<f64, InvalidInput> {
    Ok(link.cpu_read_ns(bytes)? + config.mmio_read_host_ns)
}

/// CPU time between two posted MMIO writes of `bytes`: the host's spacing, never faster than the
/// simulated link carries one write TLP of that size.
pub fn mmio_write_ns(config: &SimConfig, link: &mut LinkTimes, bytes: u64) -> Result<f64, InvalidInput> {
    Ok(config.mmio_write_ns.max(link.cpu_write_ns(bytes)?))
}

/// CPU time for `bytes` sequential byte stores at `offset` through write-combining buffers and a
/// store fence: each TLP the buffers leave as (`model::write_combining::tlps`) costs what a
/// single write of its size does.
pub fn wc_write_ns(config: &SimConfig, link: &mut LinkTimes, offset: u64, bytes: u64) -> Result<f64, InvalidInput> {
    let mut total_ns = 0.0;
    for tlp in crate::model::write_combining::tlps(offset, bytes) {
        total_ns += tlp.count as f64 * mmio_write_ns(config, link, tlp.len)?;
    }
    Ok(total_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc000_cpu_accesses_match_tests_1_and_2() {
        let config = SimConfig::preset("doc000").unwrap();
        let mut link = LinkTimes::new(&config.params);
        let read_ns = mmio_read_ns(&config, &mut link, 4).unwrap();
        assert!((read_ns - 1520.0).abs() < 1.0, "{read_ns}");
        assert_eq!(mmio_write_ns(&config, &mut link, 4).unwrap(), 110.0);
        let timer = HostTimer { period_ns: 1000.0, irq_ns: 10.0, phase_ns: 0.0, seed: 1 };
        let busy = timer.duration_ns(1);
        assert!((5.0..15.0).contains(&busy));
        assert_eq!(timer.run_at(1000.0 + busy / 2.0), 1000.0 + busy);
        assert_eq!(timer.run_at(1500.0), 1500.0);
        assert_ne!(timer.duration_ns(1), timer.duration_ns(2), "the handler's time varies");
        assert_eq!(timer.interrupts_between(0.5, 3000.5), 3);
    }
}
