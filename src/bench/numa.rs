//! Where the measuring thread and the host buffers sit relative to the device, on a machine
//! with several NUMA nodes: a DMA to memory on another node crosses the inter-socket link, and
//! a measuring thread on another node adds that crossing to every completion it waits for.
//! Placement is read, not assumed: the thread's node from `getcpu`, a buffer's from
//! `move_pages` (which, given no target nodes, only reports where each page is).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The run's placement; recorded only when the kernel gives the device a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaPlacement {
    /// The device's `numa_node`.
    pub device_node: u32,
    /// The node of the CPU the measuring thread ran on when the run started.
    pub thread_node: Option<u32>,
    /// The node of the first page of the run's first DMA buffer, after it was used.
    pub buffer_node: Option<u32>,
    /// The firmware's (SLIT) distance from the device's node to itself (10 by convention) and to
    /// the farthest node the run used, from `/sys/devices/system/node/nodeN/distance`.
    pub local_distance: Option<u32>,
    pub remote_distance: Option<u32>,
}

impl NumaPlacement {
    /// The node the run used that is not the device's, preferring the buffers' (the DMA's own
    /// path) over the thread's.
    pub fn remote_node(&self) -> Option<u32> {
        [self.buffer_node, self.thread_node].into_iter().flatten().find(|&n| n != self.device_node)
    }
}

/// The device's node, `None` where the kernel gives none (`-1`: one node, or firmware that
/// does not say).
pub fn device_node(sys_root: &Path, bdf: &str) -> Option<u32> {
    let text = std::fs::read_to_string(sys_root.join("bus/pci/devices").join(bdf).join("numa_node")).ok()?;
    text.trim().parse::<i64>().ok().and_then(|n| u32::try_from(n).ok())
}

/// The node of the CPU this thread runs on now.
pub fn thread_node() -> Option<u32> {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two unsigned ints through the pointers given; the third argument is unused.
    let rc = unsafe { libc::syscall(libc::SYS_getcpu, &mut cpu as *mut u32, &mut node as *mut u32, std::ptr::null_mut::<libc::c_void>()) };
    (rc == 0).then_some(node)
}

/// The node of the page holding `address`; `None` for a page never touched (no node yet) or a
/// kernel without `move_pages`.
pub fn page_node(address: *const u8) -> Option<u32> {
    let mut page = address as *mut libc::c_void;
    let mut status: libc::c_int = -1;
    // SAFETY: with a null node list, move_pages moves nothing: it writes one status for the one
    // page pointer given.
    let rc = unsafe {
        libc::syscall(libc::SYS_move_pages, 0, 1usize, &mut page as *mut *mut libc::c_void, std::ptr::null::<libc::c_int>(), &mut status as *mut libc::c_int, 0)
    };
    (rc == 0).then_some(status).and_then(|s| u32::try_from(s).ok())
}

/// Distance from node `from` to node `to` in the firmware's table.
pub fn distance(sys_root: &Path, from: u32, to: u32) -> Option<u32> {
    let text = std::fs::read_to_string(sys_root.join(format!("devices/system/node/node{from}/distance"))).ok()?;
    text.split_whitespace().nth(to as usize)?.parse().ok()
}

/// The placement of a run on `bdf` whose thread and buffers were on the nodes given; `None`
/// when the device has no node.
pub fn placement(sys_root: &Path, bdf: &str, thread_node: Option<u32>, buffer_node: Option<u32>) -> Option<NumaPlacement> {
    let device_node = device_node(sys_root, bdf)?;
    let mut placement = NumaPlacement { device_node, thread_node, buffer_node, local_distance: None, remote_distance: None };
    placement.local_distance = distance(sys_root, device_node, device_node);
    placement.remote_distance = placement.remote_node().and_then(|n| distance(sys_root, device_node, n));
    Some(placement)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_reads_the_devices_node_and_the_distance_to_the_remote_one() {
        let root = tempfile::tempdir().unwrap();
        let device = root.path().join("bus/pci/devices/0000:41:00.0");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("numa_node"), "1\n").unwrap();
        std::fs::create_dir_all(root.path().join("devices/system/node/node1")).unwrap();
        std::fs::write(root.path().join("devices/system/node/node1/distance"), "21 10\n").unwrap();
        let p = placement(root.path(), "0000:41:00.0", Some(0), Some(1)).unwrap();
        assert_eq!((p.device_node, p.remote_node(), p.local_distance, p.remote_distance), (1, Some(0), Some(10), Some(21)));
        let local = placement(root.path(), "0000:41:00.0", Some(1), Some(1)).unwrap();
        assert_eq!((local.remote_node(), local.remote_distance), (None, None));
        std::fs::write(device.join("numa_node"), "-1\n").unwrap();
        assert_eq!(placement(root.path(), "0000:41:00.0", Some(0), None), None, "no node: nothing to compare");
    }

    #[test]
    fn a_touched_page_and_this_thread_have_a_node() {
        let buffer = vec![1u8; 4096];
        match (page_node(buffer.as_ptr()), thread_node()) {
            (Some(_), Some(_)) => {}
            other => println!("skipped: this kernel reports no node ({other:?}; move_pages or getcpu unavailable)"),
        }
    }
}
