//! Interrupts seen during a run, from `/proc/interrupts` before and after (document 000 counts
//! timer, local-timer and rescheduling interrupts as the source of long delays, §4).
//!
//! Per vector of the device when sysfs lists them (`msi_irqs/` for MSI and MSI-X, `irq` for INTx:
//! the kernel's own list, so a line labelled `PCI-MSI 524289-edge nvme0q1` is attributed too);
//! else the lines that name the device (its PCI address, as in `PCI-MSIX-0000:01:00.0`, or its
//! driver, as in `xdma`); otherwise the total over every line, labelled as the host's, so the
//! reader still sees how busy the host was.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One line of `/proc/interrupts`: the IRQ label, its count summed over CPUs, the rest of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    pub irq: String,
    pub count: u64,
    pub description: String,
}

/// A parsed `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub lines: Vec<IrqLine>,
}

impl Snapshot {
    /// Read `/proc/interrupts`; `None` when it cannot be read (not Linux, no procfs).
    pub fn read() -> Option<Snapshot> {
        std::fs::read_to_string("/proc/interrupts").ok().map(|t| Snapshot::parse(&t))
    }

    /// Parse the text: a header of `CPUn` columns, then `LABEL: counts... description`.
    pub fn parse(text: &str) -> Snapshot {
        let mut lines_iter = text.lines();
        let cpus = lines_iter.next().map(|h| h.split_whitespace().filter(|w| w.starts_with("CPU")).count()).unwrap_or(0);
        let lines = lines_iter
            .filter_map(|line| {
                let (irq, rest) = line.split_once(':')?;
                let mut count = 0u64;
                let mut words = rest.split_whitespace().peekable();
                for _ in 0..cpus {
                    match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                        Some(n) => {
                            count += n;
                            words.next();
                        }
                        None => break,
                    }
                }
                Some(IrqLine { irq: irq.trim().to_string(), count, description: words.collect::<Vec<_>>().join(" ") })
            })
            .collect();
        Snapshot { lines }
    }

    fn matching<'a>(&'a self, keys: &'a [String]) -> impl Iterator<Item = &'a IrqLine> + 'a {
        self.lines.iter().filter(move |l| keys.iter().any(|k| !k.is_empty() && l.description.contains(k.as_str())))
    }
}

/// Interrupts counted over a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptDelta {
    /// `device_vectors` (the vectors sysfs lists for the device), `device` (lines naming the
    /// device), else `host_total`.
    pub scope: String,
    /// IRQ labels counted (for the device scopes), e.g. `["24", "25"]`.
    pub irqs: Vec<String>,
    pub count: u64,
    /// Per IRQ counted (device scopes only): label, its `/proc/interrupts` description, count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_irq: Vec<IrqCount>,
}

/// One vector's interrupts over a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqCount {
    pub irq: String,
    pub description: String,
    pub count: u64,
}

/// The device's interrupt vectors as the kernel lists them under its sysfs directory: one entry of
/// `msi_irqs/` per MSI or MSI-X vector (named by IRQ number), else the INTx line in `irq` (0 or
/// absent: none).
pub fn device_vectors(device_dir: &Path) -> Vec<String> {
    let mut msi: Vec<u64> = std::fs::read_dir(device_dir.join("msi_irqs"))
        .map(|entries| entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    msi.sort_unstable();
    if !msi.is_empty() {
        return msi.iter().map(u64::to_string).collect();
    }
    let intx = std::fs::read_to_string(device_dir.join("irq")).ok().and_then(|t| t.trim().parse::<u64>().ok());
    intx.filter(|&irq| irq != 0).map(|irq| vec![irq.to_string()]).unwrap_or_default()
}

/// Interrupts between two snapshots: on the device's `vectors` when any is in the snapshot, else
/// on the lines naming one of `keys` (PCI address, driver), else on every line.
pub fn delta(before: &Snapshot, after: &Snapshot, vectors: &[String], keys: &[String]) -> InterruptDelta {
    let own: Vec<&IrqLine> = after.lines.iter().filter(|l| vectors.contains(&l.irq)).collect();
    let named: Vec<&IrqLine> = after.matching(keys).collect();
    let (scope, lines): (&str, Vec<&IrqLine>) = match (own.is_empty(), named.is_empty()) {
        (false, _) => ("device_vectors", own),
        (true, false) => ("device", named),
        (true, true) => ("host_total", after.lines.iter().collect()),
    };
    let counted = |l: &IrqLine| l.count.saturating_sub(before.lines.iter().find(|b| b.irq == l.irq).map_or(0, |b| b.count));
    let count = lines.iter().map(|l| counted(l)).sum();
    let per_irq: Vec<IrqCount> = match scope {
        "host_total" => Vec::new(),
        _ => lines.iter().map(|l| IrqCount { irq: l.irq.clone(), description: l.description.clone(), count: counted(l) }).collect(),
    };
    let irqs = per_irq.iter().map(|c| c.irq.clone()).collect();
    InterruptDelta { scope: scope.to_string(), irqs, count, per_irq }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "           CPU0       CPU1
  0:         44          0   IO-APIC   2-edge      timer
 24:         10        100  IR-PCI-MSIX-0000:01:00.0    0-edge      xdma
 25:          5          0  IR-PCI-MSIX-0000:02:00.0    0-edge      nvme0q0
NMI:          0          0   Non-maskable interrupts
LOC:       1000       2000   Local timer interrupts
ERR:          0
";
    const AFTER: &str = "           CPU0       CPU1
  0:         44          0   IO-APIC   2-edge      timer
 24:         15        130  IR-PCI-MSIX-0000:01:00.0    0-edge      xdma
 25:          9          0  IR-PCI-MSIX-0000:02:00.0    0-edge      nvme0q0
NMI:          0          0   Non-maskable interrupts
LOC:       1100       2050   Local timer interrupts
ERR:          0
";

    #[test]
    fn parses_counts_over_cpus() {
        let snap = Snapshot::parse(BEFORE);
        assert_eq!(snap.lines.len(), 6);
        assert_eq!(snap.lines[1], IrqLine { irq: "24".into(), count: 110, description: "IR-PCI-MSIX-0000:01:00.0 0-edge xdma".into() });
        assert_eq!(snap.lines[5].count, 0);
        assert_eq!(snap.lines[4].description, "Local timer interrupts");
    }

    #[test]
    fn counts_the_device_when_a_line_names_it() {
        let (before, after) = (Snapshot::parse(BEFORE), Snapshot::parse(AFTER));
        let by_address = delta(&before, &after, &[], &["0000:01:00.0".into()]);
        let xdma = IrqCount { irq: "24".into(), description: "IR-PCI-MSIX-0000:01:00.0 0-edge xdma".into(), count: 35 };
        assert_eq!(by_address, InterruptDelta { scope: "device".into(), irqs: vec!["24".into()], count: 35, per_irq: vec![xdma] });
        let by_driver = delta(&before, &after, &[], &["nvme".into()]);
        assert_eq!(by_driver.count, 4);
    }

    /// The kernel's label need not name the device (`PCI-MSI 524289-edge nvme0q1`): sysfs's
    /// vector list attributes it anyway, per vector, ahead of any name match.
    #[test]
    fn counts_the_vectors_sysfs_lists_per_vector() {
        let (before, after) = (Snapshot::parse(BEFORE), Snapshot::parse(AFTER));
        let vectors = ["25".to_string(), "0".to_string()];
        let d = delta(&before, &after, &vectors, &["0000:01:00.0".into()]);
        assert_eq!(d.scope, "device_vectors");
        assert_eq!(d.irqs, ["0", "25"]);
        assert_eq!(d.count, 4);
        assert_eq!(d.per_irq.iter().map(|c| c.count).collect::<Vec<_>>(), [0, 4]);
        let absent = delta(&before, &after, &["99".into()], &[]);
        assert_eq!(absent.scope, "host_total", "a vector missing from /proc/interrupts is not the device's count");
    }

    #[test]
    fn reads_msi_vectors_then_intx_from_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        assert!(device_vectors(dir.path()).is_empty());
        std::fs::write(dir.path().join("irq"), "0\n").unwrap();
        assert!(device_vectors(dir.path()).is_empty(), "irq 0 is no line");
        std::fs::write(dir.path().join("irq"), "17\n").unwrap();
        assert_eq!(device_vectors(dir.path()), ["17"]);
        std::fs::create_dir(dir.path().join("msi_irqs")).unwrap();
        for v in ["130", "129", "24"] {
            std::fs::write(dir.path().join("msi_irqs").join(v), "msix\n").unwrap();
        }
        assert_eq!(device_vectors(dir.path()), ["24", "129", "130"]);
    }

    #[test]
    fn falls_back_to_the_host_total() {
        let (before, after) = (Snapshot::parse(BEFORE), Snapshot::parse(AFTER));
        let total = delta(&before, &after, &[], &["0000:09:00.0".into()]);
        assert_eq!(total.scope, "host_total");
        assert_eq!(total.count, 35 + 4 + 150);
        assert!(total.per_irq.is_empty());
    }
}

/// Interrupts counted on one CPU's column of `/proc/interrupts`, summed over every line (timer,
/// local timer, rescheduling, device): what can hold up a thread pinned to that CPU.
pub fn cpu_total(text: &str, cpu: usize) -> Option<u64> {
    let mut lines = text.lines();
    let column = lines.next()?.split_whitespace().position(|w| w == format!("CPU{cpu}"))?;
    Some(
        lines
            .filter_map(|line| line.split_once(':').and_then(|(_, rest)| rest.split_whitespace().nth(column)?.parse::<u64>().ok()))
            .sum(),
    )
}

/// [`cpu_total`] of the live `/proc/interrupts`.
pub fn cpu_total_now(cpu: usize) -> Option<u64> {
    cpu_total(&std::fs::read_to_string("/proc/interrupts").ok()?, cpu)
}

#[cfg(test)]
mod cpu_tests {
    #[test]
    fn one_cpu_column() {
        let text = "           CPU0       CPU1\n  0:  44  0  IO-APIC timer\nLOC:  1000  2000  Local timer interrupts\nERR:  0\n";
        assert_eq!(super::cpu_total(text, 0), Some(1044));
        assert_eq!(super::cpu_total(text, 1), Some(2000));
        assert_eq!(super::cpu_total(text, 7), None);
    }
}
