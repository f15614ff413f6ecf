//! Device profiles: which BAR ranges of a known device are scratch, so `pio` may write them
//! without `--destructive`. Everything else on a real device may have side effects.

/// A device pcieperf knows the register map of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    pub vendor: u16,
    pub device: u16,
    /// (BAR, first byte, end byte exclusive) ranges whose writes destroy nothing.
    pub scratch: &'static [(u8, u64, u64)],
}

/// QEMU's `edu` teaching device: BAR0+0x04 is the liveness register (reads back the bitwise
/// inverse of what was written). Its DMA buffer (device address 0x40000) is not in the BAR.
pub const EDU: Profile = Profile { name: "QEMU edu", vendor: 0x1234, device: 0x11e8, scratch: &[(0, 0x04, 0x08)] };

/// QEMU's `ivshmem-plain`: BAR2 is shared RAM (BAR0 holds registers).
pub const IVSHMEM: Profile = Profile { name: "QEMU ivshmem-plain", vendor: 0x1af4, device: 0x1110, scratch: &[(2, 0, u64::MAX)] };

pub const PROFILES: [Profile; 2] = [EDU, IVSHMEM];

impl Profile {
    pub fn find(vendor: u16, device: u16) -> Option<Profile> {
        PROFILES.into_iter().find(|p| p.vendor == vendor && p.device == device)
    }

    pub fn is_scratch(&self, bar: u8, offset: u64, bytes: u64) -> bool {
        self.scratch.iter().any(|&(b, start, end)| b == bar && offset >= start && offset.saturating_add(bytes) <= end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_named_ranges_are_scratch() {
        assert!(EDU.is_scratch(0, 0x04, 4));
        assert!(!EDU.is_scratch(0, 0x00, 4), "the identification register is not scratch");
        assert!(!EDU.is_scratch(0, 0x06, 4), "an access straddling the end is not");
        assert!(IVSHMEM.is_scratch(2, 1 << 20, 64) && !IVSHMEM.is_scratch(0, 0, 4));
        assert_eq!(Profile::find(0x1234, 0x11e8), Some(EDU));
    }
}
