//! Non-posted reads: memory read requests out, completions with data back.
//!
//! Requests are cut at MaxReadRequest-aligned addresses, completions at MaxPayload and the read
//! completion boundary ([`super::tlp::completions`]). The requester's direction carries the
//! requests and ACKs for the completions; the completer's direction carries the completions and
//! an ACK plus UpdateFC-NP per coalescing interval of requests (completion credits are infinite
//! at the requester, so no UpdateFC-Cpl). The time of a transfer is the larger of
//! - link bound: first request + completion latency + the completion stream, which also carries
//!   the DLLPs of requests that arrive after the first completion is ready (DLLPs go first) and
//!   the SKPs due while it runs; or either direction's busy time if larger (SKPs and DLLPs that
//!   fall in the latency gap cost nothing, 000 §3.5 Example 2);
//! - latency bound (more requests than tags): a round lasts Ack + request + latency + the first
//!   request's completions (a tag frees when its last completion arrives); the last round adds
//!   its completions one after another (a round's completions share one link, so they are
//!   serialised, with the DLLPs of the round's requests between them). Document 000 §3.5 and
//!   §4.17 with one tag are the one-request case.
//!
//! Both were checked symbol by symbol against the link simulator (`pcieperf crosscheck`,
//! docs/link-simulator.md).
//!
//! With several transfers in flight (`in_flight` > 1, the steady state of back-to-back DMAs as DMA
//! engines and pcie-bench run them) the first completion latency overlaps other transfers'
//! data, so a transfer takes the larger of
//! - link bound: either direction's busy time for its share of requests and completions;
//! - latency bound (Little's law): every request holds a tag for request + latency + its
//!   completions, and at most min(tags, in_flight × requests per transfer) are outstanding.

use super::load::{bytes_ns, bytes_symbols, Load};
use super::tlp::{self, TlpTotals, COMPLETION_HEADER_BYTES};
use super::{dllp, flit, skp, Flow, Limit, Link, LinkParams, Span, Throughput};

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
    // Flit mode: every phase of a round trip ends on a flit boundary (`flit::whole_flits_ns`):
    // a lone request arrives with its flit's end, a completion waits for the next flit.
    let whole = |ns: f64| flit::whole_flits_ns(link, ns);
    let request_ns = whole(bytes_ns(link, opposite.tlp_bytes() / request_count.max(1.0)));
    let latency_ns = whole(params.read_latency_ns);
    let completions_ns = bytes_ns(link, data.tlp_bytes());
    // A round waits for the completions of its largest request.
    let largest = requests.iter().map(|r| r.len).max().unwrap_or(1);
    let set_ns = whole(completions_ns / (size_bytes as f64 / largest as f64).max(1.0));
    let timing = if params.in_flight <= 1 {
        let rounds = (request_count / params.tags as f64).ceil().max(1.0);
        let last_round = last_requests(&requests, request_count as u64 - (rounds as u64 - 1) * params.tags as u64);
        let last_round_cpl: Vec<tlp::Piece> = last_round.iter().flat_map(|r| tlp::completions(params, *r)).collect();
        let skp_share = if params.include_skp && span == Span::Steady { skp::fraction(link.generation) } else { 0.0 };
        let mut last_round_load = Load::default();
        last_round_load.add_tlps(link, &TlpTotals::of(params, &last_round_cpl, COMPLETION_HEADER_BYTES));
        Timing::Isolated(Isolated {
            request_ns,
            latency_ns,
            set_ns,
            completions_ns: whole(completions_ns),
            last_round_ns: whole(bytes_ns(link, last_round_load.tlp_bytes())),
            requests: request_count.max(1.0),
            last_round_requests: tlp::count(&last_round).max(1) as f64,
            tags: params.tags as f64,
            dllp_group: if params.include_dllp { params.dllp_every_tlps.unwrap_or(1) as f64 } else { 1.0 },
            rounds,
            skp_stretch: 1.0 / (1.0 - skp_share),
        })
    } else {
        let round_ns = request_ns + latency_ns + set_ns;
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
    Isolated(Isolated),
    /// One transfer of a steady stream with several in flight.
    Stream {
        /// The transfer's share of the time, from outstanding requests × their tag-holding time.
        latency_bound_ns: f64,
    },
}

/// One read transfer on its own, in the times its parts take on the link (ns).
///
/// The completer's direction is one server: completions queue behind each other, and behind
/// the Ack/UpdateFC DLLPs of requests that arrive once the completions have started (DLLPs go
/// first); SKPs that come due inside the completion stream delay it too. Requests are issued
/// back to back while tags are free; after that a request goes out when a tag frees, i.e. when
/// its predecessor's last completion arrived.
struct Isolated {
    /// One request TLP.
    request_ns: f64,
    latency_ns: f64,
    /// The completions of the largest request.
    set_ns: f64,
    /// All completions.
    completions_ns: f64,
    /// The completions of the requests in the last round.
    last_round_ns: f64,
    requests: f64,
    last_round_requests: f64,
    tags: f64,
    /// Requests per Ack/UpdateFC pair when the receiver sends one per N TLPs (they go out with
    /// every Nth request, not spread evenly); 1 when they are counted by the latency timer.
    dllp_group: f64,
    rounds: f64,
    /// Completion-stream time per unit of busy time with the SKPs due inside it (1 if not charged).
    skp_stretch: f64,
}

impl Isolated {
    /// Link bound: from the first completion on, the completer's direction never idles. It
    /// carries every completion, the DLLPs of requests that arrive after the first completion is
    /// ready, and the SKPs due meanwhile.
    fn link_ns(&self, dllp_ns: f64) -> f64 {
        let late_dllps_ns = self.first_round_late_dllps_ns(dllp_ns) + (self.requests - self.first_round()) * dllp_ns;
        self.request_ns + self.latency_ns + self.skp_stretch * (self.completions_ns + late_dllps_ns)
    }

    /// Latency bound (more requests than tags): each round starts when the first request of the
    /// previous round has its completions (Ack ahead of the request on the requester's side), and
    /// the last round's completions follow each other, with the DLLPs of that round's requests
    /// between them where they landed in the rounds before.
    fn latency_ns(&self, dllp_ns: f64, ack_ns: f64) -> f64 {
        if self.rounds <= 1.0 {
            return 0.0;
        }
        let round_ns = ack_ns + self.request_ns + self.latency_ns + self.set_ns;
        let streamed_ns = self.completions_ns + (self.requests - self.first_round()) * dllp_ns;
        (self.rounds - 1.0) * round_ns
            + self.request_ns
            + self.latency_ns
            + self.last_round_ns
            + (self.last_round_requests - 1.0) * dllp_ns
            + (self.skp_stretch - 1.0) * streamed_ns
    }

    fn first_round(&self) -> f64 {
        self.requests.min(self.tags)
    }

    /// DLLP time of first-round requests (sent back to back) still due when the first completion
    /// is ready. With one Ack/UpdateFC pair per N requests, a pair follows every Nth request.
    fn first_round_late_dllps_ns(&self, dllp_ns: f64) -> f64 {
        let first_ready_ns = self.request_ns + self.latency_ns;
        let group = self.dllp_group.max(1.0) as u64;
        let pair_ns = dllp_ns * group as f64;
        (1..=self.first_round() as u64)
            .filter(|i| i % group == 0)
            .map(|i| (i as f64 * self.request_ns + pair_ns - first_ready_ns).clamp(0.0, pair_ns))
            .sum()
    }
}

impl Timing {
    /// Duration and what bounds it, given what each direction carries.
    fn duration(&self, link: Link, data: &Load, opposite: &Load) -> (f64, Limit) {
        let (data_ns, opposite_ns) = (data.busy_ns(link), opposite.busy_ns(link));
        match self {
            Timing::Isolated(read) => {
                // The completer's DLLPs per request, and the requester's Ack that goes out ahead
                // of a request issued on a completion's arrival.
                let dllp_ns = bytes_ns(link, data.dllp_bytes / read.requests);
                let ack_ns = bytes_ns(link, (opposite.dllp_bytes / read.requests).min(dllp::bytes(link, 1.0)));
                let link_ns = read.link_ns(dllp_ns).max(data_ns).max(opposite_ns);
                let bound_ns = read.latency_ns(dllp_ns, ack_ns);
                if bound_ns >= link_ns {
                    (bound_ns, Limit::Latency)
                } else if 2.0 * read.latency_ns > link_ns {
                    // All requests fit in the tags, but waiting for the first completion is most
                    // of the transfer: more link would hardly help, less latency would.
                    (link_ns, Limit::Latency)
                } else if opposite_ns > data_ns.max(read.link_ns(dllp_ns)) {
                    (link_ns, Limit::OppositeDirection)
                } else {
                    (link_ns, Limit::Link)
                }
            }
            Timing::Stream { latency_bound_ns } => {
                let link_ns = data_ns.max(opposite_ns);
                if *latency_bound_ns >= link_ns {
                    (*latency_bound_ns, Limit::Latency)
                } else if opposite_ns > data_ns {
                    (link_ns, Limit::OppositeDirection)
                } else {
                    (link_ns, Limit::Link)
                }
            }
        }
    }
}

/// The last `count` requests of `pieces` (groups of equal requests, in order).
fn last_requests(pieces: &[tlp::Piece], count: u64) -> Vec<tlp::Piece> {
    let mut left = count;
    let mut last = Vec::new();
    for piece in pieces.iter().rev() {
        if left == 0 {
            break;
        }
        let take = piece.count.min(left);
        let skipped = piece.count - take;
        last.push(tlp::Piece { start: piece.start + skipped * piece.len, count: take, ..*piece });
        left -= take;
    }
    last.reverse();
    last
}

/// The latency bound alone: at most `tags` requests of MRRS bytes per completion latency, in
/// MB/s. No read can exceed it.
pub fn latency_bound_mbps(params: &LinkParams) -> f64 {
    if params.read_latency_ns <= 0.0 {
        return f64::INFINITY;
    }
    crate::units::mbps(params.tags as f64 * params.mrrs_bytes as f64, params.read_latency_ns)
}
