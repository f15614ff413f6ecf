//! `pcieperf pio`, the `bar` engine and the `vfio` DMA engine on a real kernel: QEMU q35 guests
//! (tests/testbed/) with QEMU's `edu` device and an `ivshmem-plain` RAM BAR, through sysfs, UIO
//! and VFIO (intel-iommu, and the kernel's no-IOMMU mode).
//!
//! Emulated timings are not PCIe timings: these tests check behaviour and plumbing, never speed.
//! Without QEMU or a kernel each test prints why it was skipped.

mod testbed;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use testbed::topology::{Below, Endpoint, RootPort};
use testbed::{Guest, Output, Topology, Unavailable};

/// One guest at a time: two TCG guests on two shared cores starve each other's timers, and an
/// intel-iommu guest then panics at boot ("timer doesn't work through Interrupt-remapped IO-APIC").
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn boot(topology: Topology) -> Option<Guest> {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testbed");
    match testbed::boot(&topology, Path::new(env!("CARGO_BIN_EXE_pcieperf")), &cache) {
        Ok(guest) => Some(guest),
        Err(Unavailable::Missing(why)) => {
            let _ = writeln!(std::io::stderr().lock(), "skipped testbed topology {}: {why}", topology.name);
            None
        }
        Err(Unavailable::Failed(error)) => panic!("testbed topology {} did not boot: {error}", topology.name),
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// The PCI address of the first function with `vendor:device`.
fn find(guest: &mut Guest, (vendor, device): (u16, u16)) -> String {
    let script = format!("for d in /sys/bus/pci/devices/*; do [ \"$(cat $d/vendor):$(cat $d/device)\" = 0x{vendor:04x}:0x{device:04x} ] && basename $d; done");
    let out = guest.run(&script).unwrap().stdout;
    out.lines().next().unwrap_or_else(|| panic!("no {vendor:04x}:{device:04x} in the guest")).to_string()
}

fn pio(guest: &mut Guest, args: &str) -> Output {
    guest.run_with_deadline(&format!("pcieperf pio {args}"), Duration::from_secs(120)).unwrap()
}

/// The error's bind commands, run as the guest's root (no sudo there; the guest's init has
/// loaded the modules already and its busybox modprobe cannot find them again).
fn run_bind_commands(guest: &mut Guest, error: &str) {
    let commands = error.split("to bind it, run: ").nth(1).and_then(|rest| rest.lines().next()).unwrap_or_else(|| panic!("no bind commands in: {error}"));
    let steps: Vec<&str> = commands.trim().split(" && ").filter(|step| !step.starts_with("sudo modprobe")).collect();
    assert!(steps.iter().any(|s| s.contains("driver_override")) && steps.last().unwrap().contains("drivers_probe"), "{commands}");
    guest.run(&steps.join(" && ").replace("sudo ", "")).unwrap().success();
}

fn tests_run(output: &Output) -> Vec<u64> {
    json(&output.stdout)["tests"].as_array().unwrap().iter().map(|t| t["number"].as_u64().unwrap()).collect()
}

#[test]
fn edu_and_ivshmem_through_sysfs_uio_and_vfio_with_an_iommu() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut guest) = boot(Topology::preset("mixed").unwrap()) else { return };
    let edu = find(&mut guest, Endpoint::Edu.ids());
    let ivshmem = find(&mut guest, Endpoint::Ivshmem.ids());
    let dev = format!("/sys/bus/pci/devices/{edu}");

    // Memory decoding off (Command register cleared through config space): an unprivileged user
    // is told what needs root; root gets it turned on through `enable`, and is told so.
    guest.run(&format!("printf '\\000' | dd of={dev}/config bs=1 seek=4 conv=notrunc 2>/dev/null")).unwrap().success();
    let refused = guest.run_unprivileged(&format!("pcieperf pio --target bar:{edu} --tests 2")).unwrap();
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("memory decoding") && refused.stderr.contains("needs root"), "{}", refused.stderr);
    let out = pio(&mut guest, &format!("--target bar:{edu} --count 10 --json")).success();
    assert!(out.stderr.contains("memory decoding was off; enabled"), "{}", out.stderr);
    let run = json(&out.stdout);
    assert_eq!(run["simulated"], false);
    assert_eq!(run["engine"]["pci_address"], edu.as_str());
    assert!(run["engine"]["description"].as_str().unwrap().contains("emulated"), "{}", run["engine"]);
    assert_eq!(tests_run(&out), [2, 4, 7, 9, 11, 13, 15, 16], "read-only tests by default");
    // edu sits behind a 5 GT/s x4 root port: the model uses that link.
    assert_eq!(run["model_conditions"]["params"]["link"], serde_json::json!({ "generation": "gen2", "width": 4 }), "{}", run["model_conditions"]);
    assert!(run["model_conditions"]["source"].as_str().unwrap().contains("port above"), "{}", run["model_conditions"]);

    // Reads and writes reach the device: edu's liveness register reads back the inverse of what
    // was written, so Test 5's read-back check fails there, and says so.
    let liveness = pio(&mut guest, &format!("--target bar:{edu} --tests 5 --offset 0x4 --count 1"));
    assert_eq!(liveness.code, 1, "{liveness:?}");
    assert!(liveness.stdout.contains("1 of 1 read-backs differed"), "{}", liveness.stdout);
    let read = guest.run(&format!("pcieperf pio --target bar:{edu} --tests 7 --offset 0x4 --count 3 --json")).unwrap().success();
    assert_eq!(json(&read.stdout)["tests"][0]["cases"][0]["samples"], 3);
    // Only edu's liveness register is scratch; writes elsewhere need --destructive; offsets
    // beyond the 1 MiB BAR are refused before any access.
    let walk = pio(&mut guest, &format!("--target bar:{edu} --tests 3 --offset 0x4 --count 4"));
    assert_eq!(walk.code, 2, "{walk:?}");
    assert!(walk.stderr.contains("--destructive"), "{}", walk.stderr);
    let beyond = pio(&mut guest, &format!("--target bar:{edu} --tests 2 --offset 0x100000"));
    assert_eq!(beyond.code, 2, "{beyond:?}");
    assert!(beyond.stderr.contains("beyond the BAR"), "{}", beyond.stderr);

    // Document 001's register flow through the same BAR: edu is not that endpoint, and the flow
    // says so from the version register before writing anything.
    let demo = guest.run(&format!("pcieperf demo --target bar:{edu} --write")).unwrap();
    assert_eq!(demo.code, 1, "{demo:?}");
    assert!(demo.stderr.contains("not the performance-demo endpoint"), "{}", demo.stderr);

    // ivshmem-plain's RAM BAR through resource2_wc: write combining (Test 14) and walking writes
    // (Test 3) need no --destructive there; the register BAR0 is not mapped write-combining.
    let wc = pio(&mut guest, &format!("--target bar:{ivshmem},bar=2,wc --tests 3,14 --count 4 --json")).success();
    let run = json(&wc.stdout);
    assert_eq!(run["tests"][1]["cases"].as_array().unwrap().len(), 13, "1 B to 4 KiB");
    assert!(run["tests"][1]["cases"][6]["predicted"]["basis"].as_str().unwrap().contains("1 x 64 B"), "{}", run["tests"][1]["cases"][6]);
    let not_prefetchable = pio(&mut guest, &format!("--target bar:{ivshmem},bar=0,wc --tests 14 --destructive"));
    assert_eq!(not_prefetchable.code, 1, "{not_prefetchable:?}");
    assert!(not_prefetchable.stderr.contains("not prefetchable"), "{}", not_prefetchable.stderr);

    // UIO: refused with the exact bind commands while unbound; after running them, the BAR is
    // reached through /dev/uio0's map (uio_pci_generic exports memory BARs).
    let unbound = pio(&mut guest, &format!("--target bar:{edu},via=uio --tests 2"));
    assert_eq!(unbound.code, 1, "{unbound:?}");
    assert!(unbound.stderr.contains("never rebinds"), "{}", unbound.stderr);
    run_bind_commands(&mut guest, &unbound.stderr);
    let uio = pio(&mut guest, &format!("--target bar:{edu},via=uio --tests 2,6 --offset 0x4 --count 5")).success();
    assert!(uio.stderr.contains("BAR0 mapped through /dev/uio0 map0"), "{}", uio.stderr);
    assert!(uio.stdout.contains("Test 6: n writes to one address"));

    // VFIO with intel-iommu: the bind commands unbind uio_pci_generic first.
    let vfio_unbound = pio(&mut guest, &format!("--target bar:{edu},via=vfio --tests 2"));
    assert!(vfio_unbound.stderr.contains("bound to uio_pci_generic") && vfio_unbound.stderr.contains("driver/unbind"), "{}", vfio_unbound.stderr);
    run_bind_commands(&mut guest, &vfio_unbound.stderr);
    let vfio = pio(&mut guest, &format!("--target bar:{edu},via=vfio --tests 2,6 --offset 0x4 --count 5")).success();
    assert!(!vfio.stderr.contains("no-IOMMU"), "{}", vfio.stderr);

    // The edu DMA personality: LFSR data to the device and back, verified, host clock,
    // completion interrupts through the eventfd; sizes past the usable buffer refused.
    let target = format!("vfio:{edu},personality=edu");
    let out = guest
        .run_with_deadline(&format!("pcieperf dma --target {target} --dir h2d --sizes 1KiB,2KiB --duration 1s --json"), Duration::from_secs(120))
        .unwrap()
        .success();
    let results = json(&out.stdout);
    assert_eq!(results["complete"], true);
    assert_eq!(results["verification"]["failed"], 0, "{}", results["verification"]);
    assert!(results["verification"]["passed"].as_u64().unwrap() >= 2, "{}", results["verification"]);
    assert!(results["conditions"]["engine"]["description"].as_str().unwrap().contains("IOMMU"));
    let out = guest.run_with_deadline(&format!("pcieperf dma --target {target} --dir d2h --sizes 2KiB --duration 1s"), Duration::from_secs(120)).unwrap().success();
    assert!(out.stdout.contains("0 failed"), "{}", out.stdout);
    assert!(out.stdout.contains("on the device's IRQ"), "completion interrupts counted: {}", out.stdout);
    let too_big = guest.run(&format!("pcieperf dma --target {target} --dir d2h --sizes 4KiB --duration 1s")).unwrap();
    assert_eq!(too_big.code, 2, "{too_big:?}");

    // Unplugged: the device removed through the monitor; pio says it is gone, nothing hangs.
    guest.qmp.execute("device_del", serde_json::json!({ "id": "edu0" })).unwrap();
    guest.qmp.wait_event("DEVICE_DELETED", Duration::from_secs(60), |d| d["device"] == "edu0").unwrap();
    let gone = pio(&mut guest, &format!("--target bar:{edu} --tests 2"));
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("hot-unplugged"), "{}", gone.stderr);
}

#[test]
fn edu_through_vfio_in_no_iommu_mode() {
    let topology = Topology {
        name: "edu-noiommu",
        about: "edu behind a 5 GT/s x4 root port, no IOMMU (VFIO's no-IOMMU mode)",
        root_ports: vec![RootPort::new("5", 4, Below::Device(Endpoint::Edu))],
        iommu: false,
    };
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut guest) = boot(topology) else { return };
    let edu = find(&mut guest, Endpoint::Edu.ids());
    // Without an IOMMU the function is in no IOMMU group: pcieperf says what is missing before
    // asking for any binding.
    let unbound = pio(&mut guest, &format!("--target bar:{edu},via=vfio --tests 2"));
    assert_eq!(unbound.code, 1, "{unbound:?}");
    assert!(unbound.stderr.contains("no IOMMU group"), "{}", unbound.stderr);
    let parameter = "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode";
    if guest.run(&format!("test -e {parameter}")).unwrap().code != 0 {
        assert!(unbound.stderr.contains("CONFIG_VFIO_NOIOMMU"), "{}", unbound.stderr);
        let _ = writeln!(std::io::stderr().lock(), "skipped VFIO no-IOMMU mode: the guest kernel is built without CONFIG_VFIO_NOIOMMU (Debian's is)");
        return;
    }
    guest.run(&format!("echo 1 > {parameter}")).unwrap().success();
    let off = pio(&mut guest, &format!("--target bar:{edu},via=vfio --tests 2"));
    run_bind_commands(&mut guest, &off.stderr);
    let out = pio(&mut guest, &format!("--target bar:{edu},via=vfio --tests 2,6 --offset 0x4 --count 5")).success();
    assert!(out.stderr.contains("WARNING: VFIO no-IOMMU mode"), "said loudly: {}", out.stderr);
    // DMA without an IOMMU reaches physical addresses; edu masks them to 28 bits, so the buffer
    // either lands low enough and the data verifies, or pcieperf refuses clearly.
    let dma = guest
        .run_with_deadline(&format!("pcieperf dma --target vfio:{edu},personality=edu --dir h2d --sizes 1KiB --duration 1s"), Duration::from_secs(120))
        .unwrap();
    assert!(dma.stderr.contains("no-IOMMU"), "{}", dma.stderr);
    match dma.code {
        0 => assert!(dma.stdout.contains("0 failed"), "{}", dma.stdout),
        _ => assert!(dma.stderr.contains("beyond what edu reaches"), "{dma:?}"),
    }
}
