//! VFIO: a PCI function handed to user space by `vfio-pci`, with or without an IOMMU.
//!
//! A small typed layer over the kernel's ioctls (`include/uapi/linux/vfio.h`): container, group,
//! device; region info and mmap for BARs and config space; eventfd interrupts; DMA mappings.
//! rust-vmm's `vfio-ioctls` targets virtual machine monitors (its default feature pulls in KVM and
//! its container wants guest memory objects) and `vfio-bindings` alone still leaves the ioctl
//! numbers and every unsafe call to us, so the dozen calls live here, each behind a safe method.
//!
//! Without an IOMMU the kernel's no-IOMMU mode (`vfio.enable_unsafe_noiommu_mode=1`) still gives
//! BAR access and interrupts, but no DMA mapping: the device then reaches physical addresses the
//! host looks up in `/proc/self/pagemap`. pcieperf says so loudly whenever that mode is in use.
//!
//! The DMA engine (`dma.rs`) drives any [`Personality`]; one design's registers are one file
//! (`edu.rs`) listed in [`PERSONALITIES`], so neither file imports the other.

pub mod dma;
pub mod edu;

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::engine::bar::device::{open_rw, PciFunction};
use crate::engine::bar::region::Region;
use crate::engine::{Direction, EngineError};
use crate::error::InvalidInput;

/// One DMA design's registers: how to check the device, start a transfer and see it finish.
pub trait Personality: Send {
    fn name(&self) -> &'static str;
    /// The BAR holding the DMA registers.
    fn bar(&self) -> u8;
    /// Read the identification registers; a description, or why this is not the device.
    fn identify(&mut self, regs: &Region) -> Result<String, EngineError>;
    /// Device-side memory transfers can address, in bytes (offsets run from 0).
    fn capacity_bytes(&self) -> u64;
    /// Highest bus address the device can reach (edu: 28-bit DMA mask).
    fn max_bus_address(&self) -> u64;
    /// Program and start one transfer between host bus address `bus_addr` and device offset
    /// `device_offset`.
    fn start(&mut self, regs: &Region, direction: Direction, bus_addr: u64, device_offset: u64, bytes: u64) -> Result<(), EngineError>;
    /// Whether the transfer started last has finished.
    fn finished(&mut self, regs: &Region) -> Result<bool, EngineError>;
    /// Acknowledge the completion interrupt, so the next one can fire.
    fn acknowledge(&mut self, regs: &Region) -> Result<(), EngineError>;
}

/// A personality by name, in the table the `vfio` target's `personality=NAME` is looked up in.
pub struct PersonalityEntry {
    pub name: &'static str,
    /// What the design is, for the unknown-personality message.
    pub about: &'static str,
    pub make: fn() -> Box<dyn Personality>,
}

/// Every personality: a new DMA design is one file implementing [`Personality`] and one line here.
pub const PERSONALITIES: &[PersonalityEntry] = &[PersonalityEntry { name: "edu", about: "QEMU's edu device", make: || Box::new(edu::Edu) }];

/// The personality named in a target.
pub fn personality(name: &str) -> Result<Box<dyn Personality>, InvalidInput> {
    PERSONALITIES.iter().find(|p| p.name == name).map(|p| (p.make)()).ok_or_else(|| {
        let known: Vec<String> = PERSONALITIES.iter().map(|p| format!("{} ({})", p.name, p.about)).collect();
        InvalidInput::new(format!("personality={name}: known personalities: {}", known.join(", ")))
    })
}

const VFIO_TYPE: u64 = b';' as u64;
const VFIO_BASE: u64 = 100;

/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO encodes no size or direction in its request numbers.
const fn vfio_io(n: u64) -> u64 {
    (VFIO_TYPE << 8) | (VFIO_BASE + n)
}

const GET_API_VERSION: u64 = vfio_io(0);
const CHECK_EXTENSION: u64 = vfio_io(1);
const SET_IOMMU: u64 = vfio_io(2);
const GROUP_GET_STATUS: u64 = vfio_io(3);
const GROUP_SET_CONTAINER: u64 = vfio_io(4);
const GROUP_GET_DEVICE_FD: u64 = vfio_io(6);
const DEVICE_GET_REGION_INFO: u64 = vfio_io(8);
const DEVICE_GET_IRQ_INFO: u64 = vfio_io(9);
const DEVICE_SET_IRQS: u64 = vfio_io(10);
const IOMMU_MAP_DMA: u64 = vfio_io(13);
const IOMMU_UNMAP_DMA: u64 = vfio_io(14);

const API_VERSION: i32 = 0;
const TYPE1_IOMMU: u64 = 1;
const TYPE1V2_IOMMU: u64 = 3;
const NOIOMMU_IOMMU: u64 = 8;
const GROUP_FLAGS_VIABLE: u32 = 1;
const REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
/// Region index of config space for a PCI device (BARs are 0–5, the ROM 6).
const PCI_CONFIG_REGION_INDEX: u32 = 7;
const PCI_INTX_IRQ_INDEX: u32 = 0;
const PCI_MSI_IRQ_INDEX: u32 = 1;
const IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
const IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;
const DMA_MAP_FLAG_READ: u32 = 1;
const DMA_MAP_FLAG_WRITE: u32 = 1 << 1;

#[repr(C)]
#[derive(Default)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
struct RegionInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

#[repr(C)]
#[derive(Default)]
struct IrqInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    count: u32,
}

#[repr(C)]
struct IrqSetOneEventfd {
    argsz: u32,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
    fd: i32,
}

#[repr(C)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

#[repr(C)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

fn ioctl<T>(fd: &impl AsRawFd, request: u64, arg: *mut T, what: &str) -> Result<i32, EngineError> {
    // SAFETY: every caller passes a request whose argument is `T` as the kernel defines it (or a
    // plain integer cast to a pointer, for the requests that take one), valid for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) };
    if rc < 0 {
        return Err(EngineError::Io { what: format!("VFIO {what}"), source: std::io::Error::last_os_error() });
    }
    Ok(rc)
}

fn ioctl_value(fd: &impl AsRawFd, request: u64, value: u64, what: &str) -> Result<i32, EngineError> {
    ioctl(fd, request, value as *mut u8, what)
}

/// Which IOMMU backs the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IommuMode {
    /// Type1 IOMMU: the device reaches only what `map_dma` gave it, at the IOVA given.
    Iommu,
    /// The kernel's unsafe no-IOMMU mode: the device reaches all of physical memory.
    NoIommu,
}

/// The warning every output carries in no-IOMMU mode.
pub const NOIOMMU_WARNING: &str = "VFIO no-IOMMU mode: the kernel is tainted and the device can write anywhere in physical memory; \
     DMA addresses are physical (from /proc/self/pagemap, which needs root)";

/// An open VFIO device: container, group and device file descriptors.
pub struct VfioDevice {
    pub function: PciFunction,
    pub mode: IommuMode,
    container: File,
    _group: File,
    device: OwnedFd,
    /// Eventfd wired to the device's interrupt, when `enable_interrupts` ran.
    irq: Option<OwnedFd>,
    irq_total: u64,
}

impl VfioDevice {
    /// Open `function` through vfio-pci (it must already be bound; the error says how).
    pub fn open(function: PciFunction) -> Result<VfioDevice, EngineError> {
        if function.iommu_group().is_none() {
            no_group(&function)?;
        }
        function.require_driver("vfio-pci", "vfio-pci", "VFIO")?;
        let group_name = function.iommu_group().ok_or_else(|| EngineError::Unsupported(format!("{}: bound to vfio-pci but in no IOMMU group", function.bdf)))?;
        let (node, mode) = if Path::new(&format!("/dev/vfio/{group_name}")).exists() {
            (format!("/dev/vfio/{group_name}"), IommuMode::Iommu)
        } else {
            (format!("/dev/vfio/noiommu-{group_name}"), IommuMode::NoIommu)
        };
        let needed = "VFIO needs read/write access to /dev/vfio/vfio and the group node (root, or a user given the group with chown)";
        let container = open_rw(Path::new("/dev/vfio/vfio"), needed)?;
        let version = ioctl_value(&container, GET_API_VERSION, 0, "GET_API_VERSION")?;
        if version != API_VERSION {
            return Err(EngineError::Unsupported(format!("VFIO API version {version}, this pcieperf speaks {API_VERSION}")));
        }
        let group = open_rw(Path::new(&node), needed)?;
        let mut status = GroupStatus { argsz: std::mem::size_of::<GroupStatus>() as u32, flags: 0 };
        ioctl(&group, GROUP_GET_STATUS, &mut status, "GROUP_GET_STATUS")?;
        if status.flags & GROUP_FLAGS_VIABLE == 0 {
            return Err(EngineError::Unsupported(format!(
                "IOMMU group {group_name} is not viable: every device in /sys/kernel/iommu_groups/{group_name}/devices must be bound to vfio-pci or to no driver"
            )));
        }
        let mut container_fd = container.as_raw_fd();
        ioctl(&group, GROUP_SET_CONTAINER, &mut container_fd, "GROUP_SET_CONTAINER")?;
        let iommu_type = match mode {
            IommuMode::NoIommu => NOIOMMU_IOMMU,
            IommuMode::Iommu if ioctl_value(&container, CHECK_EXTENSION, TYPE1V2_IOMMU, "CHECK_EXTENSION")? == 1 => TYPE1V2_IOMMU,
            IommuMode::Iommu => TYPE1_IOMMU,
        };
        ioctl_value(&container, SET_IOMMU, iommu_type, "SET_IOMMU").map_err(|e| match e {
            EngineError::Io { source, .. } if source.raw_os_error() == Some(libc::ENODEV) => EngineError::Unsupported(format!(
                "VFIO has no IOMMU backend for this container (SET_IOMMU: no such device): load it with `sudo modprobe {}`",
                if mode == IommuMode::NoIommu { "vfio enable_unsafe_noiommu_mode=1" } else { "vfio_iommu_type1" }
            )),
            other => other,
        })?;
        let name = CString::new(function.bdf.to_string()).expect("a PCI address has no NUL");
        let fd = ioctl(&group, GROUP_GET_DEVICE_FD, name.as_ptr() as *mut libc::c_char, "GROUP_GET_DEVICE_FD")?;
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        let device = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(VfioDevice { function, mode, container, _group: group, device, irq: None, irq_total: 0 })
    }

    fn region_info(&self, index: u32) -> Result<RegionInfo, EngineError> {
        let mut info = RegionInfo { argsz: std::mem::size_of::<RegionInfo>() as u32, index, ..RegionInfo::default() };
        ioctl(&self.device, DEVICE_GET_REGION_INFO, &mut info, "DEVICE_GET_REGION_INFO")?;
        Ok(info)
    }

    /// Map BAR `bar` (VFIO region `bar`).
    pub fn map_bar(&self, bar: u8) -> Result<Region, EngineError> {
        let info = self.region_info(bar.into())?;
        if info.size == 0 {
            return Err(EngineError::Unsupported(format!("{}: BAR{bar} is not implemented (VFIO region size 0)", self.function.bdf)));
        }
        if info.flags & REGION_INFO_FLAG_MMAP == 0 {
            return Err(EngineError::Unsupported(format!("{}: VFIO does not allow mapping BAR{bar} (an I/O BAR, or a region vfio-pci traps)", self.function.bdf)));
        }
        // SAFETY: dup of a descriptor we own; `File` takes ownership of the duplicate.
        let file = File::from(self.device.try_clone().map_err(|e| EngineError::Io { what: "dup VFIO device fd".into(), source: e })?);
        Region::map(&file, info.offset, info.size, bar, format!("VFIO region {bar} of {}", self.function.bdf), false)
    }

    /// Read or write config space through VFIO (vfio-pci virtualises parts of it).
    fn config(&self, offset: u64, bytes: &mut [u8], write: bool) -> Result<(), EngineError> {
        use std::os::unix::fs::FileExt;
        let info = self.region_info(PCI_CONFIG_REGION_INDEX)?;
        let file = File::from(self.device.try_clone().map_err(|e| EngineError::Io { what: "dup VFIO device fd".into(), source: e })?);
        let result = if write { file.write_all_at(bytes, info.offset + offset) } else { file.read_exact_at(bytes, info.offset + offset) };
        result.map_err(|e| EngineError::Io { what: format!("VFIO config space at {offset:#x}"), source: e })
    }

    /// Set Memory Space Enable and Bus Master Enable in the Command register, so the device
    /// answers its BARs and may issue DMA.
    pub fn enable_bus_master(&self) -> Result<(), EngineError> {
        let mut command = [0u8; 2];
        self.config(4, &mut command, false)?;
        let value = u16::from_le_bytes(command) | 0x2 | 0x4;
        self.config(4, &mut value.to_le_bytes(), true)
    }

    /// Wire the device's first MSI vector (else INTx) to an eventfd.
    pub fn enable_interrupts(&mut self) -> Result<(), EngineError> {
        // SAFETY: eventfd has no memory preconditions; a negative result is handled below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(EngineError::Io { what: "eventfd".into(), source: std::io::Error::last_os_error() });
        }
        // SAFETY: a new descriptor nothing else owns.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut chosen = None;
        for index in [PCI_MSI_IRQ_INDEX, PCI_INTX_IRQ_INDEX] {
            let mut info = IrqInfo { argsz: std::mem::size_of::<IrqInfo>() as u32, index, ..IrqInfo::default() };
            if ioctl(&self.device, DEVICE_GET_IRQ_INFO, &mut info, "DEVICE_GET_IRQ_INFO").is_ok() && info.count > 0 {
                chosen = Some(index);
                break;
            }
        }
        let index = chosen.ok_or_else(|| EngineError::Unsupported(format!("{}: the device offers neither MSI nor INTx through VFIO", self.function.bdf)))?;
        let mut set = IrqSetOneEventfd {
            argsz: std::mem::size_of::<IrqSetOneEventfd>() as u32,
            flags: IRQ_SET_DATA_EVENTFD | IRQ_SET_ACTION_TRIGGER,
            index,
            start: 0,
            count: 1,
            fd: event.as_raw_fd(),
        };
        ioctl(&self.device, DEVICE_SET_IRQS, &mut set, "DEVICE_SET_IRQS")?;
        self.irq = Some(event);
        Ok(())
    }

    /// Interrupts delivered since `enable_interrupts` (reads and resets the eventfd's counter).
    pub fn interrupts(&mut self) -> Option<u64> {
        let fd = self.irq.as_ref()?;
        let mut count = 0u64;
        // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
        let n = unsafe { libc::read(fd.as_raw_fd(), &mut count as *mut u64 as *mut libc::c_void, 8) };
        if n == 8 {
            self.irq_total += count;
        }
        Some(self.irq_total)
    }

    /// Wait up to `timeout` for the next interrupt; true when one came.
    pub fn wait_interrupt(&mut self, timeout: std::time::Duration) -> bool {
        let Some(fd) = self.irq.as_ref() else { return false };
        let mut poll = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
        ready > 0
    }

    /// Let the device reach `bytes` at `vaddr` as `iova` (IOMMU mode only).
    pub fn map_dma(&self, vaddr: *const u8, iova: u64, bytes: u64) -> Result<(), EngineError> {
        let mut map = DmaMap {
            argsz: std::mem::size_of::<DmaMap>() as u32,
            flags: DMA_MAP_FLAG_READ | DMA_MAP_FLAG_WRITE,
            vaddr: vaddr as u64,
            iova,
            size: bytes,
        };
        ioctl(&self.container, IOMMU_MAP_DMA, &mut map, "IOMMU_MAP_DMA").map(|_| ())
    }

    pub fn unmap_dma(&self, iova: u64, bytes: u64) -> Result<(), EngineError> {
        let mut unmap = DmaUnmap { argsz: std::mem::size_of::<DmaUnmap>() as u32, flags: 0, iova, size: bytes };
        ioctl(&self.container, IOMMU_UNMAP_DMA, &mut unmap, "IOMMU_UNMAP_DMA").map(|_| ())
    }
}

/// Where the kernel's no-IOMMU switch is (present only when vfio is built with CONFIG_VFIO_NOIOMMU).
const NOIOMMU_PARAMETER: &str = "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode";

/// A function in no IOMMU group: fine only when no-IOMMU mode is on (binding vfio-pci then
/// creates a no-IOMMU group); otherwise say what the machine lacks.
fn no_group(function: &PciFunction) -> Result<(), EngineError> {
    let bdf = function.bdf;
    match std::fs::read_to_string(NOIOMMU_PARAMETER).map(|t| t.trim() == "Y") {
        Ok(true) => Ok(()),
        Ok(false) => Err(EngineError::Unsupported(format!(
            "{bdf} is in no IOMMU group (no IOMMU, or it is off): boot with intel_iommu=on / amd_iommu=on, or accept VFIO's unsafe no-IOMMU mode: `echo 1 | sudo tee {NOIOMMU_PARAMETER}`, then bind vfio-pci"
        ))),
        Err(_) => Err(EngineError::Unsupported(format!(
            "{bdf} is in no IOMMU group (no IOMMU, or it is off), and this kernel's vfio offers no no-IOMMU mode (built without CONFIG_VFIO_NOIOMMU, or vfio not loaded): boot with intel_iommu=on / amd_iommu=on"
        ))),
    }
}

/// Physical address of the page holding `vaddr`, from `/proc/self/pagemap` (root only: the
/// kernel hides frame numbers from others). For no-IOMMU DMA.
pub fn physical_address(vaddr: *const u8) -> Result<u64, EngineError> {
    use std::os::unix::fs::FileExt;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let file = File::open("/proc/self/pagemap").map_err(|e| EngineError::Io { what: "open /proc/self/pagemap".into(), source: e })?;
    let mut entry = [0u8; 8];
    let vaddr = vaddr as u64;
    file.read_exact_at(&mut entry, vaddr / page * 8).map_err(|e| EngineError::Io { what: "read /proc/self/pagemap".into(), source: e })?;
    let entry = u64::from_le_bytes(entry);
    let frame = entry & ((1 << 55) - 1);
    if entry >> 63 == 0 || frame == 0 {
        return Err(EngineError::PermissionDenied {
            path: "/proc/self/pagemap".into(),
            needed: "no-IOMMU DMA needs physical addresses, which the kernel shows only to root".into(),
        });
    }
    Ok(frame * page + vaddr % page)
}
