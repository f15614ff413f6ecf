//! Which PCI function a device node or file belongs to, from sysfs: the address the pci layer
//! then reads conditions for ([`super::conditions`]).

use std::fs;
use std::path::Path;

/// The PCI device of a class device node, e.g. `/sys/class/xdma/xdma0_user/device`.
pub fn class_node_pci(sys_dir: &Path, node_name: &str) -> Option<String> {
    let classes = fs::read_dir(sys_dir.join("class")).ok()?;
    classes.flatten().find_map(|class| {
        let device = fs::canonicalize(class.path().join(node_name).join("device")).ok()?;
        pci_address_in_path(&device)
    })
}

/// The last `DDDD:BB:DD.F` component of a sysfs device path: the PCI function nearest to the
/// node (an NVMe controller, not the root port above it).
pub fn pci_address_in_path(path: &Path) -> Option<String> {
    path.components().filter_map(|c| c.as_os_str().to_str()).rfind(|c| is_pci_address(c)).map(str::to_string)
}

fn is_pci_address(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 12
        && bytes[4] == b':'
        && bytes[7] == b':'
        && bytes[10] == b'.'
        && bytes.iter().enumerate().all(|(i, b)| matches!(i, 4 | 7 | 10) || b.is_ascii_hexdigit())
}

/// The PCI device behind a file or block device: the device number (`st_rdev` for a block
/// device, `st_dev` of the filesystem for a regular file) → `/sys/dev/block/MAJ:MIN` → path.
pub fn pci_address_of(path: &Path, sys_dir: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(path).ok()?;
    let devnum = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(devnum), libc::minor(devnum));
    let node = fs::canonicalize(sys_dir.join(format!("dev/block/{major}:{minor}"))).ok()?;
    pci_address_in_path(&node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_address_is_the_last_function_in_the_path() {
        let path = Path::new("/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1");
        assert_eq!(pci_address_in_path(path).as_deref(), Some("0000:3d:00.0"));
        assert_eq!(pci_address_in_path(Path::new("/sys/devices/virtual/block/loop0")), None);
        assert!(!is_pci_address("pci0000:00"));
    }
}
