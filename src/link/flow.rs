//! Flow control: the transmitter's view of the receiver's buffers, and the receiver's count of
//! what it has freed. Credits are cumulative counters, as the specification keeps them: a TLP
//! may go when consumed + needed ≤ limit, and an UpdateFC raises the limit. A class advertised
//! infinite never stalls and is never updated.

use super::config::{ClassCredits, Credits};
use super::packet::{FcClass, Tlp};

/// Bytes of one data credit (4 DW).
pub const DATA_CREDIT_BYTES: u64 = 16;

/// Header and data credits a TLP needs.
pub fn needed(tlp: &Tlp) -> (u64, u64) {
    (1, tlp.data_bytes.div_ceil(DATA_CREDIT_BYTES))
}

/// Cumulative header and data counters of one class; `None` for an infinite class.
type Counter = Option<(u64, u64)>;

fn counters(credits: &Credits) -> [Counter; 3] {
    FcClass::ALL.map(|class| match credits.class(class) {
        ClassCredits::Infinite => None,
        ClassCredits::Finite { header, data } => Some((header, data)),
    })
}

/// One class's (limit, consumed) as (header, data) each; None for an infinite class.
pub type ClassState = Option<((u64, u64), (u64, u64))>;

/// What a transmitter knows of its partner's receive buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxCredits {
    /// Limits advertised (initially, then by UpdateFC).
    limit: [Counter; 3],
    /// Credits consumed by TLPs sent.
    consumed: [(u64, u64); 3],
}

impl TxCredits {
    pub fn new(advertised: &Credits) -> Self {
        TxCredits { limit: counters(advertised), consumed: [(0, 0); 3] }
    }

    pub fn allows(&self, tlp: &Tlp) -> bool {
        let class = tlp.kind.class().index();
        let Some((header_limit, data_limit)) = self.limit[class] else { return true };
        let (header, data) = needed(tlp);
        let (used_header, used_data) = self.consumed[class];
        used_header + header <= header_limit && used_data + data <= data_limit
    }

    pub fn consume(&mut self, tlp: &Tlp) {
        let (header, data) = needed(tlp);
        let used = &mut self.consumed[tlp.kind.class().index()];
        used.0 += header;
        used.1 += data;
    }

    /// Limit and consumed credits (header, data) of `class`; None for an infinite class.
    pub fn state(&self, class: FcClass) -> ClassState {
        Some((self.limit[class.index()]?, self.consumed[class.index()]))
    }

    /// Per class, the advertised limit and the credits consumed (None: infinite), for the
    /// periodic-state key (`link/sim/periodic.rs`).
    pub fn counters(&self) -> [(Counter, (u64, u64)); 3] {
        [0, 1, 2].map(|c| (self.limit[c], self.consumed[c]))
    }

    /// An UpdateFC arrived. Limits only grow (a stale update never takes credits back).
    pub fn update(&mut self, class: FcClass, header: u64, data: u64) {
        if let Some(limit) = &mut self.limit[class.index()] {
            *limit = (limit.0.max(header), limit.1.max(data));
        }
    }
}

/// The receiver's side: credits allocated so far (advertised + freed), and TLPs freed since
/// the last UpdateFC of each class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxCredits {
    allocated: [Counter; 3],
    freed_since_update: [u32; 3],
}

impl RxCredits {
    pub fn new(advertised: &Credits) -> Self {
        RxCredits { allocated: counters(advertised), freed_since_update: [0; 3] }
    }

    /// The receiver consumed `tlp`: its buffer space is free again.
    pub fn free(&mut self, tlp: &Tlp) {
        let class = tlp.kind.class().index();
        if let Some(allocated) = &mut self.allocated[class] {
            let (header, data) = needed(tlp);
            *allocated = (allocated.0 + header, allocated.1 + data);
            self.freed_since_update[class] += 1;
        }
    }

    /// Per class, the credits allocated so far (None: infinite) and the TLPs freed since the
    /// last UpdateFC, for the periodic-state key.
    pub fn counters(&self) -> [(Counter, u32); 3] {
        [0, 1, 2].map(|c| (self.allocated[c], self.freed_since_update[c]))
    }

    /// TLPs of `class` freed since its last UpdateFC (always 0 for an infinite class).
    pub fn freed(&self, class: FcClass) -> u32 {
        self.freed_since_update[class.index()]
    }

    /// Contents of an UpdateFC for `class` (header, data), which resets its count of freed TLPs.
    pub fn update(&mut self, class: FcClass) -> (u64, u64) {
        self.freed_since_update[class.index()] = 0;
        self.allocated[class.index()].unwrap_or((0, 0))
    }
}
