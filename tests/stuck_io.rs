//! A transfer the kernel holds and will not cancel is abandoned at its deadline (or at Ctrl-C):
//! the run ends, writes its partial results, names the device and what was left behind, and
//! the process exits while the kernel still holds the I/O.
//!
//! The stuck device: a loop device backed by a file on a frozen ext4 filesystem (itself on a
//! loop device, mounted in a temporary directory). A write to it is accepted by the block
//! layer and then waits in the loop driver's worker until the filesystem thaws — block I/O that
//! nothing cancels, as on an NVMe controller whose queue froze after a failed AER recovery
//! (tests/qemu_testbed.rs reproduces that one). Needs root, mount, losetup, mkfs.ext4 and
//! fsfreeze; prints "skipped: <reason>" otherwise.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The frozen filesystem and the loop device on it; thawed and taken down on drop (even when a
/// test fails), which lets the held write complete.
struct FrozenDisk {
    mount: PathBuf,
    fs_loop: bool,
    device: Option<String>,
    frozen: bool,
    _dir: tempfile::TempDir,
}

fn sh(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl FrozenDisk {
    fn new() -> Result<FrozenDisk, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root (loop devices, mount, fsfreeze)".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("fs.img");
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).map_err(|e| e.to_string())?;
        std::fs::File::create(&image).and_then(|f| f.set_len(32 << 20)).map_err(|e| e.to_string())?;
        let mut disk = FrozenDisk { mount: mount.clone(), fs_loop: false, device: None, frozen: false, _dir: dir };
        sh("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()])?;
        sh("mount", &["-o", "loop", image.to_str().unwrap(), mount.to_str().unwrap()])?;
        disk.fs_loop = true;
        let backing = mount.join("backing");
        std::fs::File::create(&backing).and_then(|f| f.set_len(8 << 20)).map_err(|e| e.to_string())?;
        disk.device = Some(sh("losetup", &["-f", "--show", backing.to_str().unwrap()])?);
        sh("fsfreeze", &["-f", mount.to_str().unwrap()])?;
        disk.frozen = true;
        Ok(disk)
    }

    fn device(&self) -> &str {
        self.device.as_deref().unwrap()
    }

    fn thaw(&mut self) {
        if std::mem::take(&mut self.frozen) {
            let _ = sh("fsfreeze", &["-u", self.mount.to_str().unwrap()]);
        }
    }
}

impl Drop for FrozenDisk {
    fn drop(&mut self) {
        self.thaw();
        if let Some(device) = self.device.take() {
            let _ = sh("losetup", &["-d", &device]);
        }
        // The loop device lets go of its backing file once the thawed write completed: retry.
        for _ in 0..50 {
            if !self.fs_loop || sh("umount", &[self.mount.to_str().unwrap()]).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not unmount {}", self.mount.display());
    }
}

fn frozen_disk() -> Option<FrozenDisk> {
    match FrozenDisk::new() {
        Ok(disk) => Some(disk),
        Err(why) => {
            eprintln!("skipped: no frozen loop device to hold an I/O: {why}");
            None
        }
    }
}

/// `dma --dir h2d` onto the frozen device: its first write is held by the kernel.
fn stuck_write(disk: &FrozenDisk, deadline: &str, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["dma", "--dir", "h2d", "--destructive", "--sizes", "64KiB", "--duration", "30s", "--deadline", deadline])
        .arg("--target")
        .arg(format!("block:{}", disk.device()))
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for the child; past `limit` the filesystem is thawed (so nothing stays stuck) and the
/// test fails.
fn finish(mut child: Child, disk: &mut FrozenDisk, limit: Duration) -> (i32, String, Duration) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            disk.thaw();
            let _ = child.wait();
            panic!("pcieperf did not exit within {limit:?} while the kernel held its I/O");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status.code().unwrap_or(-1), stderr, started.elapsed())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

#[test]
fn a_write_held_by_the_kernel_is_abandoned_at_its_deadline_and_the_process_exits() {
    let Some(mut disk) = frozen_disk() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("held.json");
    let started = Instant::now();
    let child = stuck_write(&disk, "2s", &out);
    let (code, stderr, _) = finish(child, &mut disk, Duration::from_secs(20));
    let took = started.elapsed();
    assert_eq!(code, 1, "{stderr}");
    // The deadline, the cancel grace of 1 s, and start-up.
    assert!(took < Duration::from_millis(4500), "ended {took:?} after the start (deadline 2 s): {stderr}");
    let device = format!("block:{}", disk.device());
    let held = stderr.lines().find(|l| l.contains("still held by the kernel")).unwrap_or_else(|| panic!("no held message: {stderr}"));
    assert!(held.contains(&device) && held.contains("did not answer within 2s") && held.contains("buffers were left allocated"), "{held}");
    assert!(held.contains("partial results kept in"), "{held}");
    let doc = read_json(&out);
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["stopped"]["reason"], "error");
    assert!(doc["stopped"]["message"].as_str().unwrap().contains("still held by the kernel"), "{}", doc["stopped"]);
    eprintln!("held write abandoned: exit {code} after {took:?}: {held}");
}

#[test]
fn ctrl_c_during_a_write_held_by_the_kernel_ends_the_run_with_130() {
    let Some(mut disk) = frozen_disk() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("held.json");
    let child = stuck_write(&disk, "60s", &out);
    std::thread::sleep(Duration::from_millis(1500)); // inside the held write by now
    // SAFETY: kill on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let (code, stderr, took) = finish(child, &mut disk, Duration::from_secs(20));
    assert_eq!(code, 130, "{stderr}");
    assert!(took < Duration::from_millis(2000), "ended {took:?} after SIGINT (cancel grace 1 s): {stderr}");
    assert!(stderr.contains(&format!("block:{}", disk.device())) && stderr.contains("still held by the kernel"), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let doc = read_json(&out);
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["stopped"]["reason"], "interrupted");
    eprintln!("held write interrupted: exit {code} {took:?} after SIGINT");
}
