//! Whether a PCI function's DMA goes through an IOMMU, and how: its IOMMU group
//! (`/sys/bus/pci/devices/BDF/iommu_group`, a link to `/sys/kernel/iommu_groups/N`) and the
//! group's domain type (`iommu_group/type`, Linux 5.11+). A translated domain adds an IOTLB
//! lookup to every DMA and an invalidation to every unmap, so a rate means something only beside it.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The IOMMU as sysfs shows it for one function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iommu {
    /// The group number; None when the function has no group (no IOMMU, or one turned off).
    pub group: Option<u32>,
    /// `identity`, `DMA`, `DMA-FQ`, `unmanaged`, `blocked`; None when the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_type: Option<String>,
}

impl Iommu {
    /// What the domain type means for the DMA measured.
    pub fn describe(&self) -> String {
        let Some(group) = self.group else {
            return "no IOMMU group: DMA addresses are not translated (no IOMMU, or it is off)".into();
        };
        let meaning = match self.domain_type.as_deref() {
            Some("identity") => "identity (passthrough: DMA addresses are physical, nothing translated)".to_string(),
            Some("DMA") => "DMA (translated, strict: an IOTLB invalidation on every unmap)".to_string(),
            Some("DMA-FQ") => "DMA-FQ (translated, invalidations batched in a flush queue)".to_string(),
            Some("unmanaged") => "unmanaged (owned by a user-space driver such as VFIO: translated by its mappings)".to_string(),
            Some("blocked") => "blocked (no DMA allowed)".to_string(),
            Some(other) => other.to_string(),
            None => "domain type not given by this kernel (iommu_group/type)".to_string(),
        };
        format!("group {group}, domain {meaning}")
    }
}

/// The IOMMU of `bdf` under `sys_root`; None when sysfs does not list the function.
pub fn read(sys_root: &Path, bdf: &str) -> Option<Iommu> {
    let device = sys_root.join("bus/pci/devices").join(bdf);
    if !device.exists() {
        return None;
    }
    let link = device.join("iommu_group");
    let group = std::fs::read_link(&link).ok().and_then(|target| target.file_name()?.to_str()?.parse().ok());
    let domain_type = group.and_then(|_| std::fs::read_to_string(link.join("type")).ok()).map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    Some(Iommu { group, domain_type })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function in group 12 of domain type `kind`, linked as the kernel links it.
    fn in_group(root: &Path, bdf: &str, kind: Option<&str>) {
        let group = root.join("kernel/iommu_groups/12");
        std::fs::create_dir_all(&group).unwrap();
        if let Some(kind) = kind {
            std::fs::write(group.join("type"), format!("{kind}\n")).unwrap();
        }
        let device = root.join("bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&device).unwrap();
        std::os::unix::fs::symlink("../../../../kernel/iommu_groups/12", device.join("iommu_group")).unwrap();
    }

    #[test]
    fn the_group_and_its_domain_type_are_read_through_the_link() {
        let root = tempfile::tempdir().unwrap();
        in_group(root.path(), "0000:01:00.0", Some("DMA-FQ"));
        let iommu = read(root.path(), "0000:01:00.0").unwrap();
        assert_eq!(iommu, Iommu { group: Some(12), domain_type: Some("DMA-FQ".into()) });
        assert_eq!(iommu.describe(), "group 12, domain DMA-FQ (translated, invalidations batched in a flush queue)");
        std::fs::write(root.path().join("kernel/iommu_groups/12/type"), "identity\n").unwrap();
        assert!(read(root.path(), "0000:01:00.0").unwrap().describe().contains("identity (passthrough"));
    }

    #[test]
    fn no_group_no_type_and_no_device_are_told_apart() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("bus/pci/devices/0000:02:00.0")).unwrap();
        let none = read(root.path(), "0000:02:00.0").unwrap();
        assert_eq!(none, Iommu { group: None, domain_type: None });
        assert!(none.describe().starts_with("no IOMMU group"));
        in_group(root.path(), "0000:03:00.0", None);
        assert!(read(root.path(), "0000:03:00.0").unwrap().describe().ends_with("domain type not given by this kernel (iommu_group/type)"));
        assert_eq!(read(root.path(), "0000:09:00.0"), None);
    }
}
