//! The write guard (issue 18, docs/safety.md): every engine in the table, aimed at a user's file
//! and at a loop device in every way its target syntax allows, runs every command that writes
//! (h2d, both, run, demo, pio) without `--destructive`, and the bytes stay as they were. A new
//! engine without a case here fails the test.

#[path = "support/fake_bar.rs"]
mod fake_bar;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use pcieperf::engine::registry::ENGINES;

fn pcieperf() -> Command {
    let mut command = Command::cargo_bin("pcieperf").unwrap();
    command.timeout(Duration::from_secs(30));
    command
}

/// 1 MiB of varied bytes: a user's data.
const DATA_BYTES: usize = 1 << 20;

fn user_bytes() -> Vec<u8> {
    (0..DATA_BYTES as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// A loop device over a file of user bytes, detached when dropped.
struct Loop {
    device: PathBuf,
    _backing: tempfile::NamedTempFile,
}

impl Loop {
    fn attach(dir: &Path) -> Result<Loop, String> {
        let backing = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
        std::fs::write(backing.path(), user_bytes()).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("losetup").args(["-f", "--show"]).arg(backing.path()).output().map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!("losetup: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Loop { device: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()), _backing: backing })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// Every way an engine's target can name `victim`, each a full command line (without the
/// command's own flags). Node names an engine derives are symbolic links to the victim, as a
/// careless `ln -s` would make them.
fn aimed_at(engine: &str, victim: &Path, dir: &Path) -> Vec<Vec<String>> {
    let v = victim.display().to_string();
    let link = |name: &str| {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(victim, &path).unwrap();
        path.display().to_string()
    };
    let fifo = dir.join("reader");
    if !fifo.exists() {
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    }
    let dma = |target: String| vec!["dma".into(), "--target".into(), target];
    match engine {
        "block" => vec![dma(format!("block:{v}")), dma(format!("block:{v},sync"))],
        "chardev" => vec![dma(format!("chardev:{v}")), dma(format!("chardev:{v},mmap")), dma(format!("chardev:{v},{}", fifo.display()))],
        "xillybus" => {
            link("xillybus_read_guard");
            vec![dma(format!("xillybus:{}", link("xillybus_write_guard")))]
        }
        "xdma" => {
            for name in ["x_h2c_0", "x_c2h_0", "x_user"] {
                link(name);
            }
            vec![dma(format!("xdma:{}", dir.join("x").display()))]
        }
        "bar" => {
            // edu's profile names BAR0+0x4 scratch; on a user's file nothing is scratch.
            let tree = fake_bar::fake("1234", "11e8", 0x40200, DATA_BYTES as u64, true);
            std::fs::remove_file(tree.dev.join("resource0")).unwrap();
            std::os::unix::fs::symlink(victim, tree.dev.join("resource0")).unwrap();
            let root = tree.root.display().to_string();
            std::mem::forget(tree); // the tree outlives this function; the temp dir is small
            let pio = |tests: &str, offset: &str| -> Vec<String> {
                ["pio", "--target", &format!("bar:{}", fake_bar::BDF), "--sysfs-root", &root, "--tests", tests, "--offset", offset, "--count", "4"].map(String::from).to_vec()
            };
            vec![pio("6", "0x4"), pio("1,3,5,6,8,14", "0x0")]
        }
        "cosim" => vec![dma(format!("cosim:{v}"))],
        // No path in their targets: vfio opens /dev/vfio character devices only, sim is virtual,
        // cuda names a GPU by ordinal or PCI address and writes only its memory and own buffers.
        "vfio" | "sim" | "cuda" => vec![dma(format!("{engine}:{v}"))],
        "fault" => vec![dma(format!("fault:bitflip:block:{v}")), dma(format!("fault:drop:chardev:{v}"))],
        other => panic!("engine '{other}' has no write-guard case here: add the ways its target can name a file"),
    }
}

/// The writing variants of one command line.
fn writing_runs(command: &[String]) -> Vec<Vec<String>> {
    let mut runs = Vec::new();
    if command[0] == "dma" {
        let target = command[2].clone();
        for dir in ["h2d", "both"] {
            runs.push([command, &["--dir".into(), dir.into(), "--sizes".into(), "64KiB".into(), "--duration".into(), "20ms".into()]].concat());
        }
        runs.push(vec!["run".into(), "--target".into(), target.clone(), "--quick".into(), "--out".into(), "-".into()]);
        runs.push(vec!["demo".into(), "--target".into(), target, "--block-amount".into(), "1".into()]);
    } else {
        runs.push(command.to_vec());
    }
    runs
}

fn assert_untouched(victim: &Path, what: &str) {
    let now = std::fs::read(victim).unwrap();
    assert!(now.len() >= DATA_BYTES && now[..DATA_BYTES] == user_bytes()[..], "{what} changed {}", victim.display());
}

fn every_engine_leaves(victim: &Path, dir: &Path) -> usize {
    let mut runs = 0;
    for engine in ENGINES {
        for command in aimed_at(engine.name, victim, dir) {
            for run in writing_runs(&command) {
                let out = pcieperf().args(&run).output().unwrap();
                let shown = run.join(" ");
                assert!(out.status.code().is_some(), "{shown} did not exit by itself");
                assert_untouched(victim, &shown);
                runs += 1;
            }
        }
    }
    runs
}

#[test]
fn no_engine_writes_a_users_file_without_consent() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("thesis.dat");
    std::fs::write(&file, user_bytes()).unwrap();
    let runs = every_engine_leaves(&file, dir.path());
    assert!(runs >= 40, "only {runs} runs");
}

#[test]
fn no_engine_writes_a_loop_device_without_consent() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let device = match Loop::attach(dir.path()) {
        Ok(device) => device,
        Err(why) => {
            eprintln!("skipped: no loop device ({why}; needs root and the loop module)");
            return;
        }
    };
    every_engine_leaves(&device.device, dir.path());
}

/// The control: with consent the same command does write, so the guard is what protected the
/// bytes above, not a target that could not write anyway.
#[test]
fn with_consent_the_same_targets_do_write() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("scratch.dat");
    for target in [format!("chardev:{}", file.display()), format!("chardev:{},mmap", file.display()), format!("block:{}", file.display())] {
        std::fs::write(&file, user_bytes()).unwrap();
        pcieperf().args(["dma", "--target", &target, "--dir", "h2d", "--sizes", "64KiB", "--duration", "20ms", "--destructive"]).assert().success();
        assert_ne!(std::fs::read(&file).unwrap()[..DATA_BYTES], user_bytes()[..], "{target} with --destructive wrote nothing");
    }
    let refused = pcieperf().args(["dma", "--target", &format!("chardev:{}", file.display()), "--dir", "h2d", "--sizes", "64KiB"]).assert().failure();
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).to_string();
    assert!(stderr.contains("--destructive"), "{stderr}");
}
