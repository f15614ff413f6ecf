//! NUMA placement: the measuring thread and the host buffers on the GPU's node, as nvbandwidth
//! places them (its CPU affinity follows the GPU), and the placement verified with
//! move_pages(2) in query mode rather than assumed.
//!
//! The thread is pinned to the node's CPUs before any buffer is allocated: Linux's default
//! policy puts a page on the node of the CPU that first touches it, and the driver allocates
//! pinned memory from the calling thread, so the buffers land there too.

use std::path::Path;

/// Where the buffers should go: `--cuda-numa auto` (the GPU's node), `off`, or a node number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Auto,
    Off,
    Node(u32),
}

impl Placement {
    pub fn parse(text: &str) -> Result<Placement, String> {
        match text.trim() {
            "auto" => Ok(Placement::Auto),
            "off" => Ok(Placement::Off),
            number => number.parse().map(Placement::Node).map_err(|_| "give auto, off or a NUMA node number".into()),
        }
    }
}

/// The NUMA node sysfs gives for a PCI function; None when the machine has one node (-1).
pub fn node_of(sysfs_root: &Path, bdf: &str) -> Option<u32> {
    let text = std::fs::read_to_string(sysfs_root.join("bus/pci/devices").join(bdf).join("numa_node")).ok()?;
    text.trim().parse::<i64>().ok().and_then(|n| u32::try_from(n).ok())
}

/// CPUs of a node, from `devices/system/node/nodeN/cpulist` (`0-3,8-11`).
pub fn cpus_of(sysfs_root: &Path, node: u32) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(sysfs_root.join(format!("devices/system/node/node{node}/cpulist"))).ok()?;
    parse_cpu_list(&text)
}

pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Pin the calling thread to `cpus`.
pub fn pin_thread(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only touch it.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    if pinned { Ok(()) } else { Err(format!("sched_setaffinity: {}", std::io::Error::last_os_error())) }
}

/// Pages of a buffer sampled for the check: enough to see a split placement, cheap to ask.
const SAMPLED_PAGES: usize = 64;

/// What move_pages(2) said about a buffer's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageCheck {
    pub sampled: usize,
    /// Pages on the wanted node.
    pub on_node: usize,
    /// Pages the kernel could not place (driver mappings answer -EFAULT or -ENOENT).
    pub unknown: usize,
}

/// Ask the kernel which node holds each of up to 64 pages spread over `[pointer, pointer+len)`.
pub fn check_pages(pointer: *const u8, len: usize, node: u32) -> PageCheck {
    let page = 4096usize;
    let pages = len.div_ceil(page).max(1);
    let step = pages.div_ceil(SAMPLED_PAGES).max(1);
    let mut addresses: Vec<*mut libc::c_void> = (0..pages).step_by(step).map(|i| pointer.wrapping_add(i * page) as *mut libc::c_void).collect();
    let mut status = vec![0 as libc::c_int; addresses.len()];
    // SAFETY: query mode (nodes = NULL) of our own process's pages: nothing moves.
    let rc = unsafe {
        libc::syscall(libc::SYS_move_pages, 0, addresses.len(), addresses.as_mut_ptr(), std::ptr::null::<libc::c_int>(), status.as_mut_ptr(), 0)
    };
    if rc < 0 {
        return PageCheck { sampled: status.len(), on_node: 0, unknown: status.len() };
    }
    PageCheck {
        sampled: status.len(),
        on_node: status.iter().filter(|&&s| s >= 0 && s as u32 == node).count(),
        unknown: status.iter().filter(|&&s| s < 0).count(),
    }
}

/// How the placement is described: node, CPUs, and what the kernel confirmed.
pub fn describe(node: u32, cpus: &[usize], check: PageCheck) -> String {
    let cpus = if cpus.len() > 1 { format!("CPUs {}-{}", cpus[0], cpus[cpus.len() - 1]) } else { format!("CPU {}", cpus.first().copied().unwrap_or(0)) };
    let confirmed = if check.sampled == 0 {
        "no pages to check".to_string()
    } else if check.unknown == check.sampled {
        format!("placement not verifiable: move_pages knows none of {} sampled pages (driver mapping)", check.sampled)
    } else {
        format!("move_pages: {} of {} sampled pages on node {node}", check.on_node, check.sampled - check.unknown)
    };
    format!("thread on NUMA node {node} ({cpus}); {confirmed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cpu_list("0-3,8-9\n"), Some(vec![0, 1, 2, 3, 8, 9]));
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    #[test]
    fn placement_parses() {
        assert_eq!(Placement::parse("auto"), Ok(Placement::Auto));
        assert_eq!(Placement::parse("off"), Ok(Placement::Off));
        assert_eq!(Placement::parse("1"), Ok(Placement::Node(1)));
        assert!(Placement::parse("near").is_err());
    }

    #[test]
    fn move_pages_finds_touched_memory_on_this_threads_node() {
        let Some(node) = (0..4).find(|&n| cpus_of(Path::new("/sys"), n).is_some()) else {
            eprintln!("skipped: no NUMA node in /sys/devices/system/node");
            return;
        };
        let cpus = cpus_of(Path::new("/sys"), node).unwrap();
        pin_thread(&cpus).unwrap();
        let buffer = vec![1u8; 1 << 20];
        let check = check_pages(buffer.as_ptr(), buffer.len(), node);
        assert_eq!(check.sampled, 64);
        assert_eq!(check.on_node, check.sampled, "{check:?}");
        let elsewhere = check_pages(buffer.as_ptr(), buffer.len(), node + 1);
        assert_eq!(elsewhere.on_node, 0, "{elsewhere:?}");
    }
}
