//! The `block` engine on a file on the machine's disk: O_DIRECT reads and writes are real
//! device DMA (the disk controller moves the data), no hardware beyond the disk is needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::{self, AlignedBuf, DataModel, Direction, EngineError, Io, OpenOptions};

const DEADLINE: Duration = Duration::from_secs(20);

/// A file of `len` bytes on a disk filesystem (not tmpfs): the target dir Cargo gives tests.
fn disk_file(name: &str, len: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix("engine-block").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().set_len(len).unwrap();
    (dir, path)
}

/// Tests write their own scratch files: they give the consent a user's file would need.
fn options(queue_depth: usize, io_bytes: u64) -> OpenOptions {
    OpenOptions { queue_depth, io_bytes, destructive: true, ..OpenOptions::default() }
}

fn target(path: &Path) -> String {
    format!("block:{}", path.display())
}

#[test]
fn file_round_trip_through_bounce_and_direct_buffers_keeps_offsets() {
    let (_dir, path) = disk_file("data", 4 << 20);
    let mut engine = engine::open(&target(&path), &options(4, 64 * 1024)).unwrap();
    let info = engine.info().clone();
    assert_eq!(info.kind, "block");
    assert!(!info.simulated);
    assert_eq!(info.data_model, DataModel::Memory);
    assert_eq!(info.directions, vec![Direction::H2d, Direction::D2h]);
    assert_eq!(info.alignment_bytes, 4096);
    assert_eq!(info.capacity_bytes, Some(4 << 20));
    assert!(info.description.contains("io_uring, queue depth 4"), "{}", info.description);

    // An ordinary Vec (not page-aligned in general) goes through the bounce slots.
    let pattern = Pattern::lfsr(11);
    let offset = 512 * 1024;
    let mut sent = vec![0u8; 1 << 20];
    pattern.fill(offset, &mut sent);
    let write = engine.transfer(Io::H2d(&sent), offset, DEADLINE).unwrap();
    assert_eq!((write.direction, write.bytes), (Direction::H2d, 1 << 20));
    assert!(write.end_ns > write.start_ns);

    // Read back into an aligned buffer: zero copy, O_DIRECT straight into it.
    let mut back = AlignedBuf::new(1 << 20);
    let read = engine.transfer(Io::D2h(&mut back), offset, DEADLINE).unwrap();
    assert_eq!(read.bytes, 1 << 20);
    assert_eq!(pattern.check(offset, &back), None);
    assert_eq!(crc32(&back), crc32(&sent));

    // The bytes sit at the device offsets asked for, and nowhere else.
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(pattern.check(offset, &on_disk[offset as usize..offset as usize + (1 << 20)]), None);
    assert!(on_disk[..offset as usize].iter().all(|b| *b == 0));
    assert!(on_disk[offset as usize + (1 << 20)..].iter().all(|b| *b == 0));

    // A partial read at an offset inside the written range, into an unaligned buffer.
    let mut part = vec![0u8; 8192 + 1][1..].to_vec();
    engine.transfer(Io::D2h(&mut part), offset + 4096 * 3, DEADLINE).unwrap();
    assert_eq!(pattern.check(offset + 4096 * 3, &part), None);
}

#[test]
fn synchronous_fallback_moves_the_same_data_and_says_so() {
    let (_dir, path) = disk_file("sync", 1 << 20);
    let mut engine = engine::open(&format!("{},sync", target(&path)), &options(0, 0)).unwrap();
    assert!(engine.info().description.contains("synchronous"), "{}", engine.info().description);
    assert!(!engine.info().concurrent);
    let pattern = Pattern::lfsr(3);
    let mut sent = vec![0u8; 300 * 1024];
    pattern.fill(4096, &mut sent);
    engine.transfer(Io::H2d(&sent), 4096, DEADLINE).unwrap();
    let mut back = vec![0u8; sent.len()];
    engine.transfer(Io::D2h(&mut back), 4096, DEADLINE).unwrap();
    assert_eq!(pattern.check(4096, &back), None);
    let err = engine.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap_err();
    assert!(matches!(err, EngineError::Unsupported(_)), "{err}");
}

#[test]
fn both_directions_at_once_share_one_range_on_one_ring() {
    let (_dir, path) = disk_file("both", 2 << 20);
    let pattern = Pattern::lfsr(5);
    let mut engine = engine::open(&target(&path), &options(8, 16 * 1024)).unwrap();
    assert!(engine.info().concurrent);
    // The contract: both legs use the same range, holding the data the read expects, so the
    // order in which concurrent reads and writes land does not matter.
    let mut sent = vec![0u8; 256 * 1024];
    pattern.fill(0, &mut sent);
    engine.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
    let mut back = vec![0u8; 256 * 1024];
    let (h2d, d2h) = engine.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap();
    assert_eq!((h2d.direction, d2h.direction), (Direction::H2d, Direction::D2h));
    assert_eq!((h2d.bytes, d2h.bytes), (256 * 1024, 256 * 1024));
    assert_eq!(h2d.start_ns, d2h.start_ns);
    assert_eq!(pattern.check(0, &back), None);
    // Nothing outside the range was touched.
    let mut after = vec![0xAAu8; 256 * 1024];
    engine.transfer(Io::D2h(&mut after), 256 * 1024, DEADLINE).unwrap();
    assert!(after.iter().all(|&b| b == 0), "the file beyond the range is still zero");
}

#[test]
fn sizes_offsets_and_capacity_are_checked_as_invalid_input() {
    let (_dir, path) = disk_file("small", 64 * 1024);
    let mut engine = engine::open(&target(&path), &options(0, 0)).unwrap();
    let mut buf = vec![0u8; 1000];
    let err = engine.transfer(Io::D2h(&mut buf), 0, DEADLINE).unwrap_err();
    assert!(matches!(err, EngineError::InvalidInput(_)) && err.to_string().contains("4096"), "{err}");
    let mut buf = vec![0u8; 8192];
    let err = engine.transfer(Io::D2h(&mut buf), 100, DEADLINE).unwrap_err();
    assert!(matches!(err, EngineError::InvalidInput(_)), "{err}");
    let err = engine.transfer(Io::D2h(&mut buf), 60 * 1024, DEADLINE).unwrap_err();
    assert!(err.to_string().contains("past the end"), "{err}");
    assert!(engine::open(&target(&path), &options(0, 1000)).is_err());
}

#[test]
fn missing_paths_and_wrong_node_kinds_are_named() {
    let err = engine::open("block:/nonexistent/disk", &OpenOptions::default()).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/disk does not exist"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let err = engine::open(&target(dir.path()), &OpenOptions::default()).err().unwrap();
    assert!(err.to_string().contains("neither a block device nor a regular file"), "{err}");
    let err = engine::open("block:", &OpenOptions::default()).err().unwrap();
    assert!(matches!(err, EngineError::InvalidInput(_)), "{err}");
}

#[test]
fn permission_denied_names_the_privilege() {
    use pcieperf::engine::devfile::{open_error, Access};
    let err = open_error(Path::new("/dev/nvme0n1"), Access::Read, "", std::io::ErrorKind::PermissionDenied.into());
    let text = err.to_string();
    assert!(text.contains("permission denied") && text.contains("read access") && text.contains("root"), "{text}");
}

/// A loop device is a real block device backed by a file; needs root and `losetup`.
struct Loop(String);

impl Loop {
    fn attach(file: &Path) -> Option<Loop> {
        let out = std::process::Command::new("losetup").args(["-f", "--show", "--direct-io=on"]).arg(file).output().ok()?;
        out.status.success().then(|| Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn block_devices_are_read_only_without_consent() {
    let (_dir, path) = disk_file("loop-backing", 1 << 20);
    let pattern = Pattern::lfsr(9);
    let mut content = vec![0u8; 1 << 20];
    pattern.fill(0, &mut content);
    std::fs::write(&path, &content).unwrap();
    let Some(device) = Loop::attach(&path) else {
        // The refusal rule itself is tested without a device in block::tests.
        eprintln!("no loop device (needs root and losetup): read-only rule tested on its decision function only");
        return;
    };
    let mut engine = engine::open(&format!("block:{}", device.0), &OpenOptions::default()).unwrap();
    let info = engine.info().clone();
    assert_eq!(info.directions, vec![Direction::D2h]);
    assert_eq!(info.data_model, DataModel::Opaque);
    assert!(info.description.contains("read-only"), "{}", info.description);
    let err = engine.transfer(Io::H2d(&content[..4096]), 0, DEADLINE).unwrap_err();
    assert!(err.to_string().contains("--destructive"), "{err}");
    let mut back = vec![0u8; 64 * 1024];
    engine.transfer(Io::D2h(&mut back), 8192, DEADLINE).unwrap();
    assert_eq!(pattern.check(8192, &back), None);
    drop(engine);

    let mut engine = engine::open(&format!("block:{}", device.0), &OpenOptions { destructive: true, ..OpenOptions::default() }).unwrap();
    assert_eq!(engine.info().data_model, DataModel::Memory);
    let zeros = vec![0u8; 4096];
    engine.transfer(Io::H2d(&zeros), 0, DEADLINE).unwrap();
    engine.transfer(Io::D2h(&mut back), 0, DEADLINE).unwrap();
    assert!(back[..4096].iter().all(|b| *b == 0));
    assert_eq!(pattern.check(4096, &back[4096..]), None);
}

/// `transfer_reusing`: the device range is covered I/O by I/O while the host buffer (a few
/// I/Os, as fio's `iodepth × bs` buffers) is reused cyclically — through the bounce slots
/// (a Vec) and zero copy (an aligned buffer), in both directions, sync fallback included.
#[test]
fn a_reused_buffer_covers_the_device_range_cyclically() {
    let io = 8 * 1024;
    for (suffix, aligned) in [("", true), ("", false), (",sync", true)] {
        let (_dir, path) = disk_file("reuse", 1 << 20);
        let opened = pcieperf::engine::block::open(&format!("{}{suffix}", path.display()), &options(2, io as u64)).unwrap();
        let mut engine = opened;
        let offset = 64 * 1024;
        let device_bytes = 10 * io; // five passes over a buffer of two I/Os
        let mut aligned_buf = AlignedBuf::new(2 * io);
        let mut plain = vec![0u8; 2 * io + 16];
        let skip = if pcieperf::engine::devfile::is_page_aligned(plain.as_ptr()) { 16 } else { 0 };
        let buf: &mut [u8] = if aligned { &mut aligned_buf } else { &mut plain[skip..skip + 2 * io] };
        Pattern::lfsr(5).fill(0, buf);
        let sent = buf.to_vec();
        let write = engine.transfer_reusing(Io::H2d(buf), offset, device_bytes as u64, DEADLINE).unwrap();
        assert_eq!((write.direction, write.bytes), (Direction::H2d, device_bytes as u64));

        let on_disk = std::fs::read(&path).unwrap();
        for pass in 0..5 {
            let at = offset as usize + pass * 2 * io;
            assert!(on_disk[at..at + 2 * io] == sent[..], "{suffix} aligned={aligned}: pass {pass} differs");
        }
        assert!(on_disk[..offset as usize].iter().all(|b| *b == 0));
        assert!(on_disk[offset as usize + device_bytes..].iter().all(|b| *b == 0));

        // Reading the file's first 12 I/Os (I/O k holds byte value k) through the two-I/O
        // buffer: I/Os may complete out of order, but an I/O waits for the last one that used
        // its half, so each half holds the last I/O of its parity (even I/Os go to the first
        // half, odd ones to the second).
        let mut file: Vec<u8> = (0..12u8).flat_map(|k| std::iter::repeat_n(k, io)).collect();
        file.resize(1 << 20, 0);
        std::fs::write(&path, &file).unwrap();
        buf.fill(0xff);
        let read = engine.transfer_reusing(Io::D2h(buf), 0, 12 * io as u64, DEADLINE).unwrap();
        assert_eq!((read.direction, read.bytes), (Direction::D2h, 12 * io as u64));
        let (first, second) = (buf[0], buf[io]);
        assert!(buf[..io].iter().all(|b| *b == first) && buf[io..].iter().all(|b| *b == second), "{suffix} aligned={aligned}: halves torn");
        assert!((first, second) == (10, 11), "{suffix} aligned={aligned}: halves hold I/Os {first} and {second}");
    }
}

#[test]
fn a_reused_buffer_must_hold_whole_ios() {
    let (_dir, path) = disk_file("reuse-bad", 1 << 20);
    let mut engine = pcieperf::engine::block::open(&path.display().to_string(), &options(2, 8192)).unwrap();
    for host in [4096, 12 * 1024] {
        let buf = AlignedBuf::new(host);
        let err = engine.transfer_reusing(Io::H2d(&buf), 0, 64 * 1024, DEADLINE).unwrap_err();
        assert!(matches!(err, EngineError::InvalidInput(_)), "{err:?}");
        assert!(err.to_string().contains("whole number of I/Os"), "{err}");
    }
    // The device range is checked as for any transfer.
    let buf = AlignedBuf::new(8192);
    assert!(engine.transfer_reusing(Io::H2d(&buf), 0, 2 << 20, DEADLINE).is_err());
}
