//! Writes and reads at the same time (document 001 "Read/Write", `dma --both`).
//!
//! Device→host carries the write TLPs, the read requests and the ACKs for completions;
//! host→device carries the completions and the ACK/UpdateFC DLLPs for writes and requests.
//! Each stream costs each direction a fixed number of link bytes per payload byte (from its
//! one-way [`Flow`]); SKPs reduce both directions' capacity. Both streams run as fast as they can:
//! the rates are where both directions are full, clamped to each stream's one-way rate (a read
//! stream that is latency bound stays latency bound and leaves room for the writes).
//!
//! A read that holds its tags for a round trip is slowed by the writes beside it in two ways
//! the one-way flows do not see (found against the link simulator, `pcieperf crosscheck
//! --kind both`): a request cannot start inside a write TLP, so it waits for the one in progress
//! on the requester's lanes (the rest of the write TLP in progress when its tag frees: fixed by
//! the phase of the schedule with one tag or rounds shorter than a write TLP, otherwise half a
//! write TLP on average; times the share of time those lanes are busy), and the Ack/UpdateFC DLLPs for the writes go ahead of completions on the
//! completer's lanes, stretching each request's completions by the share of time they take.
//! Both lengthen the time a tag is held, so they are charged as completion latency.

use serde::{Deserialize, Serialize};

use super::load::bytes_ns;
use super::{dllp, read, skp, write, Flow, Limit, LinkParams, Span, Throughput};

/// Write and read throughput when both run at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bidirectional {
    pub write: Throughput,
    pub read: Throughput,
}

impl Bidirectional {
    /// Payload in both directions together, MB/s.
    pub fn total_mbps(&self) -> f64 {
        self.write.mbps + self.read.mbps
    }
}

/// How long a read request waits for the write TLP in progress on the requester's lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestWait {
    /// The model's default: the rest of the write TLP in progress when the tag frees (see
    /// `Phase::wait_ns`) times the share of time the requester's lanes are busy.
    Average,
    /// A given wait per request, in ns (0 and one whole write TLP bound what a fixed schedule
    /// can do).
    Ns(f64),
    /// Every round's requests go out as one group, locked to the writes (`Phase::group_round_ns`);
    /// where no such schedule exists, one whole write TLP per request.
    Group,
}

/// Writes and reads of `size_bytes` each, at the same time: (write, read).
pub fn bidirectional_throughput(params: &LinkParams, size_bytes: u64) -> (Throughput, Throughput) {
    let both = bidirectional(params, size_bytes);
    (both.write, both.read)
}

/// Writes and reads of `size_bytes` each, at the same time.
pub fn bidirectional(params: &LinkParams, size_bytes: u64) -> Bidirectional {
    bidirectional_waiting(params, size_bytes, RequestWait::Average)
}

/// As [`bidirectional`], with a chosen wait of each read request behind a write TLP.
pub fn bidirectional_waiting(params: &LinkParams, size_bytes: u64, wait: RequestWait) -> Bidirectional {
    let alone = Shares::of(params, size_bytes);
    let mut rates = alone.solve();
    if rates.write_bytes_per_ns <= 0.0 {
        return rates.both(params, &alone);
    }
    // The reads' longer tag holding time depends on the writes' share of the lanes, which grows
    // as the reads slow down: iterate to the fixed point (a few steps; the share is bounded).
    let (mut slowed, mut shares) = (params.clone(), alone);
    for _ in 0..FIXED_POINT_STEPS {
        let extra_ns = behind_writes_ns(params, size_bytes, &shares, &rates, wait);
        let next = LinkParams { read_latency_ns: params.read_latency_ns + extra_ns, ..params.clone() };
        let converged = (next.read_latency_ns - slowed.read_latency_ns).abs() <= 1e-6 * next.read_latency_ns.max(1.0);
        shares = Shares::of(&next, size_bytes);
        rates = shares.solve();
        slowed = next;
        if converged {
            break;
        }
    }
    rates.both(&slowed, &shares)
}

/// Most steps of the fixed point of the reads' extra latency (it settles in a handful).
const FIXED_POINT_STEPS: usize = 16;

/// As [`bidirectional`], with the two one-way flows sharing only the link's bytes: what the
/// streams would get if read requests never waited behind write TLPs and completions never
/// behind the writes' DLLPs (what the model gave before it charged either).
pub fn bidirectional_without_interference(params: &LinkParams, size_bytes: u64) -> Bidirectional {
    let shares = Shares::of(params, size_bytes);
    shares.solve().both(params, &shares)
}

/// Time a read request holds its tag longer because writes run beside it, in ns: its wait for
/// the write TLP in progress, and its completions stretched by the writes' DLLPs going first.
fn behind_writes_ns(params: &LinkParams, size_bytes: u64, shares: &Shares, rates: &Rates, wait: RequestWait) -> f64 {
    let (write_bytes_per_ns, read_bytes_per_ns) = (rates.write_bytes_per_ns, rates.read_bytes_per_ns);
    if write_bytes_per_ns <= 0.0 {
        return 0.0;
    }
    let link = params.link;
    // The phase rules assume the writes keep the requester's lanes busy between requests; the
    // wait shrinks by the share of time those lanes are idle.
    let upstream_share = ((shares.a * write_bytes_per_ns + shares.b * read_bytes_per_ns) / shares.capacity).min(1.0);
    let downstream_share = (shares.c * write_bytes_per_ns / shares.capacity).min(0.99);
    let request_bytes = params.mrrs_bytes.min(size_bytes) as f64;
    let set_ns = bytes_ns(link, shares.reads.data.tlp_bytes() * request_bytes / size_bytes as f64);
    let stretch_ns = set_ns * downstream_share / (1.0 - downstream_share);
    let request_wait_ns = match wait {
        RequestWait::Average | RequestWait::Group => {
            // From the end of the request (where the next write starts) to its tag freeing.
            let after_request_ns = params.read_latency_ns + set_ns + stretch_ns;
            let request_ns = bytes_ns(link, shares.reads.opposite.tlp_bytes() / shares.reads.opposite.tlps.max(1.0));
            let ack_ns = if params.include_dllp { bytes_ns(link, dllp::bytes(link, 1.0)) } else { 0.0 };
            let skp_share = if params.include_skp { skp::fraction(link.generation) } else { 0.0 };
            let phase = Phase {
                after_request_ns,
                write_tlp_ns: write_tlp_ns(params, size_bytes),
                request_ns,
                ack_ns,
                completion_set_ns: set_ns + stretch_ns,
                skp_share,
            };
            match wait {
                RequestWait::Average => upstream_share * phase.wait_ns(params.tags),
                _ => phase.group_round_ns(params.tags).map_or(phase.write_tlp_ns, |round_ns| round_ns - request_ns - after_request_ns),
            }
        }
        RequestWait::Ns(ns) => ns,
    };
    request_wait_ns + stretch_ns
}

/// Where a read request's tag frees among the write TLPs, with writes filling the lanes (ns).
struct Phase {
    /// From the end of a request (where the next write TLP starts) to its tag freeing.
    after_request_ns: f64,
    write_tlp_ns: f64,
    request_ns: f64,
    /// The requester's Ack for the completions, which goes out ahead of the request.
    ack_ns: f64,
    /// One request's completions on the completer's lanes (a round's follow each other).
    completion_set_ns: f64,
    /// Share of the requester's lanes SKPs take.
    skp_share: f64,
}

impl Phase {
    /// The wait of a request for the write TLP in progress when its tag frees (and for the
    /// Acks and requests queued with it). A request that waited went out as a write TLP ended,
    /// and the next write started behind it. With one tag the phase is fixed: the wait is the
    /// rest of the write TLP then in progress. With several tags whose tags all free inside one
    /// write TLP, all go out together after it, one after another: every tag's round is one
    /// write TLP plus the burst. Otherwise the rounds drift against the writes: on average
    /// half a write TLP (the simulator may instead lock them into one group per round, see
    /// [`RequestWait::Group`]).
    fn wait_ns(&self, tags: u32) -> f64 {
        let Phase { after_request_ns: after, write_tlp_ns: write, request_ns, ack_ns, .. } = *self;
        if write <= 0.0 {
            return 0.0;
        }
        let burst_ns = tags as f64 * (request_ns + ack_ns);
        if tags <= 1 {
            (after / write).ceil() * write - after + ack_ns
        } else if after + burst_ns <= write {
            write + burst_ns - request_ns - after
        } else {
            write / 2.0
        }
    }

    /// The round of `tags` requests that go out as one group, when their tags all free within
    /// one write TLP: the tags that free first wait for the write TLP in progress, and the
    /// others free before it ends (found at Gen3 x4, MPS 4096, MRRS 512, 8 tags, 2 µs: the 8
    /// completions take 945 ns, a write TLP 1046 ns, and every round was the group plus 3
    /// write TLPs, +20.7 % against half a write TLP of wait). From the start of the group (its
    /// Acks, then its requests), the first tag frees after the Acks, its request and `after`,
    /// the last (tags − 1) completion sets later; the writes resume behind the group, and the
    /// next group goes when the write TLP in progress at the last free ends. The requester's
    /// lanes are busy all round (the group, then whole write TLPs), so its SKPs stretch the
    /// round. Whether a simulated schedule locks into this or drifts depends on its phase
    /// (an SKP among the writes moves the grid by more than the margin), so the model does not
    /// assume it; it bounds what the lock can cost.
    fn group_round_ns(&self, tags: u32) -> Option<f64> {
        let Phase { after_request_ns: after, write_tlp_ns: write, request_ns, ack_ns, completion_set_ns, skp_share } = *self;
        let spacing_ns = completion_set_ns.max(request_ns);
        let spread_ns = tags.saturating_sub(1) as f64 * spacing_ns;
        let burst_ns = tags as f64 * (request_ns + ack_ns);
        if spread_ns + burst_ns > write {
            return None;
        }
        let first_free_ns = tags as f64 * ack_ns + request_ns + after;
        let writes = ((first_free_ns + spread_ns - burst_ns) / write).ceil().max(1.0);
        // The schedule holds only if no write TLP ends between the first and the last tag
        // freeing: there the early tags would go out alone and split the group.
        if first_free_ns <= burst_ns + (writes - 1.0) * write {
            return None;
        }
        Some((burst_ns + writes * write) / (1.0 - skp_share))
    }
}

/// One write TLP of the transfer (MaxPayload, or the whole transfer when smaller) on the link.
pub fn write_tlp_ns(params: &LinkParams, size_bytes: u64) -> f64 {
    let bytes = params.framing_bytes() + params.header.bytes() + params.mps_bytes.min(size_bytes);
    bytes_ns(params.link, bytes as f64)
}

/// Each stream's one-way flow and what it costs each direction per payload byte.
struct Shares {
    writes: Flow,
    reads: Flow,
    /// Link bytes per payload byte: writes and reads device→host (a, b), host→device (c, d).
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    /// Link bytes per ns of one direction, SKPs taken out.
    capacity: f64,
}

/// Each stream's rate, payload bytes per ns.
struct Rates {
    write_bytes_per_ns: f64,
    read_bytes_per_ns: f64,
}

impl Shares {
    fn of(params: &LinkParams, size_bytes: u64) -> Self {
        let writes = write::write_flow(params, size_bytes, Span::Steady);
        let reads = read::read_flow(params, size_bytes, Span::Steady);
        let size = size_bytes as f64;
        // Link bytes per payload byte, SKPs left out (they are capacity, below).
        let per_byte = |flow: &Flow, data_side: bool| {
            let load = if data_side { flow.data } else { flow.opposite };
            (load.total_bytes() - load.skp_bytes) / size
        };
        let (a, b) = (per_byte(&writes, true), per_byte(&reads, false));
        let (c, d) = (per_byte(&writes, false), per_byte(&reads, true));
        let skp_share = if params.include_skp { skp::fraction(params.link.generation) } else { 0.0 };
        let capacity = 1.0 / bytes_ns(params.link, 1.0) * (1.0 - skp_share);
        Shares { writes, reads, a, b, c, d, capacity }
    }

    /// Both directions full: a·w + b·r = C and c·w + d·r = C. Clamp the read rate to its
    /// one-way rate, give the writes what fits, then give the reads what the writes left.
    fn solve(&self) -> Rates {
        let Shares { a, b, c, d, capacity, .. } = *self;
        let size = self.writes.size_bytes as f64;
        let w_max = size / self.writes.duration_ns;
        let r_max = size / self.reads.duration_ns;
        let slack = |used: f64, cost: f64| if cost > 0.0 { ((capacity - used) / cost).max(0.0) } else { f64::INFINITY };
        let det = a * d - b * c;
        let r_full = if det.abs() > 1e-12 { capacity * (a - c) / det } else { r_max };
        let r = r_full.clamp(0.0, r_max);
        let w = w_max.min(slack(b * r, a)).min(slack(d * r, c));
        let r = r_max.min(slack(a * w, b)).min(slack(c * w, d));
        Rates { write_bytes_per_ns: w, read_bytes_per_ns: r }
    }
}

impl Rates {
    fn both(&self, params: &LinkParams, shares: &Shares) -> Bidirectional {
        let link = params.link;
        let size = shares.writes.size_bytes as f64;
        let w_max = size / shares.writes.duration_ns;
        let r_max = size / shares.reads.duration_ns;
        let limit = |rate: f64, max: f64, one_way: Limit| if rate >= max * (1.0 - 1e-9) { one_way } else { Limit::Link };
        let throughput = |rate_bytes_per_ns: f64, limit: Limit| {
            Throughput::new(link, size, if rate_bytes_per_ns > 0.0 { size / rate_bytes_per_ns } else { f64::INFINITY }, limit)
        };
        let (w, r) = (self.write_bytes_per_ns, self.read_bytes_per_ns);
        Bidirectional {
            write: throughput(w, limit(w, w_max, shares.writes.throughput.limit)),
            read: throughput(r, limit(r, r_max, shares.reads.throughput.limit)),
        }
    }
}
