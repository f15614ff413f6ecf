//! The QEMU q35 testbed: a real Linux PCI Express stack (PCI core, sysfs, AER, NVMe, pciehp)
//! around emulated devices, for testing pcieperf's live paths without hardware. Shared by the
//! integration tests (`tests/testbed_*.rs`) and the demo (`cargo run --example testbed`).
//!
//! Emulated timings are not PCIe timings: the testbed checks behaviour, never performance.
#![allow(dead_code, unused_imports)]

pub mod guest;
pub mod initramfs;
pub mod qmp;
pub mod topology;

use std::path::Path;
use std::time::Duration;

pub use guest::{Guest, Output};
pub use topology::{Below, Endpoint, RootPort, Topology};

/// Deadline for a boot (TCG on two shared cores takes 5–20 s).
pub const BOOT_DEADLINE: Duration = Duration::from_secs(150);

/// Boot `topology` with `pcieperf` in the guest, or say why the testbed cannot run here.
pub fn boot(topology: &Topology, pcieperf: &Path, cache_dir: &Path) -> Result<Guest, Unavailable> {
    let image = initramfs::cached(pcieperf, cache_dir).map_err(Unavailable::Missing)?;
    Guest::boot(topology, &image, BOOT_DEADLINE).map_err(Unavailable::Failed)
}

/// Why no guest: tools missing (a skip) or a failure (an error).
#[derive(Debug)]
pub enum Unavailable {
    Missing(String),
    Failed(String),
}
