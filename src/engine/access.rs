//! Whether the current user can reach a device node, checked without moving data: what engine
//! detection says about each candidate.

use std::path::{Path, PathBuf};

/// Whether the current user has `mode` access to every node, and a phrase saying so.
pub fn access_summary(nodes: &[PathBuf], mode: i32) -> (bool, String) {
    for node in nodes {
        // SAFETY: access() reads a NUL-terminated path.
        let ok = unsafe { libc::access(super::devfile::c_path(node).as_ptr(), mode) } == 0;
        if !ok {
            let why = if node.exists() { "no permission (run as root or join the node's group)" } else { "missing" };
            return (false, format!("{}: {why}", node.display()));
        }
    }
    (true, "accessible".into())
}

/// Whether a block device really opens read-only: permission bits are not the whole story
/// (a container's device cgroup refuses even root). Opening for reading moves no data.
pub fn opens_for_reading(node: &Path) -> (bool, String) {
    match super::devfile::open_node(node, super::devfile::Access::Read, libc::O_NONBLOCK, "", &super::guard::WriteGuard::REFUSING) {
        Ok(_) => (true, "accessible".into()),
        Err(error) => (false, error.to_string()),
    }
}

