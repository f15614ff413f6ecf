//! Try pcieperf on an emulated PCI Express topology without hardware: boots a QEMU q35 guest
//! (Debian's kernel, TCG) with the chosen topology and runs pcieperf in it.
//!
//! ```sh
//! cargo run --example testbed -- degraded                 # inspect a degraded topology
//! cargo run --example testbed -- nvme 'pcieperf run --quick'
//! cargo run --example testbed -- --list
//! ```
//!
//! Emulated devices move data at the emulator's speed, not at PCIe speed: use this to see what
//! pcieperf reports and how, never as a performance figure.

#[path = "../tests/testbed/mod.rs"]
mod testbed;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use testbed::{Topology, Unavailable};

/// The pcieperf binary of the same profile, built first so the guest runs the current code.
fn pcieperf_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("PCIEPERF_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile_dir = exe.parent().and_then(Path::parent).ok_or("cannot place the example binary")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "--bin", "pcieperf"]);
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().map_err(|e| format!("cannot run cargo to build pcieperf: {e}"))?;
    if !status.success() {
        return Err("building pcieperf failed".into());
    }
    Ok(profile_dir.join("pcieperf"))
}

fn list() {
    println!("topologies (cargo run --example testbed -- NAME ['GUEST COMMAND' ...]):");
    for t in Topology::presets() {
        println!("  {:<9} {}", t.name, t.about.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first().filter(|a| !a.starts_with('-')) else {
        list();
        return if args.is_empty() || args[0] == "--list" { ExitCode::SUCCESS } else { ExitCode::from(2) };
    };
    let Some(topology) = Topology::preset(name) else {
        eprintln!("unknown topology '{name}'");
        list();
        return ExitCode::from(2);
    };
    let mut commands: Vec<String> = args[1..].to_vec();
    if commands.is_empty() {
        commands = vec!["lspci -tv 2>/dev/null".into(), "pcieperf inspect".into()];
        if let Some(endpoint) = topology.placed().first() {
            let (vendor, device) = endpoint.endpoint.ids();
            commands.push(format!("pcieperf inspect -v -s $(lspci -n -d {vendor:04x}:{device:04x} 2>/dev/null | cut -d' ' -f1 | head -1)"));
        }
        if topology.placed().iter().any(|p| p.endpoint == testbed::Endpoint::Nvme) {
            commands.push("pcieperf run --quick".into());
        }
    }
    let pcieperf = match pcieperf_binary() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("testbed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cache = pcieperf.parent().unwrap().join("testbed");
    println!("booting QEMU q35 (TCG) with topology '{}': {}", topology.name, topology.about.split_whitespace().collect::<Vec<_>>().join(" "));
    let mut guest = match testbed::boot(&topology, &pcieperf, &cache) {
        Ok(g) => g,
        Err(Unavailable::Missing(why)) => {
            eprintln!("testbed: cannot run here: {why}");
            return ExitCode::FAILURE;
        }
        Err(Unavailable::Failed(e)) => {
            eprintln!("testbed: the guest did not boot: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("booted in {:.1} s. Every device below is emulated by QEMU: links are nominal, rates are the emulator's.\n", guest.boot_time.as_secs_f64());
    let mut worst = 0;
    for command in commands {
        println!("guest# {command}");
        match guest.run_with_deadline(&command, std::time::Duration::from_secs(600)) {
            Ok(out) => {
                print!("{}", out.stdout);
                eprint!("{}", out.stderr);
                if out.code != 0 {
                    println!("(exit {})", out.code);
                    worst = worst.max(out.code);
                }
            }
            Err(e) => {
                eprintln!("testbed: {e}");
                return ExitCode::FAILURE;
            }
        }
        println!();
    }
    ExitCode::from(worst.clamp(0, 255) as u8)
}
