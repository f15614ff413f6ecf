//! An in-memory engine for testing the procedures: a virtual clock, a configurable rate and
//! per-transfer cost, optional jitter, stalls, corruption, a hang and a Ctrl-C after N transfers.
//! Test code only: the product's simulated endpoint is the `sim` engine.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::{DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Transfer};
use pcieperf::model::{Conditions, LinkParams};

pub struct TestEngine {
    pub info: EngineInfo,
    /// The modelled link, as a simulated engine states it.
    pub conditions: Option<Conditions>,
    pub now_ns: f64,
    /// Steady-state rate in MB/s (bytes per µs).
    pub rate_mbps: f64,
    /// In `transfer_both`, the h2d leg takes this many times the d2h leg's time (≥ 1).
    pub h2d_leg_factor: f64,
    /// Fixed cost per transfer (m), in ns.
    pub per_transfer_ns: f64,
    /// Relative jitter of each transfer time, uniform in ±jitter, deterministic.
    pub jitter: f64,
    /// Report the device's own duration (the time without the per-transfer cost).
    pub device_clock: bool,
    /// Report stall counters (the device's view) instead of leaving stalls to the host.
    pub device_stall_counters: bool,
    /// Every k-th transfer stalls for this many ns.
    pub stall_every: Option<(usize, f64)>,
    /// Flip a bit at this device offset in every d2h transfer.
    pub corrupt_d2h_at: Option<u64>,
    /// Report a wrong CRC for h2d data.
    pub corrupt_crc: bool,
    /// Refuse h2d writes, as an engine opened without consent to destroy data does.
    pub refuse_writes: bool,
    /// Memory: from this transfer on, writes are acknowledged but never land.
    pub drop_writes_from: Option<usize>,
    /// From this transfer on, d2h transfers write only the first half of the buffer (a device
    /// that stops short: the rest holds whatever was there before).
    pub short_d2h_from: Option<usize>,
    /// After this many transfers, stop answering.
    pub hang_after: Option<usize>,
    /// After this many transfers, raise this flag (as Ctrl-C would).
    pub cancel_after: Option<(usize, Arc<AtomicBool>)>,
    pub transfers: usize,
    seed: u64,
    rng: u64,
    memory: Vec<u8>,
    fifo: VecDeque<u8>,
}

/// Conditions of a modelled link: typical values with this MaxPayload and MRRS 512.
pub fn link(text: &str, mps: u64) -> Conditions {
    let params = LinkParams { mps_bytes: mps, mrrs_bytes: 512, ..LinkParams::typical(text.parse().unwrap()) };
    Conditions { params, capable: None, source: "test engine".into(), assumed: vec![], credits: None }
}

impl TestEngine {
    pub fn new(model: DataModel, seed: u64) -> Self {
        TestEngine {
            info: EngineInfo {
                kind: "test".into(),
                target: "test".into(),
                simulated: true,
                co_simulated: false,
                description: "in-memory test engine (simulated)".into(),
                pci_address: None,
                in_flight: 1,
                copies_per_transfer: 1,
                device_clock_hz: None,
                directions: vec![Direction::H2d, Direction::D2h],
                concurrent: true,
                alignment_bytes: 4,
                max_transfer_bytes: 64 << 20,
                capacity_bytes: Some(64 << 20),
                data_model: model,
            },
            conditions: Some(link("gen2x4", 256)),
            now_ns: 0.0,
            rate_mbps: 1000.0,
            h2d_leg_factor: 1.0,
            per_transfer_ns: 10_000.0,
            jitter: 0.0,
            device_clock: false,
            device_stall_counters: false,
            stall_every: None,
            corrupt_d2h_at: None,
            corrupt_crc: false,
            refuse_writes: false,
            drop_writes_from: None,
            short_d2h_from: None,
            hang_after: None,
            cancel_after: None,
            transfers: 0,
            seed,
            rng: 0x9E37_79B9_7F4A_7C15 ^ seed,
            memory: Vec::new(),
            fifo: VecDeque::new(),
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// Time the next transfer of `bytes` takes, and its stall.
    fn duration(&mut self, bytes: usize) -> Result<(f64, f64, f64), EngineError> {
        self.transfers += 1;
        if let Some((n, flag)) = &self.cancel_after {
            if self.transfers >= *n {
                flag.store(true, Ordering::SeqCst);
            }
        }
        if self.hang_after.is_some_and(|n| self.transfers > n) {
            return Err(EngineError::Timeout { what: "test engine hung".into(), after: Duration::from_millis(5) });
        }
        let data_ns = bytes as f64 / self.rate_mbps * 1e3 * (1.0 + self.jitter * self.uniform());
        let stall_ns = match self.stall_every {
            Some((k, ns)) if self.transfers.is_multiple_of(k) => ns,
            _ => 0.0,
        };
        Ok((self.per_transfer_ns, data_ns, stall_ns))
    }

    fn counters(&self, data_ns: f64, stall_ns: f64) -> DeviceCounters {
        DeviceCounters {
            device_ns: self.device_clock.then_some(data_ns + stall_ns),
            max_stall_ns: self.device_stall_counters.then_some(stall_ns),
            stalls_over_threshold: self.device_stall_counters.then_some(u64::from(stall_ns > 50_000.0)),
            crc32: None,
            errors: None,
            first_error_offset: None,
        }
    }

    fn move_data(&mut self, io: Io<'_>, offset: u64, counters: &mut DeviceCounters) -> Result<(), EngineError> {
        let model = self.info.data_model;
        if self.refuse_writes && io.direction() == Direction::H2d {
            return Err(EngineError::Unsupported("test device refuses writes without consent".into()));
        }
        match io {
            Io::H2d(buf) => match model {
                DataModel::Generator => counters.crc32 = Some(crc32(buf) ^ u32::from(self.corrupt_crc)),
                DataModel::Memory if self.drop_writes_from.is_some_and(|n| self.transfers >= n) => {}
                DataModel::Memory => {
                    let end = offset as usize + buf.len();
                    if self.memory.len() < end {
                        self.memory.resize(end, 0);
                    }
                    self.memory[offset as usize..end].copy_from_slice(buf);
                }
                DataModel::Loopback => self.fifo.extend(buf.iter()),
                DataModel::Opaque => return Err(EngineError::Unsupported("opaque test device refuses writes".into())),
            },
            Io::D2h(buf) => {
                let short = self.short_d2h_from.is_some_and(|n| self.transfers >= n);
                let written = if short { buf.len() / 2 } else { buf.len() };
                let buf = &mut buf[..written];
                match model {
                    DataModel::Generator => Pattern::lfsr(self.seed).fill(offset, buf),
                    DataModel::Memory => {
                        let start = offset as usize;
                        for (i, b) in buf.iter_mut().enumerate() {
                            *b = self.memory.get(start + i).copied().unwrap_or(0);
                        }
                    }
                    DataModel::Loopback => {
                        for b in buf.iter_mut() {
                            *b = self.fifo.pop_front().unwrap_or(0);
                        }
                    }
                    DataModel::Opaque => Pattern::lfsr(999).fill(offset, buf),
                }
                if let Some(at) = self.corrupt_d2h_at {
                    if let Some(b) = buf.get_mut(at.wrapping_sub(offset) as usize) {
                        *b ^= 0x40;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Engine for TestEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn conditions(&self) -> Option<Conditions> {
        self.conditions.clone()
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, _deadline: Duration) -> Result<Transfer, EngineError> {
        let (direction, bytes) = (io.direction(), io.len());
        let (m_ns, data_ns, stall_ns) = self.duration(bytes)?;
        let mut device = self.counters(data_ns, stall_ns);
        self.move_data(io, device_offset, &mut device)?;
        let start_ns = self.now_ns;
        self.now_ns += m_ns + data_ns + stall_ns;
        Ok(Transfer { direction, bytes: bytes as u64, start_ns, end_ns: self.now_ns, device, copy_ns: None })
    }

    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], device_offset: u64, _deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        let (m_ns, data_ns, stall_ns) = self.duration(h2d.len().max(d2h.len()))?;
        let (mut dev_h, mut dev_d) = (self.counters(data_ns, stall_ns), self.counters(data_ns, stall_ns));
        // Read before write: a concurrent d2h sees what the region held when the step began.
        self.move_data(Io::D2h(d2h), device_offset, &mut dev_d)?;
        self.move_data(Io::H2d(h2d), device_offset, &mut dev_h)?;
        let start_ns = self.now_ns;
        let d2h_ns = m_ns + data_ns + stall_ns;
        let h2d_ns = d2h_ns * self.h2d_leg_factor;
        self.now_ns += d2h_ns.max(h2d_ns);
        let leg = |direction, bytes: usize, took_ns: f64, device| Transfer { direction, bytes: bytes as u64, start_ns, end_ns: start_ns + took_ns, device, copy_ns: None };
        Ok((leg(Direction::H2d, h2d.len(), h2d_ns, dev_h), leg(Direction::D2h, d2h.len(), d2h_ns, dev_d)))
    }

    fn now_ns(&self) -> f64 {
        self.now_ns
    }
}
