//! The agents at both ends: a device DMA engine, host memory and device registers answering
//! reads, and a CPU issuing MMIO writes and reads.

use super::config::SimConfig;
use super::packet::{Tlp, TlpKind};
use super::transaction::{self, Splitter};

/// What the agents do in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// Device DMA writes `bytes` to host memory from `addr` (d2h): posted MWr TLPs upstream.
    DmaWrite { addr: u64, bytes: u64 },
    /// Device DMA reads `bytes` of host memory from `addr` (h2d): MRd upstream, CplD back.
    DmaRead { addr: u64, bytes: u64 },
    /// The CPU writes `count` times `bytes` to device registers, one write every `spacing_ns`
    /// (0: all at once, as fast as the link takes them).
    CpuWrites { addr: u64, bytes: u64, count: u32, spacing_ns: f64 },
    /// The CPU reads `count` times `bytes` of device registers, one at a time: the next read is
    /// issued `gap_ns` after the previous one's completion arrived.
    CpuReads { addr: u64, bytes: u64, count: u32, gap_ns: f64 },
}

/// The device's DMA engine.
#[derive(Debug, Clone)]
pub struct DmaEngine {
    kind: TlpKind,
    splitter: Splitter,
    free_tags: Vec<u16>,
    /// Bytes still expected per tag.
    outstanding: Vec<u64>,
    pub bytes_left: u64,
}

impl DmaEngine {
    pub fn new(config: &SimConfig, workload: &Workload) -> Option<Self> {
        let (kind, addr, bytes, chunk) = match *workload {
            Workload::DmaWrite { addr, bytes } => (TlpKind::MemWrite, addr, bytes, config.mps_bytes),
            Workload::DmaRead { addr, bytes } => (TlpKind::MemRead, addr, bytes, config.mrrs_bytes),
            _ => return None,
        };
        Some(DmaEngine {
            kind,
            splitter: Splitter::new(addr, bytes, chunk),
            free_tags: (0..config.tags as u16).rev().collect(),
            outstanding: vec![0; config.tags as usize],
            bytes_left: bytes,
        })
    }

    /// The next TLP the engine would send, if it has one and (for reads) a free tag.
    pub fn next_tlp(&mut self) -> Option<Tlp> {
        if self.splitter.is_done() {
            return None;
        }
        let tag = if self.kind == TlpKind::MemRead { *self.free_tags.last()? } else { 0 };
        let (addr, len) = self.splitter.next_piece()?;
        if self.kind == TlpKind::MemRead {
            self.free_tags.pop();
            self.outstanding[tag as usize] = len;
        } else {
            self.bytes_left -= len;
        }
        Some(transaction::tlp(self.kind, addr, len, tag))
    }

    /// A completion arrived: returns true when it freed a tag (the engine may send again).
    pub fn complete(&mut self, cpl: &Tlp) -> bool {
        let tag = cpl.tag as usize;
        self.outstanding[tag] -= cpl.len_bytes;
        self.bytes_left -= cpl.len_bytes;
        if self.outstanding[tag] == 0 {
            self.free_tags.push(cpl.tag);
            return true;
        }
        false
    }
}

/// The CPU issuing MMIO accesses.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    pub addr: u64,
    pub bytes: u64,
    pub left: u32,
    /// Ticks between writes, or from a completion to the next read.
    pub gap_ticks: u64,
    pub reads: bool,
    /// Bytes of the outstanding read still expected.
    pub awaiting: u64,
}

impl Cpu {
    pub fn new(workload: &Workload, ticks: impl Fn(f64) -> u64) -> Option<Self> {
        let (addr, bytes, count, gap_ns, reads) = match *workload {
            Workload::CpuWrites { addr, bytes, count, spacing_ns } => (addr, bytes, count, spacing_ns, false),
            Workload::CpuReads { addr, bytes, count, gap_ns } => (addr, bytes, count, gap_ns, true),
            _ => return None,
        };
        Some(Cpu { addr, bytes, left: count, gap_ticks: ticks(gap_ns), reads, awaiting: 0 })
    }

    /// The next access as a TLP (the caller schedules the one after).
    pub fn issue(&mut self) -> Option<Tlp> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let kind = if self.reads { TlpKind::MemRead } else { TlpKind::MemWrite };
        let tlp = transaction::tlp(kind, self.addr, self.bytes, 0);
        self.addr += self.bytes;
        if self.reads {
            self.awaiting = self.bytes;
        }
        Some(tlp)
    }
}
