//! `--scratch DIR`: a file pcieperf creates on the disk to measure, writes freely (it holds
//! nobody's data) and removes at the end. Its name carries the creating process's id
//! (`pcieperf-scratch-PID-XXXXXX`), so a file left behind by a run that was killed (SIGKILL, a
//! crash, a power cut) is recognised by the next run in the same directory: removed when its
//! process is gone, named when it still runs.

use std::path::{Path, PathBuf};

use crate::error::InvalidInput;

const PREFIX: &str = "pcieperf-scratch-";

/// A new scratch file of `bytes` in `dir`, removed when dropped; with what was found of earlier
/// runs' scratch files, for the user.
pub fn create(dir: &Path, bytes: u64) -> Result<(tempfile::NamedTempFile, Vec<String>), InvalidInput> {
    let notes = leftovers(dir);
    let file = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempfile_in(dir)
        .and_then(|file| file.as_file().set_len(bytes).map(|()| file))
        .map_err(|e| InvalidInput::new(format!("--scratch {}: cannot create a scratch file there: {e}", dir.display())))?;
    Ok((file, notes))
}

/// Earlier scratch files in `dir`: those whose process is gone are removed, the others named.
fn leftovers(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.filter_map(|entry| leftover(&entry.path())).collect()
}

fn leftover(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let meta = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file())?;
    let size = crate::units::format_size(meta.len());
    let pid = name.strip_prefix(PREFIX)?.split('-').next().and_then(|pid| pid.parse::<u32>().ok());
    Some(match pid {
        Some(pid) if !Path::new(&format!("/proc/{pid}")).exists() => match std::fs::remove_file(path) {
            Ok(()) => format!("removed {} ({size}), a scratch file left by an earlier run (process {pid}, now gone)", path.display()),
            Err(e) => format!("{} ({size}) was left by an earlier run (process {pid}, now gone) and cannot be removed: {e}", path.display()),
        },
        Some(pid) => format!("{} ({size}) belongs to a running process {pid}: left alone", path.display()),
        None => format!("{} ({size}) looks like a scratch file of an older pcieperf: remove it if no pcieperf is running", path.display()),
    })
}

/// Scratch files in `dir` (tests).
pub fn scratch_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.map(|e| e.path()).filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_of_gone_processes_are_removed_and_live_ones_named() {
        let dir = tempfile::tempdir().unwrap();
        // No process has id 4194304 (above pid_max's largest value).
        let gone = dir.path().join(format!("{PREFIX}4194305-abc123"));
        std::fs::write(&gone, vec![0u8; 4096]).unwrap();
        let live = dir.path().join(format!("{PREFIX}{}-def456", std::process::id()));
        std::fs::write(&live, b"x").unwrap();
        std::fs::write(dir.path().join("unrelated.dat"), b"keep").unwrap();
        let (file, notes) = create(dir.path(), 8192).unwrap();
        assert!(!gone.exists() && live.exists() && dir.path().join("unrelated.dat").exists());
        assert!(notes.iter().any(|n| n.contains("removed") && n.contains("4194305") && n.contains("4KiB")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("left alone")), "{notes:?}");
        assert_eq!(file.as_file().metadata().unwrap().len(), 8192);
        assert_eq!(scratch_files(dir.path()).len(), 2);
    }
}
