//! One message size's figures, from the record: what the report prints.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::record::{Bubble, Gap, Recorder, Slow, CAUSES};
use crate::bench::stats::Stats;
use crate::engine::ring::{RingPlan, StreamEnd, WaitCause};
use crate::model::message::MessageOverhead;
use crate::engine::ring::{StreamDirection, Transport};
use crate::model::stream::{doc003_convention, h2d_pull_model, h2d_push_model, pull_model, stream_model, RingShape, StreamModel};
use crate::model::LinkParams;

/// Per-message bytes the models count: OCDP's 16-byte metadata and 4-byte flag, a 4-byte
/// doorbell; document 003 counts 4 DW metadata + 2 DW flag = 24 bytes.
pub const METADATA_BYTES: u64 = 16;
pub const FLAG_BYTES: u64 = 4;
pub const DOORBELL_BYTES: u64 = 4;
pub const DOC003_OVERHEAD_BYTES: u64 = 24;

/// A latency distribution from a log-linear histogram (≤ 0.1 % error), ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p99_9_ns: f64,
    pub max_ns: f64,
    /// The distribution as (value ns, share of messages at or below it), for a CDF plot.
    pub cdf: Vec<(f64, f64)>,
}

/// The three latencies of a message (absent where the engine has no device times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    /// Device start to its flag write leaving: moving one message.
    pub device_service: Option<Latency>,
    /// Flag write leaving to the host seeing it: the host's reaction.
    pub host_reaction: Option<Latency>,
    /// Device start to host seeing it.
    pub end_to_end: Option<Latency>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Payload bytes over the whole stream's time (first start to last release), MB/s.
    #[serde(rename = "sustained_MBps")]
    pub sustained_mbps: f64,
    /// Median over windows of messages, with its 95 % interval where there are enough windows.
    #[serde(rename = "median_MBps")]
    pub median_mbps: Option<f64>,
    #[serde(rename = "median_interval_MBps")]
    pub median_interval_mbps: Option<(f64, f64)>,
    pub windows: usize,
}

/// How the ring's time divides: full (the consumer is the limit), empty (the producer is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingShare {
    pub full_share: f64,
    pub empty_share: f64,
    pub mean_occupancy: f64,
    /// Bins of `bin_ns` from the stream's start: mean and most buffers full.
    pub bin_ns: f64,
    pub occupancy_mean: Vec<f64>,
    pub occupancy_max: Vec<u32>,
}

/// Bubbles of one cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BubbleClass {
    pub cause: WaitCause,
    pub count: u64,
    pub total_ns: f64,
    /// Share of the stream's time.
    pub share: f64,
    pub latency: Latency,
    /// Histogram buckets: (upper bound ns, count), log-spaced.
    pub buckets: Vec<(f64, u64)>,
}

/// What limits the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `consumer`, `producer` or `balanced`.
    pub limit: String,
    pub reason: String,
}

/// One message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub message_bytes: u32,
    pub messages: u64,
    pub produced: u64,
    pub payload_bytes: u64,
    pub duration_ns: f64,
    pub throughput: Throughput,
    pub latency: Latencies,
    pub ring: RingShare,
    pub bubbles: Vec<BubbleClass>,
    /// Drops found from sequence gaps, and those the producer counted (where it can).
    pub dropped: u64,
    pub dropped_by_producer: Option<u64>,
    /// Messages the engine produced as copies of a simulated steady period, not stepped one by
    /// one ([`crate::engine::ring::StreamEnd::fast_forwarded`]).
    #[serde(default)]
    pub fast_forwarded: u64,
    pub gaps: Vec<Gap>,
    pub gaps_left_out: u64,
    pub reordered: u64,
    pub long_bubbles: Vec<Bubble>,
    pub long_bubbles_left_out: u64,
    pub slowest: Vec<Slow>,
    pub verdict: Verdict,
    /// The model beside the measurement, where the engine states its link.
    pub model: Option<PointModel>,
}

/// The model of this message size: TLP-accurate bounds with the host figures measured here, and
/// document 003's own convention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointModel {
    pub shape: RingShape,
    pub tlp_accurate: StreamModel,
    /// Document 003's convention: byte-exact TLP efficiency × message ÷ (message + 24 bytes).
    pub doc003_convention: MessageOverhead,
    /// Sustained throughput ÷ the model's bound.
    pub reached: f64,
}

/// Quantiles drawn for the CDF.
const CDF_QUANTILES: [f64; 21] =
    [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0];

fn latency(h: &Histogram<u64>) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    let q = |quantile: f64| h.value_at_quantile(quantile) as f64;
    Some(Latency {
        count: h.len(),
        mean_ns: h.mean(),
        p50_ns: q(0.5),
        p90_ns: q(0.9),
        p99_ns: q(0.99),
        p99_9_ns: q(0.999),
        max_ns: h.max() as f64,
        cdf: CDF_QUANTILES.iter().map(|&p| (q(p), p)).collect(),
    })
}

fn buckets(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    h.iter_log(1, 2.0).filter(|v| v.count_since_last_iteration() > 0).map(|v| (v.value_iterated_to() as f64, v.count_since_last_iteration())).collect()
}

pub fn point(plan: &RingPlan, r: &Recorder, end: &StreamEnd, link: Option<&LinkParams>) -> Point {
    let first = r.first_ns.unwrap_or(end.start_ns);
    let duration_ns = (r.last_ns - first).max(0.0);
    let share = |ns: f64| if duration_ns > 0.0 { ns / duration_ns } else { 0.0 };
    let rates: Vec<f64> = r.windows.iter().map(|(bytes, ns)| *bytes as f64 / ns * 1e3).collect();
    let stats = Stats::of(&rates);
    let throughput = Throughput {
        sustained_mbps: if duration_ns > 0.0 { r.bytes as f64 / duration_ns * 1e3 } else { 0.0 },
        median_mbps: stats.as_ref().map(|s| s.median),
        median_interval_mbps: stats.as_ref().and_then(|s| s.median_ci),
        windows: rates.len(),
    };
    let ring = RingShare {
        full_share: share(r.time_full_ns),
        empty_share: share(r.time_empty_ns),
        mean_occupancy: share(r.occupancy_area),
        bin_ns: r.bins.width_ns,
        occupancy_mean: r.bins.area.iter().map(|a| a / r.bins.width_ns).collect(),
        occupancy_max: r.bins.max.clone(),
    };
    let bubbles: Vec<BubbleClass> = CAUSES
        .iter()
        .enumerate()
        .filter_map(|(i, &cause)| {
            let latency = latency(&r.bubbles[i])?;
            Some(BubbleClass { cause, count: latency.count, total_ns: r.bubble_ns[i], share: share(r.bubble_ns[i]), latency, buckets: buckets(&r.bubbles[i]) })
        })
        .collect();
    let verdict = verdict(plan, &ring, &bubbles);
    let per_message = |total: f64| if r.messages > 0 { total / r.messages as f64 } else { 0.0 };
    let model = link.map(|params| {
        // The producer's own pause: the d2h device's dwell, the h2d host's preparation; in h2d
        // pull the device's engine moves the data, and its pause is its reaction.
        let pause_cause = if plan.direction == StreamDirection::H2d && plan.transport == Transport::Push { WaitCause::ProducerIdle } else { WaitCause::DeviceDwell };
        let dwell = bubbles.iter().find(|b| b.cause == pause_cause).map_or(0.0, |b| b.total_ns);
        let shape = RingShape {
            message_bytes: u64::from(plan.message_bytes),
            host_buffers: u64::from(ring_buffers(plan)),
            metadata_bytes: METADATA_BYTES,
            flag_bytes: FLAG_BYTES,
            doorbell_bytes: DOORBELL_BYTES,
            dwell_ns: per_message(dwell),
            host_reaction_ns: latency(&r.reaction).map_or(0.0, |l| l.mean_ns),
            host_hold_ns: per_message(r.hold_ns),
        };
        let tlp_accurate = match (plan.direction, plan.transport) {
            (StreamDirection::D2h, Transport::Push) => stream_model(params, &shape),
            (StreamDirection::H2d, Transport::Push) => h2d_push_model(params, &shape),
            (StreamDirection::H2d, Transport::Pull) => h2d_pull_model(params, &shape),
            (StreamDirection::D2h, Transport::Pull) => pull_model(params, &shape),
        };
        let reached = if tlp_accurate.mbps > 0.0 { throughput.sustained_mbps / tlp_accurate.mbps } else { 0.0 };
        PointModel { shape, doc003_convention: doc003_convention(params, u64::from(plan.message_bytes), DOC003_OVERHEAD_BYTES), tlp_accurate, reached }
    });
    Point {
        message_bytes: plan.message_bytes,
        messages: r.messages,
        produced: end.produced,
        payload_bytes: r.bytes,
        duration_ns,
        throughput,
        latency: Latencies { device_service: latency(&r.service), host_reaction: latency(&r.reaction), end_to_end: latency(&r.end_to_end) },
        ring,
        bubbles,
        dropped: r.dropped,
        dropped_by_producer: end.dropped_by_producer,
        fast_forwarded: end.fast_forwarded,
        gaps: r.gaps.clone(),
        gaps_left_out: r.gaps_left_out,
        reordered: r.reordered,
        long_bubbles: r.long_bubbles.clone(),
        long_bubbles_left_out: r.long_bubbles_left_out,
        slowest: r.slowest(),
        verdict,
        model,
    }
}

/// The buffers the producer fills: the host's in d2h push and in h2d pull (messages wait there
/// until the device reads them); the device's in h2d push (the host writes into them) and in
/// d2h pull (messages wait there until the host reads them).
pub fn ring_buffers(plan: &RingPlan) -> u32 {
    match (plan.direction, plan.transport) {
        (StreamDirection::D2h, Transport::Push) | (StreamDirection::H2d, Transport::Pull) => plan.host_buffers,
        _ => plan.device_buffers,
    }
}

/// The buffers whose occupancy the report sweeps (from each message's device done to its
/// release): the host's ring in d2h (push, and pull, where the host takes one message at a
/// time, so at most one is counted), the device's buffers in h2d (written or read into, not yet
/// consumed).
pub fn occupancy_buffers(plan: &RingPlan) -> u32 {
    match plan.direction {
        StreamDirection::D2h => plan.host_buffers,
        StreamDirection::H2d => plan.device_buffers,
    }
}

/// The limit: a ring full half the time (or the producer waiting on it) is the consumer; a ring
/// mostly empty is the producer (the link or its own pause: the pause's share says which). In
/// d2h pull the host takes one message at a time, so no ring fills: the source's idle share
/// decides. In h2d pull the device's buffers fill as in h2d push (its consumer drains them).
fn verdict(plan: &RingPlan, ring: &RingShare, bubbles: &[BubbleClass]) -> Verdict {
    let waited = |cause| bubbles.iter().find(|b| b.cause == cause).map_or(0.0, |b| b.share);
    let no_buffer = waited(WaitCause::NoFreeBuffer);
    let pct = |x: f64| x * 100.0;
    if plan.transport == Transport::Pull && plan.direction == StreamDirection::D2h {
        let idle = waited(WaitCause::ProducerIdle);
        let (limit, who) = if idle >= 0.5 { ("producer", "the device's source is slower than the host's reads") } else { ("consumer", "the host's reads (one in flight) and its use of each message set the rate") };
        return Verdict {
            limit: limit.into(),
            reason: format!("pull: the host reads one message at a time; it waited for the source {:.1} % of the time and the source for a free device buffer {:.1} %: {who}", pct(idle), pct(no_buffer)),
        };
    }
    let (producer, consumer, pause_cause, pause) = match plan.direction {
        StreamDirection::D2h => ("device", "host", WaitCause::DeviceDwell, "the device's own pause between messages (dwell)"),
        StreamDirection::H2d => ("host", "device", WaitCause::ProducerIdle, "the host's own preparation of each message"),
    };
    let paused = waited(pause_cause);
    if ring.full_share >= 0.5 || no_buffer >= 0.25 {
        return Verdict {
            limit: "consumer".into(),
            reason: format!(
                "the ring was full {:.1} % of the time and the producer waited for a free buffer {:.1} % of it: the {consumer} releases buffers slower than they fill",
                pct(ring.full_share),
                pct(no_buffer)
            ),
        };
    }
    if ring.empty_share >= 0.5 {
        let transfer = if plan.transport == Transport::Pull { "the device's reads of each message (one in flight) and its reaction before them".to_string() } else { format!("the producer's transfer of each message (the link or the {producer})") };
        // In h2d pull the device's engine waits for the host's doorbells only when the host is
        // slower than its reads, however small that share of the time.
        let host_late = plan.transport == Transport::Pull && paused > 0.0 && paused > waited(WaitCause::DeviceDwell);
        let who = if paused >= 0.25 || host_late { pause.to_string() } else { transfer };
        return Verdict {
            limit: "producer".into(),
            reason: format!(
                "the ring was empty {:.1} % of the time (full {:.1} %): the {consumer} waits for messages; {:.1} % of the time went to {pause}, so the limit is {who}",
                pct(ring.empty_share),
                pct(ring.full_share),
                pct(paused)
            ),
        };
    }
    Verdict {
        limit: "balanced".into(),
        reason: format!("the ring was full {:.1} % and empty {:.1} % of the time: neither side alone sets the rate", pct(ring.full_share), pct(ring.empty_share)),
    }
}

#[cfg(test)]
mod tests {
    //! The verdict's rules both ways (docs/findings.md, the stream family of the audit).

    use super::*;
    use crate::engine::ring::{Backpressure, StreamStop};

    fn plan(direction: StreamDirection, transport: Transport) -> RingPlan {
        RingPlan {
            direction,
            transport,
            backpressure: Backpressure::Lossless,
            host_buffers: 8,
            device_buffers: 2,
            buffer_bytes: 4096,
            message_bytes: 4096,
            stop: StreamStop::Messages(100),
        }
    }

    fn ring(full_share: f64, empty_share: f64) -> RingShare {
        RingShare { full_share, empty_share, mean_occupancy: 0.0, bin_ns: 1.0, occupancy_mean: Vec::new(), occupancy_max: Vec::new() }
    }

    fn waited(cause: WaitCause, share: f64) -> BubbleClass {
        let latency = Latency { count: 1, mean_ns: 1.0, p50_ns: 1.0, p90_ns: 1.0, p99_ns: 1.0, p99_9_ns: 1.0, max_ns: 1.0, cdf: Vec::new() };
        BubbleClass { cause, count: 1, total_ns: share, share, latency, buckets: Vec::new() }
    }

    #[test]
    fn each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it() {
        let d2h = plan(StreamDirection::D2h, Transport::Push);
        // Consumer: the ring full half the time, or the producer waiting for a free buffer.
        assert_eq!(verdict(&d2h, &ring(0.6, 0.0), &[]).limit, "consumer");
        assert_eq!(verdict(&d2h, &ring(0.1, 0.1), &[waited(WaitCause::NoFreeBuffer, 0.3)]).limit, "consumer");
        assert_ne!(verdict(&d2h, &ring(0.4, 0.0), &[waited(WaitCause::NoFreeBuffer, 0.2)]).limit, "consumer");
        // Producer: the ring mostly empty; its own pause named only when the pause takes a quarter.
        let paused = verdict(&d2h, &ring(0.0, 0.8), &[waited(WaitCause::DeviceDwell, 0.5)]);
        assert_eq!(paused.limit, "producer");
        assert!(paused.reason.ends_with("so the limit is the device's own pause between messages (dwell)"), "{}", paused.reason);
        let moving = verdict(&d2h, &ring(0.0, 0.8), &[waited(WaitCause::DeviceDwell, 0.1)]);
        assert!(moving.reason.ends_with("so the limit is the producer's transfer of each message (the link or the device)"), "{}", moving.reason);
        let h2d = plan(StreamDirection::H2d, Transport::Push);
        let preparing = verdict(&h2d, &ring(0.0, 0.8), &[waited(WaitCause::ProducerIdle, 0.5)]);
        assert!(preparing.reason.ends_with("the host's own preparation of each message"), "{}", preparing.reason);
        assert_ne!(verdict(&d2h, &ring(0.0, 0.4), &[]).limit, "producer");
        // Balanced: neither.
        assert_eq!(verdict(&d2h, &ring(0.3, 0.3), &[]).limit, "balanced");
        assert_ne!(verdict(&d2h, &ring(0.0, 0.6), &[]).limit, "balanced");
        // Pull: the source's idle share decides, the ring's shares do not.
        let pull = plan(StreamDirection::D2h, Transport::Pull);
        assert_eq!(verdict(&pull, &ring(0.9, 0.0), &[waited(WaitCause::ProducerIdle, 0.6)]).limit, "producer");
        assert_eq!(verdict(&pull, &ring(0.0, 0.9), &[waited(WaitCause::ProducerIdle, 0.2)]).limit, "consumer");
    }
}
