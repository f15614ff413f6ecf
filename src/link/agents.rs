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
    /// Both at once, as two DMA channels sharing the device's transmit queue: writes of
    /// `write_bytes` from `write_addr` and reads of `read_bytes` from `read_addr`.
    DmaBoth { write_addr: u64, write_bytes: u64, read_addr: u64, read_bytes: u64 },
    /// The CPU writes `count` times `bytes` to device registers, one write every `spacing_ns`
    /// (0: all at once, as fast as the link takes them).
    CpuWrites { addr: u64, bytes: u64, count: u32, spacing_ns: f64 },
    /// The CPU reads `count` times `bytes` of device registers, one at a time: the next read is
    /// issued `gap_ns` after the previous one's completion arrived.
    CpuReads { addr: u64, bytes: u64, count: u32, gap_ns: f64 },
}

impl Workload {
    /// TLPs the workload sends in both directions, about and at most: a DMA transfer cut at its
    /// chunk and at 4 KiB pages, a read answered in completions of MaxPayload with one more at
    /// each end of a request. Only sizes the record once (a wrong guess costs a reallocation).
    pub fn tlps_at_most(&self, config: &SimConfig) -> u64 {
        let pieces = |bytes: u64, chunk: u64| bytes / chunk + bytes / transaction::ADDRESS_BOUNDARY_BYTES + 2;
        let read_tlps = |bytes: u64| {
            let requests = pieces(bytes, config.mrrs_bytes);
            requests + bytes / config.mps_bytes + 2 * requests
        };
        match *self {
            Workload::DmaWrite { bytes, .. } => pieces(bytes, config.mps_bytes),
            Workload::DmaRead { bytes, .. } => read_tlps(bytes),
            Workload::DmaBoth { write_bytes, read_bytes, .. } => pieces(write_bytes, config.mps_bytes) + read_tlps(read_bytes),
            Workload::CpuWrites { count, .. } => u64::from(count),
            Workload::CpuReads { count, .. } => 3 * u64::from(count),
        }
    }

    /// Bytes the workload moves (writes and reads together).
    pub fn bytes(&self) -> u64 {
        match *self {
            Workload::DmaWrite { bytes, .. } | Workload::DmaRead { bytes, .. } => bytes,
            Workload::DmaBoth { write_bytes, read_bytes, .. } => write_bytes + read_bytes,
            Workload::CpuWrites { bytes, count, .. } | Workload::CpuReads { bytes, count, .. } => bytes * u64::from(count),
        }
    }
}

/// One DMA channel: a transfer cut into TLPs of one kind.
#[derive(Debug, Clone)]
pub struct Channel {
    pub kind: TlpKind,
    splitter: Splitter,
    start: u64,
    /// Largest TLP (MaxPayload or MaxReadRequest): the unit the transfer is cut at.
    pub chunk_bytes: u64,
}

impl Channel {
    fn new(kind: TlpKind, addr: u64, bytes: u64, chunk_bytes: u64) -> Self {
        Channel { kind, splitter: Splitter::new(addr, bytes, chunk_bytes), start: addr, chunk_bytes }
    }

    /// Bytes handed out as TLPs so far.
    pub fn issued_bytes(&self) -> u64 {
        self.splitter.position() - self.start
    }

    /// Bytes not yet handed out.
    pub fn left_bytes(&self) -> u64 {
        self.splitter.remaining()
    }
}

/// The device's DMA engine: a write channel, a read channel, or both sharing the transmit
/// queue. With both, a read request goes out whenever a tag is free and a write TLP otherwise,
/// so writes fill what the reads leave (a request is small; holding it back behind writes would
/// idle the completions' direction).
#[derive(Debug, Clone)]
pub struct DmaEngine {
    /// Index 0 writes, 1 reads (either may be absent).
    pub channels: [Option<Channel>; 2],
    free_tags: Vec<u16>,
    /// Bytes still expected per tag.
    outstanding: Vec<u64>,
    pub bytes_left: u64,
}

impl DmaEngine {
    pub fn new(config: &SimConfig, workload: &Workload) -> Option<Self> {
        let write = |addr, bytes| Some(Channel::new(TlpKind::MemWrite, addr, bytes, config.mps_bytes));
        let read = |addr, bytes| Some(Channel::new(TlpKind::MemRead, addr, bytes, config.mrrs_bytes));
        let (channels, bytes_left) = match *workload {
            Workload::DmaWrite { addr, bytes } => ([write(addr, bytes), None], bytes),
            Workload::DmaRead { addr, bytes } => ([None, read(addr, bytes)], bytes),
            Workload::DmaBoth { write_addr, write_bytes, read_addr, read_bytes } => {
                ([write(write_addr, write_bytes), read(read_addr, read_bytes)], write_bytes + read_bytes)
            }
            _ => return None,
        };
        Some(DmaEngine {
            channels,
            free_tags: (0..config.tags as u16).rev().collect(),
            outstanding: vec![0; config.tags as usize],
            bytes_left,
        })
    }

    /// Whether channel `index` has a TLP to send now (reads need a free tag).
    fn ready(&self, index: usize) -> bool {
        self.channels[index].as_ref().is_some_and(|c| !c.splitter.is_done()) && (index == 0 || !self.free_tags.is_empty())
    }

    /// The next TLP the engine would send, if a channel has one ready.
    pub fn next_tlp(&mut self) -> Option<Tlp> {
        let index = if self.ready(1) { 1 } else if self.ready(0) { 0 } else { return None };
        let channel = self.channels[index].as_mut()?;
        let (addr, len) = channel.splitter.next_piece()?;
        let kind = channel.kind;
        let tag = if kind == TlpKind::MemRead {
            let tag = self.free_tags.pop()?;
            self.outstanding[tag as usize] = len;
            tag
        } else {
            self.bytes_left -= len;
            0
        };
        Some(transaction::tlp(kind, addr, len, tag))
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

    /// Whether a read request still waits for completions.
    pub fn reads_outstanding(&self) -> bool {
        self.free_tags.len() < self.outstanding.len()
    }

    /// Bytes issued so far per channel (writes, reads).
    pub fn issued_bytes(&self) -> [u64; 2] {
        self.channels.each_ref().map(|c| c.as_ref().map_or(0, Channel::issued_bytes))
    }

    /// Give channel i `bytes[i]` more to move (a copy of a run looking for its steady state).
    pub fn extend(&mut self, bytes: [u64; 2]) {
        for (channel, more) in self.channels.iter_mut().zip(bytes) {
            if let Some(channel) = channel {
                channel.splitter.extend(more);
                self.bytes_left += more;
            }
        }
    }

    /// Leave out `bytes[i]` of channel i, as if they had been sent and answered (the steady-state
    /// fast-forward): the channels move on, nothing in flight changes.
    pub fn skip(&mut self, bytes: [u64; 2]) {
        for (channel, skipped) in self.channels.iter_mut().zip(bytes) {
            if let Some(channel) = channel {
                channel.splitter.skip(skipped);
                self.bytes_left -= skipped;
            }
        }
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
