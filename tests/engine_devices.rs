//! Device-file engines without hardware: FIFOs with a loopback thread stand in for Xillybus
//! and dma_buf-style streams (slow, stuck, corrupting and vanishing peers included), regular
//! files laid out like the XDMA driver's nodes stand in for `/dev/xdmaN_*`, and a fake
//! `/dev` + `/sys` tree exercises detection. None of this is real XDMA or Xillybus hardware.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use pcieperf::engine::registry::detect_in;
use pcieperf::engine::Candidate;

/// The candidate `run` would take unasked, if any device is usable.
fn choose(found: &[Candidate]) -> Option<&Candidate> {
    let choice = pcieperf::engine::choose(None, found);
    found.iter().find(|c| c.target == choice.target)
}
use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::xdma::XdmaEngine;
use pcieperf::engine::{self, DataModel, Direction, EngineError, Io, OpenOptions};

const DEADLINE: Duration = Duration::from_secs(10);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// What the fake device does with the bytes it is sent.
#[derive(Clone, Copy)]
enum Peer {
    /// Return everything, in chunks of this size, sleeping between chunks.
    Loopback { chunk: usize, pause: Duration },
    /// Return everything but flip one bit at this stream offset.
    Corrupt { at: usize },
    /// Open both ends, then neither read nor write until told to stop.
    Stuck,
    /// Return `n` bytes of what it receives, then close its sending end.
    CloseAfter(usize),
}

/// Two FIFOs `to_device` → peer thread → `from_device`.
fn fake_stream(dir: &Path, to_device: &str, from_device: &str, peer: Peer) -> (PathBuf, PathBuf, JoinHandle<()>) {
    let (tx, rx) = (dir.join(to_device), dir.join(from_device));
    mkfifo(&tx);
    mkfifo(&rx);
    let (tx2, rx2) = (tx.clone(), rx.clone());
    let handle = std::thread::spawn(move || {
        let mut input = File::open(&tx2).unwrap();
        let mut output = std::fs::OpenOptions::new().write(true).open(&rx2).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut position = 0usize;
        match peer {
            Peer::Stuck => {
                std::thread::sleep(Duration::from_secs(2));
            }
            Peer::CloseAfter(n) => {
                let mut sent = 0;
                while sent < n {
                    let got = input.read(&mut buf[..(n - sent).min(65536)]).unwrap();
                    if got == 0 {
                        break;
                    }
                    output.write_all(&buf[..got]).unwrap();
                    sent += got;
                }
                drop(output);
                // Keep reading so the writer is not stopped by a full pipe.
                while input.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
            }
            Peer::Loopback { .. } | Peer::Corrupt { .. } => {
                let (chunk, pause, flip) = match peer {
                    Peer::Loopback { chunk, pause } => (chunk, pause, usize::MAX),
                    Peer::Corrupt { at } => (65536, Duration::ZERO, at),
                    _ => unreachable!(),
                };
                loop {
                    let got = match input.read(&mut buf[..chunk]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if (position..position + got).contains(&flip) {
                        buf[flip - position] ^= 0x04;
                    }
                    position += got;
                    if output.write_all(&buf[..got]).is_err() {
                        break;
                    }
                    std::thread::sleep(pause);
                }
            }
        }
    });
    (tx, rx, handle)
}

fn loopback() -> Peer {
    Peer::Loopback { chunk: 65536, pause: Duration::ZERO }
}

fn chardev(tx: &Path, rx: &Path) -> Box<dyn engine::Engine> {
    engine::open(&format!("chardev:{},{}", tx.display(), rx.display()), &OpenOptions::default()).unwrap()
}

#[test]
fn loopback_stream_returns_what_was_written_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx, peer) = fake_stream(dir.path(), "to", "from", loopback());
    let mut engine = chardev(&tx, &rx);
    let info = engine.info().clone();
    assert_eq!((info.kind.as_str(), info.data_model, info.concurrent), ("chardev", DataModel::Loopback, true));

    // 1 MiB is far more than a pipe holds: the engine must drain the loopback while writing.
    let pattern = Pattern::lfsr(21);
    let mut sent = vec![0u8; 1 << 20];
    pattern.fill(0, &mut sent);
    let write = engine.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
    assert_eq!(write.bytes, 1 << 20);
    let mut back = vec![0u8; 1 << 20];
    let read = engine.transfer(Io::D2h(&mut back), 0, DEADLINE).unwrap();
    assert_eq!(read.bytes, 1 << 20);
    assert_eq!(pattern.check(0, &back), None);

    // Both at once: the stream continues at byte 1 MiB.
    let mut more = vec![0u8; 300_000];
    pattern.fill(1 << 20, &mut more);
    let mut more_back = vec![0u8; 300_000];
    let (h2d, d2h) = engine.transfer_both(&more, &mut more_back, 0, DEADLINE).unwrap();
    assert_eq!((h2d.direction, d2h.direction), (Direction::H2d, Direction::D2h));
    assert_eq!(crc32(&more_back), crc32(&more));
    drop(engine);
    peer.join().unwrap();
}

#[test]
fn xillybus_names_pick_the_write_and_read_pair() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, _rx, peer) = fake_stream(dir.path(), "xillybus_write_32", "xillybus_read_32", Peer::Loopback { chunk: 4096, pause: Duration::from_micros(100) });
    let mut engine = engine::open(&format!("xillybus:{}", tx.display()), &OpenOptions::default()).unwrap();
    assert_eq!((engine.info().kind.as_str(), engine.info().data_model), ("xillybus", DataModel::Loopback));
    assert!(engine.info().description.contains("xillybus_read_32"));
    let pattern = Pattern::lfsr(1);
    let mut sent = vec![0u8; 100_000];
    pattern.fill(0, &mut sent);
    engine.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
    let mut back = vec![0u8; 100_000];
    engine.transfer(Io::D2h(&mut back), 0, DEADLINE).unwrap();
    assert_eq!(pattern.check(0, &back), None);
    drop(engine);
    peer.join().unwrap();

    // Without the nodes, the message names the node and the driver.
    let err = engine::open("xillybus:nosuchstream_for_test", &OpenOptions::default()).err().unwrap();
    assert!(err.to_string().contains("/dev/xillybus_read_nosuchstream_for_test does not exist"), "{err}");
    assert!(err.to_string().contains("xillybus driver"), "{err}");
    let err = engine::open("xillybus:/tmp/not_a_xillybus_node", &OpenOptions::default()).err().unwrap();
    assert!(matches!(err, EngineError::InvalidInput(_)), "{err}");
}

#[test]
fn corrupting_peer_is_caught_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx, peer) = fake_stream(dir.path(), "to", "from", Peer::Corrupt { at: 5000 });
    let mut engine = chardev(&tx, &rx);
    let pattern = Pattern::lfsr(77);
    let mut sent = vec![0u8; 64 * 1024];
    pattern.fill(0, &mut sent);
    let mut back = vec![0u8; sent.len()];
    engine.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap();
    let mismatch = pattern.check(0, &back).expect("the flipped bit must be found");
    assert_eq!(mismatch.offset, 5000);
    assert_eq!(mismatch.expected ^ mismatch.actual, 0x04);
    assert_ne!(crc32(&back), crc32(&sent));
    drop(engine);
    peer.join().unwrap();
}

#[test]
fn slow_peer_finishes_within_a_generous_deadline_and_times_out_within_a_short_one() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx, peer) = fake_stream(dir.path(), "to", "from", Peer::Loopback { chunk: 1024, pause: Duration::from_millis(2) });
    let mut engine = chardev(&tx, &rx);
    let pattern = Pattern::lfsr(2);
    let mut sent = vec![0u8; 32 * 1024];
    pattern.fill(0, &mut sent);
    let mut back = vec![0u8; sent.len()];
    engine.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap();
    assert_eq!(pattern.check(0, &back), None);

    // 4 MiB at 1 KiB per 2 ms cannot finish in 200 ms: a timeout that says how far it got.
    let big = vec![0u8; 4 << 20];
    let err = engine.transfer(Io::H2d(&big), 0, Duration::from_millis(200)).unwrap_err();
    match &err {
        EngineError::Timeout { what, after } => {
            assert_eq!(*after, Duration::from_millis(200));
            assert!(what.contains("stopped accepting data") && what.contains("of 4194304 bytes written"), "{what}");
        }
        other => panic!("expected a timeout, got {other}"),
    }
    drop(engine);
    peer.join().unwrap();
}

#[test]
fn stuck_peer_times_out_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx, peer) = fake_stream(dir.path(), "to", "from", Peer::Stuck);
    let mut engine = chardev(&tx, &rx);
    let mut back = vec![0u8; 4096];
    let err = engine.transfer(Io::D2h(&mut back), 0, Duration::from_millis(150)).unwrap_err();
    assert!(matches!(&err, EngineError::Timeout { what, .. } if what.contains("stopped sending data: 0 of 4096")), "{err}");
    let sent = vec![0u8; 1 << 20];
    let err = engine.transfer(Io::H2d(&sent), 0, Duration::from_millis(150)).unwrap_err();
    assert!(matches!(&err, EngineError::Timeout { what, .. } if what.contains("stopped accepting data")), "{err}");
    drop(engine);
    peer.join().unwrap();
}

#[test]
fn peer_that_closes_gives_a_short_transfer_at_eof() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx, peer) = fake_stream(dir.path(), "to", "from", Peer::CloseAfter(1000));
    let mut engine = chardev(&tx, &rx);
    let sent = vec![7u8; 4096];
    let mut back = vec![0u8; 4096];
    let err = engine.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap_err();
    match err {
        EngineError::Short { done, wanted, why } => {
            assert_eq!((done, wanted), (1000, 4096));
            assert!(why.contains("end of stream"), "{why}");
        }
        other => panic!("expected a short transfer, got {other}"),
    }
    assert!(back[..1000].iter().all(|b| *b == 7));
    drop(engine);
    peer.join().unwrap();
}

#[test]
fn writing_to_a_peer_that_left_reports_epipe() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = (dir.path().join("to"), dir.path().join("from"));
    mkfifo(&tx);
    mkfifo(&rx);
    let tx2 = tx.clone();
    let rx2 = rx.clone();
    let peer = std::thread::spawn(move || {
        let input = File::open(&tx2).unwrap();
        let output = std::fs::OpenOptions::new().write(true).open(&rx2).unwrap();
        drop(input);
        drop(output);
    });
    let mut engine = chardev(&tx, &rx);
    peer.join().unwrap();
    let err = engine.transfer(Io::H2d(&[1u8; 4096]), 0, DEADLINE).unwrap_err();
    assert!(err.to_string().contains("EPIPE"), "{err}");
}

#[test]
fn single_node_is_a_dma_buf_style_device_with_opaque_contents() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("dma_buf");
    mkfifo(&node); // opened read-write, a FIFO gives back what was written: a stand-in device
    let mut engine = engine::open(&format!("chardev:{}", node.display()), &OpenOptions::default()).unwrap();
    let info = engine.info().clone();
    assert_eq!((info.data_model, info.concurrent), (DataModel::Opaque, false));
    let sent: Vec<u8> = (0..8192u32).map(|i| i as u8).collect();
    engine.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
    let mut back = vec![0u8; 8192];
    engine.transfer(Io::D2h(&mut back), 0, DEADLINE).unwrap();
    assert_eq!(back, sent);
    assert!(matches!(engine.transfer_both(&sent, &mut back, 0, DEADLINE), Err(EngineError::Unsupported(_))));
    let err = engine::open("chardev:", &OpenOptions::default()).err().unwrap();
    assert!(matches!(err, EngineError::InvalidInput(_)));
    let err = engine::open("chardev:/dev/no_such_dma_buf", &OpenOptions::default()).err().unwrap();
    assert!(err.to_string().contains("does not exist (is the driver loaded?)"), "{err}");
}

/// Regular files named like the XDMA driver's nodes; each c2h node is a hard link to the h2c
/// node of the same channel, so the "card memory" reads back what was written, as on an
/// AXI memory-mapped design.
fn fake_xdma(dir: &Path, channels: u32) -> PathBuf {
    for k in 0..channels {
        let h2c = dir.join(format!("xdma0_h2c_{k}"));
        File::create(&h2c).unwrap().set_len(1 << 20).unwrap();
        std::fs::hard_link(&h2c, dir.join(format!("xdma0_c2h_{k}"))).unwrap();
    }
    File::create(dir.join("xdma0_user")).unwrap().set_len(4096).unwrap();
    dir.join("xdma0")
}

/// The fake nodes are regular files, which the write guard protects: the tests consent.
fn open_xdma(prefix: &Path, channels: usize, card_addr: u64) -> Result<XdmaEngine, EngineError> {
    pcieperf::engine::xdma::open(prefix.to_str().unwrap(), &OpenOptions { destructive: true, ..OpenOptions::default() }.with_flag("channels", channels).with_flag("card-addr", card_addr))
}

#[test]
fn xdma_channels_split_a_transfer_and_honour_the_card_address() {
    use pcieperf::engine::Engine;
    let dir = tempfile::tempdir().unwrap();
    let prefix = fake_xdma(dir.path(), 2);
    let mut engine = open_xdma(&prefix, 2, 0x1000).unwrap();
    let info = engine.info().clone();
    assert_eq!((info.kind.as_str(), info.data_model, info.concurrent), ("xdma", DataModel::Memory, true));
    assert!(info.description.contains("2 h2c / 2 c2h channel(s) in use of 2 / 2"), "{}", info.description);
    assert!(info.description.contains("card address 0x1000"), "{}", info.description);
    assert_eq!(info.alignment_bytes, 1, "plain files do not answer IOCTL_XDMA_ALIGN_GET");

    let pattern = Pattern::lfsr(4);
    let mut sent = vec![0u8; 64 * 1024];
    pattern.fill(0, &mut sent);
    engine.transfer(Io::H2d(&sent), 0x100, DEADLINE).unwrap();
    // Channel 0 took the first half, channel 1 the second, each at its card address.
    let h2c0 = std::fs::read(dir.path().join("xdma0_h2c_0")).unwrap();
    let h2c1 = std::fs::read(dir.path().join("xdma0_h2c_1")).unwrap();
    let at = 0x1100usize;
    assert_eq!(pattern.check(0, &h2c0[at..at + 32 * 1024]), None);
    assert_eq!(pattern.check(32 * 1024, &h2c1[at + 32 * 1024..at + 64 * 1024]), None);
    assert!(h2c0[at + 32 * 1024..].iter().all(|b| *b == 0));

    let mut back = vec![0u8; 64 * 1024];
    engine.transfer(Io::D2h(&mut back), 0x100, DEADLINE).unwrap();
    assert_eq!(pattern.check(0, &back), None);

    let mut both_back = vec![0u8; 4096];
    let (h2d, d2h) = engine.transfer_both(&sent[..4096], &mut both_back, 0x100 + 64 * 1024, DEADLINE).unwrap();
    assert_eq!((h2d.bytes, d2h.bytes), (4096, 4096));
}

#[test]
fn xdma_argument_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = fake_xdma(dir.path(), 1);
    let err = open_xdma(&prefix, 2, 0).err().unwrap();
    assert!(matches!(err, EngineError::InvalidInput(_)) && err.to_string().contains("has only 1"), "{err}");
    let err = open_xdma(&dir.path().join("xdma7"), 1, 0).err().unwrap();
    assert!(err.to_string().contains("xdma.ko"), "{err}");
    let err = engine::open("xdma:", &OpenOptions::default()).err().unwrap();
    assert!(matches!(err, EngineError::InvalidInput(_)));
    // Only c2h present: h2d is refused, d2h works.
    std::fs::remove_file(dir.path().join("xdma0_h2c_0")).unwrap();
    let mut engine = open_xdma(&prefix, 1, 0).unwrap();
    use pcieperf::engine::Engine;
    assert_eq!(engine.info().directions, vec![Direction::D2h]);
    assert!(matches!(engine.transfer(Io::H2d(&[0u8; 16]), 0, DEADLINE), Err(EngineError::Unsupported(_))));
}

#[test]
fn xdma_user_bar_reads_and_writes_registers() {
    use pcieperf::engine::Engine;
    let dir = tempfile::tempdir().unwrap();
    let prefix = fake_xdma(dir.path(), 1);
    let mut engine = open_xdma(&prefix, 1, 0).unwrap();
    let mmio = engine.mmio().expect("xdma0_user present");
    mmio.write32(0, 8, 0xdead_beef).unwrap();
    assert_eq!(mmio.read32(0, 8).unwrap(), 0xdead_beef);
    assert!(matches!(mmio.read32(1, 0), Err(EngineError::Unsupported(_))));
    assert!(matches!(mmio.read32(0, 2), Err(EngineError::InvalidInput(_))));
    let bytes = std::fs::read(dir.path().join("xdma0_user")).unwrap();
    assert_eq!(&bytes[8..12], &0xdead_beef_u32.to_le_bytes());
    // The driver's performance ioctl is refused by anything that is not the driver.
    let err = engine.driver_perf(Direction::H2d, 0, 4096, Duration::from_millis(1)).unwrap_err();
    assert!(err.to_string().contains("not an XDMA driver node"), "{err}");
}

#[test]
fn detection_lists_targets_by_preference_and_never_chooses_a_destructive_one() {
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().unwrap();
    let (dev, sys) = (root.path().join("dev"), root.path().join("sys"));
    std::fs::create_dir_all(&dev).unwrap();
    for node in ["xdma0_h2c_0", "xdma0_c2h_0", "xdma0_user", "xillybus_write_8", "xillybus_read_8", "xillybus_write_32", "nvme0n1", "vda"] {
        File::create(dev.join(node)).unwrap();
    }
    // sysfs: an NVMe disk with a partition, a virtio disk, and a loop device.
    let nvme = sys.join("devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1");
    std::fs::create_dir_all(nvme.join("nvme0n1p1")).unwrap();
    File::create(nvme.join("nvme0n1p1/partition")).unwrap();
    let virtio = sys.join("devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
    let loop0 = sys.join("devices/virtual/block/loop0");
    std::fs::create_dir_all(&virtio).unwrap();
    std::fs::create_dir_all(&loop0).unwrap();
    std::fs::create_dir_all(sys.join("class/block")).unwrap();
    symlink(&nvme, sys.join("class/block/nvme0n1")).unwrap();
    symlink(nvme.join("nvme0n1p1"), sys.join("class/block/nvme0n1p1")).unwrap();
    symlink(&virtio, sys.join("class/block/vda")).unwrap();
    symlink(&loop0, sys.join("class/block/loop0")).unwrap();
    let pci = sys.join("bus/pci/devices/0000:01:00.0");
    std::fs::create_dir_all(&pci).unwrap();
    std::fs::write(pci.join("current_link_speed"), "8.0 GT/s PCIe\n").unwrap();
    std::fs::write(pci.join("current_link_width"), "4\n").unwrap();
    std::fs::write(pci.join("max_link_speed"), "16.0 GT/s PCIe\n").unwrap();
    std::fs::write(pci.join("max_link_width"), "4\n").unwrap();
    let mut config = vec![0u8; 256];
    config[0x34] = 0x40;
    config[0x40] = 0x10; // PCI Express capability, DevCtl: MPS 256, MRRS 512
    config[0x48..0x4a].copy_from_slice(&((1u16 << 5) | (2 << 12)).to_le_bytes());
    std::fs::write(pci.join("config"), &config).unwrap();
    // The XDMA driver's class device points at the card.
    let card = sys.join("devices/pci0000:00/0000:00:03.0/0000:02:00.0");
    std::fs::create_dir_all(&card).unwrap();
    std::fs::create_dir_all(sys.join("class/xdma/xdma0_user")).unwrap();
    symlink(&card, sys.join("class/xdma/xdma0_user/device")).unwrap();

    let found = detect_in(&dev, &sys);
    // GPUs come from the CUDA driver of this machine, not from the device tree: left out here.
    let targets: Vec<&str> = found.iter().filter(|c| c.kind != "cuda").map(|c| c.target.as_str()).collect();
    let d = dev.display();
    assert_eq!(
        targets,
        vec![
            format!("xdma:{d}/xdma0"),
            format!("xillybus:{d}/xillybus_write_32"),
            format!("xillybus:{d}/xillybus_write_8"),
            format!("block:{d}/nvme0n1"),
            format!("block:{d}/vda"),
        ]
    );
    assert_eq!(found[0].pci_address.as_deref(), Some("0000:02:00.0"));
    assert!(found[0].usable, "{}", found[0].reason);
    assert!(!found[1].usable && found[1].reason.contains("no xillybus_read_32"), "{}", found[1].reason);
    assert!(found[2].usable);
    assert_eq!(found[3].pci_address.as_deref(), Some("0000:01:00.0"));
    assert!(found[3].reason.contains("Gen3 x4") && found[3].reason.contains("read-only"), "{}", found[3].reason);
    assert_eq!(found[4].pci_address.as_deref(), Some("0000:00:02.0"));
    assert_eq!(choose(&found).unwrap().kind, "xdma");

    // Without the FPGA nodes, `run` falls back to reading the NVMe disk, never writing it.
    for node in ["xdma0_h2c_0", "xdma0_c2h_0", "xillybus_write_8", "xillybus_read_8", "xillybus_write_32"] {
        std::fs::remove_file(dev.join(node)).unwrap();
    }
    let found = detect_in(&dev, &sys);
    let chosen = choose(&found).unwrap();
    assert_eq!(chosen.target, format!("block:{d}/nvme0n1"));
    assert!(chosen.reason.contains("writes need --destructive"));
    // Missing nodes make a candidate unusable, with the reason.
    std::fs::remove_file(dev.join("nvme0n1")).unwrap();
    let found = detect_in(&dev, &sys);
    assert!(!found[0].usable && found[0].reason.contains("missing"), "{}", found[0].reason);
}

#[test]
fn detection_on_this_machine_offers_block_devices_read_only() {
    let found = engine::detect();
    for candidate in &found {
        eprintln!("{} [{}] usable={} pci={:?}: {}", candidate.target, candidate.kind, candidate.usable, candidate.pci_address, candidate.reason);
        if candidate.kind == "block" {
            assert!(candidate.target.starts_with("block:/dev/"));
            assert!(candidate.reason.contains("read-only") && candidate.pci_address.is_some(), "{}", candidate.reason);
        }
    }
    if let Some(chosen) = choose(&found) {
        // Whatever is chosen opens without --destructive and never offers writes to a disk.
        if chosen.kind == "block" {
            let engine = engine::open(&chosen.target, &OpenOptions::default()).unwrap();
            assert_eq!(engine.info().directions, vec![Direction::D2h]);
        }
    }
}

/// `chardev:NODE,mmap`: data moves through the node's mapped DMA buffer (document 000 §5.5). A
/// regular file stands in for the driver's node: its mapping is the file's own pages, so what
/// write() sends from the mapping lands in the file and read() brings it back through it.
#[test]
fn a_mapped_dma_buffer_carries_the_data_and_bounds_the_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("dma_buf");
    std::fs::File::create(&node).unwrap().set_len(64 * 1024).unwrap();
    let target = format!("chardev:{},mmap", node.display());
    // A regular file stands in for the driver's node: writing it needs consent.
    let consent = OpenOptions { destructive: true, ..OpenOptions::default() };
    let mut engine = engine::open(&target, &consent).unwrap();
    assert!(engine.info().description.contains("mapped DMA buffer (65536 bytes)"), "{}", engine.info().description);
    assert_eq!(engine.info().max_transfer_bytes, 64 * 1024);
    let pattern = Pattern::lfsr(3);
    let mut sent = vec![0u8; 16 * 1024];
    pattern.fill(0, &mut sent);
    engine.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
    assert_eq!(std::fs::read(&node).unwrap()[..sent.len()], sent[..], "write() from the mapping reached the device");

    let mut fresh = engine::open(&target, &consent).unwrap();
    let mut back = vec![0u8; 16 * 1024];
    let t = fresh.transfer(Io::D2h(&mut back), 0, DEADLINE).unwrap();
    assert_eq!((t.direction, t.bytes), (Direction::D2h, 16 * 1024));
    assert_eq!(pattern.check(0, &back), None, "read() into the mapping, then out to the caller");

    let mut too_big = vec![0u8; 128 * 1024];
    assert!(matches!(fresh.transfer(Io::D2h(&mut too_big), 0, DEADLINE), Err(EngineError::InvalidInput(_))));
    let sized = engine::open(&format!("chardev:{},mmap=8KiB", node.display()), &OpenOptions::default()).unwrap();
    assert_eq!(sized.info().max_transfer_bytes, 8 * 1024);
    let pair = engine::open(&format!("chardev:{0},{0},mmap", node.display()), &OpenOptions::default()).err().unwrap();
    assert!(matches!(pair, EngineError::InvalidInput(_)), "{pair}");
}
