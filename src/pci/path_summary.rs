//! What a device's analysis folds over its path to the root port, summarised once for all the
//! functions below one bridge: the hops (shared, not copied per device), the narrowest hop as
//! the kernel's `pcie_bandwidth_available()` finds it, the smallest MaxPayload configured and
//! supported, the link partner and the root port. A summary extends its parent's by one hop in
//! constant time ([`PathSummary::below`]), so a device's analysis costs the same at any depth.

use std::collections::HashMap;
use std::sync::Arc;

use super::address::Bdf;
use super::conditions::hop;
use super::device::Device;
use super::report::path_text;
use super::topology::{hop_mbits, Hop};
use super::Machine;

/// The kernel's loop over a path, run ahead of the device it starts from. Its result depends on
/// the device's rate in only two ways (see [`Narrowest::after`]), so it can be kept per path.
#[derive(Debug, Clone, Default)]
struct Narrowest {
    /// The loop's result over this path alone (as if started at a hop of 0 Mb/s).
    alone: Option<(u32, Hop)>,
    /// Some hop reads 0 Mb/s: the loop then restarts there, forgetting what came before.
    restarts: bool,
}

impl Narrowest {
    /// The loop's result when `first` (a hop with its rate) precedes this path.
    fn after(&self, first: (u32, Hop)) -> (u32, Hop) {
        match &self.alone {
            None => first,
            // A first hop of 0 Mb/s is replaced by the next, and a hop of 0 Mb/s on the path
            // replaces whatever came before it: the path's own result stands.
            Some(alone) if first.0 == 0 || self.restarts => alone.clone(),
            // Otherwise the loop keeps the lowest rate, ties going upstream.
            Some(alone) if alone.0 <= first.0 => alone.clone(),
            Some(_) => first,
        }
    }

    fn below(&self, bridge: Hop) -> Narrowest {
        let mbits = hop_mbits(&bridge);
        Narrowest { alone: Some(self.after((mbits, bridge))), restarts: self.restarts || mbits == 0 }
    }
}

/// The path above a device, nearest bridge first.
#[derive(Debug, Clone, Default)]
pub struct PathSummary<'a> {
    /// Every bridge's hop, nearest first.
    pub hops: Arc<[Hop]>,
    /// `hops` as the `-v` line shows them.
    pub line: Arc<str>,
    /// The nearest bridge: the other end of the device's link when it is a port.
    pub nearest: Option<&'a Device>,
    /// The topmost bridge (the root port): its RCB applies to the device's reads.
    pub root: Option<&'a Device>,
    narrowest: Narrowest,
    /// Smallest MaxPayload configured / supported by the bridges that have a Device Control.
    max_payload_bytes: Option<u32>,
    max_payload_supported_bytes: Option<u32>,
}

impl<'a> PathSummary<'a> {
    /// The summary of `upstream` (nearest first), folded from the root down, one hop at a time.
    pub fn of(upstream: &[&'a Device]) -> PathSummary<'a> {
        let mut summary = upstream.iter().rev().fold(PathSummary::default(), |above, bridge| above.below(bridge));
        summary.hops = upstream.iter().map(|d| hop(d)).collect();
        summary.line = path_text(&summary.hops).into();
        summary
    }

    /// The summary of the path of `bridge`'s children, from the summary of `bridge`'s own path:
    /// constant time, except the hop list and its line, left empty ([`PathSummary::of`] fills them).
    pub fn below(&self, bridge: &'a Device) -> PathSummary<'a> {
        let regs = bridge.pcie.as_ref().and_then(|p| p.device.as_ref());
        let smaller = |so_far: Option<u32>, value: Option<u32>| match (so_far, value) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        PathSummary {
            hops: Arc::from([]),
            line: Arc::from(""),
            nearest: Some(bridge),
            root: self.root.or(Some(bridge)),
            narrowest: self.narrowest.below(hop(bridge)),
            max_payload_bytes: smaller(self.max_payload_bytes, regs.map(|r| r.max_payload_bytes)),
            max_payload_supported_bytes: smaller(self.max_payload_supported_bytes, regs.map(|r| r.max_payload_supported_bytes)),
        }
    }

    /// The hop that limits the device's path (the device's own `hop` first) and its rate.
    pub fn narrowest_from(&self, device_hop: Hop) -> (u32, Hop) {
        self.narrowest.after((hop_mbits(&device_hop), device_hop))
    }

    /// The smallest of `own` and every MaxPayload configured on the path.
    pub fn max_payload_bytes(&self, own: u32) -> u32 {
        self.max_payload_bytes.map_or(own, |m| m.min(own))
    }

    /// The smallest of `own` and every MaxPayload supported on the path.
    pub fn max_payload_supported_bytes(&self, own: u32) -> u32 {
        self.max_payload_supported_bytes.map_or(own, |m| m.min(own))
    }
}

/// Every bridge's summary, made once from its parent's: the path of a function costs one lookup
/// whatever its depth and whatever order functions come in.
pub struct Summaries<'a> {
    machine: &'a Machine,
    by_bridge: HashMap<Bdf, PathSummary<'a>>,
    top: PathSummary<'a>,
}

impl<'a> Summaries<'a> {
    pub fn new(machine: &'a Machine) -> Self {
        Summaries { machine, by_bridge: HashMap::new(), top: PathSummary::default() }
    }

    /// The summary of the path above `device`.
    pub fn above(&mut self, device: &Device) -> &PathSummary<'a> {
        match self.machine.parent_above(&device.bdf, device.sysfs_parent).filter(|p| p.bdf != device.bdf) {
            Some(parent) => {
                self.summarise(parent);
                &self.by_bridge[&parent.bdf]
            }
            None => &self.top,
        }
    }

    /// Summarise the path below `bridge`, and below every bridge above it not yet summarised.
    fn summarise(&mut self, bridge: &'a Device) {
        // The bridges without a summary, nearest first, up to one with a summary or the top; a
        // path has no cycle (see `Machine::upstream`), bounded all the same at 256 buses.
        let mut missing = Vec::new();
        let mut at = Some(bridge);
        while let Some(b) = at.filter(|b| !self.by_bridge.contains_key(&b.bdf) && missing.len() <= 256) {
            missing.push(b);
            at = self.machine.parent_of(&b.bdf).filter(|p| p.bdf != b.bdf);
        }
        for b in missing.into_iter().rev() {
            let above = self.machine.parent_of(&b.bdf).and_then(|p| self.by_bridge.get(&p.bdf)).unwrap_or(&self.top);
            let mut summary = above.below(b);
            summary.hops = std::iter::once(hop(b)).chain(above.hops.iter().cloned()).collect();
            summary.line = path_text(&summary.hops).into();
            self.by_bridge.insert(b.bdf, summary);
        }
    }
}
