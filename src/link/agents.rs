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
    /// Both at once: the device writes `bytes` from `write_addr` and reads `bytes` from
    /// `read_addr` (read requests first whenever a tag is free).
    DmaBoth { write_addr: u64, read_addr: u64, bytes: u64 },
    /// The CPU writes `count` times `bytes` to device registers, one write every `spacing_ns`
    /// (0: all at once, as fast as the link takes them).
    CpuWrites { addr: u64, bytes: u64, count: u32, spacing_ns: f64 },
    /// The CPU reads `count` times `bytes` of device registers, one at a time: the next read is
    /// issued `gap_ns` after the previous one's completion arrived.
    CpuReads { addr: u64, bytes: u64, count: u32, gap_ns: f64 },
}

/// The device's DMA engine: reads, writes, or both at once. With both, a read request goes out
/// whenever a tag is free and a write TLP otherwise, so writes fill what the reads leave.
#[derive(Debug, Clone)]
pub struct DmaEngine {
    /// Read requests still to send (cut at MaxReadRequest).
    reads: Option<Splitter>,
    /// Write TLPs still to send (cut at MaxPayload).
    writes: Option<Splitter>,
    free_tags: Vec<u16>,
    /// Bytes still expected per tag.
    outstanding: Vec<u64>,
    pub bytes_left: u64,
}

impl DmaEngine {
    pub fn new(config: &SimConfig, workload: &Workload) -> Option<Self> {
        let (reads, writes, bytes) = match *workload {
            Workload::DmaWrite { addr, bytes } => (None, Some((addr, bytes)), bytes),
            Workload::DmaRead { addr, bytes } => (Some((addr, bytes)), None, bytes),
            Workload::DmaBoth { write_addr, read_addr, bytes } => (Some((read_addr, bytes)), Some((write_addr, bytes)), 2 * bytes),
            _ => return None,
        };
        Some(DmaEngine {
            reads: reads.map(|(addr, bytes)| Splitter::new(addr, bytes, config.mrrs_bytes)),
            writes: writes.map(|(addr, bytes)| Splitter::new(addr, bytes, config.mps_bytes)),
            free_tags: (0..config.tags as u16).rev().collect(),
            outstanding: vec![0; config.tags as usize],
            bytes_left: bytes,
        })
    }

    /// The next TLP the engine would send, if it has one (a read needs a free tag).
    pub fn next_tlp(&mut self) -> Option<Tlp> {
        if let (Some(reads), Some(&tag)) = (self.reads.as_mut(), self.free_tags.last()) {
            if let Some((addr, len)) = reads.next_piece() {
                self.free_tags.pop();
                self.outstanding[tag as usize] = len;
                return Some(transaction::tlp(TlpKind::MemRead, addr, len, tag));
            }
        }
        let (addr, len) = self.writes.as_mut()?.next_piece()?;
        self.bytes_left -= len;
        Some(transaction::tlp(TlpKind::MemWrite, addr, len, 0))
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
