//! Traces of the simulated link (`pcieperf trace`, docs/trace.md): the record of
//! [`crate::link::simulate`] as an analyser shows it — text in document 000's layout ([`text`]),
//! VCD for GTKWave ([`vcd`]) and pcapng for Wireshark with the dissector in
//! `tools/wireshark/pcieperf.lua` ([`pcapng`]). Text and VCD share one symbol expansion
//! ([`crate::link::symbols`]); all three take the wire bytes from [`crate::link::wire`]. With the
//! steady-state fast-forward, each stretch it left out ([`crate::link::LeftOut`]) is shown where
//! it was left out: a marked text row, the VCD's `fast_forward` signal, a pcapng gap record.

pub mod pcapng;
pub mod text;
pub mod vcd;

use crate::link::phy::Phy;
use crate::link::symbols::{gap_rows, Timeline};
use crate::link::wire::Encoder;
use crate::error::InvalidInput;
use crate::link::{Crossing, Dllp, FcClass, LeftOut, Packet, SimConfig, SteadyOptions, Workload};

/// The trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Vcd,
    Pcapng,
}

impl crate::named::Named for Format {
    const ALL: &'static [Self] = &[Format::Text, Format::Vcd, Format::Pcapng];

    fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Vcd => "vcd",
            Format::Pcapng => "pcapng",
        }
    }
}

/// Packets written when neither a packet count nor a symbol count is given.
pub const DEFAULT_PACKETS: u64 = 200;

/// The first `count` packets (or those starting in the first `symbols` symbol times) of
/// `workload` on the link of `config`, simulated and written in `format`. With `fast_forward`,
/// the whole transfer is simulated with the steady-state fast-forward, and the trace marks the
/// time it left out where it left it out.
pub fn render(config: &SimConfig, workload: Workload, format: Format, count: Option<u64>, symbols: Option<u64>, fast_forward: Option<&SteadyOptions>) -> Result<Vec<u8>, InvalidInput> {
    let phy = Phy::new(config.link);
    if let Some(symbols) = symbols {
        rows(&[], &[], &phy, Some(symbols))?;
    }
    // Enough packets to fill the symbol times when only those are given (a packet is 4 ticks
    // or more).
    let from_symbols = symbols.map(|s| s.saturating_mul(phy.width) / 4 + 2).map(|p| p.min(MAX_PACKETS));
    let packets = count.or(from_symbols).unwrap_or(DEFAULT_PACKETS);
    let (record, left_out) = match fast_forward {
        Some(options) => simulate_fast_forward(config, workload, options)?,
        None => (simulate_first(config, workload, packets)?, Vec::new()),
    };
    let first = &record[..record.len().min(packets as usize)];
    if format == Format::Pcapng {
        let shown = symbols.map_or(first, |symbols| within_rows(first, &phy, symbols));
        let last_ns = shown.last().map_or(0.0, |c| c.start_ns);
        let gaps = left_out.iter().take_while(|gap| gap.start_ns <= last_ns).count();
        return Ok(pcapng::render(&Trace { config, record: shown, rows: 0, left_out: &left_out[..gaps] }));
    }
    let rows = rows(first, &left_out, &phy, symbols)?;
    let end_ns = phy.ns(rows * phy.width);
    let gaps = left_out.iter().take_while(|gap| gap.start_ns < end_ns).count();
    let trace = Trace { config, record: within_rows(&record, &phy, rows), rows, left_out: &left_out[..gaps] };
    Ok(if format == Format::Vcd { vcd::render(&trace) } else { text::render(&trace) }.into_bytes())
}

/// What a trace shows: the simulated link and the packets, in order of their start.
pub struct Trace<'a> {
    pub config: &'a SimConfig,
    pub record: &'a [Crossing],
    /// Symbol times (rows) the text and VCD traces span (those inside a gap are not shown).
    pub rows: u64,
    /// The time the fast-forward left out, in time order.
    pub left_out: &'a [LeftOut],
}

impl Trace<'_> {
    pub fn phy(&self) -> Phy {
        Phy::new(self.config.link)
    }

    pub fn encoder(&self) -> Encoder {
        Encoder::new(self.phy().encoding, self.config.header, self.config.ecrc)
    }

    pub fn timeline(&self) -> Timeline<'_> {
        Timeline::new(self.record, self.phy(), self.encoder()).with_gaps(self.left_out)
    }

    /// The rows to show: 0..rows without those inside a gap, as ranges.
    pub fn shown_rows(&self) -> Vec<std::ops::Range<u64>> {
        shown_rows(self.rows, self.left_out, &self.phy())
    }
}

/// The record in order of start time (a SKP sent during idle is recorded when the transmitter
/// next looks, after packets of the other direction that started later).
pub fn in_start_order(mut record: Vec<Crossing>) -> Vec<Crossing> {
    record.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns));
    record
}

/// Short name of a packet's kind, as the traces print it.
pub fn kind_name(packet: &Packet) -> &'static str {
    match packet {
        Packet::Tlp(tlp) => tlp.kind.name(),
        Packet::Dllp(Dllp::Ack { .. }) => "Ack",
        Packet::Dllp(Dllp::Nak { .. }) => "Nak",
        Packet::Dllp(Dllp::UpdateFc { class, .. }) => match class {
            FcClass::Posted => "UpdateFC-P",
            FcClass::NonPosted => "UpdateFC-NP",
            FcClass::Completion => "UpdateFC-Cpl",
        },
        Packet::Skp => "SKP",
        Packet::Flit(_) => "Flit",
    }
}

/// UpdateFC credit values as the DLLP carries them: the header counter modulo 2^8, the data
/// counter modulo 2^12 (the simulator counts without bound).
pub fn wire_credits(header: u64, data: u64) -> (u64, u64) {
    (header % 256, data % 4096)
}

/// The decoded fields of a packet, one per line, the kind first.
pub fn fields(packet: &Packet) -> Vec<String> {
    let mut lines = vec![kind_name(packet).to_string()];
    match *packet {
        Packet::Tlp(tlp) => lines.extend([
            format!("seq {}", tlp.seq),
            format!("tag {}", tlp.tag),
            format!("addr {:#x}", tlp.addr),
            format!("len {} B", tlp.len_bytes),
        ]),
        Packet::Dllp(Dllp::Ack { seq } | Dllp::Nak { seq }) => lines.push(format!("seq {seq}")),
        Packet::Dllp(Dllp::UpdateFc { header, data, .. }) => {
            let (header, data) = wire_credits(header, data);
            lines.extend([format!("HdrFC {header}"), format!("DataFC {data}")]);
        }
        Packet::Skp | Packet::Flit(_) => {}
    }
    lines
}

/// Most packets a trace may hold. The record and the output are built in memory (a 2-million-
/// packet pcapng peaked at 546 MB), so the bound keeps a trace well inside a workstation's memory.
pub const MAX_PACKETS: u64 = 2_000_000;
/// Most symbol times a text or VCD trace may show (a text row is about 60 bytes).
pub const MAX_ROWS: u64 = 2_000_000;

/// The workload cut to what its first `packets` packets need: N + 1 TLPs at most (every
/// packet of the trace starts before the last of them), so a trace of a huge transfer stays
/// quick. Its first `packets` packets are those of the whole workload.
pub fn shortened(config: &SimConfig, workload: Workload, packets: u64) -> Workload {
    let tlps = packets.saturating_add(1);
    let count = |count: u32| count.min(u32::try_from(tlps).unwrap_or(u32::MAX));
    match workload {
        Workload::DmaWrite { addr, bytes } => Workload::DmaWrite { addr, bytes: bytes.min(tlps.saturating_mul(config.mps_bytes)) },
        Workload::DmaRead { addr, bytes } => Workload::DmaRead { addr, bytes: bytes.min(tlps.saturating_mul(config.mrrs_bytes)) },
        Workload::DmaBoth { write_addr, write_bytes, read_addr, read_bytes } => Workload::DmaBoth {
            write_addr,
            write_bytes: write_bytes.min(tlps.saturating_mul(config.mps_bytes)),
            read_addr,
            read_bytes: read_bytes.min(tlps.saturating_mul(config.mrrs_bytes)),
        },
        Workload::CpuWrites { addr, bytes, count: n, spacing_ns } => Workload::CpuWrites { addr, bytes, count: count(n), spacing_ns },
        Workload::CpuReads { addr, bytes, count: n, gap_ns } => Workload::CpuReads { addr, bytes, count: count(n), gap_ns },
    }
}

/// The record, in start order, of as much of `workload` as its first `packets` packets need:
/// they are its first `packets` entries, and whatever follows starts later.
pub fn simulate_first(config: &SimConfig, workload: Workload, packets: u64) -> Result<Vec<Crossing>, InvalidInput> {
    if !(1..=MAX_PACKETS).contains(&packets) {
        return Err(InvalidInput::new(format!("invalid trace length {packets} packets: allowed 1 to {MAX_PACKETS}")));
    }
    if config.link.generation == crate::model::Generation::Gen6 {
        // Flits have no per-packet framing or symbols to show; the simulator's Gen6 record is
        // one entry per flit, which none of these formats lays out yet.
        return Err(InvalidInput::new("invalid trace link Gen6: flit mode has no trace yet; trace Gen1–Gen5 links"));
    }
    let mut config = config.clone();
    config.record = true;
    let outcome = crate::link::simulate(&config, &shortened(&config, workload, packets))?;
    Ok(in_start_order(outcome.record))
}

/// The record of the whole transfer simulated with the fast-forward, in start order, and what
/// the fast-forward left out.
pub fn simulate_fast_forward(config: &SimConfig, workload: Workload, options: &SteadyOptions) -> Result<(Vec<Crossing>, Vec<LeftOut>), InvalidInput> {
    if config.link.generation == crate::model::Generation::Gen6 {
        return Err(InvalidInput::new("invalid trace link Gen6: flit mode has no trace yet; trace Gen1–Gen5 links"));
    }
    let mut config = config.clone();
    config.record = true;
    let outcome = crate::link::fast_forward(&config, &workload, options)?.outcome;
    Ok((in_start_order(outcome.record), outcome.left_out))
}

/// `0..rows` without the rows the gaps of `left_out` leave out.
fn shown_rows(rows: u64, left_out: &[LeftOut], phy: &Phy) -> Vec<std::ops::Range<u64>> {
    let mut shown = Vec::new();
    let mut from = 0;
    for gap in left_out.iter().map(|gap| gap_rows(gap, phy)).filter(|gap| !gap.is_empty() && gap.start < rows) {
        shown.push(from..gap.start);
        from = gap.end.min(rows);
    }
    shown.push(from..rows);
    shown.retain(|range| !range.is_empty());
    shown
}

/// The packets a text or VCD trace of `rows` symbol times shows: all that start in them.
pub fn within_rows<'a>(record: &'a [Crossing], phy: &Phy, rows: u64) -> &'a [Crossing] {
    let end_tick = rows * phy.width;
    let shown = record.partition_point(|c| phy.ticks(c.start_ns) < end_tick);
    &record[..shown]
}

/// Symbol times that span `record` whole, or `symbols` of them; refused where more than
/// [`MAX_ROWS`] would show (rows inside the gaps of `left_out` are not shown).
pub fn rows(record: &[Crossing], left_out: &[LeftOut], phy: &Phy, symbols: Option<u64>) -> Result<u64, InvalidInput> {
    let whole = record.iter().map(|c| phy.ticks(c.end_ns)).max().unwrap_or(0).div_ceil(phy.width);
    let rows = symbols.unwrap_or(whole);
    let shown: u64 = shown_rows(rows, left_out, phy).iter().map(|range| range.end - range.start).sum();
    if !(1..=MAX_ROWS).contains(&shown) {
        let hint = if symbols.is_none() { " (these packets span that many: pass --symbols or a smaller --count)" } else { "" };
        return Err(InvalidInput::new(format!("invalid trace of {shown} symbol times: allowed 1 to {MAX_ROWS}{hint}")));
    }
    Ok(rows)
}
