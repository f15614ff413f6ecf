//! `vfio:BDF,personality=NAME`: a device's own DMA engine driven from user space through
//! vfio-pci, pointed at a pcieperf buffer the IOMMU maps for it.
//!
//! What is common to every DMA design lives here: opening the device, the host buffer and its
//! IOMMU mapping (or, in no-IOMMU mode, its physical address), interrupts, deadlines, the host
//! clock. What one design's registers look like is a [`Personality`], chosen by name from the
//! table in `vfio/mod.rs`; this file drives any of them and knows none by name.

use std::time::Duration;

use crate::engine::bar::device::PciFunction;
use crate::engine::bar::region::Region;
use crate::engine::devfile::{AlignedBuf, Deadline, HostClock};
use crate::engine::{DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Mmio, OpenOptions, Transfer, Width};
use crate::error::InvalidInput;
use crate::model::Conditions;

use super::{personality, physical_address, IommuMode, Personality, VfioDevice, NOIOMMU_WARNING};

/// The `vfio` DMA engine in the engine table.
pub const ENTRY: crate::engine::EngineEntry = crate::engine::EngineEntry {
    name: "vfio",
    argument: "BDF,personality=edu",
    about: "a device's own DMA engine driven through vfio-pci into an IOMMU-mapped pcieperf buffer (personalities: edu, QEMU's teaching device)",
    options: &[],
    flags: &[],
    open: |o| Ok(Box::new(open(o.argument, o.options)?)),
    detect: None,
};

/// IOVA the host buffer is mapped at: low, since edu masks DMA addresses to 28 bits.
const IOVA: u64 = 0x10_0000;
const PAGE_BYTES: u64 = 4096;

/// The DMA engine of a device bound to vfio-pci.
pub struct VfioDmaEngine {
    info: EngineInfo,
    device: VfioDevice,
    regs: Region,
    personality: Box<dyn Personality>,
    buffer: AlignedBuf,
    bus_addr: u64,
    clock: HostClock,
}

/// Open `BDF,personality=NAME`.
pub fn open(argument: &str, options: &OpenOptions) -> Result<VfioDmaEngine, EngineError> {
    let mut parts = argument.split(',');
    let bdf = parts.next().filter(|b| !b.is_empty()).ok_or_else(|| InvalidInput::new("vfio target needs a PCI address: vfio:BDF,personality=edu"))?;
    let mut name = None;
    for part in parts {
        match part.split_once('=') {
            Some(("personality", value)) => name = Some(value),
            _ => return Err(InvalidInput::new(format!("vfio target option '{part}': known is personality=NAME")).into()),
        }
    }
    let name = name.ok_or_else(|| InvalidInput::new("vfio target needs personality=NAME (known: edu)"))?;
    let mut personality = personality(name)?;
    let root = options.sysfs_root.clone().unwrap_or_else(crate::pci::sysfs::default_root);
    let function = PciFunction::find(&root, bdf)?;
    let mut device = VfioDevice::open(function)?;
    device.enable_bus_master()?;
    let regs = device.map_bar(personality.bar())?;
    let identity = personality.identify(&regs)?;
    if let Err(e) = device.enable_interrupts() {
        eprintln!("pcieperf: {bdf}: completion interrupts unavailable, polling instead: {e}");
    }
    let capacity = personality.capacity_bytes();
    // The IOMMU maps whole pages.
    let mapped_bytes = capacity.div_ceil(PAGE_BYTES) * PAGE_BYTES;
    let mut buffer = AlignedBuf::new(mapped_bytes as usize);
    let bus_addr = match device.mode {
        IommuMode::Iommu => {
            device.map_dma(buffer.as_ptr(), IOVA, mapped_bytes)?;
            IOVA
        }
        IommuMode::NoIommu => {
            eprintln!("pcieperf: WARNING: {NOIOMMU_WARNING}");
            // SAFETY: mlock of our own buffer keeps its pages (and physical addresses) in place.
            unsafe { libc::mlock(buffer.as_mut_ptr() as *const libc::c_void, mapped_bytes as usize) };
            buffer.fill(0);
            physical_address(buffer.as_ptr())?
        }
    };
    if bus_addr + capacity - 1 > personality.max_bus_address() {
        return Err(EngineError::Unsupported(format!(
            "host buffer at bus address {bus_addr:#x} is beyond what {} reaches ({:#x}); in no-IOMMU mode give the guest less memory or use an IOMMU",
            personality.name(),
            personality.max_bus_address()
        )));
    }
    let mode = match device.mode {
        IommuMode::Iommu => "IOMMU",
        IommuMode::NoIommu => "no-IOMMU (unsafe)",
    };
    let info = EngineInfo {
        kind: "vfio".into(),
        target: format!("vfio:{argument}"),
        simulated: false,
        co_simulated: false,
        description: format!("{identity} at {bdf} through vfio-pci, {mode}, {} personality, {capacity}-byte device buffer", personality.name()),
        pci_address: Some(device.function.bdf.to_string()),
        in_flight: 1,
        copies_per_transfer: 1,
        device_clock_hz: None,
        directions: vec![Direction::H2d, Direction::D2h],
        concurrent: false,
        alignment_bytes: 4,
        max_transfer_bytes: capacity,
        capacity_bytes: Some(capacity),
        data_model: DataModel::Memory,
    };
    Ok(VfioDmaEngine { info, device, regs, personality, buffer, bus_addr, clock: HostClock::start() })
}

impl VfioDmaEngine {
    /// Wait for the transfer to finish: woken by the completion interrupt when there is one,
    /// checking the device's own status either way (an interrupt may be shared or lost).
    fn wait(&mut self, deadline: &Deadline, what: &str) -> Result<(), EngineError> {
        loop {
            if self.personality.finished(&self.regs)? {
                self.personality.acknowledge(&self.regs)?;
                let _ = self.device.interrupts();
                return Ok(());
            }
            let Some(left) = deadline.remaining() else { return Err(deadline.timeout(what.to_string())) };
            if !self.device.wait_interrupt(left.min(Duration::from_millis(5))) {
                std::thread::sleep(Duration::from_micros(200).min(left));
            }
        }
    }
}

impl Engine for VfioDmaEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn conditions(&self) -> Option<Conditions> {
        self.device.function.conditions()
    }

    fn transfer(&mut self, mut io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let bytes = io.len() as u64;
        let capacity = self.info.capacity_bytes.unwrap_or(0);
        if bytes == 0 || device_offset.checked_add(bytes).is_none_or(|end| end > capacity) {
            return Err(InvalidInput::new(format!("transfer of {bytes} bytes at device offset {device_offset}: the device buffer holds {capacity} bytes")).into());
        }
        let direction = io.direction();
        let deadline = Deadline::after(deadline);
        let start_ns = self.clock.now_ns();
        if let Io::H2d(data) = &io {
            self.buffer[..data.len()].copy_from_slice(data);
        }
        self.personality.start(&self.regs, direction, self.bus_addr, device_offset, bytes)?;
        self.wait(&deadline, &format!("{} DMA of {bytes} bytes", self.personality.name()))?;
        if let Io::D2h(data) = &mut io {
            data.copy_from_slice(&self.buffer[..data.len()]);
        }
        let end_ns = self.clock.now_ns();
        Ok(Transfer { direction, bytes, start_ns, end_ns, device: DeviceCounters::default(), copy_ns: None })
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        Some(self)
    }
}

impl Drop for VfioDmaEngine {
    fn drop(&mut self) {
        if self.device.mode == IommuMode::Iommu {
            let _ = self.device.unmap_dma(IOVA, self.buffer.len() as u64);
        }
    }
}

/// The DMA registers' BAR, for register-level procedures.
impl Mmio for VfioDmaEngine {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        self.read(bar, offset, Width::B4).map(|v| v as u32)
    }

    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        self.write(bar, offset, Width::B4, value.into())
    }

    fn read(&mut self, bar: u8, offset: u64, width: Width) -> Result<u64, EngineError> {
        self.check_bar(bar)?;
        self.regs.read(offset, width)
    }

    fn write(&mut self, bar: u8, offset: u64, width: Width, value: u64) -> Result<(), EngineError> {
        self.check_bar(bar)?;
        self.regs.write(offset, width, value)
    }

    fn bar_bytes(&mut self, bar: u8) -> Option<u64> {
        (bar == self.personality.bar()).then(|| self.regs.size_bytes())
    }

    fn default_bar(&self) -> u8 {
        self.personality.bar()
    }

    fn interrupts(&mut self) -> Option<u64> {
        self.device.interrupts()
    }
}

impl VfioDmaEngine {
    fn check_bar(&self, bar: u8) -> Result<(), EngineError> {
        if bar == self.personality.bar() {
            Ok(())
        } else {
            Err(EngineError::Unsupported(format!("the vfio engine maps BAR{} only (use bar:BDF,via=vfio,bar={bar} for others)", self.personality.bar())))
        }
    }
}
