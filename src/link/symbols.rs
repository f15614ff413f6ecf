//! One symbol expansion of a record, shared by the text and VCD traces: which byte each lane of
//! each direction carries at every symbol time, and which packets start there.
//!
//! A packet of B link bytes starting at tick `s` takes ticks `s..s + B`; tick `t` is symbol
//! time `t / width` on lane `t % width` (bytes striped over the lanes, [`super::phy`]). A SKP
//! ordered set puts the same symbols on every lane (and, at 128b/130b, follows an EDS token and
//! PAD to the block boundary). Lanes carry logical idle (00) between packets. At 128b/130b a
//! 2-bit sync header starts every 16 symbol times: 10 for data blocks, 01 for the SKP block;
//! the simulator charges those bits evenly, so they take no row of their own.
//!
//! Where the fast-forward left time out ([`LeftOut`]), the rows of the gap show nothing of
//! their own: a packet on the lanes when the gap starts has its first symbols before the gap and
//! the rest after it (the schedule repeats, so the left-out periods end as they began).

use std::collections::VecDeque;

use super::packet::{Direction, Packet};
use super::phy::{Phy, BLOCK_SYMBOLS, EDS_BYTES};
use super::record::{Crossing, LeftOut};
use super::wire::{skp_block_lane, token, Encoder, Symbol};
use crate::model::Encoding;

/// Sync header of a 128b/130b data block and of an ordered-set block.
pub const SYNC_DATA: u8 = 0b10;
pub const SYNC_ORDERED_SET: u8 = 0b01;

/// A packet of the record placed on the lanes, in ticks, with its bytes in tick order.
#[derive(Debug, Clone)]
struct Placed {
    index: usize,
    start: u64,
    end: u64,
    symbols: Vec<Symbol>,
    /// A gap the packet straddles: (its first tick, its ticks). The packet's ticks from the
    /// gap's start on show after the gap, and `end` includes the gap.
    gap: Option<(u64, u64)>,
}

impl Placed {
    /// Position of `tick` (before `end`) among the packet's symbols, or None before the packet
    /// or inside the gap it straddles.
    fn offset(&self, tick: u64) -> Option<usize> {
        let tick = match self.gap {
            Some((from, ticks)) if tick >= from => tick.checked_sub(ticks).filter(|&t| t >= from)?,
            _ => tick,
        };
        tick.checked_sub(self.start).map(|at| at as usize)
    }
}

/// What one symbol time shows in one direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSide {
    /// One symbol per lane, lane 0 first.
    pub lanes: Vec<Symbol>,
    /// Indices (into the record) of the packets whose first byte is in this row.
    pub starts: Vec<usize>,
    /// Last symbol time (row) of the packet that starts here, for laying out its fields.
    pub last_row: Option<u64>,
    /// 128b/130b: the sync header of the block that starts at this row.
    pub sync: Option<u8>,
}

/// The rows a gap of the fast-forward leaves out (possibly none): those wholly inside it (the
/// row where it starts and the row where the simulation goes on are shown).
pub fn gap_rows(gap: &LeftOut, phy: &Phy) -> std::ops::Range<u64> {
    phy.ticks(gap.start_ns) / phy.width + 1..phy.ticks(gap.end_ns()) / phy.width
}

/// Walks a record symbol time by symbol time (rows 0, 1, 2, … in order).
pub struct Timeline<'a> {
    record: &'a [Crossing],
    /// Next record entry not yet encoded (entries are encoded in record order, so a completion
    /// is encoded after its request).
    cursor: usize,
    encoder: Encoder,
    phy: Phy,
    queued: [VecDeque<Placed>; 2],
    current: [Option<Placed>; 2],
    /// The fast-forward's gaps as (first tick, ticks), in time order.
    gaps: Vec<(u64, u64)>,
}

impl<'a> Timeline<'a> {
    pub fn new(record: &'a [Crossing], phy: Phy, encoder: Encoder) -> Self {
        Timeline { record, cursor: 0, encoder, phy, queued: Default::default(), current: Default::default(), gaps: Vec::new() }
    }

    /// The same, for a record with the fast-forward's gaps `left_out`.
    pub fn with_gaps(mut self, left_out: &[LeftOut]) -> Self {
        self.gaps = left_out.iter().map(|gap| (self.phy.ticks(gap.start_ns), self.phy.ticks(gap.end_ns()) - self.phy.ticks(gap.start_ns))).collect();
        self
    }

    /// Time of a row's start in ns.
    pub fn row_ns(&self, row: u64) -> f64 {
        self.phy.ns(row * self.phy.width)
    }

    /// Rows up to and including the last byte of the record's last packet.
    pub fn rows(&self) -> u64 {
        let last_tick = self.record.iter().map(|c| self.tick(c.end_ns)).max().unwrap_or(0);
        last_tick.div_ceil(self.phy.width)
    }

    fn tick(&self, ns: f64) -> u64 {
        self.phy.ticks(ns)
    }

    /// The symbols of `row` in `direction`. Rows must be asked for in increasing order.
    pub fn row(&mut self, row: u64, direction: Direction) -> RowSide {
        let width = self.phy.width;
        let mut side = RowSide { lanes: Vec::with_capacity(width as usize), ..RowSide::default() };
        for lane in 0..width {
            let tick = row * width + lane;
            let symbol = self.symbol_at(direction, tick);
            if let Some(placed) = &self.current[direction.index()] {
                if placed.start == tick {
                    side.starts.push(placed.index);
                    side.last_row = Some((placed.end - 1) / width);
                }
            }
            side.lanes.push(symbol);
        }
        if self.phy.encoding != Encoding::B8b10b && row.is_multiple_of(BLOCK_SYMBOLS) {
            side.sync = Some(if self.in_skp_block(direction, row * width) { SYNC_ORDERED_SET } else { SYNC_DATA });
        }
        side
    }

    fn in_skp_block(&self, direction: Direction, tick: u64) -> bool {
        let block_ticks = BLOCK_SYMBOLS * self.phy.width;
        self.current[direction.index()]
            .as_ref()
            .is_some_and(|p| self.record[p.index].packet == Packet::Skp && tick < p.end && p.offset(tick).is_some_and(|at| at as u64 + block_ticks >= p.symbols.len() as u64))
    }

    fn symbol_at(&mut self, direction: Direction, tick: u64) -> Symbol {
        let i = direction.index();
        loop {
            if let Some(placed) = &self.current[i] {
                if tick < placed.end {
                    return placed.offset(tick).map_or(Symbol::IDLE, |at| placed.symbols[at]);
                }
            }
            match self.next_placed(direction) {
                Some(placed) => self.current[i] = Some(placed),
                None => {
                    self.current[i] = None;
                    return Symbol::IDLE;
                }
            }
        }
    }

    /// The next packet of `direction`, encoding record entries in order until one turns up.
    fn next_placed(&mut self, direction: Direction) -> Option<Placed> {
        while self.queued[direction.index()].is_empty() && self.cursor < self.record.len() {
            let index = self.cursor;
            self.cursor += 1;
            let crossing = self.record[index];
            let (start, end) = (self.tick(crossing.start_ns), self.tick(crossing.end_ns));
            let symbols = self.stripe(&crossing, start, end);
            let gap = self.gaps.iter().copied().find(|&(from, _)| start < from && from < end);
            let end = end + gap.map_or(0, |(_, ticks)| ticks);
            self.queued[crossing.direction.index()].push_back(Placed { index, start, end, symbols, gap });
        }
        self.queued[direction.index()].pop_front()
    }

    /// The packet's bytes in tick order, `end - start` of them.
    fn stripe(&mut self, crossing: &Crossing, start: u64, end: u64) -> Vec<Symbol> {
        let width = self.phy.width as usize;
        let span = (end - start) as usize;
        if crossing.packet != Packet::Skp {
            let mut symbols = self.encoder.framed(&crossing.packet, crossing.direction);
            symbols.resize(span, Symbol::IDLE);
            return symbols;
        }
        let lane: Vec<Symbol> = match self.phy.encoding {
            Encoding::B8b10b => self.encoder.skp_lane(),
            _ => skp_block_lane().map(Symbol::control).to_vec(),
        };
        let mut symbols = Vec::with_capacity(span);
        if self.phy.encoding != Encoding::B8b10b {
            // EDS token, then PAD (idle) to the block boundary where the ordered set starts.
            symbols.extend(token::EDS.map(Symbol::control));
            symbols.resize(span.saturating_sub(lane.len() * width).max(EDS_BYTES as usize), Symbol::IDLE);
        }
        for symbol in lane {
            symbols.extend(std::iter::repeat_n(symbol, width));
        }
        symbols.resize(span, Symbol::IDLE);
        symbols
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::wire::k;
    use crate::link::{simulate, SimConfig, Workload};

    fn timeline_rows(link: &str, workload: Workload) -> (Vec<Crossing>, Vec<[RowSide; 2]>, Phy) {
        let config = SimConfig::for_link(link).unwrap();
        let outcome = simulate(&config, &workload).unwrap();
        let phy = Phy::new(config.link);
        let mut timeline = Timeline::new(&outcome.record, phy, Encoder::new(phy.encoding, config.header, config.ecrc));
        let rows = (0..timeline.rows()).map(|r| [timeline.row(r, Direction::Downstream), timeline.row(r, Direction::Upstream)]).collect();
        (outcome.record, rows, phy)
    }

    #[test]
    fn every_packet_starts_once_where_the_record_says() {
        for link in ["gen1x1", "gen2x4", "gen3x8", "gen5x16"] {
            let (record, rows, phy) = timeline_rows(link, Workload::DmaRead { addr: 0x1000, bytes: 4096 });
            let mut seen = vec![false; record.len()];
            for (row, sides) in rows.iter().enumerate() {
                for side in sides {
                    assert_eq!(side.lanes.len() as u64, phy.width);
                    for &index in &side.starts {
                        assert!(!seen[index]);
                        seen[index] = true;
                        assert_eq!(phy.ticks(record[index].start_ns) / phy.width, row as u64, "{link}: {}", record[index]);
                    }
                }
            }
            assert!(seen.iter().all(|&s| s), "{link}: every packet placed");
        }
    }

    #[test]
    fn gen1_x1_tlps_open_with_stp_and_skps_are_com_skp_skp_skp() {
        let (record, rows, _) = timeline_rows("gen1x1", Workload::DmaWrite { addr: 0, bytes: 64 * 1024 });
        for (row, sides) in rows.iter().enumerate() {
            for side in sides {
                for &index in &side.starts {
                    let expected = match record[index].packet {
                        Packet::Tlp(_) => k::STP,
                        Packet::Dllp(_) => k::SDP,
                        Packet::Skp => k::COM,
                        Packet::Flit(_) => panic!("no flit at Gen1"),
                    };
                    assert_eq!(side.lanes[0], Symbol::control(expected), "row {row}");
                    if record[index].packet == Packet::Skp {
                        assert_eq!(sides[record[index].direction.index()].lanes[0].byte, k::COM);
                        assert_eq!(rows[row + 3][record[index].direction.index()].lanes[0], Symbol::control(k::SKP));
                    }
                }
            }
        }
    }
}
