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

/// One guest at a time per process: a TCG guest starved of CPU by another loses NVMe
/// completions (the guest's driver times out and resets the controller).
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Boot `topology` with `pcieperf` in the guest, or say why the testbed cannot run here. The
/// guest holds the process's guest slot until it is dropped.
pub fn boot(topology: &Topology, pcieperf: &Path, cache_dir: &Path) -> Result<Guest, Unavailable> {
    let image = initramfs::cached(pcieperf, cache_dir).map_err(Unavailable::Missing)?;
    let slot = ONE_GUEST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut guest = Guest::boot(topology, &image, BOOT_DEADLINE).map_err(Unavailable::Failed)?;
    guest.slot = Some(slot);
    Ok(guest)
}

/// Why no guest: tools missing (a skip) or a failure (an error).
#[derive(Debug)]
pub enum Unavailable {
    Missing(String),
    Failed(String),
}
