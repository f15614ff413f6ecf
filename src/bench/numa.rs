//! Where a run's measuring thread and DMA buffers sit relative to the device on a machine with
//! several NUMA nodes: a DMA to memory on another node crosses the inter-socket link, and a
//! measuring thread on another node adds that crossing to every completion it waits for.
//!
//! The run is placed as `--numa` asks (`engine::numa`: the thread pinned, the buffers bound),
//! and the placement is read back, not assumed: the thread's node from `getcpu`, the buffers'
//! from `move_pages` on pages sampled across every DMA buffer of every point.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::engine::numa::{self, PageTally, Request, Resolution, Target};
use crate::error::InvalidInput;

/// The run's placement: what was asked, what was done and what the kernel says it got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaPlacement {
    /// `--numa` as given: `auto`, `off` or a node number.
    #[serde(default)]
    pub requested: String,
    /// The node the thread was pinned to and the buffers bound to; None when nothing was placed.
    #[serde(default)]
    pub node: Option<u32>,
    /// That node's CPUs, as sysfs lists them (`0-3,8-11`).
    #[serde(default)]
    pub cpus: Option<String>,
    /// Why nothing was placed (`off`, not applicable), or what failed while placing.
    #[serde(default)]
    pub note: Option<String>,
    /// Whether the thread and every sampled buffer page were on `node`; None when nothing was
    /// placed or no page could be located.
    #[serde(default)]
    pub held: Option<bool>,
    /// The device's `numa_node`; None for an engine without a device, or one the kernel gives
    /// no node (`-1`).
    #[serde(default)]
    pub device_node: Option<u32>,
    /// The node of the CPU the measuring thread ran on at the end of the run.
    pub thread_node: Option<u32>,
    /// The nodes the sampled buffer pages were found on.
    #[serde(default)]
    pub buffer_nodes: Vec<u32>,
    /// Sampled pages per node, over every DMA buffer of every point.
    #[serde(default)]
    pub buffer_pages: PageTally,
    /// The firmware's (SLIT) distance from the device's node to itself (10 by convention) and to
    /// the farthest node the run used, from `/sys/devices/system/node/nodeN/distance`.
    pub local_distance: Option<u32>,
    pub remote_distance: Option<u32>,
}

impl NumaPlacement {
    /// The node the run used that is not the device's, preferring the buffers' (the DMA's own
    /// path) over the thread's.
    pub fn remote_node(&self) -> Option<u32> {
        let device = self.device_node?;
        self.buffer_nodes.iter().copied().chain(self.thread_node).find(|&n| n != device)
    }

    /// The one-line account the text report shows.
    pub fn describe(&self) -> String {
        let asked = format!("--numa {}", self.requested);
        let placed = match (self.node, &self.note) {
            (Some(node), _) => {
                let held = match self.held {
                    Some(true) => "held".to_string(),
                    Some(false) => "NOT held".to_string(),
                    None => "not verifiable".to_string(),
                };
                let note = self.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
                format!("placed on node {node} (CPUs {}): {held}{note}", self.cpus.as_deref().unwrap_or("?"))
            }
            (None, Some(why)) => format!("placement {why}"),
            (None, None) => "not placed".to_string(),
        };
        let device = self.device_node.map_or(String::new(), |n| format!("device on node {n}, "));
        let thread = self.thread_node.map_or("?".to_string(), |n| n.to_string());
        let distance = self.remote_distance.map_or(String::new(), |d| format!(", distance to it {d}"));
        format!("{asked}: {placed}; {device}measuring thread on node {thread}, buffers on {}{distance}", self.buffer_pages.describe())
    }
}

/// The placement being applied to a run: resolved and done before its first buffer, checked
/// after each point.
#[derive(Debug)]
pub struct Placer {
    request: Request,
    target: Option<Target>,
    note: Option<String>,
    device_node: Option<u32>,
    pages: PageTally,
}

impl Placer {
    /// Resolve `request` for the device at `pci_address` (None: an engine without a device) and
    /// pin the calling thread. A node that does not exist is bad input; a pin that fails is
    /// reported, not fatal.
    pub fn start(request: Request, sys_root: &Path, pci_address: Option<&str>, engine: &str) -> Result<Placer, InvalidInput> {
        let device_node = pci_address.and_then(|a| numa::node_of(sys_root, a));
        let mut placer = Placer { request, target: None, note: None, device_node, pages: PageTally::default() };
        let resolution = match (request, pci_address) {
            (Request::Auto, None) => Resolution::Skip(format!("not applicable: the {engine} engine has no PCI device")),
            (_, address) => numa::resolve(request, sys_root, device_node, address.unwrap_or(engine))?,
        };
        match resolution {
            Resolution::Skip(why) => placer.note = Some(why),
            Resolution::Place(target) => {
                placer.note = numa::pin_thread(&target.cpus).err().map(|why| format!("thread not pinned: {why}"));
                placer.target = Some(target);
            }
        }
        Ok(placer)
    }

    /// The node new buffers are bound to.
    pub fn node(&self) -> Option<u32> {
        self.target.as_ref().map(|t| t.node)
    }

    /// A buffer could not be bound: said in the report.
    pub fn bind_failed(&mut self, why: String) {
        self.note.get_or_insert(format!("buffer not bound: {why}"));
    }

    /// Locate sampled pages of a buffer the run moved data through.
    pub fn check(&mut self, pointer: *const u8, len: usize) {
        self.pages.add(pointer, len);
    }

    /// The placement as recorded, with the thread's node now and the distances from the
    /// device's node.
    pub fn finish(self, sys_root: &Path) -> NumaPlacement {
        let thread_node = numa::thread_node();
        let node = self.node();
        let known = self.pages.sampled() > self.pages.unknown;
        let held = node.filter(|_| known).map(|n| thread_node == Some(n) && self.pages.all_on(n));
        let mut placement = NumaPlacement {
            requested: self.request.name(),
            node,
            cpus: self.target.as_ref().map(|t| numa::format_cpu_list(&t.cpus)),
            note: self.note,
            held,
            device_node: self.device_node,
            thread_node,
            buffer_nodes: self.pages.by_node.keys().copied().collect(),
            buffer_pages: self.pages,
            local_distance: None,
            remote_distance: None,
        };
        if let Some(device) = placement.device_node {
            placement.local_distance = distance(sys_root, device, device);
            placement.remote_distance = placement.remote_node().and_then(|n| distance(sys_root, device, n));
        }
        placement
    }
}

/// The node of the CPU this thread runs on now.
pub fn thread_node() -> Option<u32> {
    numa::thread_node()
}

/// Distance from node `from` to node `to` in the firmware's table.
pub fn distance(sys_root: &Path, from: u32, to: u32) -> Option<u32> {
    let text = std::fs::read_to_string(sys_root.join(format!("devices/system/node/node{from}/distance"))).ok()?;
    text.split_whitespace().nth(to as usize)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_on_node(root: &Path, node: &str) {
        let device = root.join("bus/pci/devices/0000:41:00.0");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("numa_node"), node).unwrap();
    }

    #[test]
    fn the_distance_to_the_remote_node_is_read_from_the_devices_node() {
        let root = tempfile::tempdir().unwrap();
        device_on_node(root.path(), "1\n");
        std::fs::create_dir_all(root.path().join("devices/system/node/node1")).unwrap();
        std::fs::write(root.path().join("devices/system/node/node1/distance"), "21 10\n").unwrap();
        // Node 1 has no CPU list here: auto cannot place, and says so.
        let placer = Placer::start(Request::Auto, root.path(), Some("0000:41:00.0"), "x").unwrap();
        let mut p = placer.finish(root.path());
        assert_eq!((p.device_node, p.node, p.held), (Some(1), None, None));
        assert!(p.note.as_deref().unwrap().contains("node 1, which has no CPUs"), "{p:?}");
        p.buffer_nodes = vec![0];
        assert_eq!(p.remote_node(), Some(0));
        p.buffer_nodes = vec![1];
        p.thread_node = Some(1);
        assert_eq!(p.remote_node(), None);
        p.device_node = None;
        p.buffer_nodes = vec![0];
        assert_eq!(p.remote_node(), None, "no device node: nothing is remote");
    }

    #[test]
    fn an_engine_without_a_device_says_placement_is_not_applicable() {
        let placer = Placer::start(Request::Auto, Path::new("/sys"), None, "sim").unwrap();
        assert_eq!(placer.node(), None);
        let p = placer.finish(Path::new("/sys"));
        assert_eq!((p.requested.as_str(), p.held), ("auto", None));
        assert!(p.describe().starts_with("--numa auto: placement not applicable: the sim engine has no PCI device; measuring thread on node"), "{}", p.describe());
    }

    /// A node that is in the (fake) sysfs but not in the kernel: the thread is pinned (to a CPU
    /// that exists), the bind fails, the pages stay where they were, and the check says so.
    #[test]
    fn a_placement_the_kernel_did_not_give_is_reported_not_held() {
        let Some(_) = numa::thread_node() else {
            println!("skipped: this kernel does not say which node a thread runs on");
            return;
        };
        let root = tempfile::tempdir().unwrap();
        device_on_node(root.path(), "1\n");
        let node = root.path().join("devices/system/node/node1");
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("cpulist"), "0\n").unwrap();
        let beyond = (1..64).find(|n| !Path::new(&format!("/sys/devices/system/node/node{n}")).exists()).unwrap();
        std::fs::rename(&node, root.path().join(format!("devices/system/node/node{beyond}"))).unwrap();
        std::fs::write(root.path().join("bus/pci/devices/0000:41:00.0/numa_node"), format!("{beyond}\n")).unwrap();
        let mut placer = Placer::start(Request::Auto, root.path(), Some("0000:41:00.0"), "x").unwrap();
        assert_eq!(placer.node(), Some(beyond));
        let buffer = crate::engine::AlignedBuf::on_node(1 << 16, placer.node()).unwrap_or_else(|why| {
            placer.bind_failed(why);
            crate::engine::AlignedBuf::new(1 << 16)
        });
        placer.check(buffer.as_ptr(), buffer.len());
        let p = placer.finish(root.path());
        assert_eq!(p.held, Some(false), "{p:?}");
        assert!(!p.buffer_nodes.contains(&beyond), "{p:?}");
        assert!(p.describe().contains(&format!("placed on node {beyond} (CPUs 0): NOT held")), "{}", p.describe());
    }
}
