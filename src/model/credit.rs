//! Finite flow-control credits and a long credit loop (an optional model input; without it the
//! model assumes credits never limit).
//!
//! A transmitter may send a TLP only while the receiver's advertised credits cover it; they come
//! back with an UpdateFC DLLP once the receiver has taken the TLP in. The credit loop of a TLP is
//! its own time on the lanes, the wire delay there, the Ack and UpdateFC DLLPs the receiver sends
//! (the Ack first, as the link simulator queues them), and the wire delay back. When the credits
//! cover fewer TLPs than fit in that loop the stream is credit-limited: the model's time is the
//! larger of the link-limited time and the credit-limited schedule computed here TLP by TLP
//! (with one UpdateFC per `update_fc_every_tlps` TLPs, the credits of a group come back
//! together, after its last TLP; a group the stalled transmitter cannot complete comes back
//! after the last TLP sent).

use serde::{Deserialize, Serialize};

use super::load::bytes_ns;
use super::tlp::{self, TlpTotals};
use super::{dllp, read, write, Limit, LinkParams, Span, Throughput};

/// Bytes of one data credit (4 DW).
pub const DATA_CREDIT_BYTES: u64 = 16;

/// Credits one class advertises: header credits (one per TLP) and data credits (16 B each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCredits {
    pub header: u64,
    pub data: u64,
}

/// What the receivers advertise and how long their credits take to come back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CreditLoop {
    /// Posted (memory writes) at the host; `None`: infinite.
    pub posted: Option<ClassCredits>,
    /// Non-posted (read requests) at the host; `None`: infinite.
    pub non_posted: Option<ClassCredits>,
    /// Flight time plus receive pipeline, one way, in ns.
    pub wire_delay_ns: f64,
    /// The receiver sends one Ack and one UpdateFC per this many TLPs.
    pub update_fc_every_tlps: u32,
}

impl CreditLoop {
    /// The loop's fixed part, from the end of the TLP that frees credits (the last of its
    /// group) to the UpdateFC's arrival: wire, Ack and UpdateFC on the lanes back, wire.
    pub fn return_ns(&self, params: &LinkParams) -> f64 {
        2.0 * self.wire_delay_ns + bytes_ns(params.link, dllp::bytes(params.link, 2.0))
    }
}

/// Writes of `size_bytes` with finite posted credits: from the first TLP's start to the last
/// TLP's end, the larger of the link-limited and the credit-limited time (ns).
pub fn write_ns(params: &LinkParams, credits: &CreditLoop, size_bytes: u64) -> f64 {
    let link_ns = write::write_flow(params, size_bytes, Span::Steady).duration_ns;
    let Some(class) = credits.posted else { return link_ns };
    let pieces = tlp::cut_aligned(params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES, size_bytes, params.mps_bytes, params.accounting);
    let tlps: Vec<(f64, u64)> = pieces
        .iter()
        .flat_map(|piece| {
            let one = tlp::Piece { count: 1, ..*piece };
            let ns = bytes_ns(params.link, TlpTotals::of(params, &[one], params.header.bytes()).bytes());
            std::iter::repeat((ns, piece.wire_bytes(params.accounting).div_ceil(DATA_CREDIT_BYTES))).take(piece.count as usize)
        })
        .collect();
    link_ns.max(schedule_ns(&tlps, class, credits, credits.return_ns(params)))
}

/// Reads of `size_bytes` with the wire delay and finite non-posted credits: every request's
/// completions come a round trip of wire later, and requests wait for non-posted credits (ns,
/// from the first request's start to the last completion's end on the completer's lanes).
pub fn read_ns(params: &LinkParams, credits: &CreditLoop, size_bytes: u64) -> f64 {
    // A tag is held for the round trip: the wire both ways is completion latency. The first
    // request's outward wire and the last completion's wire home are outside the measured span,
    // hence one wire delay less.
    let wired = LinkParams { read_latency_ns: params.read_latency_ns + 2.0 * credits.wire_delay_ns, ..params.clone() };
    let flow = read::read_flow(&wired, size_bytes, Span::Steady);
    let link_ns = flow.duration_ns - credits.wire_delay_ns;
    let Some(class) = credits.non_posted else { return link_ns };
    let requests = tlp::count(&tlp::cut_aligned(params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES, size_bytes, params.mrrs_bytes, params.accounting));
    let request_ns = bytes_ns(params.link, flow.opposite.tlp_bytes() / requests.max(1) as f64);
    let issued_ns = schedule_ns(&vec![(request_ns, 0); requests as usize], class, credits, credits.return_ns(params));
    // The last request's completions follow it a wire delay and the completion latency later.
    let last_completions_ns = bytes_ns(params.link, flow.data.tlp_bytes() / requests.max(1) as f64);
    link_ns.max(issued_ns + credits.wire_delay_ns + params.read_latency_ns + last_completions_ns)
}

/// [`write_ns`] as a throughput; its limit is the one-way flow's, or `Link` when the credit loop
/// sets the time (flow control is the link's own).
pub fn write_throughput(params: &LinkParams, credits: &CreditLoop, size_bytes: u64) -> Throughput {
    let alone = write::write_flow(params, size_bytes, Span::Steady).throughput;
    throughput(params, alone, write_ns(params, credits, size_bytes), size_bytes)
}

/// [`read_ns`] as a throughput (limit as for [`write_throughput`]).
pub fn read_throughput(params: &LinkParams, credits: &CreditLoop, size_bytes: u64) -> Throughput {
    let alone = read::read_flow(params, size_bytes, Span::Steady).throughput;
    throughput(params, alone, read_ns(params, credits, size_bytes), size_bytes)
}

fn throughput(params: &LinkParams, alone: Throughput, ns: f64, size_bytes: u64) -> Throughput {
    let alone_ns = size_bytes as f64 * 1e3 / alone.mbps;
    let limit = if ns > alone_ns * (1.0 + 1e-9) { Limit::Link } else { alone.limit };
    Throughput::new(params.link, size_bytes as f64, ns, limit)
}

/// Start-to-end time of TLPs sent back to back as far as credits allow: each is (ns on the lanes,
/// data credits); its credits return `return_ns` after the end of the last TLP of its UpdateFC
/// group. Infinite when the credits cannot cover one TLP.
fn schedule_ns(tlps: &[(f64, u64)], class: ClassCredits, credits: &CreditLoop, return_ns: f64) -> f64 {
    let every = credits.update_fc_every_tlps.max(1) as usize;
    let mut ends = Vec::with_capacity(tlps.len());
    // Cumulative data credits consumed before each TLP, and credits returned so far.
    let mut consumed_data = Vec::with_capacity(tlps.len() + 1);
    consumed_data.push(0u64);
    let (mut returned_tlps, mut returned_data, mut credit_at_ns, mut end_ns) = (0usize, 0u64, 0.0f64, 0.0f64);
    for (j, &(ns, data)) in tlps.iter().enumerate() {
        let used_data = consumed_data[j];
        while j as u64 + 1 > class.header + returned_tlps as u64 || used_data + data > class.data + returned_data {
            // The next UpdateFC covers the group ending at TLP `last`. A group the stalled
            // transmitter cannot complete is sent short (the receiver's UpdateFC timer; the link
            // simulator flushes it when the link falls idle) after the last TLP sent.
            let last = (returned_tlps + every - 1).min(j.wrapping_sub(1));
            if j == returned_tlps {
                return f64::INFINITY;
            }
            credit_at_ns = credit_at_ns.max(ends[last] + return_ns);
            returned_tlps = last + 1;
            returned_data = consumed_data[returned_tlps];
        }
        end_ns = end_ns.max(credit_at_ns) + ns;
        ends.push(end_ns);
        consumed_data.push(used_data + data);
    }
    end_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen1x1_mps128() -> LinkParams {
        LinkParams { mps_bytes: 128, ..LinkParams::typical("gen1x1".parse().unwrap()) }
    }

    #[test]
    fn the_third_write_waits_for_the_first_ones_credits() {
        // As the link simulator shows it (tests/link_policies.rs): 2 posted credits and a 1 µs
        // wire each way at Gen1 x1, MPS 128: the third TLP starts at 592 (TLP) + 1000 (wire) +
        // 32 (Ack) + 32 (UpdateFC) + 1000 (wire) = 2656 ns and ends one TLP (592 ns) later.
        let credits = CreditLoop { posted: Some(ClassCredits { header: 2, data: 16 }), non_posted: None, wire_delay_ns: 1000.0, update_fc_every_tlps: 1 };
        let ns = write_ns(&gen1x1_mps128(), &credits, 3 * 128);
        assert!((ns - (2656.0 + 592.0)).abs() < 1e-6, "{ns}");
    }

    #[test]
    fn credits_that_cover_the_loop_leave_the_link_limited_time_and_too_few_never_finish() {
        let params = gen1x1_mps128();
        let link_ns = write::write_flow(&params, 64 << 10, Span::Steady).duration_ns;
        let plenty = CreditLoop { posted: Some(ClassCredits { header: 1000, data: 100_000 }), non_posted: None, wire_delay_ns: 100.0, update_fc_every_tlps: 4 };
        assert_eq!(write_ns(&params, &plenty, 64 << 10), link_ns);
        let none = CreditLoop { posted: None, ..plenty };
        assert_eq!(write_ns(&params, &none, 64 << 10), link_ns);
        let too_few = CreditLoop { posted: Some(ClassCredits { header: 1, data: 4 }), ..plenty };
        assert_eq!(write_ns(&params, &too_few, 64 << 10), f64::INFINITY);
    }
}
