//! The write guard: the one check between any engine and a write that could destroy a user's
//! data. Every engine opens what it writes through [`devfile::open_node`] (or asks
//! [`WriteGuard::allows`] before mapping), and both come here, so no engine can write to a block
//! device, a regular file or a mapping of one unless the user consented (`--destructive`, or a
//! scratch file pcieperf made itself with `--scratch`).
//!
//! What counts as the user's data: a block device, or a regular file anywhere but in sysfs (the
//! kernel's BAR `resourceN` files are device registers, not data) or in the sysfs tree the user
//! named with `--sysfs-root` (a stand-in tree, which tests build). Symbolic links are followed:
//! a link to a loop device is a block device. Character devices, FIFOs and sockets are driver or
//! stream interfaces and are written without consent, as their drivers intend.
//!
//! [`devfile::open_node`]: super::devfile::open_node

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::EngineError;

/// statfs(2) f_type of sysfs.
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// The user's consent to destructive writes, and where device stand-ins may live.
#[derive(Debug, Clone, Default)]
pub struct WriteGuard {
    /// `--destructive` was given, or the target is a scratch file pcieperf created.
    pub consent: bool,
    /// A sysfs tree named by the user (`--sysfs-root`): its regular files stand in for device
    /// registers, as the kernel's sysfs files do.
    pub device_tree: Option<PathBuf>,
}

impl WriteGuard {
    /// No consent: only nodes that hold no user data may be written.
    pub const REFUSING: WriteGuard = WriteGuard { consent: false, device_tree: None };

    /// Ok when writing `path` destroys nothing or the user consented; else the refusal naming
    /// `--destructive`. A path that cannot be examined is left to the open that follows.
    pub fn check(&self, path: &Path) -> Result<(), EngineError> {
        match user_data(path, self.device_tree.as_deref()) {
            Some(what) if !self.consent => Err(refusal(path, what)),
            _ => Ok(()),
        }
    }

    /// [`check`](Self::check) as a yes or no, for engines that fall back to read-only.
    pub fn allows(&self, path: &Path) -> bool {
        self.check(path).is_ok()
    }
}

/// What `path` is when writing it would destroy a user's data ("a block device", "a regular
/// file"); None for device interfaces, streams and paths that do not exist.
pub fn user_data(path: &Path, device_tree: Option<&Path>) -> Option<&'static str> {
    let kind = std::fs::metadata(path).ok()?.file_type();
    if kind.is_block_device() {
        return Some("a block device");
    }
    if !kind.is_file() || on_sysfs(path) || inside(path, device_tree) {
        return None;
    }
    Some("a regular file")
}

fn on_sysfs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: statfs fills a zeroed struct from a valid NUL-terminated path.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut stat) == 0 && stat.f_type as i64 == SYSFS_MAGIC }
}

/// True when `path`, links resolved, lies inside `tree` (links resolved too).
fn inside(path: &Path, tree: Option<&Path>) -> bool {
    let (Some(tree), Ok(real)) = (tree, std::fs::canonicalize(path)) else { return false };
    std::fs::canonicalize(tree).is_ok_and(|tree| real.starts_with(tree))
}

/// The message for a refused write.
pub fn refusal(path: &Path, what: &str) -> EngineError {
    EngineError::Unsupported(format!(
        "refusing to write to {} ({what}): writes destroy its data; pass --destructive to allow h2d (device reads \
         host memory) and register writes on it, or --scratch DIR to measure a scratch file pcieperf creates and removes",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_need_consent_and_streams_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, b"precious").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for path in [&file, &link] {
            let err = WriteGuard::REFUSING.check(path).unwrap_err().to_string();
            assert!(err.contains("--destructive") && err.contains("a regular file"), "{err}");
            assert!(WriteGuard { consent: true, device_tree: None }.allows(path));
        }
        assert!(WriteGuard::REFUSING.allows(Path::new("/dev/null")), "a character device is a driver interface");
        assert!(WriteGuard::REFUSING.allows(&dir.path().join("missing")));
        let tree = WriteGuard { consent: false, device_tree: Some(dir.path().to_path_buf()) };
        assert!(tree.allows(&file), "a stand-in sysfs tree's files are device registers");
        let outside = tempfile::NamedTempFile::new_in(std::env::current_dir().unwrap()).unwrap();
        assert!(!tree.allows(outside.path()));
    }

    #[test]
    fn block_devices_are_user_data_wherever_they_are() {
        let Some(block) = std::fs::read_dir("/dev").into_iter().flatten().flatten().map(|e| e.path()).find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
        }) else {
            eprintln!("skipped: no block device node in /dev");
            return;
        };
        assert_eq!(user_data(&block, Some(Path::new("/dev"))), Some("a block device"));
    }

    #[test]
    fn sysfs_files_are_device_interfaces() {
        let path = Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
        if !path.exists() {
            eprintln!("skipped: {} not present", path.display());
            return;
        }
        assert_eq!(user_data(path, None), None);
    }
}
