//! Interrupts seen during a run, from `/proc/interrupts` before and after (document 000 counts
//! timer, local-timer and rescheduling interrupts as the source of long delays, §4).
//!
//! Per device when a line names the device (its PCI address, as in `PCI-MSIX-0000:01:00.0`, or
//! its driver, as in `xdma`); otherwise the total over every line, so the reader still sees how
//! busy the host was.

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
    /// `device` when lines matched the device, else `host_total`.
    pub scope: String,
    /// IRQ labels counted (for `device`), e.g. `["24", "25"]`.
    pub irqs: Vec<String>,
    pub count: u64,
}

/// Interrupts between two snapshots, for the lines naming one of `keys` (PCI address, driver),
/// or all lines when none does.
pub fn delta(before: &Snapshot, after: &Snapshot, keys: &[String]) -> InterruptDelta {
    let count_of = |snap: &Snapshot, irq: &str| snap.lines.iter().find(|l| l.irq == irq).map_or(0, |l| l.count);
    let device: Vec<&IrqLine> = after.matching(keys).collect();
    let (scope, lines): (&str, Vec<&IrqLine>) =
        if device.is_empty() { ("host_total", after.lines.iter().collect()) } else { ("device", device) };
    let count = lines.iter().map(|l| l.count.saturating_sub(count_of(before, &l.irq))).sum();
    let irqs = if scope == "device" { lines.iter().map(|l| l.irq.clone()).collect() } else { Vec::new() };
    InterruptDelta { scope: scope.to_string(), irqs, count }
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
        let by_address = delta(&before, &after, &["0000:01:00.0".into()]);
        assert_eq!(by_address, InterruptDelta { scope: "device".into(), irqs: vec!["24".into()], count: 35 });
        let by_driver = delta(&before, &after, &["nvme".into()]);
        assert_eq!(by_driver.count, 4);
    }

    #[test]
    fn falls_back_to_the_host_total() {
        let (before, after) = (Snapshot::parse(BEFORE), Snapshot::parse(AFTER));
        let total = delta(&before, &after, &["0000:09:00.0".into()]);
        assert_eq!(total.scope, "host_total");
        assert_eq!(total.count, 35 + 4 + 150);
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
