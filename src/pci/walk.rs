//! Bounded walks of the capability list (from 0x34) and the extended capability list (from
//! 0x100), as lspci walks them. A loop, a pointer outside the bytes we have and a broken entry
//! end the walk; a pointer into the header (or below 0x100 for the extended list) is followed
//! as lspci follows it. Each is reported; nothing is followed twice, so every walk terminates.

use serde::Serialize;

use super::config::ConfigSpace;

/// One capability found on a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CapEntry {
    pub offset: usize,
    pub id: u16,
    /// Capability Version of an extended capability (0 for standard capabilities).
    pub version: u8,
}

/// Why a walk stopped early.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WalkProblem {
    /// The entry at `offset` was already visited.
    Loop { offset: usize },
    /// A pointer into the header (below 0x100 for the extended list): followed, as lspci does.
    OutOfRange { offset: usize },
    /// The entry lies beyond the bytes we could read (unprivileged sysfs reads stop at 64).
    Unavailable { offset: usize, available: usize },
    /// An ID of 0xff: the device stopped answering or the list is corrupt (lspci "chain broken").
    Broken { offset: usize },
}

impl std::fmt::Display for WalkProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkProblem::Loop { offset } => write!(f, "capability list loops back to 0x{offset:x}"),
            WalkProblem::OutOfRange { offset } => write!(f, "capability pointer 0x{offset:x} points into the header"),
            WalkProblem::Unavailable { offset, available } => {
                write!(f, "capability at 0x{offset:x} is beyond the {available} bytes readable (reading more needs root)")
            }
            WalkProblem::Broken { offset } => write!(f, "capability list broken at 0x{offset:x} (ID 0xff)"),
        }
    }
}

/// The capabilities found and, if the walk stopped early, why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Walk {
    pub caps: Vec<CapEntry>,
    pub problem: Option<WalkProblem>,
}

impl Walk {
    pub fn find(&self, id: u16) -> Option<usize> {
        self.caps.iter().find(|c| c.id == id).map(|c| c.offset)
    }
}

/// The line lspci ends a standard list with when it cannot follow it to the end:
/// `Capabilities: <access denied>` (beyond the bytes read), `[xx] <chain looped>`,
/// `[xx] <chain broken>` (ID ff).
pub fn standard_end_line(problem: &WalkProblem, config: &ConfigSpace) -> Option<(String, Option<String>)> {
    let line = match problem {
        _ if !config.has(0, 64) => return None,
        WalkProblem::Unavailable { .. } => "Capabilities: <access denied>".to_string(),
        WalkProblem::Loop { offset } => format!("Capabilities: [{offset:02x}] <chain looped>"),
        WalkProblem::Broken { offset } => format!("Capabilities: [{offset:02x}] <chain broken>"),
        WalkProblem::OutOfRange { .. } => return None,
    };
    Some((line, None))
}

/// lspci's last line of an extended list that loops (`-vv` form, `-v` form); it stops silently
/// at bytes it could not read.
pub fn extended_end_lines(problem: &WalkProblem, config: &ConfigSpace) -> Option<(String, Option<String>)> {
    let WalkProblem::Loop { offset } = problem else { return None };
    let version = config.u32_at(*offset)? >> 16 & 0xf;
    Some((format!("Capabilities: [{offset:03x} v{version}] <chain looped>"), Some(format!("Capabilities: [{offset:03x}] <chain looped>"))))
}

/// The standard list: followed only when Status says it exists, at most 48 entries fit in
/// 0x40..0x100 at 4-byte alignment, and a visited set catches loops earlier. A pointer into the
/// header is followed, as lspci follows it, and reported when nothing else ends the walk.
pub fn standard(config: &ConfigSpace) -> Walk {
    let mut walk = Walk::default();
    if !config.has_capability_list() {
        return walk;
    }
    let Some(first) = config.u8_at(config.capability_pointer_offset()) else {
        walk.problem = Some(WalkProblem::Unavailable { offset: config.capability_pointer_offset(), available: config.len() });
        return walk;
    };
    let mut seen = [false; 256];
    let mut offset = usize::from(first & !3);
    let mut stray = None;
    while offset != 0 {
        if offset < 0x40 {
            stray = stray.or(Some(WalkProblem::OutOfRange { offset }));
        }
        if !config.has(offset, 4) {
            walk.problem = Some(WalkProblem::Unavailable { offset, available: config.len() });
            break;
        }
        if std::mem::replace(&mut seen[offset], true) {
            walk.problem = Some(WalkProblem::Loop { offset });
            break;
        }
        let id = config.u8_at(offset).unwrap_or(0xff);
        if id == 0xff {
            walk.problem = Some(WalkProblem::Broken { offset });
            break;
        }
        walk.caps.push(CapEntry { offset, id: u16::from(id), version: 0 });
        offset = usize::from(config.u8_at(offset + 1).unwrap_or(0) & !3);
    }
    walk.problem = walk.problem.or(stray);
    walk
}

/// The extended list at 0x100..0x1000 (PCIe Base Spec §7.6): a header of 0 or all ones ends it.
/// Absent when fewer than 260 bytes were read; lspci only looks for it on PCIe and PCI-X devices.
pub fn extended(config: &ConfigSpace) -> Walk {
    let mut walk = Walk::default();
    let mut seen = vec![false; 0x1000];
    let mut offset = 0x100;
    let mut stray = None;
    loop {
        if !config.has(offset, 4) {
            if offset != 0x100 || config.len() > 0x100 {
                walk.problem = Some(WalkProblem::Unavailable { offset, available: config.len() });
            }
            break;
        }
        let header = config.u32_at(offset).unwrap_or(0);
        if header == 0 || header == u32::MAX {
            break;
        }
        if std::mem::replace(&mut seen[offset], true) {
            walk.problem = Some(WalkProblem::Loop { offset });
            break;
        }
        walk.caps.push(CapEntry { offset, id: (header & 0xffff) as u16, version: ((header >> 16) & 0xf) as u8 });
        let next = (header >> 20) as usize & !3;
        if next == 0 {
            break;
        }
        if next < 0x100 {
            stray = stray.or(Some(WalkProblem::OutOfRange { offset: next }));
        }
        offset = next;
    }
    walk.problem = walk.problem.or(stray);
    walk
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(len: usize, edits: &[(usize, &[u8])]) -> ConfigSpace {
        let mut bytes = vec![0u8; len];
        bytes[6] = 0x10;
        for (at, data) in edits {
            bytes[*at..*at + data.len()].copy_from_slice(data);
        }
        ConfigSpace::new(bytes)
    }

    #[test]
    fn follows_the_list_and_reports_loops() {
        let ok = standard(&space(256, &[(0x34, &[0x40]), (0x40, &[0x01, 0x50]), (0x50, &[0x10, 0x00])]));
        assert_eq!(ok.caps.iter().map(|c| (c.offset, c.id)).collect::<Vec<_>>(), vec![(0x40, 1), (0x50, 0x10)]);
        assert_eq!(ok.problem, None);
        let looped = standard(&space(256, &[(0x34, &[0x40]), (0x40, &[0x01, 0x50]), (0x50, &[0x10, 0x40])]));
        assert_eq!(looped.problem, Some(WalkProblem::Loop { offset: 0x40 }));
        let short = standard(&space(64, &[(0x34, &[0x40])]));
        assert_eq!(short.problem, Some(WalkProblem::Unavailable { offset: 0x40, available: 64 }));
        let header = standard(&space(256, &[(0x34, &[0x10])]));
        assert_eq!(header.problem, Some(WalkProblem::OutOfRange { offset: 0x10 }));
    }

    #[test]
    fn extended_list_ends_and_loops() {
        let aer_then_loop = (0x0001u32 | 1 << 16 | 0x100 << 20).to_le_bytes();
        let walk = extended(&space(4096, &[(0x100, &aer_then_loop)]));
        assert_eq!(walk.caps.len(), 1);
        assert_eq!(walk.problem, Some(WalkProblem::Loop { offset: 0x100 }));
        assert_eq!(extended(&space(256, &[])), Walk::default());
    }
}
