//! `sim`: a simulated endpoint on a modelled link, in virtual time, deterministic for a seed.
//!
//! - [`config`]: presets (`doc000`, `doc001`, `doc003`, `gen3x8`, `gen4x16`, `gen5x16`) and
//!   free-form `genNxW,key=value,...` targets.
//! - [`link_time`]: a transfer's data time from the link simulator ([`crate::link`], with its
//!   steady-state fast-forward), and CPU register accesses from the link's CPU agent.
//!   Bit errors are injected into the link; the replays they cause come out of its simulation.
//! - [`timing`]: what the device's counters see of a stream, with the stalls drawn on top.
//! - [`host`]: host timer interrupts and CPU-initiated MMIO timing (document 000 §4).
//! - [`regs`]: the register file of the performance-demo endpoint (document 001 §4).
//! - [`published`]: the documents' figures each `docNNN` preset is calibrated to or predicts.
//!
//! Data follows [`DataModel::Generator`]: d2h buffers are filled with
//! `Pattern::lfsr(seed)` at the device offset, and the device reports the CRC32 of h2d data.
//! Every figure is virtual time: `now_ns()` only advances when a transfer runs, a register is
//! accessed or the host sleeps. See `docs/simulator.md`.

pub mod config;
pub mod host;
pub mod link_time;
pub mod published;
pub mod regs;
pub mod ring;
mod ring_both;
mod ring_h2d;
mod ring_h2d_pull;
mod ring_pull;
pub mod rng;
pub mod timing;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::pattern::{crc32, Pattern};
use crate::engine::{
    DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Mmio, OpenOptions, Width, Transfer,
};
use crate::error::InvalidInput;

pub use config::{SimConfig, DEFAULT_PRESET, PRESETS};
/// The device's register map, under the name the simulator's users know it by.
pub use crate::device::regmap as demo_registers;

use host::HostTimer;
use link_time::{DmaRun, LinkTimes};
use regs::{DemoRegisters, PendingResult};
use rng::SimRng;
use timing::StreamOutcome;

/// Largest single `transfer()` (the host buffer must exist; the demo flow moves more, unbuffered).
pub const MAX_TRANSFER_BYTES: u64 = 1 << 30;

pub const ENTRY: crate::engine::EngineEntry = crate::engine::EngineEntry {
    name: "sim",
    argument: "[PRESET|genNxW][,key=value...]",
    about: "simulated endpoint on a modelled link, virtual time, deterministic per --seed; presets doc000, doc001, doc003, gen3x8, gen4x16, gen5x16",
    options: &["--seed"],
    flags: &[],
    open: |o| Ok(Box::new(SimEngine::open(o.target, o.options)?)),
    detect: None,
};

/// Which way a register access went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessKind {
    Read,
    Write,
}

/// One register access as the simulated device saw it (value as on the bus).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MmioAccess {
    pub kind: AccessKind,
    pub bar: u8,
    pub offset: u64,
    pub width: Width,
    /// The value on the bus, zero-extended (the first 8 bytes of a write-combined store).
    pub value: u64,
    pub at_ns: f64,
}

/// The simulated endpoint.
pub struct SimEngine {
    info: EngineInfo,
    config: SimConfig,
    pattern: Pattern,
    /// Whether d2h buffers get the pattern: not when nobody reads them (`--verify none`).
    write_data: bool,
    rng: SimRng,
    now_ns: f64,
    /// End of the last data movement (for ASPM L1 entry).
    idle_since_ns: f64,
    timer: HostTimer,
    regs: DemoRegisters,
    log: Vec<MmioAccess>,
    /// The simulated link and the transfer times it gave so far.
    link: LinkTimes,
    /// The message ring (`pcieperf stream`), on its own driven link.
    ring: ring::SimRing,
}

/// The stream ring's driven link: the endpoint's, with the target's flow-control stalls as
/// credit holds when it set them ([`ring::RingBehaviour::credit_holds`]), seeded from the run's
/// seed. The link then simulates what they cost: the device's transmitter starving for credits.
fn ring_link(config: &SimConfig, seed: u64) -> Result<crate::link::SimConfig, InvalidInput> {
    let mut link = link_time::link_config(&config.params)?;
    if config.ring.credit_holds {
        link.inject = crate::link::Injection {
            holds_per_s: config.stalls_per_s,
            hold_min_ns: config.stall_min_ns,
            hold_max_ns: config.stall_max_ns,
            seed: seed ^ 0x00C2_ED17_0003,
            threshold_ns: DemoRegisters::default().threshold_ns(),
            ..Default::default()
        };
        link.inject.validate()?;
    }
    Ok(link)
}

impl SimEngine {
    /// Open `sim[:ARGUMENT]`; `target` is kept as written for the description.
    pub fn open(target: &str, options: &OpenOptions) -> Result<Self, EngineError> {
        let argument = target.split_once(':').map_or("", |(_, a)| a);
        let mut engine = SimEngine::new(target, SimConfig::parse(argument)?, options.seed);
        engine.write_data = !options.data_unread;
        Ok(engine)
    }

    pub fn new(target: &str, config: SimConfig, seed: u64) -> Self {
        let mut rng = SimRng::new(seed);
        let timer = HostTimer {
            period_ns: config.timer_period_ns,
            irq_ns: config.timer_irq_ns,
            phase_ns: rng.uniform(0.0, config.timer_period_ns.max(0.0)),
            seed: rng.next_u64(),
        };
        let p = &config.params;
        let info = EngineInfo {
            kind: "sim".into(),
            target: target.into(),
            simulated: true,
            co_simulated: false,
            description: config.describe(),
            pci_address: None,
            in_flight: p.in_flight,
            copies_per_transfer: 1,
            device_clock_hz: Some(config.device_clock_hz),
            directions: vec![Direction::H2d, Direction::D2h],
            concurrent: true,
            alignment_bytes: 4,
            max_transfer_bytes: MAX_TRANSFER_BYTES,
            capacity_bytes: None,
            data_model: DataModel::Generator,
        };
        SimEngine {
            pattern: Pattern::lfsr(seed),
            write_data: true,
            rng,
            now_ns: 0.0,
            idle_since_ns: 0.0,
            timer,
            regs: DemoRegisters::default(),
            log: Vec::new(),
            link: LinkTimes::new(&config.params),
            ring: ring::SimRing {
                info: info.clone(),
                link: ring_link(&config, seed),
                behaviour: config.ring.clone(),
                rng: SimRng::new(seed ^ 0x0003_0003),
                truth: None,
            },
            info,
            config,
        }
    }

    /// What the last stream injected, as only the simulator knows it (tests compare the
    /// report with it).
    pub fn ring_truth(&self) -> Option<&ring::RingTruth> {
        self.ring.truth()
    }

    /// What the device reports of h2d data: its CRC32 and, as the core's FIRST_ERROR register
    /// does, the first byte that differs from its pattern at that offset.
    fn received(&self, counters: &mut DeviceCounters, device_offset: u64, data: &[u8]) {
        counters.crc32 = Some(crc32(data));
        counters.first_error_offset = self.pattern.check(device_offset, data).map(|m| m.offset);
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Every register access so far, in order.
    pub fn mmio_log(&self) -> &[MmioAccess] {
        &self.log
    }

    /// Host timer interrupts between two instants of the virtual clock (document 000 counts them).
    pub fn timer_interrupts_between(&self, from_ns: f64, to_ns: f64) -> u64 {
        self.timer.interrupts_between(from_ns, to_ns)
    }

    /// The PCI-status word the device reports (document 001 §3 layout).
    pub fn status_word(&self) -> u32 {
        crate::device::status_word(&self.config.params, true, self.config.status_extra_bits)
    }

    fn check_io(&self, bytes: usize, device_offset: u64) -> Result<(), EngineError> {
        let align = self.info.alignment_bytes;
        if bytes == 0 || bytes as u64 > MAX_TRANSFER_BYTES {
            return Err(InvalidInput::new(format!("transfer size {bytes} bytes: allowed 4 bytes to {MAX_TRANSFER_BYTES} bytes")).into());
        }
        if bytes as u64 % align != 0 || device_offset % align != 0 {
            return Err(InvalidInput::new(format!(
                "transfer of {bytes} bytes at device offset {device_offset}: sizes and offsets must be multiples of {align} bytes"
            ))
            .into());
        }
        Ok(())
    }

    /// L1 exit cost if the link went to L1 while idle since the last data movement.
    fn l1_exit_ns(&self, at_ns: f64) -> f64 {
        match self.config.l1_idle_ns {
            Some(idle) if at_ns - self.idle_since_ns >= idle => self.config.l1_exit_ns,
            _ => 0.0,
        }
    }

    /// The link's run of `write_bytes` d2h and `read_bytes` h2d with this endpoint's flow-control
    /// stalls (the host's receiver pausing: credit holds) and bit errors (`errors_per_tb`)
    /// injected, seeded from the engine's generator; and the generator for the rest of the
    /// transfer.
    fn link_run(&mut self, write_bytes: u64, read_bytes: u64, salt: u64) -> Result<(DmaRun, SimRng), EngineError> {
        let mut rng = self.rng.fork(salt);
        let injection = crate::link::Injection {
            holds_per_s: self.config.stalls_per_s,
            hold_min_ns: self.config.stall_min_ns,
            hold_max_ns: self.config.stall_max_ns,
            holds: Vec::new(),
            tlp_errors_per_tb: self.config.errors_per_tb,
            seed: rng.next_u64(),
            threshold_ns: self.regs.threshold_ns(),
        };
        Ok((self.link.dma_injected(write_bytes, read_bytes, &injection)?, rng))
    }

    /// One direction's data movement (`data_ns` on the simulated link, with the payload's pauses
    /// and errors of `run`), plus the drawn long stalls and `l1_ns` of L1 exit before it.
    fn stream(&self, rng: &mut SimRng, data_ns: f64, run: &DmaRun, d2h: bool, l1_ns: f64) -> StreamOutcome {
        let threshold_ns = self.regs.threshold_ns();
        let i = timing::payload_index(d2h);
        let mut out = timing::stream(&self.config, rng, data_ns, &run.payload_gaps[i], run.errors[i], threshold_ns);
        if l1_ns > 0.0 {
            out.busy_ns += l1_ns;
            out.max_stall_ns = out.max_stall_ns.max(l1_ns);
            out.stalls_over_threshold = out.stalls_over_threshold.saturating_add((l1_ns > threshold_ns) as u64);
        }
        out
    }

    /// Duration on the device's clock: whole cycles.
    fn device_ns(&self, busy_ns: f64) -> f64 {
        let cycle_ns = 1e9 / self.config.device_clock_hz;
        (busy_ns / cycle_ns).ceil() * cycle_ns
    }

    /// When the host sees a completion the device signalled at `done_ns`.
    fn host_end_ns(&self, done_ns: f64) -> f64 {
        self.timer.run_at(done_ns + self.config.interrupt_ns)
    }

    /// The simulated copy of d2h data to user space (`copy_mbps`), on the simulation's clock.
    fn copy_ns(&self, direction: Direction, bytes: u64) -> Option<f64> {
        self.config.copy_mbps.filter(|_| direction == Direction::D2h).map(|mbps| timing::ns_for(bytes, mbps))
    }

    fn finish(&mut self, direction: Direction, bytes: u64, start_ns: f64, data_start_ns: f64, out: StreamOutcome) -> Transfer {
        let device_ns = self.device_ns(out.busy_ns);
        let copy_ns = self.copy_ns(direction, bytes);
        let end_ns = self.host_end_ns(data_start_ns + device_ns) + copy_ns.unwrap_or(0.0);
        Transfer {
            direction,
            bytes,
            start_ns,
            end_ns,
            copy_ns,
            device: DeviceCounters {
                device_ns: Some(device_ns),
                max_stall_ns: Some(out.max_stall_ns),
                stalls_over_threshold: Some(out.stalls_over_threshold),
                crc32: None,
                errors: Some(out.errors),
                first_error_offset: None,
            },
        }
    }

    /// Apply the deadline: a transfer that would outlast it is a timeout (the clock moves on by
    /// the deadline, as a host waiting for it would).
    fn within(&mut self, start_ns: f64, end_ns: f64, deadline: Duration, what: &str) -> Result<(), EngineError> {
        if end_ns - start_ns > deadline.as_nanos() as f64 {
            self.now_ns = start_ns + deadline.as_nanos() as f64;
            return Err(EngineError::Timeout { what: format!("simulated {what}"), after: deadline });
        }
        Ok(())
    }

    /// Start a demo run (document 001 §4 step 6): compute both results now, reveal them later.
    fn start_demo(&mut self, command: u32) -> Result<(), EngineError> {
        let (read, write) = (command & 1 != 0, command & 2 != 0);
        if !(read || write) || !self.regs.ready() {
            return Ok(()); // a real device ignores a start it cannot run: results stay 0
        }
        let bytes = self.regs.bytes();
        let (run, mut rng) = self.link_run(if write { bytes } else { 0 }, if read { bytes } else { 0 }, 0xde)?;
        let l1_ns = self.l1_exit_ns(self.now_ns);
        let start_ns = self.now_ns;
        let tenths = |busy_ns: f64| ((busy_ns / 1e8).round() as u32).max(1);
        let (mut max_stall_ns, mut over, mut end_ns) = (0.0f64, 0u64, start_ns);
        self.regs.tx = None;
        self.regs.rx = None;
        if write {
            let out = self.stream(&mut rng, run.times.d2h_ns, &run, true, l1_ns);
            let busy = self.device_ns(out.busy_ns);
            self.regs.tx = Some(PendingResult { done_at_ns: start_ns + busy, tenths: tenths(busy) });
            self.regs.tx_bit_errors = out.errors as u32;
            (max_stall_ns, over, end_ns) = (max_stall_ns.max(out.max_stall_ns), over.saturating_add(out.stalls_over_threshold), end_ns.max(start_ns + busy));
        }
        if read {
            let out = self.stream(&mut rng, run.times.h2d_ns, &run, false, l1_ns);
            let busy = self.device_ns(out.busy_ns);
            self.regs.rx = Some(PendingResult { done_at_ns: start_ns + busy, tenths: tenths(busy) });
            self.regs.rx_bit_errors = out.errors as u32;
            (max_stall_ns, over, end_ns) = (max_stall_ns.max(out.max_stall_ns), over.saturating_add(out.stalls_over_threshold), end_ns.max(start_ns + busy));
        }
        self.regs.max_stall = (max_stall_ns / crate::device::STALL_UNIT_NS).round() as u32;
        self.regs.stall_count = over.min(u32::MAX as u64) as u32;
        self.regs.counters_at_ns = end_ns;
        self.idle_since_ns = end_ns;
        Ok(())
    }

    fn register(&self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        use demo_registers as m;
        let now = self.now_ns;
        let counter = |value: u32| if now >= self.regs.counters_at_ns { value } else { 0 };
        Ok(match (bar, offset) {
            m::VERSION => m::VERSION_RESET,
            m::BUFFER1 => self.regs.buffer1,
            m::BUFFER2 => self.regs.buffer2,
            m::FIXED => self.regs.fixed,
            m::BLOCK_AMOUNT => self.regs.block_amount,
            m::THRESHOLD => self.regs.threshold,
            m::TX_RESULT => DemoRegisters::result(self.regs.tx, now),
            m::RX_RESULT => DemoRegisters::result(self.regs.rx, now),
            m::MAX_STALL => counter(self.regs.max_stall),
            m::STALL_COUNT => counter(self.regs.stall_count),
            m::RX_BIT_ERRORS => counter(self.regs.rx_bit_errors),
            m::TX_BIT_ERRORS => counter(self.regs.tx_bit_errors),
            m::PCI_STATUS => self.status_word(),
            (m::RAM_BAR, o) => u32::from_le_bytes(self.regs.ram[o as usize..o as usize + 4].try_into().expect("4 bytes")),
            _ => 0, // unimplemented registers read as zero
        })
    }

    fn set_register(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        use demo_registers as m;
        match (bar, offset) {
            m::BUFFER1 => self.regs.buffer1 = value,
            m::BUFFER2 => self.regs.buffer2 = value,
            m::FIXED => self.regs.fixed = value,
            m::BLOCK_AMOUNT => self.regs.block_amount = value,
            m::THRESHOLD => self.regs.threshold = value,
            m::START => return self.start_demo(value),
            (m::RAM_BAR, o) => self.regs.ram[o as usize..o as usize + 4].copy_from_slice(&value.to_le_bytes()),
            _ => {} // read-only or unimplemented: writes are ignored, as hardware does
        }
        Ok(())
    }

    /// BAR0–BAR2 hold 32-bit registers (4 KiB each); BAR3 is RAM any width may reach.
    fn check_register(&self, bar: u8, offset: u64, bytes: u64) -> Result<(), EngineError> {
        let size = self.sim_bar_bytes(bar).ok_or_else(|| InvalidInput::new(format!("BAR{bar} does not exist on the simulated endpoint (BAR0–BAR3)")))?;
        crate::engine::check_access(bar, offset, bytes, size)?;
        if bar != demo_registers::RAM_BAR && bytes != 4 {
            return Err(InvalidInput::new(format!("BAR{bar}+{offset:#x}: the simulated endpoint's registers are 32-bit; {bytes}-byte accesses reach only its RAM (BAR{})", demo_registers::RAM_BAR)).into());
        }
        Ok(())
    }

    fn sim_bar_bytes(&self, bar: u8) -> Option<u64> {
        demo_registers::BAR_BYTES.get(bar as usize).copied()
    }

    fn ram_slice(&mut self, offset: u64, bytes: u64) -> &mut [u8] {
        &mut self.regs.ram[offset as usize..(offset + bytes) as usize]
    }

    fn bus(&self, value: u32) -> u32 {
        if self.config.byteswap { value.swap_bytes() } else { value }
    }

    fn record(&mut self, kind: AccessKind, bar: u8, offset: u64, width: Width, value: u64) {
        self.log.push(MmioAccess { kind, bar, offset, width, value, at_ns: self.now_ns });
    }

    /// The host reaches the CPU after any timer interrupt in progress, then spends `ns`.
    fn charge(&mut self, ns: f64) {
        self.now_ns = self.timer.run_at(self.now_ns) + ns;
    }
}

impl Engine for SimEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn streaming(&mut self) -> Option<&mut dyn crate::engine::ring::Streaming> {
        Some(&mut self.ring)
    }

    fn notes(&self) -> Vec<String> {
        published::notes(&self.config.preset)
    }

    fn conditions(&self) -> Option<crate::model::Conditions> {
        Some(crate::model::Conditions {
            params: self.config.params.clone(),
            capable: Some(self.config.params.link),
            source: format!("simulated endpoint '{}' (its configuration)", self.config.preset),
            assumed: Vec::new(),
            credits: None,
        })
    }

    fn transfer(&mut self, mut io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        self.check_io(io.len(), device_offset)?;
        let (direction, bytes) = (io.direction(), io.len() as u64);
        let start_ns = self.now_ns;
        let data_start_ns = start_ns + self.config.setup_ns;
        let l1_ns = self.l1_exit_ns(data_start_ns);
        let d2h = direction == Direction::D2h;
        let (run, mut rng) = if d2h { self.link_run(bytes, 0, 0x7e)? } else { self.link_run(0, bytes, 0x4e)? };
        let out = self.stream(&mut rng, run.times.d2h_ns.max(run.times.h2d_ns), &run, d2h, l1_ns);
        let mut transfer = self.finish(direction, bytes, start_ns, data_start_ns, out);
        self.within(start_ns, transfer.end_ns, deadline, &format!("{} transfer of {bytes} bytes", direction.name()))?;
        match &mut io {
            Io::D2h(buf) if self.write_data => self.pattern.fill(device_offset, buf),
            Io::D2h(_) => {}
            Io::H2d(buf) => self.received(&mut transfer.device, device_offset, buf),
        }
        self.idle_since_ns = data_start_ns + transfer.device.device_ns.unwrap_or(0.0);
        self.now_ns = transfer.end_ns;
        Ok(transfer)
    }

    fn transfer_both(
        &mut self,
        h2d: &[u8],
        d2h: &mut [u8],
        device_offset: u64,
        deadline: Duration,
    ) -> Result<(Transfer, Transfer), EngineError> {
        self.check_io(h2d.len(), device_offset)?;
        self.check_io(d2h.len(), device_offset)?;
        let start_ns = self.now_ns;
        // Two descriptors and doorbells before data moves.
        let data_start_ns = start_ns + 2.0 * self.config.setup_ns;
        let l1_ns = self.l1_exit_ns(data_start_ns);
        // Both DMA channels at once on the simulated link: each direction's time includes the
        // other's TLPs and DLLPs sharing its lanes.
        // Each transfer reports the pauses of its own payload.
        let (run, mut rng) = self.link_run(d2h.len() as u64, h2d.len() as u64, 0x4e7e)?;
        let out_h2d = self.stream(&mut rng, run.times.h2d_ns, &run, false, l1_ns);
        let out_d2h = self.stream(&mut rng, run.times.d2h_ns, &run, true, l1_ns);
        let mut to_device = self.finish(Direction::H2d, h2d.len() as u64, start_ns, data_start_ns, out_h2d);
        let from_device = self.finish(Direction::D2h, d2h.len() as u64, start_ns, data_start_ns, out_d2h);
        let end_ns = to_device.end_ns.max(from_device.end_ns);
        self.within(start_ns, end_ns, deadline, "concurrent h2d+d2h transfer")?;
        self.received(&mut to_device.device, device_offset, h2d);
        if self.write_data {
            self.pattern.fill(device_offset, d2h);
        }
        self.idle_since_ns = data_start_ns + out_h2d.busy_ns.max(out_d2h.busy_ns);
        self.now_ns = end_ns;
        Ok((to_device, from_device))
    }

    fn now_ns(&self) -> f64 {
        self.now_ns
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        Some(self)
    }
}

impl Mmio for SimEngine {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        self.read(bar, offset, Width::B4).map(|v| v as u32)
    }

    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        self.write(bar, offset, Width::B4, value.into())
    }

    fn sleep(&mut self, duration: Duration) {
        self.now_ns += duration.as_nanos() as f64;
    }

    fn read(&mut self, bar: u8, offset: u64, width: Width) -> Result<u64, EngineError> {
        let bytes = width.bytes();
        self.check_register(bar, offset, bytes)?;
        let cost_ns = host::mmio_read_ns(&self.config, &mut self.link, bytes)?;
        self.charge(cost_ns);
        let value = if bar == demo_registers::RAM_BAR {
            let mut word = [0u8; 8];
            word[..bytes as usize].copy_from_slice(self.ram_slice(offset, bytes));
            u64::from_le_bytes(word)
        } else {
            self.bus(self.register(bar, offset)?).into()
        };
        self.record(AccessKind::Read, bar, offset, width, value);
        Ok(value)
    }

    fn write(&mut self, bar: u8, offset: u64, width: Width, value: u64) -> Result<(), EngineError> {
        let bytes = width.bytes();
        self.check_register(bar, offset, bytes)?;
        let cost_ns = host::mmio_write_ns(&self.config, &mut self.link, bytes)?;
        self.charge(cost_ns);
        let value = value & width.mask();
        self.record(AccessKind::Write, bar, offset, width, value);
        if bar == demo_registers::RAM_BAR {
            self.ram_slice(offset, bytes).copy_from_slice(&value.to_le_bytes()[..bytes as usize]);
        } else {
            self.set_register(bar, offset, self.bus(value as u32))?;
        }
        Ok(())
    }

    fn write_combined(&mut self, bar: u8, offset: u64, data: &[u8]) -> Result<(), EngineError> {
        if bar != demo_registers::RAM_BAR {
            return Err(EngineError::Unsupported(format!("BAR{bar} of the simulated endpoint holds registers; write combining reaches its RAM (BAR{})", demo_registers::RAM_BAR)));
        }
        crate::engine::check_access(bar, offset, data.len() as u64, demo_registers::RAM_BYTES)?;
        let cost_ns = host::wc_write_ns(&self.config, &mut self.link, offset, data.len() as u64)?;
        self.charge(cost_ns);
        let mut first = [0u8; 8];
        let head = data.len().min(8);
        first[..head].copy_from_slice(&data[..head]);
        self.record(AccessKind::Write, bar, offset, Width::B1, u64::from_le_bytes(first));
        self.ram_slice(offset, data.len() as u64).copy_from_slice(data);
        Ok(())
    }

    fn bar_bytes(&mut self, bar: u8) -> Option<u64> {
        self.sim_bar_bytes(bar)
    }

    fn default_bar(&self) -> u8 {
        demo_registers::RAM_BAR
    }

    /// Nothing real is behind the simulator: every write is harmless.
    fn is_scratch(&self, _bar: u8, _offset: u64, _bytes: u64) -> bool {
        true
    }

    fn virtual_clock_ns(&mut self) -> Option<f64> {
        self.charge(self.config.stopwatch_ns);
        Some(self.now_ns)
    }

    fn interrupts(&mut self) -> Option<u64> {
        Some(self.timer.interrupts_between(0.0, self.now_ns))
    }
}
