//! `cosim`: the project's own measurement core (`hdl/`, Verilog) simulated by Icarus Verilog
//! under cocotb, driven through a Unix socket (protocol: `docs/cosim.md`).
//!
//! - `cosim` or `cosim:gen1x4` / `cosim:gen3x8`: start the testbench (`hdl/tb/run.py cosim`) as a
//!   child process on a private socket, and stop it when the engine is dropped.
//! - `cosim:/path/to/socket`: connect to a testbench someone already started.
//!
//! The core is a [`DataModel::Generator`] device: d2h data is `Pattern::lfsr(seed)` at the device
//! offset, h2d data is checked against the same pattern and reported as a CRC32. Every figure is
//! co-simulated: RTL in a simulator, a modelled link and root complex, no hardware. The engine
//! clock is the simulator's clock. Registers: `crate::device::regmap` (docs/regmap.md).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::{
    DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Mmio, OpenOptions, Transfer,
};
use crate::device::check_access;
use crate::device::regmap as reg;
use crate::error::InvalidInput;
use crate::model::{Conditions, Link, LinkParams};

mod stream;

/// The word every output carries for this engine's figures.
pub const LABEL: &str = "co-simulated";

/// Largest single transfer: simulation runs at roughly 50 KB of transfer per wall-clock second.
pub const MAX_TRANSFER_BYTES: u64 = 4 << 20;

/// Links the testbench models (the hard block's interface width and clock follow from them).
pub const LINKS: [&str; 2] = ["gen1x4", "gen3x8"];

/// How long the testbench may take to build and come up.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Completion latency of the testbench's root complex (it answers at once; the modelled link
/// adds its port delays).
const COMPLETION_LATENCY_NS: f64 = 20.0;

/// Simulated time between two polls of the DMA status register.
const POLL_NS: u64 = 1000;

/// DMA_CONTROL bits: writing starts those directions, reading shows those still busy.
const H2D: u32 = reg::DMA_CONTROL_H2D_MASK << reg::DMA_CONTROL_H2D_SHIFT;
const D2H: u32 = reg::DMA_CONTROL_D2H_MASK << reg::DMA_CONTROL_D2H_SHIFT;
const BOTH_DIRECTIONS: u32 = H2D | D2H;

/// The testbench process and its private directory, removed when dropped.
struct Testbench {
    child: Child,
    dir: PathBuf,
}

impl Drop for Testbench {
    fn drop(&mut self) {
        // The server ends after `quit`; give it a moment, then make sure.
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One connection to the co-simulation server.
pub struct CosimEngine {
    info: EngineInfo,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    now_ns: f64,
    clock_hz: f64,
    /// Interface width of the core in bits (its hello): beats per TLP.
    data_width_bits: u64,
    /// How long the testbench's stream consumer holds each message before ringing the doorbell.
    stream_release_delay_ns: u64,
    /// Idle device cycles after each message (the core's STREAM_DWELL).
    stream_dwell_cycles: u64,
    seed: u64,
    /// What the testbench models: link, MPS, MRRS (from its hello).
    params: Option<LinkParams>,
    /// Host memory allocated in the testbench: (bus address, bytes), one per direction.
    buffers: [Option<(u64, u64)>; 2],
    // Last, so the connection closes before the child is waited for.
    child: Option<Testbench>,
}

/// Where the testbench lives: `PCIEPERF_HDL_DIR`, else the source tree this binary was built from.
fn hdl_dir() -> PathBuf {
    std::env::var_os("PCIEPERF_HDL_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("hdl"))
}

/// The Python that runs the testbench: `PCIEPERF_PYTHON`, else the HDL tests' own virtual
/// environment (`hdl/.venv`, where .ci/run and the README install hdl/requirements.txt), else
/// `python3` from PATH.
pub fn hdl_python() -> PathBuf {
    if let Some(python) = std::env::var_os("PCIEPERF_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = hdl_dir().join(".venv").join("bin").join("python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EngineError {
    let what = what.into();
    move |source| EngineError::Io { what, source }
}

/// Start `run.py cosim` on a private socket; wait until it listens.
fn start_testbench(link: &str) -> Result<(Testbench, PathBuf), EngineError> {
    let script = hdl_dir().join("tb").join("run.py");
    if !script.exists() {
        return Err(EngineError::Unsupported(format!(
            "cosim: testbench {} not found (set PCIEPERF_HDL_DIR to the project's hdl/ directory)",
            script.display()
        )));
    }
    let dir = std::env::temp_dir().join(format!("pcieperf-cosim-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).map_err(io_error(format!("create {}", dir.display())))?;
    let socket = dir.join("cosim.sock");
    let log = dir.join("testbench.log");
    // run.py's own lines (a missing prerequisite) go to a file: a pipe nobody reads could fill.
    let said = dir.join("run.out");
    let out = std::fs::File::create(&said).map_err(io_error(format!("create {}", said.display())))?;
    let python = hdl_python();
    let child = Command::new(&python)
        .arg(&script)
        .args(["cosim", "--link", link, "--socket"])
        .arg(&socket)
        .arg("--log")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            EngineError::Unsupported(format!(
                "cosim needs python3 with cocotb, cocotbext-pcie, cocotbext-axi and iverilog ({}: {e})",
                python.display()
            ))
        })?;
    let mut process = Testbench { child, dir };
    let started = Instant::now();
    while !socket.exists() {
        if let Some(status) = process.child.try_wait().map_err(io_error("wait for the testbench"))? {
            let said = std::fs::read_to_string(&said).unwrap_or_default();
            let line = said.lines().find(|l| l.starts_with("skipped:")).map(str::to_string);
            return Err(EngineError::Unsupported(match line {
                // run.py names the missing prerequisites on one line.
                Some(line) => format!("cosim: {}", line.trim_start_matches("skipped: ")),
                // The directory goes with the process: quote the log's end.
                None => format!("cosim: the testbench exited ({status}) before listening: {}", last_lines(&log, 3)),
            }));
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(EngineError::Timeout { what: "cosim testbench to start".into(), after: START_TIMEOUT });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((process, socket))
}

fn last_lines(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| l.trim()).collect::<Vec<_>>().join(" | ")
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The engine table's entry.
pub const ENTRY: crate::engine::EngineEntry = crate::engine::EngineEntry {
    name: "cosim",
    argument: "[gen1x4|gen3x8|SOCKET]",
    about: "co-simulated: the project's RTL core (hdl/) in Icarus Verilog under cocotb, started as a child process (needs iverilog, cocotb, cocotbext-pcie)",
    options: &["--seed"],
    flags: &[],
    open: |o| Ok(Box::new(open(o.target, o.argument, o.options)?)),
    detect: None,
};

/// Open `cosim[:LINK|:SOCKET]`.
pub fn open(target: &str, argument: &str, options: &OpenOptions) -> Result<CosimEngine, EngineError> {
    let (child, socket) = if argument.contains('/') {
        (None, PathBuf::from(argument))
    } else {
        let link = if argument.is_empty() { "gen3x8" } else { argument };
        if !LINKS.contains(&link) {
            return Err(InvalidInput::new(format!("cosim:{link}: the testbench models {}; or give a socket path", LINKS.join(", "))).into());
        }
        let (child, socket) = start_testbench(link)?;
        (Some(child), socket)
    };
    let stream = UnixStream::connect(&socket).map_err(io_error(format!("connect to {}", socket.display())))?;
    let writer = stream.try_clone().map_err(io_error("cosim socket"))?;
    let mut engine = CosimEngine {
        info: EngineInfo {
            kind: "cosim".into(),
            target: target.into(),
            simulated: true,
            co_simulated: true,
            description: String::new(),
            pci_address: None,
            in_flight: 1,
            copies_per_transfer: 1,
            device_clock_hz: None,
            directions: vec![Direction::H2d, Direction::D2h],
            concurrent: true,
            alignment_bytes: 4,
            max_transfer_bytes: MAX_TRANSFER_BYTES,
            capacity_bytes: None,
            data_model: DataModel::Generator,
        },
        reader: BufReader::new(stream),
        writer,
        now_ns: 0.0,
        clock_hz: 0.0,
        data_width_bits: 0,
        stream_release_delay_ns: 0,
        stream_dwell_cycles: 0,
        seed: options.seed,
        params: None,
        buffers: [None, None],
        child,
    };
    engine.hello()?;
    Ok(engine)
}

/// `key=value` from the hello answer.
fn field<'a>(words: &'a [String], key: &str) -> Option<&'a str> {
    words.iter().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

impl CosimEngine {
    /// One request, one answer: `ok TIME_NS VALUES...` or `err TIME_NS MESSAGE`.
    fn call(&mut self, request: &str) -> Result<Vec<String>, EngineError> {
        self.writer.write_all(format!("{request}\n").as_bytes()).map_err(io_error("send to the cosim testbench"))?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(io_error("read from the cosim testbench"))?;
        if n == 0 {
            return Err(EngineError::Unsupported("cosim testbench closed the connection".into()));
        }
        let mut words = line.split_whitespace().map(str::to_string);
        let status = words.next().unwrap_or_default();
        let time: Option<f64> = words.next().and_then(|t| t.parse().ok());
        if let Some(t) = time {
            self.now_ns = t;
        }
        let rest: Vec<String> = words.collect();
        match (status.as_str(), time) {
            ("ok", Some(_)) => Ok(rest),
            ("err", Some(_)) => Err(EngineError::Unsupported(format!("cosim testbench: '{request:.60}': {}", rest.join(" ")))),
            _ => Err(EngineError::Unsupported(format!("cosim testbench answered '{}' (protocol docs/cosim.md)", line.trim()))),
        }
    }

    fn hello(&mut self) -> Result<(), EngineError> {
        let words = self.call("hello")?;
        if words.first().map(String::as_str) != Some("pcieperf-cosim/1") {
            return Err(EngineError::Unsupported(format!("not a pcieperf co-simulation server (protocol 1): {}", words.join(" "))));
        }
        let number = |key: &str| field(&words, key).and_then(|v| v.parse::<u64>().ok());
        let link: Link = field(&words, "link")
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| EngineError::Unsupported(format!("cosim hello without a link: {}", words.join(" "))))?;
        let (mps, mrrs) = (number("mps").unwrap_or(128), number("mrrs").unwrap_or(128));
        self.clock_hz = number("clock_hz").unwrap_or(250_000_000) as f64;
        self.data_width_bits = number("data_width").unwrap_or(256);
        self.info.description = format!(
            "{LABEL} pcieperf core (hdl/, Icarus Verilog + cocotbext-pcie), {link}, MPS {mps}, MRRS {mrrs}, {}-bit at {} MHz",
            number("data_width").unwrap_or(0),
            self.clock_hz / 1e6
        );
        // The root complex model answers reads at once; its link adds ~10 ns each way.
        self.params = Some(LinkParams { mps_bytes: mps, mrrs_bytes: mrrs, read_latency_ns: COMPLETION_LATENCY_NS, tags: 32, ..LinkParams::typical(link) });
        self.info.device_clock_hz = Some(self.clock_hz);
        Ok(())
    }

    fn value(words: &[String]) -> Result<u64, EngineError> {
        words
            .first()
            .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok())
            .ok_or_else(|| EngineError::Unsupported(format!("cosim testbench: expected a hex value, got '{}'", words.join(" "))))
    }

    fn reg(&mut self, (bar, offset): (u8, u64)) -> Result<u64, EngineError> {
        Ok(self.read32(bar, offset)? as u64)
    }

    /// A 64-bit register: the low word, then the high word after it.
    fn reg64(&mut self, (bar, offset): (u8, u64)) -> Result<u64, EngineError> {
        Ok(self.reg((bar, offset))? | self.reg((bar, offset + 4))? << 32)
    }

    fn set(&mut self, (bar, offset): (u8, u64), value: u32) -> Result<(), EngineError> {
        self.write32(bar, offset, value)
    }

    fn set64(&mut self, (bar, offset): (u8, u64), value: u64) -> Result<(), EngineError> {
        self.write32(bar, offset, value as u32)?;
        self.write32(bar, offset + 4, (value >> 32) as u32)
    }

    /// Host memory of at least `bytes` for one direction, reused while large enough.
    fn buffer(&mut self, direction: Direction, bytes: u64) -> Result<u64, EngineError> {
        let slot = direction as usize;
        match self.buffers[slot] {
            Some((addr, size)) if size >= bytes => Ok(addr),
            _ => {
                let addr = Self::value(&self.call(&format!("alloc {bytes}"))?)?;
                self.buffers[slot] = Some((addr, bytes));
                Ok(addr)
            }
        }
    }

    fn check_io(&self, bytes: usize, device_offset: u64) -> Result<(), EngineError> {
        if bytes == 0 || bytes as u64 > MAX_TRANSFER_BYTES || bytes % 4 != 0 || device_offset % 4 != 0 {
            return Err(InvalidInput::new(format!(
                "cosim transfer of {bytes} bytes at device offset {device_offset}: sizes 4 bytes to {MAX_TRANSFER_BYTES} bytes, sizes and offsets multiples of 4"
            ))
            .into());
        }
        Ok(())
    }

    /// Program one direction's run (addresses, size, pattern offset).
    fn program(&mut self, direction: Direction, bytes: u64, device_offset: u64) -> Result<u64, EngineError> {
        let addr = self.buffer(direction, bytes)?;
        let (addr_reg, bytes_reg, offset_reg) = match direction {
            Direction::H2d => (reg::DMA_H2D_ADDR, reg::DMA_H2D_BYTES, reg::DMA_H2D_OFFSET),
            Direction::D2h => (reg::DMA_D2H_ADDR, reg::DMA_D2H_BYTES, reg::DMA_D2H_OFFSET),
        };
        self.set64(addr_reg, addr)?;
        self.set(bytes_reg, bytes as u32)?;
        self.set64(offset_reg, device_offset)?;
        Ok(addr)
    }

    /// Start the programmed directions and poll until the core is idle or the deadline passes.
    fn run(&mut self, control: u32, deadline: Duration) -> Result<(f64, f64), EngineError> {
        self.set64(reg::SEED, self.seed)?;
        let start_ns = self.now_ns;
        self.set(reg::DMA_CONTROL, control)?;
        while self.reg(reg::DMA_CONTROL)? as u32 & BOTH_DIRECTIONS != 0 {
            if self.now_ns - start_ns > deadline.as_nanos() as f64 {
                return Err(EngineError::Timeout { what: "co-simulated DMA run".into(), after: deadline });
            }
            self.call(&format!("advance {POLL_NS}"))?;
        }
        Ok((start_ns, self.now_ns))
    }

    fn counters(&mut self, direction: Direction) -> Result<DeviceCounters, EngineError> {
        let cycles = self.reg64(if direction == Direction::H2d { reg::H2D_CYCLES } else { reg::D2H_CYCLES })?;
        let ns_per_cycle = 1e9 / self.clock_hz;
        let h2d = direction == Direction::H2d;
        Ok(DeviceCounters {
            device_ns: Some(cycles as f64 * ns_per_cycle),
            max_stall_ns: Some(self.reg(reg::MAX_STALL_CYCLES)? as f64 * ns_per_cycle),
            stalls_over_threshold: Some(self.reg(reg::STALL_COUNT)?),
            crc32: if h2d { Some(self.reg(reg::H2D_CRC32)? as u32) } else { None },
            errors: if h2d { Some(self.reg(reg::RX_BIT_ERRORS)?) } else { None },
            first_error_offset: if h2d && self.reg(reg::ERROR_FOUND)? as u32 & reg::ERROR_FOUND_MASK != 0 { Some(self.reg64(reg::FIRST_ERROR)?) } else { None },
        })
    }

    fn memwrite(&mut self, addr: u64, data: &[u8]) -> Result<(), EngineError> {
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        self.call(&format!("memwrite {addr:#x} {hex}")).map(drop)
    }

    fn memread(&mut self, addr: u64, out: &mut [u8]) -> Result<(), EngineError> {
        let words = self.call(&format!("memread {addr:#x} {}", out.len()))?;
        let hex = words.first().map(String::as_str).unwrap_or("");
        if hex.len() != 2 * out.len() {
            return Err(EngineError::Short { done: hex.len() as u64 / 2, wanted: out.len() as u64, why: "cosim memread".into() });
        }
        for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
            *byte = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("zz"), 16)
                .map_err(|_| EngineError::Unsupported("cosim memread: not hex".into()))?;
        }
        Ok(())
    }

    fn transfer_of(&self, direction: Direction, bytes: usize, (start_ns, end_ns): (f64, f64), device: DeviceCounters) -> Transfer {
        Transfer { direction, bytes: bytes as u64, start_ns, end_ns, device, copy_ns: None }
    }
}

impl Drop for CosimEngine {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.writer.write_all(b"quit\n");
        }
    }
}

impl Engine for CosimEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        self.check_io(io.len(), device_offset)?;
        let (direction, bytes) = (io.direction(), io.len());
        let addr = self.program(direction, bytes as u64, device_offset)?;
        match io {
            Io::H2d(buf) => {
                self.memwrite(addr, buf)?;
                let times = self.run(H2D, deadline)?;
                let device = self.counters(direction)?;
                Ok(self.transfer_of(direction, bytes, times, device))
            }
            Io::D2h(buf) => {
                let times = self.run(D2H, deadline)?;
                let device = self.counters(direction)?;
                self.memread(addr, buf)?;
                Ok(self.transfer_of(direction, bytes, times, device))
            }
        }
    }

    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], device_offset: u64, deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        self.check_io(h2d.len(), device_offset)?;
        self.check_io(d2h.len(), device_offset)?;
        let h2d_addr = self.program(Direction::H2d, h2d.len() as u64, device_offset)?;
        let d2h_addr = self.program(Direction::D2h, d2h.len() as u64, device_offset)?;
        self.memwrite(h2d_addr, h2d)?;
        let times = self.run(BOTH_DIRECTIONS, deadline)?;
        let to_device = self.counters(Direction::H2d)?;
        let from_device = self.counters(Direction::D2h)?;
        self.memread(d2h_addr, d2h)?;
        Ok((self.transfer_of(Direction::H2d, h2d.len(), times, to_device), self.transfer_of(Direction::D2h, d2h.len(), times, from_device)))
    }

    fn conditions(&self) -> Option<Conditions> {
        Some(Conditions {
            params: self.params.clone()?,
            capable: self.params.as_ref().map(|p| p.link),
            source: "co-simulated testbench (cocotbext-pcie root complex and link model)".into(),
            assumed: vec![format!("completion latency {COMPLETION_LATENCY_NS} ns (the root complex model answers at once)")],
            credits: None,
        })
    }

    fn now_ns(&self) -> f64 {
        self.now_ns
    }

    fn link_omits_skp_and_dllps(&self) -> Option<&'static str> {
        Some("the co-simulation's link model (cocotbext-pcie)")
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        Some(self)
    }

    fn streaming(&mut self) -> Option<&mut dyn crate::engine::ring::Streaming> {
        Some(self)
    }
}

impl Mmio for CosimEngine {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        check_access(bar, offset, "the pcieperf core")?;
        Ok(Self::value(&self.call(&format!("read32 {bar} {offset:#x}"))?)? as u32)
    }

    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        check_access(bar, offset, "the pcieperf core")?;
        self.call(&format!("write32 {bar} {offset:#x} {value:#x}")).map(drop)
    }

    /// Advances the simulator's clock: the core keeps running meanwhile.
    fn sleep(&mut self, duration: Duration) {
        let _ = self.call(&format!("advance {}", duration.as_nanos()));
    }
}
