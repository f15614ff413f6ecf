//! Bounded input: read a file or standard input with a size limit that fits its format, so
//! `inspect -F /dev/zero` ends at once with a message instead of eating the machine's memory;
//! or stream it ([`stream`]) to a parser that bounds memory by what it keeps (results
//! documents: `report/saved.rs`).
//!
//! Only regular files and standard input (`-`) are read: a device node or a FIFO given as a file
//! is refused. Standard input may be a pipe; one that stays silent for [`SILENT_PIPE`] ends the
//! read with a message (a signal ends it at once). A leaf module: the `pci` and `report` layers
//! both read through it.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::InvalidInput;

/// How long standard input may stay silent before the read gives up.
pub const SILENT_PIPE: Duration = Duration::from_secs(10);

/// The largest input a format allows, with its name for the message.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub bytes: u64,
    /// What the input is, e.g. "results document".
    pub what: &'static str,
}

/// `lspci -xxxx` dumps: 4 KiB of config space (about 13 KB of hex) per function.
pub const DUMP: Limit = Limit { bytes: 64 << 20, what: "dump" };
/// pci.ids: about 1.5 MB today.
pub const PCI_IDS: Limit = Limit { bytes: 64 << 20, what: "pci.ids file" };

/// Read `path` (`-`: standard input) as UTF-8 text of at most `limit` bytes.
pub fn read_to_string(path: &Path, limit: Limit) -> Result<String, InvalidInput> {
    read_to_string_waiting(path, limit, SILENT_PIPE)
}

/// Read `path` (`-`: standard input) as bytes, at most `limit` of them.
pub fn read(path: &Path, limit: Limit) -> Result<Vec<u8>, InvalidInput> {
    if path == Path::new("-") {
        read_stdin(limit, SILENT_PIPE)
    } else {
        read_file(path, limit)
    }
}

/// [`read_to_string`] with the silent-pipe timeout given (tests).
pub fn read_to_string_waiting(path: &Path, limit: Limit, silent: Duration) -> Result<String, InvalidInput> {
    let bytes = if path == Path::new("-") { read_stdin(limit, silent)? } else { read_file(path, limit)? };
    into_text(path, bytes)
}

/// The bytes read from `path` as UTF-8 text, without a copy; the message names the input.
pub fn into_text(path: &Path, bytes: Vec<u8>) -> Result<String, InvalidInput> {
    let shown = if path == Path::new("-") { "standard input".to_string() } else { path.display().to_string() };
    String::from_utf8(bytes).map_err(|e| InvalidInput::new(format!("{shown}: not UTF-8 text (byte {})", e.utf8_error().valid_up_to())))
}

fn too_large(shown: &str, limit: Limit) -> InvalidInput {
    InvalidInput::new(format!(
        "{shown}: larger than the {} limit of a {} ({} bytes); is it the right file?",
        crate::units::format_size(limit.bytes),
        limit.what,
        limit.bytes
    ))
}

/// Refuse, without reading it, a path that is not a regular file within `limit`.
pub fn check_file(path: &Path, limit: Limit) -> Result<(), InvalidInput> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| InvalidInput::new(format!("cannot read {} {shown}: {e}", limit.what)))?;
    if !meta.is_file() {
        return Err(InvalidInput::new(format!(
            "{shown} is not a regular file ({}): give a file, or - for standard input",
            kind_name(&meta.file_type())
        )));
    }
    if meta.len() > limit.bytes {
        return Err(too_large(&shown, limit));
    }
    Ok(())
}

fn read_file(path: &Path, limit: Limit) -> Result<Vec<u8>, InvalidInput> {
    check_file(path, limit)?;
    let shown = path.display().to_string();
    let cannot = |e: std::io::Error| InvalidInput::new(format!("cannot read {} {shown}: {e}", limit.what));
    let file = std::fs::File::open(path).map_err(cannot)?;
    // Sized once from the file's length: growing by doubling could reserve twice the limit.
    let expected = file.metadata().map_or(0, |m| m.len().min(limit.bytes)) as usize;
    let mut bytes = Vec::with_capacity(expected + 1);
    // A file may grow while being read: the limit holds for what is read, not only for its size.
    file.take(limit.bytes + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(too_large(&shown, limit));
    }
    Ok(bytes)
}

/// Standard input in pieces, each waited for with poll() in short slices: a pipe that stays
/// silent for `silent`, or a signal, ends the read.
fn read_stdin(limit: Limit, silent: Duration) -> Result<Vec<u8>, InvalidInput> {
    let mut bytes = Vec::new();
    let mut stdin = Stdin { limit, silent, read_bytes: 0 };
    stdin.read_to_end(&mut bytes).map_err(into_invalid)?;
    Ok(bytes)
}

/// The message an [`InvalidInput`] carried through `std::io::Error`.
pub fn into_invalid(e: std::io::Error) -> InvalidInput {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<InvalidInput>()) {
        Some(invalid) => invalid.clone(),
        None => InvalidInput::new(format!("cannot read: {e}")),
    }
}

/// A reader for `path` (`-`: standard input) that a streaming parser consumes piece by piece.
/// A regular file — given by name or as standard input — is read whatever its size: the caller
/// bounds memory by what it keeps, not by what it reads. Standard input that is not a file (a
/// pipe, a terminal) has no size to check, so it keeps `pipe_limit` and the silent-pipe
/// timeout; its errors are [`InvalidInput`]s inside `std::io::Error` ([`into_invalid`]).
pub fn stream(path: &Path, pipe_limit: Limit) -> Result<Box<dyn Read>, InvalidInput> {
    if path != Path::new("-") {
        check_file(path, Limit { bytes: u64::MAX, ..pipe_limit })?;
        let file = std::fs::File::open(path).map_err(|e| InvalidInput::new(format!("cannot read {} {}: {e}", pipe_limit.what, path.display())))?;
        return Ok(Box::new(file));
    }
    // SAFETY: fstat on standard input's descriptor into a zeroed stat.
    let stdin_is_file = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(std::io::stdin().as_raw_fd(), &mut stat) == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFREG
    };
    if stdin_is_file {
        return Ok(Box::new(std::io::stdin()));
    }
    Ok(Box::new(Stdin { limit: pipe_limit, silent: SILENT_PIPE, read_bytes: 0 }))
}

/// Standard input within a limit, each piece waited for with poll() in short slices.
struct Stdin {
    limit: Limit,
    silent: Duration,
    read_bytes: u64,
}

impl Read for Stdin {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let fail = |message: String| Err(std::io::Error::other(InvalidInput::new(message)));
        let fd = std::io::stdin().as_raw_fd();
        let started = Instant::now();
        loop {
            if crate::cancel::requested() {
                return fail("interrupted while reading standard input".into());
            }
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            let ms = crate::cancel::POLL_SLICE.as_millis() as i32;
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
            if ready == 0 {
                if started.elapsed() >= self.silent {
                    return fail(format!(
                        "standard input sent nothing for {} s: give the data on standard input or name a file",
                        self.silent.as_secs_f64()
                    ));
                }
                continue;
            }
            if ready < 0 {
                continue; // EINTR: look at the signal flag again
            }
            let n = match std::io::stdin().lock().read(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return fail(format!("cannot read standard input: {e}")),
            };
            self.read_bytes += n as u64;
            if self.read_bytes > self.limit.bytes {
                return Err(std::io::Error::other(too_large("standard input", self.limit)));
            }
            return Ok(n);
        }
    }
}

/// "directory", "device node", "FIFO", "socket", for messages.
pub fn kind_name(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device node"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limit = Limit { bytes: 16, what: "test input" };

    #[test]
    fn files_within_the_limit_are_read_and_larger_ones_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "0123456789abcdef").unwrap();
        assert_eq!(read_to_string(&path, SMALL).unwrap(), "0123456789abcdef");
        std::fs::write(&path, "0123456789abcdefg").unwrap();
        let error = read_to_string(&path, SMALL).unwrap_err().0;
        assert!(error.contains("limit of a test input (16 bytes)"), "{error}");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = Instant::now();
        for (path, kind) in [(fifo.as_path(), "a FIFO"), (Path::new("/dev/zero"), "a device node"), (dir.path(), "a directory")] {
            let error = read_to_string(path, DUMP).unwrap_err().0;
            assert!(error.contains(kind), "{error}");
        }
        assert!(started.elapsed() < Duration::from_secs(2), "nothing waited on the FIFO");
    }
}
