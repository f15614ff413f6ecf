//! NUMA placement of a run (`--numa auto|off|N`): the node a request means, its CPUs, the
//! measuring thread pinned to them, DMA buffers bound to the node before their first touch
//! (`mbind`), and the placement checked page by page with `move_pages(2)` in query mode rather
//! than assumed. nvbandwidth places a GPU's buffers and thread on its node by default; fio's
//! `--numa_cpu_nodes` and `--numa_mem_policy` are the same two halves.
//!
//! The thread is pinned before any buffer is allocated: memory a driver allocates (CUDA's
//! pinned memory) cannot be bound beforehand and lands on the node of the CPU that first
//! touches it, so pinning is what places it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// Where the run should go: the device's node, nowhere in particular, or a node given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Request {
    #[default]
    Auto,
    Off,
    Node(u32),
}

impl Request {
    pub fn parse(text: &str) -> Result<Request, String> {
        match text.trim() {
            "auto" => Ok(Request::Auto),
            "off" => Ok(Request::Off),
            number => number.parse().map(Request::Node).map_err(|_| "give auto, off or a NUMA node number".into()),
        }
    }

    /// As the user writes it: `auto`, `off`, `1`.
    pub fn name(self) -> String {
        match self {
            Request::Auto => "auto".into(),
            Request::Off => "off".into(),
            Request::Node(n) => n.to_string(),
        }
    }
}

/// A node to place on and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub node: u32,
    pub cpus: Vec<usize>,
}

/// What a request means on this machine for this device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Place(Target),
    /// Nothing is placed, and why (`--numa off`, a device without a node, …).
    Skip(String),
}

/// Resolve `request` for a device on `device_node` (None: the engine has no device, or the
/// kernel gives it no node). A node given that sysfs does not list with CPUs is bad input; a
/// device's own node without CPUs (a memory-only node) is a reason not to place.
pub fn resolve(request: Request, sysfs_root: &Path, device_node: Option<u32>, device: &str) -> Result<Resolution, InvalidInput> {
    let node = match (request, device_node) {
        (Request::Off, _) => return Ok(Resolution::Skip("off (--numa off)".into())),
        (Request::Node(n), _) => {
            return match cpus_of(sysfs_root, n) {
                Some(cpus) => Ok(Resolution::Place(Target { node: n, cpus })),
                None => Err(InvalidInput::new(format!("--numa {n}: no NUMA node {n} with CPUs on this machine (nodes with CPUs: {})", nodes_with_cpus(sysfs_root)))),
            }
        }
        (Request::Auto, None) => return Ok(Resolution::Skip(format!("not applicable: {device} has no NUMA node in sysfs"))),
        (Request::Auto, Some(n)) => n,
    };
    Ok(match cpus_of(sysfs_root, node) {
        Some(cpus) => Resolution::Place(Target { node, cpus }),
        None => Resolution::Skip(format!("not placed: {device} is on node {node}, which has no CPUs listed in sysfs")),
    })
}

/// The NUMA node sysfs gives for a PCI function; None when the kernel gives none (-1).
pub fn node_of(sysfs_root: &Path, bdf: &str) -> Option<u32> {
    let text = std::fs::read_to_string(sysfs_root.join("bus/pci/devices").join(bdf).join("numa_node")).ok()?;
    text.trim().parse::<i64>().ok().and_then(|n| u32::try_from(n).ok())
}

/// CPUs of a node, from `devices/system/node/nodeN/cpulist` (`0-3,8-11`).
pub fn cpus_of(sysfs_root: &Path, node: u32) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(sysfs_root.join(format!("devices/system/node/node{node}/cpulist"))).ok()?;
    parse_cpu_list(&text)
}

/// The nodes sysfs lists with CPUs, for a message: `0, 1` or `none`.
fn nodes_with_cpus(sysfs_root: &Path) -> String {
    let mut nodes: Vec<u32> = std::fs::read_dir(sysfs_root.join("devices/system/node"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .filter(|&n| cpus_of(sysfs_root, n).is_some())
        .collect();
    nodes.sort_unstable();
    if nodes.is_empty() { "none".into() } else { nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ") }
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

/// A CPU list as sysfs writes it: `0-3,8`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(if cpus[i] == start { start.to_string() } else { format!("{start}-{}", cpus[i]) });
        i += 1;
    }
    parts.join(",")
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

/// The node of the CPU this thread runs on now.
pub fn thread_node() -> Option<u32> {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two unsigned ints through the pointers given; the third argument is unused.
    let rc = unsafe { libc::syscall(libc::SYS_getcpu, &mut cpu as *mut u32, &mut node as *mut u32, std::ptr::null_mut::<libc::c_void>()) };
    (rc == 0).then_some(node)
}

/// `MPOL_PREFERRED` (linux/mempolicy.h): pages come from the node while it has memory, else
/// from another — a full node slows nothing down and fails nothing, and the page check says
/// the placement did not hold.
const MPOL_PREFERRED: libc::c_int = 1;
/// Nodes a mask covers (libnuma's default maximum).
const MASK_WORDS: usize = 16;

/// Set the memory policy of the page-aligned range `[pointer, pointer + len)` to prefer `node`;
/// pages already touched stay where they are, so call it before the first touch.
pub fn bind(pointer: *mut u8, len: usize, node: u32) -> Result<(), String> {
    let node = node as usize;
    if node >= MASK_WORDS * 64 {
        return Err(format!("node {node} is beyond the {} nodes a mask holds", MASK_WORDS * 64));
    }
    let mut mask = [0 as libc::c_ulong; MASK_WORDS];
    mask[node / 64] |= 1 << (node % 64);
    // The kernel reads maxnode - 1 bits (as libnuma passes it: the mask's size + 1).
    let max_node = (MASK_WORDS * 64 + 1) as libc::c_ulong;
    // SAFETY: a policy change on our own mapping; no memory is read or written.
    let rc = unsafe { libc::syscall(libc::SYS_mbind, pointer.cast::<libc::c_void>(), len as libc::c_ulong, MPOL_PREFERRED, mask.as_ptr(), max_node, 0 as libc::c_uint) };
    if rc == 0 { Ok(()) } else { Err(format!("mbind: {}", std::io::Error::last_os_error())) }
}

/// Pages of a buffer sampled for the check: enough to see a split placement, cheap to ask.
const SAMPLED_PAGES: usize = 64;

/// Where move_pages(2) found a run's sampled buffer pages.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PageTally {
    /// Sampled pages per node.
    pub by_node: BTreeMap<u32, usize>,
    /// Pages the kernel could not place (not faulted in yet, or a driver's mapping: -EFAULT, -ENOENT).
    pub unknown: usize,
    /// Buffers sampled.
    pub buffers: usize,
}

impl PageTally {
    pub fn sampled(&self) -> usize {
        self.by_node.values().sum::<usize>() + self.unknown
    }

    /// Every page the kernel could place is on `node` (and there was one).
    pub fn all_on(&self, node: u32) -> bool {
        self.by_node.len() == 1 && self.by_node.contains_key(&node)
    }

    /// Ask the kernel which node holds each of up to 64 pages spread over `[pointer, pointer+len)`.
    pub fn add(&mut self, pointer: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        let page = crate::engine::devfile::PAGE_BYTES;
        let first = pointer as usize / page * page;
        let pages = (pointer as usize + len - first).div_ceil(page);
        let step = pages.div_ceil(SAMPLED_PAGES).max(1);
        let mut addresses: Vec<*mut libc::c_void> = (0..pages).step_by(step).map(|i| (first + i * page) as *mut libc::c_void).collect();
        let mut status = vec![0 as libc::c_int; addresses.len()];
        // SAFETY: query mode (nodes = NULL) of our own process's pages: nothing moves.
        let rc = unsafe {
            libc::syscall(libc::SYS_move_pages, 0, addresses.len(), addresses.as_mut_ptr(), std::ptr::null::<libc::c_int>(), status.as_mut_ptr(), 0)
        };
        self.buffers += 1;
        if rc < 0 {
            self.unknown += status.len();
            return;
        }
        for s in status {
            match u32::try_from(s) {
                Ok(node) => *self.by_node.entry(node).or_default() += 1,
                Err(_) => self.unknown += 1,
            }
        }
    }

    /// `node 0 (128 of 128 sampled pages)` or `node 0 (96), node 1 (32) of 128 sampled pages`.
    pub fn describe(&self) -> String {
        let known = self.sampled() - self.unknown;
        let unknown = if self.unknown > 0 { format!(", {} not placed (not faulted in, or a driver's mapping)", self.unknown) } else { String::new() };
        match self.by_node.len() {
            0 => format!("unknown ({} sampled pages: move_pages placed none)", self.sampled()),
            1 => format!("node {} ({known} of {known} sampled pages in {} buffer(s){unknown})", self.by_node.keys().next().expect("one"), self.buffers),
            _ => format!(
                "{} of {known} sampled pages in {} buffer(s){unknown}",
                self.by_node.iter().map(|(n, c)| format!("node {n} ({c})")).collect::<Vec<_>>().join(", "),
                self.buffers
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_as_sysfs_writes_them() {
        assert_eq!(parse_cpu_list("0-3,8-9\n"), Some(vec![0, 1, 2, 3, 8, 9]));
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a-b"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }

    #[test]
    fn requests_parse() {
        assert_eq!(Request::parse("auto"), Ok(Request::Auto));
        assert_eq!(Request::parse("off"), Ok(Request::Off));
        assert_eq!(Request::parse("1"), Ok(Request::Node(1)));
        assert!(Request::parse("near").is_err());
        assert_eq!(Request::Node(3).name(), "3");
    }

    /// Two nodes with CPUs and a memory-only third, as on a dual-socket machine with CXL memory.
    fn two_nodes() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (node, cpus) in [(0, Some("0-3,8-11\n")), (1, Some("4-7,12-15\n")), (2, None)] {
            let dir = root.path().join(format!("devices/system/node/node{node}"));
            std::fs::create_dir_all(&dir).unwrap();
            if let Some(cpus) = cpus {
                std::fs::write(dir.join("cpulist"), cpus).unwrap();
            }
        }
        root
    }

    #[test]
    fn a_request_resolves_to_a_node_and_its_cpus() {
        let root = two_nodes();
        let sys = root.path();
        let place = |node, cpus: &[usize]| Resolution::Place(Target { node, cpus: cpus.to_vec() });
        assert_eq!(resolve(Request::Auto, sys, Some(1), "0000:41:00.0").unwrap(), place(1, &[4, 5, 6, 7, 12, 13, 14, 15]));
        assert_eq!(resolve(Request::Node(0), sys, Some(1), "0000:41:00.0").unwrap(), place(0, &[0, 1, 2, 3, 8, 9, 10, 11]));
        assert_eq!(resolve(Request::Node(1), sys, None, "sim").unwrap(), place(1, &[4, 5, 6, 7, 12, 13, 14, 15]), "a node given is placed on for any engine");
        assert!(matches!(resolve(Request::Off, sys, Some(1), "x").unwrap(), Resolution::Skip(why) if why.contains("off")));
        assert!(matches!(resolve(Request::Auto, sys, None, "sim").unwrap(), Resolution::Skip(why) if why.starts_with("not applicable: sim has no NUMA node")));
        assert!(matches!(resolve(Request::Auto, sys, Some(2), "0000:41:00.0").unwrap(), Resolution::Skip(why) if why.contains("node 2, which has no CPUs")));
        let bad = resolve(Request::Node(2), sys, Some(1), "x").unwrap_err().to_string();
        assert_eq!(bad, "--numa 2: no NUMA node 2 with CPUs on this machine (nodes with CPUs: 0, 1)");
        assert!(resolve(Request::Node(9), sys, None, "x").is_err());
    }

    /// This machine's first node with CPUs, or None (then the caller skips).
    fn a_real_node() -> Option<Target> {
        (0..8).find_map(|node| cpus_of(Path::new("/sys"), node).map(|cpus| Target { node, cpus }))
    }

    #[test]
    fn pages_bound_before_the_first_touch_are_found_on_the_node() {
        let Some(target) = a_real_node() else {
            println!("skipped: no NUMA node with CPUs in /sys/devices/system/node");
            return;
        };
        pin_thread(&target.cpus).unwrap();
        assert_eq!(thread_node(), Some(target.node));
        let buffer = crate::engine::AlignedBuf::on_node(1 << 20, Some(target.node)).unwrap();
        let mut tally = PageTally::default();
        tally.add(buffer.as_ptr(), buffer.len());
        assert_eq!(tally.sampled(), 64);
        assert!(tally.all_on(target.node), "{tally:?}");
        assert!(!tally.all_on(target.node + 1), "{tally:?}");
        assert!(tally.describe().starts_with(&format!("node {} (64 of 64 sampled pages in 1 buffer(s))", target.node)), "{}", tally.describe());
    }

    #[test]
    fn pages_never_touched_are_counted_unknown() {
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), 1 << 16, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(ptr, libc::MAP_FAILED);
        let mut tally = PageTally::default();
        tally.add(ptr.cast(), 1 << 16);
        // SAFETY: our mapping.
        unsafe { libc::munmap(ptr, 1 << 16) };
        assert_eq!((tally.sampled(), tally.unknown, tally.by_node.len()), (16, 16, 0), "{tally:?}");
        assert!(!tally.all_on(0));
    }
}
