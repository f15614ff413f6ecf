//! A PCI Express hierarchy for QEMU's q35 machine, and the QEMU arguments that build it.
//!
//! Root ports sit at fixed slots (`rp<i>` at `00:<2+i>.0`), so a test knows their addresses;
//! everything below them is numbered by the guest's firmware.

use std::path::Path;

/// A device QEMU emulates, as seen from the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `nvme`: the kernel's NVMe driver binds it; backed by a sparse file on the host.
    Nvme,
    /// `e1000e`: Intel 82574L, a PCI Express endpoint capable of 2.5 GT/s x1.
    E1000e,
    /// `virtio-net-pci`: virtio vendor ID 0x1af4, PCI Express when behind a root port.
    VirtioNet,
    /// `edu`: QEMU's teaching device (MMIO registers, a DMA engine), conventional PCI.
    Edu,
    /// `ivshmem-plain`: a RAM-backed memory BAR, conventional PCI.
    Ivshmem,
}

impl Endpoint {
    fn qemu_name(self) -> &'static str {
        match self {
            Endpoint::Nvme => "nvme",
            Endpoint::E1000e => "e1000e",
            Endpoint::VirtioNet => "virtio-net-pci",
            Endpoint::Edu => "edu",
            Endpoint::Ivshmem => "ivshmem-plain",
        }
    }

    /// `vendor:device` as the guest sees it.
    pub fn ids(self) -> (u16, u16) {
        match self {
            Endpoint::Nvme => (0x1b36, 0x0010),
            Endpoint::E1000e => (0x8086, 0x10d3),
            Endpoint::VirtioNet => (0x1af4, 0x1041),
            Endpoint::Edu => (0x1234, 0x11e8),
            Endpoint::Ivshmem => (0x1af4, 0x1110),
        }
    }
}

/// What a port has below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Below {
    Empty,
    Device(Endpoint),
    /// A TI XIO3130 switch (`x3130-upstream`), one `xio3130-downstream` port per entry.
    Switch(Vec<Option<Endpoint>>),
}

/// A `pcie-root-port`; `speed` as QEMU spells it (`2_5`, `5`, `8`, `16`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootPort {
    pub speed: &'static str,
    pub width: u8,
    pub below: Below,
}

impl RootPort {
    pub fn new(speed: &'static str, width: u8, below: Below) -> Self {
        RootPort { speed, width, below }
    }

    /// The speed in GT/s, as sysfs and pcieperf print it.
    pub fn speed_gts(&self) -> f64 {
        if self.speed == "2_5" { 2.5 } else { self.speed.parse().unwrap() }
    }
}

/// A whole machine: root ports, and whether an IOMMU (intel-iommu) is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub name: &'static str,
    pub about: &'static str,
    pub root_ports: Vec<RootPort>,
    pub iommu: bool,
}

/// A device the topology placed, with the QEMU id the monitor knows it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub qemu_id: String,
    pub endpoint: Endpoint,
    /// Index of the root port above it.
    pub root_port: usize,
    pub behind_switch: bool,
}

/// The QEMU id of root port `index`; its guest address is `0000:00:<2+index>.0`.
pub fn root_port_id(index: usize) -> String {
    format!("rp{index}")
}

pub fn root_port_bdf(index: usize) -> String {
    format!("0000:00:{:02x}.0", 2 + index)
}

impl Topology {
    /// The named topologies the tests and the demo use.
    pub fn presets() -> Vec<Topology> {
        use Below::*;
        use Endpoint::*;
        vec![
            Topology {
                name: "degraded",
                about: "an endpoint capable of 2.5 GT/s x1 behind a root port capable of 16 GT/s x8; \
                        an NVMe controller behind a root port set to 2.5 GT/s x1; an empty 8 GT/s x4 port",
                root_ports: vec![
                    RootPort::new("16", 8, Device(E1000e)),
                    RootPort::new("2_5", 1, Device(Nvme)),
                    RootPort::new("8", 4, Empty),
                ],
                iommu: false,
            },
            Topology {
                name: "switch",
                about: "a PCIe switch (TI XIO3130) behind an 8 GT/s x16 root port, three downstream ports \
                        (NVMe, e1000e, empty), and a 5 GT/s x2 root port with virtio-net",
                root_ports: vec![
                    RootPort::new("8", 16, Switch(vec![Some(Nvme), Some(E1000e), None])),
                    RootPort::new("5", 2, Device(VirtioNet)),
                ],
                iommu: false,
            },
            Topology {
                name: "mixed",
                about: "mixed endpoints behind root ports of several speeds and widths, with an IOMMU: \
                        virtio-net, e1000e, edu (conventional PCI), ivshmem (a RAM-backed BAR)",
                root_ports: vec![
                    RootPort::new("16", 16, Device(VirtioNet)),
                    RootPort::new("8", 2, Device(E1000e)),
                    RootPort::new("5", 4, Device(Edu)),
                    RootPort::new("2_5", 1, Device(Ivshmem)),
                ],
                iommu: true,
            },
            Topology {
                name: "nvme",
                about: "one NVMe controller behind an 8 GT/s x4 root port (hot-pluggable), for dma, run, AER and removal",
                root_ports: vec![RootPort::new("8", 4, Device(Nvme))],
                iommu: false,
            },
        ]
    }

    pub fn preset(name: &str) -> Option<Topology> {
        Self::presets().into_iter().find(|t| t.name == name)
    }

    /// Every endpoint with its QEMU id (`nvme0`, `e1000e0`, …, numbered per kind in order).
    pub fn placed(&self) -> Vec<Placed> {
        let mut placed: Vec<Placed> = Vec::new();
        let mut add = |endpoint: Endpoint, root_port: usize, behind_switch: bool| {
            let n = placed.iter().filter(|p| p.endpoint == endpoint).count();
            let qemu_id = format!("{}{n}", endpoint.qemu_name().split('-').next().unwrap());
            placed.push(Placed { qemu_id, endpoint, root_port, behind_switch });
        };
        for (i, port) in self.root_ports.iter().enumerate() {
            match &port.below {
                Below::Empty => {}
                Below::Device(e) => add(*e, i, false),
                Below::Switch(ports) => ports.iter().flatten().for_each(|e| add(*e, i, true)),
            }
        }
        placed
    }

    /// The `-device`, `-drive`, `-netdev` and `-object` arguments; backing files go in `dir`.
    pub fn qemu_args(&self, dir: &Path) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        let mut device = |spec: String| {
            args.push("-device".into());
            args.push(spec);
        };
        if self.iommu {
            // Must come before the devices it translates for.
            device("intel-iommu".into());
        }
        let placed = self.placed();
        let mut next = placed.iter();
        let mut chassis = 1;
        let mut extra: Vec<String> = Vec::new();
        let endpoint_spec = |p: &Placed, bus: &str, extra: &mut Vec<String>| -> String {
            let id = &p.qemu_id;
            match p.endpoint {
                Endpoint::Nvme => {
                    let disk = dir.join(format!("{id}.img"));
                    std::fs::File::create(&disk).and_then(|f| f.set_len(64 << 20)).expect("create the NVMe backing file");
                    extra.extend(["-drive".into(), format!("if=none,id={id}.disk,format=raw,file={}", disk.display())]);
                    format!("nvme,id={id},bus={bus},serial={id},drive={id}.disk")
                }
                Endpoint::E1000e | Endpoint::VirtioNet => {
                    extra.extend(["-netdev".into(), format!("user,id={id}.net,restrict=on")]);
                    format!("{},id={id},bus={bus},netdev={id}.net", p.endpoint.qemu_name())
                }
                Endpoint::Edu => format!("edu,id={id},bus={bus}"),
                Endpoint::Ivshmem => {
                    extra.extend(["-object".into(), format!("memory-backend-ram,id={id}.mem,size=1M")]);
                    format!("ivshmem-plain,id={id},bus={bus},memdev={id}.mem")
                }
            }
        };
        for (i, port) in self.root_ports.iter().enumerate() {
            let rp = root_port_id(i);
            device(format!(
                "pcie-root-port,id={rp},bus=pcie.0,addr={:#x}.0,chassis={chassis},slot={chassis},x-speed={},x-width={}",
                2 + i,
                port.speed,
                port.width
            ));
            chassis += 1;
            match &port.below {
                Below::Empty => {}
                Below::Device(_) => device(endpoint_spec(next.next().unwrap(), &rp, &mut extra)),
                Below::Switch(ports) => {
                    device(format!("x3130-upstream,id={rp}.up,bus={rp}"));
                    for (j, slot) in ports.iter().enumerate() {
                        let dn = format!("{rp}.dn{j}");
                        device(format!("xio3130-downstream,id={dn},bus={rp}.up,chassis={chassis},slot={j}"));
                        chassis += 1;
                        if slot.is_some() {
                            device(endpoint_spec(next.next().unwrap(), &dn, &mut extra));
                        }
                    }
                }
            }
        }
        args.extend(extra);
        args
    }
}
