//! Pin the measuring thread to one CPU, and say when that CPU's frequency scaling or idle
//! states are likely to distort per-access timings (document 000 ran with scaling disabled).

use serde::{Deserialize, Serialize};

/// Where the measurement ran and what may distort it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pinning {
    /// CPU the thread was pinned to; None when pinning failed or was not needed (simulated).
    pub cpu: Option<usize>,
    pub warnings: Vec<String>,
}

/// Pin the calling thread to the CPU it is running on.
pub fn pin_here() -> Pinning {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return Pinning { cpu: None, warnings: vec!["could not tell which CPU this thread runs on; not pinned".into()] };
    }
    let cpu = cpu as usize;
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only touch it.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    let mut warnings = distortions(std::path::Path::new("/sys/devices/system/cpu"), cpu);
    if !pinned {
        warnings.insert(0, format!("could not pin to CPU {cpu}: the scheduler may move the thread between accesses"));
    }
    Pinning { cpu: pinned.then_some(cpu), warnings }
}

/// Frequency scaling and idle states of `cpu` under `cpu_root` (normally /sys/devices/system/cpu).
pub fn distortions(cpu_root: &std::path::Path, cpu: usize) -> Vec<String> {
    let dir = cpu_root.join(format!("cpu{cpu}"));
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).ok().map(|t| t.trim().to_string());
    let mut warnings = Vec::new();
    match read(dir.join("cpufreq/scaling_governor")) {
        Some(governor) if governor != "performance" => warnings.push(format!(
            "CPU {cpu} frequency governor is '{governor}': the clock may change during the run (set 'performance' for steady timings)"
        )),
        _ => {}
    }
    let idle: Vec<String> = (1..16)
        .filter_map(|state| {
            let state_dir = dir.join(format!("cpuidle/state{state}"));
            let name = read(state_dir.join("name"))?;
            (read(state_dir.join("disable")).as_deref() == Some("0")).then_some(name)
        })
        .collect();
    if !idle.is_empty() {
        warnings.push(format!(
            "CPU {cpu} may enter idle states {} while waiting: waking adds microseconds to some accesses (disable them, or boot with idle=poll)",
            idle.join(", ")
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_about_governor_and_enabled_idle_states() {
        let root = tempfile::tempdir().unwrap();
        let cpu = root.path().join("cpu2");
        std::fs::create_dir_all(cpu.join("cpufreq")).unwrap();
        std::fs::write(cpu.join("cpufreq/scaling_governor"), "powersave\n").unwrap();
        for (state, name, disable) in [(1, "C1", "0"), (2, "C6", "1")] {
            let dir = cpu.join(format!("cpuidle/state{state}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("name"), name).unwrap();
            std::fs::write(dir.join("disable"), disable).unwrap();
        }
        let warnings = distortions(root.path(), 2);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("powersave"));
        assert!(warnings[1].contains("C1") && !warnings[1].contains("C6"));
        std::fs::write(cpu.join("cpufreq/scaling_governor"), "performance").unwrap();
        assert_eq!(distortions(root.path(), 2).len(), 1);
    }
}
