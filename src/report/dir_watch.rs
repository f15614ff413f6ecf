//! The names in one directory that changed since the last look, as the kernel reports them
//! (inotify): `serve` re-reads only those files instead of stat'ing every stored run per scrape.

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// What changed in the directory since the last call.
#[derive(Debug, PartialEq, Eq)]
pub enum Changes {
    /// These names were created, written, renamed or removed (empty: nothing changed).
    Names(HashSet<OsString>),
    /// The kernel dropped events (queue overflow) or the directory itself was removed or moved:
    /// the watch is no longer complete, and the whole directory must be read again.
    Lost,
}

/// An inotify watch on one directory.
#[derive(Debug)]
pub struct DirWatch {
    fd: OwnedFd,
}

/// Everything that can change what a name in the directory refers to or holds.
const NAME_EVENTS: u32 = libc::IN_CREATE | libc::IN_MODIFY | libc::IN_CLOSE_WRITE | libc::IN_ATTRIB | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO;
/// Events after which the watch no longer sees the directory it was asked for.
const LOST_EVENTS: u32 = libc::IN_Q_OVERFLOW | libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_UNMOUNT;
/// `struct inotify_event` without its name: wd, mask, cookie, len.
const HEADER_BYTES: usize = 16;

impl DirWatch {
    /// Watch `dir`; `None` where inotify is unavailable (a limit reached, not a directory).
    pub fn new(dir: &Path) -> Option<DirWatch> {
        let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new descriptor we own.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a valid descriptor and a NUL-terminated path.
        let added = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), NAME_EVENTS | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR) };
        (added >= 0).then_some(DirWatch { fd })
    }

    /// The changes queued since the last call; never blocks.
    pub fn changes(&mut self) -> Changes {
        let mut names = HashSet::new();
        // u32 words: the kernel's events are 4-byte aligned within the buffer.
        let mut buffer = vec![0u32; 16 * 1024];
        loop {
            let capacity = buffer.len() * 4;
            // SAFETY: the buffer is valid for `capacity` bytes of writes.
            let read = unsafe { libc::read(self.fd.as_raw_fd(), buffer.as_mut_ptr().cast(), capacity) };
            if read < 0 {
                match std::io::Error::last_os_error().kind() {
                    std::io::ErrorKind::WouldBlock => return Changes::Names(names),
                    std::io::ErrorKind::Interrupted => continue,
                    _ => return Changes::Lost,
                }
            }
            // SAFETY: `read` bytes were just written into the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read as usize) };
            if bytes.is_empty() || !add_names(bytes, &mut names) {
                return Changes::Lost;
            }
        }
    }
}

/// Add the names of the events in `bytes` to `names`; false when an event says the watch is lost.
fn add_names(mut bytes: &[u8], names: &mut HashSet<OsString>) -> bool {
    let word = |b: &[u8], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    while bytes.len() >= HEADER_BYTES {
        let (mask, name_bytes) = (word(bytes, 4), word(bytes, 12) as usize);
        let Some(name) = bytes.get(HEADER_BYTES..HEADER_BYTES + name_bytes) else { return false };
        if mask & LOST_EVENTS != 0 {
            return false;
        }
        // The name is NUL-padded to an aligned length.
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if !name.is_empty() {
            names.insert(OsString::from_vec(name.to_vec()));
        }
        bytes = &bytes[HEADER_BYTES + name_bytes..];
    }
    true
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn names(watch: &mut DirWatch) -> Vec<String> {
        let Changes::Names(names) = watch.changes() else { panic!("the watch was lost") };
        let mut names: Vec<String> = names.into_iter().map(|n| n.to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn names_each_file_written_renamed_or_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.json"), "1").unwrap();
        let Some(mut watch) = DirWatch::new(dir.path()) else {
            println!("skipped: inotify is unavailable here");
            return;
        };
        assert!(names(&mut watch).is_empty());
        std::fs::write(dir.path().join("new.json"), "2").unwrap();
        std::fs::write(dir.path().join("tmp"), "3").unwrap();
        std::fs::rename(dir.path().join("tmp"), dir.path().join("renamed.json")).unwrap();
        std::fs::remove_file(dir.path().join("old.json")).unwrap();
        assert_eq!(names(&mut watch), ["new.json", "old.json", "renamed.json", "tmp"]);
        assert!(names(&mut watch).is_empty(), "each change is reported once");
        // Rewritten in place: the directory itself does not change, the file does.
        std::fs::OpenOptions::new().append(true).open(dir.path().join("new.json")).unwrap().write_all(b"4").unwrap();
        assert_eq!(names(&mut watch), ["new.json"]);
    }

    #[test]
    fn a_removed_directory_loses_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let watched = dir.path().join("results");
        std::fs::create_dir(&watched).unwrap();
        let Some(mut watch) = DirWatch::new(&watched) else {
            println!("skipped: inotify is unavailable here");
            return;
        };
        std::fs::rename(&watched, dir.path().join("moved")).unwrap();
        assert_eq!(watch.changes(), Changes::Lost);
        assert!(DirWatch::new(&watched).is_none(), "no directory, no watch");
    }
}
