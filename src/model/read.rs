//! Non-posted reads: memory read requests out, completions with data back.
//!
//! Requests are cut at MaxReadRequest-aligned addresses, completions at MaxPayload and the read
//! completion boundary ([`super::tlp::completions`]). The requester's direction carries the
//! requests and ACKs for the completions; the completer's direction carries the completions and
//! an ACK plus UpdateFC-NP per coalescing interval of requests (completion credits are infinite
//! at the requester, so no UpdateFC-Cpl). The time of a transfer is the larger of
//! - link bound: first request + completion latency + all completions, or either direction's
//!   busy time if larger (SKPs and DLLPs fit into the latency gap otherwise, 000 §3.5 Example 2);
//! - latency bound: ⌈requests / tags⌉ rounds of request + latency + one request's completions
//!   (document 000 §3.5 and §4.17 with one tag), where a round's completions are those of the
//!   largest request.
//!
//! With several transfers in flight (`in_flight` > 1, the steady state of back-to-back DMAs as DMA
//! engines and pcie-bench run them) the first completion latency overlaps other transfers'
//! data, so a transfer takes the larger of
//! - link bound: either direction's busy time for its share of requests and completions;
//! - latency bound (Little's law): every request holds a tag for request + latency + its
//!   completions, and at most min(tags, in_flight × requests per transfer) are outstanding.

use super::load::{bytes_ns, bytes_symbols, Load};
use super::tlp::{self, TlpTotals, COMPLETION_HEADER_BYTES};
use super::{dllp, Flow, Limit, Link, LinkParams, Span, Throughput};

/// Non-posted reads of `size_bytes`: requests of at most MRRS, completions of at most MPS,
/// `read_latency_ns` between a request and its completion, at most `tags` outstanding.
pub fn read_throughput(params: &LinkParams, size_bytes: u64) -> Throughput {
    read_flow(params, size_bytes, Span::Steady).throughput
}

/// Everything about one read transfer of `size_bytes`.
pub fn read_flow(params: &LinkParams, size_bytes: u64, span: Span) -> Flow {
    let link = params.link;
    let start = params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES;
    let requests = tlp::cut_aligned(start, size_bytes, params.mrrs_bytes, params.accounting);
    let request_count = tlp::count(&requests) as f64;
    let completions: Vec<tlp::Piece> = requests.iter().flat_map(|r| tlp::completions(params, *r)).collect();
    let cpl = TlpTotals::of(params, &completions, COMPLETION_HEADER_BYTES);
    let req = TlpTotals::requests(params, request_count, params.header.bytes());

    let mut data = Load::default();
    data.add_tlps(link, &cpl);
    let mut opposite = Load::default();
    opposite.add_tlps(link, &req);
    let request_ns = bytes_ns(link, opposite.tlp_bytes() / request_count.max(1.0));
    let completions_ns = bytes_ns(link, data.tlp_bytes());
    // A round waits for the completions of its largest request; `full_requests` counts the
    // transfer in requests of that size so an extra partial request never shortens a round.
    let largest = requests.iter().map(|r| r.len).max().unwrap_or(1);
    let round_ns = request_ns + params.read_latency_ns + completions_ns / (size_bytes as f64 / largest as f64).max(1.0);
    let timing = if params.in_flight <= 1 {
        Timing::Isolated {
            first_ns: request_ns + params.read_latency_ns + completions_ns,
            round_ns,
            rounds: (request_count / params.tags as f64).ceil(),
            latency_ns: params.read_latency_ns,
        }
    } else {
        let outstanding = (params.tags as f64).min(params.in_flight as f64 * request_count.max(1.0));
        Timing::Stream { latency_bound_ns: request_count.max(1.0) * round_ns / outstanding }
    };
    if params.include_dllp {
        // Requests and completions arrive spread over the whole transfer (not back to back when
        // latency bound), so the ACK/UpdateFC timers run against elapsed time.
        let elapsed_symbols = timing.duration(link, &data, &opposite).0 / link.byte_time_ns();
        let acks = dllp::count(params, cpl.tlps, elapsed_symbols.max(bytes_symbols(link, data.tlp_bytes())), span);
        let request_intervals = dllp::count(params, req.tlps, elapsed_symbols, span);
        opposite.add_dllps(link, acks);
        data.add_dllps(link, 2.0 * request_intervals);
    }
    data.add_skps(params, span);
    opposite.add_skps(params, span);
    let (duration_ns, limit) = timing.duration(link, &data, &opposite);
    Flow {
        size_bytes,
        data,
        opposite,
        duration_ns,
        throughput: Throughput::new(link, size_bytes as f64, duration_ns, limit),
    }
}

/// The two bounds of a read transfer.
enum Timing {
    /// One transfer on its own.
    Isolated {
        /// First request + latency + all completions.
        first_ns: f64,
        /// One round of the latency bound.
        round_ns: f64,
        rounds: f64,
        /// The completion latency itself.
        latency_ns: f64,
    },
    /// One transfer of a steady stream with several in flight.
    Stream {
        /// The transfer's share of the time, from outstanding requests × their tag-holding time.
        latency_bound_ns: f64,
    },
}

impl Timing {
    /// Duration and what bounds it, given what each direction carries.
    fn duration(&self, link: Link, data: &Load, opposite: &Load) -> (f64, Limit) {
        let (data_ns, opposite_ns) = (data.busy_ns(link), opposite.busy_ns(link));
        match *self {
            Timing::Isolated { first_ns, round_ns, rounds, latency_ns } => {
                let link_ns = first_ns.max(data_ns).max(opposite_ns);
                let bound_ns = rounds * round_ns;
                if bound_ns >= link_ns {
                    (bound_ns, Limit::Latency)
                } else if 2.0 * latency_ns > link_ns {
                    // All requests fit in the tags, but waiting for the first completion is most
                    // of the transfer: more link would hardly help, less latency would.
                    (link_ns, Limit::Latency)
                } else if opposite_ns > data_ns.max(first_ns) {
                    (link_ns, Limit::OppositeDirection)
                } else {
                    (link_ns, Limit::Link)
                }
            }
            Timing::Stream { latency_bound_ns } => {
                let link_ns = data_ns.max(opposite_ns);
                if latency_bound_ns >= link_ns {
                    (latency_bound_ns, Limit::Latency)
                } else if opposite_ns > data_ns {
                    (link_ns, Limit::OppositeDirection)
                } else {
                    (link_ns, Limit::Link)
                }
            }
        }
    }
}

/// The latency bound alone: at most `tags` requests of MRRS bytes per completion latency, in
/// MB/s. No read can exceed it.
pub fn latency_bound_mbps(params: &LinkParams) -> f64 {
    if params.read_latency_ns <= 0.0 {
        return f64::INFINITY;
    }
    crate::units::mbps(params.tags as f64 * params.mrrs_bytes as f64, params.read_latency_ns)
}
