//! The per-message record, kept compactly for millions of messages: log-linear histograms
//! (hdrhistogram, 3 significant digits: ≤ 0.1 % error) of the latencies and bubbles, the ring's
//! occupancy as time at each level plus a binned curve, throughput per window of messages, and
//! every anomaly (drops from sequence gaps, bubbles over a threshold, the slowest messages) up
//! to a bound, with a count of what the bound left out. Memory does not grow with the stream.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::ring::{MessageEvent, MessageSink, WaitCause};
use crate::engine::EngineError;

/// Largest value the histograms hold, ns (an hour; longer values count as an hour).
const MAX_NS: u64 = 3_600_000_000_000;
/// Significant digits of the histograms: 3 = relative error ≤ 0.1 %.
const DIGITS: u8 = 3;
/// Anomalies of each kind kept in full; beyond, only counted.
pub const ANOMALIES_KEPT: usize = 1000;
/// The slowest messages kept.
pub const SLOWEST_KEPT: usize = 16;
/// Occupancy curve: at most this many bins (pairs merge as the stream grows).
const OCCUPANCY_BINS: usize = 256;
/// Throughput windows kept before pairs merge.
const MAX_WINDOWS: usize = 2048;

/// Every wait cause, in the order reports list them.
pub const CAUSES: [WaitCause; 7] = [
    WaitCause::None,
    WaitCause::NoFreeBuffer,
    WaitCause::Credits,
    WaitCause::DeviceDwell,
    WaitCause::HostLate,
    WaitCause::ProducerIdle,
    WaitCause::Unknown,
];

/// A run of missing sequence numbers: messages the consumer never saw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// The first sequence number missing.
    pub first: u64,
    pub missing: u64,
}

/// A bubble longer than the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bubble {
    /// The message that waited.
    pub sequence: u64,
    pub wait_ns: f64,
    pub cause: WaitCause,
}

/// One of the slowest messages (end to end, or host hold time without device times).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slow {
    pub sequence: u64,
    pub latency_ns: f64,
    pub event: MessageEvent,
}

/// The running record of one stream.
pub struct Recorder {
    host_buffers: u32,
    bubble_threshold_ns: f64,
    pub(super) service: Histogram<u64>,
    pub(super) reaction: Histogram<u64>,
    pub(super) end_to_end: Histogram<u64>,
    pub(super) bubbles: Vec<Histogram<u64>>,
    pub(super) bubble_ns: [f64; 7],
    pub(super) messages: u64,
    pub(super) bytes: u64,
    /// Sum of host hold times (seen to released), ns.
    pub(super) hold_ns: f64,
    next_sequence: u64,
    pub(super) gaps: Vec<Gap>,
    pub(super) gaps_left_out: u64,
    pub(super) dropped: u64,
    pub(super) reordered: u64,
    pub(super) long_bubbles: Vec<Bubble>,
    pub(super) long_bubbles_left_out: u64,
    slowest: BinaryHeap<Reverse<(u64, u64)>>,
    slowest_events: Vec<(u64, Slow)>,
    // Occupancy sweep: messages landed and not yet released, by release time.
    held: VecDeque<f64>,
    level: u32,
    last_change_ns: Option<f64>,
    pub(super) first_ns: Option<f64>,
    pub(super) last_ns: f64,
    pub(super) time_full_ns: f64,
    pub(super) time_empty_ns: f64,
    pub(super) occupancy_area: f64,
    pub(super) bins: Occupancy,
    // Throughput windows.
    window_messages: u64,
    window_count: u64,
    window_bytes: u64,
    window_start_ns: Option<f64>,
    last_seen_ns: f64,
    pub(super) windows: Vec<(u64, f64)>,
}

/// The occupancy curve: per bin of `width_ns` from `start_ns`, the time-weighted sum and max.
#[derive(Debug, Clone, Default)]
pub struct Occupancy {
    pub start_ns: f64,
    pub width_ns: f64,
    pub area: Vec<f64>,
    pub max: Vec<u32>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, DIGITS).expect("valid histogram bounds")
}

#[inline]
fn record(h: &mut Histogram<u64>, ns: f64) {
    h.saturating_record(whole_ns(ns));
}

/// Nearest whole ns of a duration, negatives as 0, at most an hour. (`+ 0.5` and truncation,
/// not `f64::round`: that is a libm call, a fifth of the recorder's time.)
#[inline]
fn whole_ns(ns: f64) -> u64 {
    (ns.max(0.0) + 0.5).min(MAX_NS as f64) as u64
}

impl Recorder {
    /// A record for a ring of `host_buffers`, throughput windows of `window_messages`.
    pub fn new(host_buffers: u32, window_messages: u64, bubble_threshold_ns: f64) -> Self {
        Recorder {
            host_buffers,
            bubble_threshold_ns,
            service: histogram(),
            reaction: histogram(),
            end_to_end: histogram(),
            bubbles: CAUSES.iter().map(|_| histogram()).collect(),
            bubble_ns: [0.0; 7],
            messages: 0,
            bytes: 0,
            hold_ns: 0.0,
            next_sequence: 0,
            gaps: Vec::new(),
            gaps_left_out: 0,
            dropped: 0,
            reordered: 0,
            long_bubbles: Vec::new(),
            long_bubbles_left_out: 0,
            slowest: BinaryHeap::new(),
            slowest_events: Vec::new(),
            held: VecDeque::new(),
            level: 0,
            last_change_ns: None,
            first_ns: None,
            last_ns: 0.0,
            time_full_ns: 0.0,
            time_empty_ns: 0.0,
            occupancy_area: 0.0,
            bins: Occupancy::default(),
            window_messages: window_messages.max(1),
            window_count: 0,
            window_bytes: 0,
            window_start_ns: None,
            last_seen_ns: 0.0,
            windows: Vec::new(),
        }
    }

    /// Take one message.
    pub fn take(&mut self, e: &MessageEvent) {
        self.messages += 1;
        self.bytes += u64::from(e.bytes);
        self.hold_ns += e.host_released_ns - e.host_seen_ns;
        self.sequence(e.sequence);
        if let (Some(start), Some(done)) = (e.device_start_ns, e.device_done_ns) {
            record(&mut self.service, done - start);
            record(&mut self.reaction, e.host_seen_ns - done);
            record(&mut self.end_to_end, e.host_seen_ns - start);
        }
        if e.wait_before_ns > 0.0 {
            let i = cause_index(e.wait_cause);
            record(&mut self.bubbles[i], e.wait_before_ns);
            self.bubble_ns[i] += e.wait_before_ns;
            if e.wait_before_ns > self.bubble_threshold_ns {
                if self.long_bubbles.len() < ANOMALIES_KEPT {
                    self.long_bubbles.push(Bubble { sequence: e.sequence, wait_ns: e.wait_before_ns, cause: e.wait_cause });
                } else {
                    self.long_bubbles_left_out += 1;
                }
            }
        }
        self.slow(e);
        let landed = e.device_done_ns.unwrap_or(e.host_seen_ns);
        self.first_ns.get_or_insert(e.device_start_ns.unwrap_or(landed));
        self.occupancy(landed, e.host_released_ns);
        self.window(e.host_seen_ns, u64::from(e.bytes));
    }

    fn sequence(&mut self, sequence: u64) {
        if sequence > self.next_sequence {
            let missing = sequence - self.next_sequence;
            self.dropped += missing;
            if self.gaps.len() < ANOMALIES_KEPT {
                self.gaps.push(Gap { first: self.next_sequence, missing });
            } else {
                self.gaps_left_out += 1;
            }
        } else if sequence < self.next_sequence {
            self.reordered += 1;
            return;
        }
        self.next_sequence = sequence + 1;
    }

    fn slow(&mut self, e: &MessageEvent) {
        let latency_ns = match e.device_start_ns {
            Some(start) => e.host_seen_ns - start,
            None => e.host_released_ns - e.host_seen_ns,
        };
        let key = whole_ns(latency_ns);
        if self.slowest.len() == SLOWEST_KEPT {
            if self.slowest.peek().is_some_and(|Reverse((k, _))| *k >= key) {
                return;
            }
            let Reverse((_, seq)) = self.slowest.pop().expect("full");
            self.slowest_events.retain(|(s, _)| *s != seq);
        }
        self.slowest.push(Reverse((key, e.sequence)));
        self.slowest_events.push((e.sequence, Slow { sequence: e.sequence, latency_ns, event: *e }));
    }

    /// The slowest messages, slowest first.
    pub fn slowest(&self) -> Vec<Slow> {
        let mut list: Vec<Slow> = self.slowest_events.iter().map(|(_, s)| *s).collect();
        list.sort_by(|a, b| b.latency_ns.total_cmp(&a.latency_ns));
        list
    }

    /// The sweep of the ring's level: releases before `landed` leave, then this message enters.
    fn occupancy(&mut self, landed: f64, released: f64) {
        while let Some(&release) = self.held.front() {
            if release > landed {
                break;
            }
            self.held.pop_front();
            self.change_at(release, -1);
        }
        self.change_at(landed, 1);
        self.held.push_back(released);
        self.last_ns = self.last_ns.max(released);
    }

    #[inline]
    fn change_at(&mut self, at: f64, delta: i32) {
        let since = self.last_change_ns.unwrap_or(at);
        let at = at.max(since);
        let span = at - since;
        if span > 0.0 {
            if self.level >= self.host_buffers {
                self.time_full_ns += span;
            } else if self.level == 0 {
                self.time_empty_ns += span;
            }
            self.occupancy_area += span * f64::from(self.level);
            self.bin(since, at);
        }
        self.last_change_ns = Some(at);
        self.level = self.level.saturating_add_signed(delta);
    }

    /// Spread the current level over the curve's bins from `from` to `to`.
    fn bin(&mut self, from: f64, to: f64) {
        let bins = &mut self.bins;
        // Most spans lie inside the last bin: add them there without the general walk.
        if let Some(last) = bins.area.len().checked_sub(1) {
            let last_start = bins.start_ns + last as f64 * bins.width_ns;
            if from >= last_start && to <= last_start + bins.width_ns {
                bins.area[last] += (to - from) * f64::from(self.level);
                bins.max[last] = bins.max[last].max(self.level);
                return;
            }
        }
        if bins.area.is_empty() {
            bins.start_ns = from;
            bins.width_ns = ((to - from) / 4.0).max(1_000.0);
        }
        while to > bins.start_ns + bins.width_ns * OCCUPANCY_BINS as f64 {
            // Merge pairs: the curve keeps its bound, each bin twice as long.
            let merged = |v: &Vec<f64>| v.chunks(2).map(|c| c.iter().sum()).collect::<Vec<f64>>();
            bins.area = merged(&bins.area);
            bins.max = bins.max.chunks(2).map(|c| c.iter().copied().max().unwrap_or(0)).collect();
            bins.width_ns *= 2.0;
        }
        let mut t = from;
        while t < to {
            let index = ((t - bins.start_ns) / bins.width_ns) as usize;
            let end = (bins.start_ns + (index + 1) as f64 * bins.width_ns).min(to);
            if bins.area.len() <= index {
                bins.area.resize(index + 1, 0.0);
                bins.max.resize(index + 1, 0);
            }
            bins.area[index] += (end - t) * f64::from(self.level);
            bins.max[index] = bins.max[index].max(self.level);
            if end <= t {
                break;
            }
            t = end;
        }
    }

    /// Close the sweep at the last release.
    pub fn finish(&mut self) {
        while let Some(release) = self.held.pop_front() {
            self.change_at(release, -1);
        }
        if self.window_count > 0 {
            self.close_window();
        }
    }

    fn window(&mut self, seen_ns: f64, bytes: u64) {
        let first = self.first_ns.unwrap_or(seen_ns);
        self.window_start_ns.get_or_insert(first);
        self.window_count += 1;
        self.window_bytes += bytes;
        self.last_seen_ns = seen_ns;
        if self.window_count >= self.window_messages {
            self.close_window();
        }
    }

    fn close_window(&mut self) {
        let start = self.window_start_ns.unwrap_or(self.last_seen_ns);
        let span = self.last_seen_ns - start;
        if span > 0.0 {
            self.windows.push((self.window_bytes, span));
        }
        self.window_start_ns = Some(self.last_seen_ns);
        self.window_count = 0;
        self.window_bytes = 0;
        if self.windows.len() >= MAX_WINDOWS {
            self.windows = self.windows.chunks(2).map(|c| (c.iter().map(|w| w.0).sum(), c.iter().map(|w| w.1).sum())).collect();
            self.window_messages *= 2;
        }
    }
}

impl MessageSink for Recorder {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError> {
        self.take(event);
        Ok(())
    }
}

pub fn cause_index(cause: WaitCause) -> usize {
    CAUSES.iter().position(|c| *c == cause).expect("every cause is listed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(sequence: u64, start: f64, wait: f64) -> MessageEvent {
        MessageEvent {
            sequence,
            bytes: 64,
            device_start_ns: Some(start),
            device_done_ns: Some(start + 100.0),
            host_seen_ns: start + 300.0,
            host_released_ns: start + 400.0,
            ring_occupancy: 1,
            wait_before_ns: wait,
            wait_cause: if wait > 0.0 { WaitCause::DeviceDwell } else { WaitCause::None },
        }
    }

    /// Millions of messages with a gap every 10 and a long bubble every 7: everything is kept
    /// up to its bound and counted beyond it; nothing grows with the stream.
    #[test]
    fn memory_is_bounded_and_every_anomaly_counted() {
        let mut r = Recorder::new(4, 1024, 1_000.0);
        let mut sequence = 0;
        for i in 0..2_000_000u64 {
            sequence += if i % 10 == 9 { 2 } else { 1 };
            r.take(&event(sequence, i as f64 * 150.0, if i % 7 == 0 { 5_000.0 } else { 0.0 }));
        }
        r.finish();
        assert_eq!(r.dropped, 1 + 200_000, "the first message is 1: sequence 0 is missing too");
        assert_eq!(r.gaps.len() as u64 + r.gaps_left_out, 1 + 200_000);
        assert_eq!(r.gaps.len(), ANOMALIES_KEPT);
        assert_eq!(r.long_bubbles.len() as u64 + r.long_bubbles_left_out, 2_000_000u64.div_ceil(7));
        assert!(r.windows.len() < MAX_WINDOWS && r.bins.area.len() <= OCCUPANCY_BINS, "{} {}", r.windows.len(), r.bins.area.len());
        assert_eq!(r.slowest().len(), SLOWEST_KEPT);
        // Each message is in the ring from 100 to 400 ns after its start, one every 150 ns:
        // two or three at a time, never four (the ring's size), never none.
        assert_eq!(r.time_full_ns, 0.0);
        assert!(r.time_empty_ns < 1.0);
        let mean = r.occupancy_area / (r.last_ns - r.first_ns.unwrap());
        assert!((mean - 2.0).abs() < 0.01, "{mean}");
    }
}
