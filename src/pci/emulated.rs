//! Functions a hypervisor emulates rather than silicon. Their link registers hold whatever the
//! hypervisor writes — a nominal speed and width, not a trained physical link — and data through
//! them moves at the emulator's speed, so neither may be read as PCI Express figures.
//!
//! Known by vendor ID (virtio, QEMU, VMware, Xen, VirtualBox), or by a hypervisor's subsystem
//! vendor on a function that borrows a real vendor's IDs (QEMU's Intel chipset functions carry
//! subsystem vendor 0x1af4). A device passed through to a virtual machine keeps its own IDs and
//! is not flagged; [`virtual_machine`] says when the whole machine is virtual.

use std::path::Path;

use super::device::Device;

/// Vendor IDs used only by hypervisors' emulated or paravirtual devices.
const EMULATOR_VENDORS: [(u16, &str); 6] = [
    (0x1af4, "virtio (Red Hat)"),
    (0x1b36, "QEMU (Red Hat)"),
    // Not assigned by the PCI-SIG; QEMU uses it for its display and the edu device.
    (0x1234, "QEMU"),
    (0x15ad, "VMware"),
    (0x5853, "Xen"),
    (0x80ee, "VirtualBox"),
];

fn emulator_named(vendor: u16) -> Option<&'static str> {
    EMULATOR_VENDORS.iter().find(|(v, _)| *v == vendor).map(|(_, name)| *name)
}

/// The subsystem vendor: from the type 0 header, or a bridge's subsystem capability.
fn subsystem_vendor(device: &Device) -> Option<u16> {
    if let Some((vendor, _)) = device.config.subsystem() {
        return Some(vendor);
    }
    device.subsystem_capability().map(|(vendor, _)| vendor)
}

/// Who emulates this function and how that is known, e.g. "QEMU (Red Hat): vendor ID 0x1b36";
/// `None` for a function with no hypervisor's IDs.
pub fn emulator(device: &Device) -> Option<String> {
    let vendor = device.config.vendor_id()?;
    if let Some(name) = emulator_named(vendor) {
        return Some(format!("{name}: vendor ID {vendor:#06x}"));
    }
    let subsystem = subsystem_vendor(device)?;
    emulator_named(subsystem).map(|name| format!("{name}: subsystem vendor ID {subsystem:#06x}"))
}

/// [`emulator`] for a function of the live machine (or a sysfs tree), by address.
pub fn emulator_of(sys_root: &Path, bdf: &str) -> Option<String> {
    let address: super::Bdf = bdf.parse().ok()?;
    let found = super::sysfs::read_device(address, &sys_root.join("bus/pci/devices").join(bdf))?;
    emulator(&Device::decode(address, found.config, None, None, Vec::new()))
}

/// The sentence reports print for an emulated function.
pub fn nominal_link_sentence(emulator: &str) -> String {
    format!(
        "emulated by a hypervisor ({emulator}): its link speed and width are nominal values the hypervisor writes, \
         not a physical link, and data through it moves at the emulator's speed, not at PCIe's"
    )
}

/// A virtual machine, by the firmware's system vendor (DMI) or the kernel's hypervisor type;
/// `sys_root` is `/sys` on the live machine.
pub fn virtual_machine(sys_root: &Path) -> Option<String> {
    let read = |name: &str| std::fs::read_to_string(sys_root.join(name)).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    if let Some(kind) = read("hypervisor/type") {
        return Some(format!("hypervisor {kind} (/sys/hypervisor/type)"));
    }
    let vendor = read("class/dmi/id/sys_vendor")?;
    let product = read("class/dmi/id/product_name").unwrap_or_default();
    let known = ["QEMU", "KVM", "VMware", "Xen", "innotek", "Bochs", "Parallels"];
    let virtual_product = vendor.starts_with("Microsoft") && product == "Virtual Machine";
    (known.iter().any(|k| vendor.contains(k) || product.contains(k)) || virtual_product).then(|| format!("{vendor} {product} (DMI)").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::config::ConfigSpace;
    use crate::pci::Bdf;

    fn device(vendor: u16, subsystem_vendor: u16, bridge: bool) -> Device {
        let mut b = vec![0u8; 256];
        b[0..2].copy_from_slice(&vendor.to_le_bytes());
        b[2..4].copy_from_slice(&0x1234u16.to_le_bytes());
        if bridge {
            b[0x0e] = 1;
            b[0x06] = 0x10; // capability list
            b[0x34] = 0x40;
            b[0x40] = crate::pci::caps::regs::PCI_CAP_ID_SSVID as u8;
            b[0x44..0x46].copy_from_slice(&subsystem_vendor.to_le_bytes());
        } else {
            b[0x2c..0x2e].copy_from_slice(&subsystem_vendor.to_le_bytes());
        }
        Device::decode(Bdf::new(0, 0, 2, 0).unwrap(), ConfigSpace::new(b), None, None, Vec::new())
    }

    #[test]
    fn hypervisor_ids_are_named_and_silicon_is_not() {
        assert_eq!(emulator(&device(0x1b36, 0x1b36, true)).unwrap(), "QEMU (Red Hat): vendor ID 0x1b36");
        assert_eq!(emulator(&device(0x1af4, 0x1af4, false)).unwrap(), "virtio (Red Hat): vendor ID 0x1af4");
        // QEMU's ICH9 functions: Intel IDs, Red Hat subsystem.
        assert_eq!(emulator(&device(0x8086, 0x1af4, false)).unwrap(), "virtio (Red Hat): subsystem vendor ID 0x1af4");
        assert_eq!(emulator(&device(0x10b5, 0x1b36, true)).unwrap(), "QEMU (Red Hat): subsystem vendor ID 0x1b36");
        assert_eq!(emulator(&device(0x10de, 0x10de, false)), None);
        assert_eq!(emulator(&device(0x8086, 0x8086, true)), None);
    }

    #[test]
    fn virtual_machines_are_known_by_dmi_or_hypervisor_type() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(virtual_machine(root.path()), None);
        std::fs::create_dir_all(root.path().join("class/dmi/id")).unwrap();
        std::fs::write(root.path().join("class/dmi/id/sys_vendor"), "Dell Inc.\n").unwrap();
        std::fs::write(root.path().join("class/dmi/id/product_name"), "PowerEdge R750\n").unwrap();
        assert_eq!(virtual_machine(root.path()), None);
        std::fs::write(root.path().join("class/dmi/id/sys_vendor"), "QEMU\n").unwrap();
        std::fs::write(root.path().join("class/dmi/id/product_name"), "Standard PC (Q35 + ICH9, 2009)\n").unwrap();
        assert_eq!(virtual_machine(root.path()).unwrap(), "QEMU Standard PC (Q35 + ICH9, 2009) (DMI)");
    }
}
