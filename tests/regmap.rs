//! The register map is written once, in hdl/regs/pcieperf.rdl: the checked-in copies generated
//! from it (Rust, Verilog, Python, markdown) must be what the generator gives today, and the
//! simulator must answer the map it is built from.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcieperf::device::regmap::{BAR_BYTES, RAM_BAR, REGISTERS};
use pcieperf::engine::sim::SimEngine;
use pcieperf::engine::{Mmio, OpenOptions};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path, relative: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir.join(relative)).unwrap() {
        let entry = entry.unwrap();
        let path = relative.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            files_under(dir, &path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn generated_copies_match_the_rdl_source() {
    let out = std::env::temp_dir().join(format!("pcieperf-regmap-drift-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let script = repository().join("hdl/regs/generate.py");
    let run = match Command::new(pcieperf::engine::cosim::hdl_python()).arg(&script).arg("--out").arg(&out).output() {
        Ok(run) => run,
        Err(e) => {
            println!("skipped: python3 cannot run the register map generator: {e}");
            return;
        }
    };
    let said = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    if run.status.code() == Some(77) {
        let _ = fs::remove_dir_all(&out);
        println!("{}", said.lines().find(|l| l.starts_with("skipped:")).unwrap_or("skipped: the generator's prerequisites are missing"));
        return;
    }
    assert!(run.status.success(), "generate.py failed ({}): {said}", run.status);
    let mut generated = Vec::new();
    files_under(&out, Path::new(""), &mut generated);
    let stale: Vec<String> = generated
        .iter()
        .filter(|path| fs::read(out.join(path)).ok() != fs::read(repository().join(path)).ok())
        .map(|path| path.display().to_string())
        .collect();
    let _ = fs::remove_dir_all(&out);
    // Rust constants, Verilog header, Python module, markdown tables.
    assert!(generated.len() >= 4, "the generator wrote only {generated:?}");
    assert!(stale.is_empty(), "{stale:?} differ from what hdl/regs/pcieperf.rdl gives: run `python3 hdl/regs/generate.py` and commit the result");
}

#[test]
fn the_simulator_answers_the_generated_map() {
    let mut sim = SimEngine::open("sim:doc001", &OpenOptions { seed: 1, ..OpenOptions::default() }).unwrap();
    for (bar, &size) in BAR_BYTES.iter().enumerate() {
        assert_eq!(sim.bar_bytes(bar as u8), Some(size), "BAR{bar}");
    }
    assert_eq!(sim.bar_bytes(BAR_BYTES.len() as u8), None);
    for reg in REGISTERS {
        let value = sim.read32(reg.bar, reg.offset).unwrap();
        if let Some(reset) = reg.reset {
            assert_eq!(value as u64, reset & 0xFFFF_FFFF, "{} after reset", reg.name);
        }
        if !reg.writable {
            sim.write32(reg.bar, reg.offset, 0xDEAD_BEEF).unwrap();
            assert_eq!(sim.read32(reg.bar, reg.offset).unwrap(), value, "{} is read-only", reg.name);
        }
    }
    // The demo's set-up registers (BAR1, BAR2; BAR0 holds the start and the core's extension,
    // which the simulator does not model) read back what was written.
    let setup: Vec<_> = REGISTERS.iter().filter(|r| r.writable && r.bar != 0 && r.bar != RAM_BAR).collect();
    assert!(setup.len() >= 5, "buffers, fixed parameter, block amount, threshold: {setup:?}");
    for (i, reg) in setup.iter().enumerate() {
        let value = 0x1000_0000 + 0x2000 * i as u32;
        sim.write32(reg.bar, reg.offset, value).unwrap();
        assert_eq!(sim.read32(reg.bar, reg.offset).unwrap(), value, "{}", reg.name);
    }
}

#[test]
fn the_generator_refuses_a_map_whose_names_repeat() {
    let dir = std::env::temp_dir().join(format!("pcieperf-regmap-refuse-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    // The same register name in two BARs: the flat Rust, Verilog and Python namespaces would clash.
    let source = dir.join("twice.rdl");
    fs::write(
        &source,
        "property pcie_bar { type = longint unsigned; component = addrmap | mem; };\n\
         property bar_bytes { type = longint unsigned; component = addrmap | mem; };\n\
         reg r32 { field { sw = rw; hw = r; } value[31:0] = 0; };\n\
         addrmap twice {\n\
           addrmap { pcie_bar = 0; bar_bytes = 4096; r32 SAME @ 0x0; } bar0 @ 0x0000;\n\
           addrmap { pcie_bar = 1; bar_bytes = 4096; r32 SAME @ 0x4; } bar1 @ 0x1000;\n\
         };\n",
    )
    .unwrap();
    let run = Command::new(pcieperf::engine::cosim::hdl_python())
        .arg(repository().join("hdl/regs/generate.py"))
        .arg("--source")
        .arg(&source)
        .arg("--out")
        .arg(dir.join("out"))
        .output();
    let written = dir.join("out").exists();
    let _ = fs::remove_dir_all(&dir);
    let run = match run {
        Ok(run) if run.status.code() != Some(77) => run,
        Ok(_) => return println!("skipped: systemrdl-compiler missing (the generator exits 77)"),
        Err(e) => return println!("skipped: python3 cannot run the register map generator: {e}"),
    };
    let said = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("SAME is defined twice"), "{said}");
    assert!(!written, "a refused map writes nothing");
}
