//! Views of a stream document (`pcieperf.stream/1`): text, JSON, CSV, HTML and metrics.
//! Simulated figures say so in every view.

use std::fmt::Write;
use std::time::SystemTime;

use crate::bench::stream::{Latency, Point, StreamDocument};
use crate::engine::ring::{StreamDirection, Transport};
use crate::report::metrics::{self, Family, Kind, Sample};
use crate::report::plot::{escape, Axis, Mark, Plot, Scale};
use crate::table::{Align, Table};
use crate::units::{format_ns, format_size};

/// "simulated" or "measured": the word every view carries.
pub fn label(doc: &StreamDocument) -> &'static str {
    if doc.engine.co_simulated {
        "co-simulated"
    } else if doc.simulated {
        "simulated"
    } else {
        "measured"
    }
}

/// A value as the JSON document spells it (`no_free_buffer`, `d2h`, `lossless`).
fn word(value: impl serde::Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn cause_name(cause: crate::engine::ring::WaitCause) -> String {
    word(cause)
}

/// Every point with its direction: the plan's, then (`--direction both`) the h2d ring's.
fn directed_points(doc: &StreamDocument) -> Vec<(StreamDirection, &Point)> {
    let h2d = doc.both.iter().flat_map(|b| b.h2d_points.iter().map(|p| (StreamDirection::H2d, p)));
    doc.points.iter().map(|p| (doc.plan.direction, p)).chain(h2d).collect()
}

/// Where the two directions of a both run met: one simulated link, or two device nodes this
/// process wrote and read at the same time (a FIFO pair, a driver's h2c and c2h channels).
fn both_where(doc: &StreamDocument) -> &'static str {
    if doc.simulated || doc.engine.co_simulated {
        "on one link"
    } else {
        "through the engine's write and read nodes"
    }
}

fn heading(doc: &StreamDocument) -> String {
    let plan = &doc.plan;
    let mut out = format!(
        "pcieperf stream — {} ({})\n{}\nring: {} host buffers, {} device buffers of {} bytes; {}\n",
        doc.target,
        label(doc),
        doc.engine.description,
        plan.host_buffers,
        plan.device_buffers,
        plan.buffer_bytes,
        if doc.both.is_some() {
            // Both rings run in the plan's mode (`--pull`, `--lossy` apply to both).
            format!("both directions at once {} (each {}, {}; the h2d ring of the same shape)", both_where(doc), word(plan.transport), word(plan.backpressure))
        } else {
            format!("{}, {}, {}", word(plan.direction), word(plan.transport), word(plan.backpressure))
        },
    );
    if doc.simulated {
        out.push_str("SIMULATED: no hardware was involved; every time below is the simulator's virtual time.\n");
    }
    if let Some(why) = &doc.stopped_early {
        let _ = writeln!(out, "stopped early: {why} (the points below are what was streamed so far)");
    }
    out
}

fn latency_row(table: &mut Table, name: &str, latency: Option<&Latency>) {
    if let Some(l) = latency {
        table.row(vec![
            name.into(),
            format_ns(l.p50_ns),
            format_ns(l.p90_ns),
            format_ns(l.p99_ns),
            format_ns(l.p99_9_ns),
            format_ns(l.max_ns),
            l.count.to_string(),
        ]);
    }
}

fn point_text(doc: &StreamDocument, direction: StreamDirection, p: &Point) -> String {
    let sim = label(doc);
    let which = if doc.both.is_some() { format!("{}: ", word(direction)) } else { String::new() };
    let mut out = format!("\n== {which}messages of {} ({sim}) ==\n", format_size(u64::from(p.message_bytes)));
    let t = &p.throughput;
    let _ = writeln!(
        out,
        "{} messages delivered of {} produced in {}; sustained {:.1} MB/s; median {} over {} windows",
        p.messages,
        p.produced,
        format_ns(p.duration_ns),
        t.sustained_mbps,
        match (t.median_mbps, t.median_interval_mbps) {
            (Some(m), Some((lo, hi))) => format!("{m:.1} MB/s (95 % interval {lo:.1}–{hi:.1})"),
            (Some(m), None) => format!("{m:.1} MB/s (too few windows for an interval)"),
            _ => "—".into(),
        },
        t.windows
    );
    let mut table = Table::new(&[
        ("latency", Align::Left),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("p99.9", Align::Right),
        ("max", Align::Right),
        ("messages", Align::Right),
    ]);
    latency_row(&mut table, "device service", p.latency.device_service.as_ref());
    latency_row(&mut table, "host reaction", p.latency.host_reaction.as_ref());
    latency_row(&mut table, "end to end", p.latency.end_to_end.as_ref());
    if table.is_empty() {
        out.push_str("latencies: the engine has no device times\n");
    } else {
        out.push_str(&table.render());
    }
    let ring = match (direction, doc.plan.transport) {
        (StreamDirection::D2h, Transport::Pull) => "ring (pull: the host holds one message at a time, from its last completion to its release; the verdict goes by the bubbles)",
        (StreamDirection::H2d, _) => "ring (the device's buffers: written, not yet consumed)",
        (StreamDirection::D2h, _) => "ring",
    };
    let _ = writeln!(
        out,
        "{ring}: full {:.2} % of the time (consumer-bound), empty {:.2} % (producer-bound), mean {:.2} buffers",
        p.ring.full_share * 100.0,
        p.ring.empty_share * 100.0,
        p.ring.mean_occupancy
    );
    if !p.bubbles.is_empty() {
        let mut bubbles = Table::new(&[("bubble cause", Align::Left), ("count", Align::Right), ("share of time", Align::Right), ("p50", Align::Right), ("p99", Align::Right), ("max", Align::Right)]);
        for b in &p.bubbles {
            bubbles.row(vec![
                cause_name(b.cause),
                b.count.to_string(),
                format!("{:.2} %", b.share * 100.0),
                format_ns(b.latency.p50_ns),
                format_ns(b.latency.p99_ns),
                format_ns(b.latency.max_ns),
            ]);
        }
        out.push_str(&bubbles.render());
    }
    let _ = writeln!(
        out,
        "drops: {} from sequence gaps{}{}",
        p.dropped,
        p.dropped_by_producer.map_or(String::new(), |d| format!(", {d} counted by the producer")),
        if p.gaps_left_out > 0 { format!(" ({} gaps beyond the first {} only counted)", p.gaps_left_out, p.gaps.len()) } else { String::new() }
    );
    if p.fast_forwarded > 0 {
        let _ = writeln!(out, "fast-forwarded: {} of {} messages are time-shifted copies of a simulated steady period (docs/stream.md)", p.fast_forwarded, p.produced);
    }
    if p.reordered > 0 {
        let _ = writeln!(out, "out of order: {} messages", p.reordered);
    }
    if !p.long_bubbles.is_empty() {
        let _ = writeln!(out, "bubbles over the threshold: {} kept, {} more counted", p.long_bubbles.len(), p.long_bubbles_left_out);
    }
    if let Some(slow) = p.slowest.first() {
        let _ = writeln!(out, "slowest message: #{} at {}", slow.sequence, format_ns(slow.latency_ns));
    }
    let _ = writeln!(out, "verdict: {}-bound — {}", p.verdict.limit, p.verdict.reason);
    let push_d2h = direction == StreamDirection::D2h && doc.plan.transport == Transport::Push;
    if let Some(m) = &p.model {
        let _ = writeln!(
            out,
            "model (TLP-accurate, host figures as measured): {:.1} MB/s, limit {}; reached {:.1} %",
            m.tlp_accurate.mbps,
            m.tlp_accurate.limit,
            m.reached * 100.0
        );
        for bound in &m.tlp_accurate.bounds {
            let _ = writeln!(out, "  {:<8} {:>10.1} MB/s  {}", bound.name, bound.mbps, bound.why);
        }
    }
    if let Some(m) = p.model.as_ref().filter(|_| push_d2h) {
        let _ = writeln!(
            out,
            "document 003's convention (byte-exact TLPs, no SKPs or DLLPs, {} bytes per message): {:.3} Gb/s = {:.1} MB/s; the TLP-accurate producer bound is {:.1} MB/s: it also counts SKPs, DLLPs, and the metadata and flag as TLPs with their own header and framing",
            crate::bench::stream::summary::DOC003_OVERHEAD_BYTES,
            m.doc003_convention.gbps(),
            m.doc003_convention.mbps,
            m.tlp_accurate.bounds[0].mbps
        );
    }
    out
}

pub fn text(doc: &StreamDocument) -> String {
    let mut out = heading(doc);
    for (i, p) in doc.points.iter().enumerate() {
        out.push_str(&point_text(doc, doc.plan.direction, p));
        let Some(both) = &doc.both else { continue };
        if let Some(h2d) = both.h2d_points.get(i) {
            out.push_str(&point_text(doc, StreamDirection::H2d, h2d));
        }
        if let Some(sum) = both.sum.get(i) {
            let _ = writeln!(
                out,
                "\n== both directions, messages of {} ({}) ==\nsum {:.1} MB/s = d2h {:.1} + h2d {:.1} MB/s, at once {} (each direction's model is of it alone: the gap to it includes the other's share of the lanes)",
                format_size(u64::from(sum.message_bytes)),
                label(doc),
                sum.sum_mbps,
                sum.d2h_mbps,
                sum.h2d_mbps,
                both_where(doc)
            );
        }
    }
    if let Some(fit) = &doc.overhead_fit {
        let _ = writeln!(
            out,
            "\nper-message overhead from the sweep ({} sizes, {}): {} = {:.0} link bytes per message; {} = {:.1} bytes per TLP; worst residual {:.2} %",
            fit.sizes,
            label(doc),
            format_ns(fit.per_message_ns),
            fit.per_message_bytes,
            format_ns(fit.per_tlp_ns),
            fit.per_tlp_bytes,
            fit.worst_residual * 100.0
        );
    }
    out
}

pub fn json(doc: &StreamDocument) -> String {
    serde_json::to_string_pretty(doc).expect("stream documents serialise: plain data") + "\n"
}

/// One row per message size.
pub fn csv(doc: &StreamDocument) -> String {
    let mut out = String::from("label,message_bytes,messages,produced,dropped,duration_ns,sustained_MBps,median_MBps,full_share,empty_share,reaction_p50_ns,reaction_p99_ns,reaction_p99_9_ns,end_to_end_p50_ns,end_to_end_p99_ns,end_to_end_max_ns,model_MBps,model_limit,verdict,direction\n");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for (direction, p) in directed_points(doc) {
        let r = p.latency.host_reaction.as_ref();
        let e = p.latency.end_to_end.as_ref();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            label(doc),
            p.message_bytes,
            p.messages,
            p.produced,
            p.dropped,
            p.duration_ns,
            p.throughput.sustained_mbps,
            opt(p.throughput.median_mbps),
            p.ring.full_share,
            p.ring.empty_share,
            opt(r.map(|l| l.p50_ns)),
            opt(r.map(|l| l.p99_ns)),
            opt(r.map(|l| l.p99_9_ns)),
            opt(e.map(|l| l.p50_ns)),
            opt(e.map(|l| l.p99_ns)),
            opt(e.map(|l| l.max_ns)),
            opt(p.model.as_ref().map(|m| m.tlp_accurate.mbps)),
            p.model.as_ref().map_or("", |m| m.tlp_accurate.limit.as_str()),
            p.verdict.limit,
            word(direction)
        );
    }
    out
}

const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#2ca02c"];

fn point_plots(doc: &StreamDocument, p: &Point) -> String {
    let sim = label(doc);
    let size = format_size(u64::from(p.message_bytes));
    let mut out = String::new();
    // Occupancy over time.
    let occupancy: Vec<(f64, f64)> = p.ring.occupancy_mean.iter().enumerate().map(|(i, v)| ((i as f64 + 0.5) * p.ring.bin_ns / 1e6, *v)).collect();
    if !occupancy.is_empty() {
        let x = Axis::new(format!("time into the stream, ms ({sim})"), Scale::Linear, occupancy.iter().map(|p| p.0));
        let y = Axis::new("full buffers", Scale::Linear, occupancy.iter().map(|p| p.1).chain([f64::from(doc.plan.host_buffers.min(1_000_000))])).from_zero();
        let mut plot = Plot::new(format!("{size}: ring occupancy over time ({sim})"), x, y).small();
        let most: Vec<(f64, f64)> = p.ring.occupancy_max.iter().enumerate().map(|(i, v)| ((i as f64 + 0.5) * p.ring.bin_ns / 1e6, f64::from(*v))).collect();
        plot.add(Mark::Line { points: occupancy, dashed: false, width: 1.5 }, COLORS[0], "mean per bin");
        plot.add(Mark::Line { points: most, dashed: true, width: 0.8 }, COLORS[1], "most per bin");
        out.push_str(&plot.render());
    }
    // Latency CDFs.
    let curves: Vec<(&str, &Latency)> = [
        ("device service", p.latency.device_service.as_ref()),
        ("host reaction", p.latency.host_reaction.as_ref()),
        ("end to end", p.latency.end_to_end.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, l)| Some((n, l?)))
    .collect();
    if !curves.is_empty() {
        let values = curves.iter().flat_map(|(_, l)| l.cdf.iter().map(|c| c.0.max(1.0)));
        let x = Axis::new(format!("ns (log scale; {sim})"), Scale::Log10, values);
        let y = Axis::new("share of messages at or below", Scale::Linear, [0.0, 1.0]);
        let mut plot = Plot::new(format!("{size}: latency CDF ({sim})"), x, y).small();
        for (i, (name, l)) in curves.iter().enumerate() {
            plot.add(Mark::Line { points: l.cdf.iter().map(|c| (c.0.max(1.0), c.1)).collect(), dashed: false, width: 1.5 }, COLORS[i], *name);
        }
        out.push_str(&plot.render());
    }
    // Bubble histogram per cause.
    let bars: Vec<(usize, &crate::bench::stream::BubbleClass)> = p.bubbles.iter().enumerate().collect();
    if !bars.is_empty() {
        let values = bars.iter().flat_map(|(_, b)| b.buckets.iter().map(|(ns, _)| ns.max(1.0)));
        let counts = bars.iter().flat_map(|(_, b)| b.buckets.iter().map(|(_, c)| *c as f64));
        let x = Axis::new(format!("bubble, ns (log scale; {sim})"), Scale::Log10, values);
        let y = Axis::new("bubbles", Scale::Linear, counts).from_zero();
        let mut plot = Plot::new(format!("{size}: bubbles by cause ({sim})"), x, y).small();
        for (i, b) in bars {
            let bars = b.buckets.iter().map(|(upper, count)| ((upper / 2.0).max(1.0), upper.max(1.0), *count as f64)).collect();
            plot.add(Mark::Bars { bars }, COLORS[i % COLORS.len()], cause_name(b.cause));
        }
        out.push_str(&plot.render());
    }
    format!("<div class=\"sizes\">{out}</div>\n")
}

pub fn html(doc: &StreamDocument) -> String {
    let title = format!("pcieperf stream — {} ({})", doc.target, label(doc));
    let mut body = String::new();
    if doc.simulated {
        body.push_str("<p class=\"sim\"><b>Simulated</b>: no hardware was involved; every time is the simulator's virtual time.</p>\n");
    }
    let _ = writeln!(body, "<pre>{}</pre>", escape(&text(doc)));
    for (direction, p) in directed_points(doc) {
        let which = if doc.both.is_some() { format!("{}: ", word(direction)) } else { String::new() };
        let _ = writeln!(body, "<h2>{which}Messages of {}</h2>", escape(&format_size(u64::from(p.message_bytes))));
        body.push_str(&point_plots(doc, p));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}.sim{{color:#a00}}</style></head><body>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(&title)
    )
}

/// Prometheus text exposition: per message size, throughput, latencies, ring shares and drops.
pub fn metrics(doc: &StreamDocument, written: SystemTime) -> String {
    let points = directed_points(doc);
    let labels = |(direction, p): &(StreamDirection, &Point)| -> Vec<(&'static str, String)> {
        vec![("target", doc.target.clone()), ("message_bytes", p.message_bytes.to_string()), ("direction", word(*direction)), ("simulated", doc.simulated.to_string())]
    };
    let gauge = |name, help, f: &dyn Fn(&Point) -> Option<f64>| Family {
        name,
        kind: Kind::Gauge,
        help,
        samples: points.iter().filter_map(|dp| Some(Sample { labels: labels(dp), value: f(dp.1)? })).collect(),
    };
    // "quantile" is a summary's label; these are gauges, one per percentile.
    let quantiles = |l: Option<&Latency>| l.map(|l| [("50", l.p50_ns), ("90", l.p90_ns), ("99", l.p99_ns), ("99.9", l.p99_9_ns), ("100", l.max_ns)]);
    let latency_family = |name, help, pick: &dyn Fn(&Point) -> Option<&Latency>| Family {
        name,
        kind: Kind::Gauge,
        help,
        samples: points
            .iter()
            .flat_map(|dp| {
                quantiles(pick(dp.1)).into_iter().flatten().map(move |(q, ns)| {
                    let mut l = labels(dp);
                    l.push(("percentile", q.to_string()));
                    Sample { labels: l, value: ns / 1e9 }
                })
            })
            .collect(),
    };
    let families = vec![
        gauge("pcieperf_stream_sustained_bytes_per_second", "Payload rate over the whole stream.", &|p| Some(p.throughput.sustained_mbps * 1e6)),
        gauge("pcieperf_stream_ring_full_ratio", "Share of the stream's time every host buffer was full (consumer-bound).", &|p| Some(p.ring.full_share)),
        gauge("pcieperf_stream_ring_empty_ratio", "Share of the stream's time the ring was empty (producer-bound).", &|p| Some(p.ring.empty_share)),
        Family {
            name: "pcieperf_stream_dropped_messages_total",
            kind: Kind::Counter,
            help: "Messages missing from the consumer's sequence.",
            samples: points.iter().map(|dp| Sample { labels: labels(dp), value: dp.1.dropped as f64 }).collect(),
        },
        Family {
            name: "pcieperf_stream_messages_total",
            kind: Kind::Counter,
            help: "Messages delivered.",
            samples: points.iter().map(|dp| Sample { labels: labels(dp), value: dp.1.messages as f64 }).collect(),
        },
        latency_family("pcieperf_stream_host_reaction_seconds", "Host reaction to a message's flag, by percentile (100 = max).", &|p| p.latency.host_reaction.as_ref()),
        latency_family("pcieperf_stream_end_to_end_seconds", "Device start to host seeing the message, by percentile (100 = max).", &|p| p.latency.end_to_end.as_ref()),
        Family {
            name: "pcieperf_stream_timestamp_seconds",
            kind: Kind::Gauge,
            help: "When these figures were written.",
            samples: vec![Sample {
                labels: vec![("target", doc.target.clone())],
                value: written.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            }],
        },
    ];
    let families: Vec<Family> = families.into_iter().filter(|f| !f.samples.is_empty()).collect();
    metrics::text(&families)
}
