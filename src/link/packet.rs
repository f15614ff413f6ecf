//! What crosses the link: TLPs, DLLPs and ordered sets, with the fields a trace shows.

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Host (root complex) to device: CPU writes and read requests, completions of host memory.
    Downstream,
    /// Device to host: DMA writes and read requests, completions of device registers.
    Upstream,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Downstream, Direction::Upstream];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn opposite(self) -> Direction {
        match self {
            Direction::Downstream => Direction::Upstream,
            Direction::Upstream => Direction::Downstream,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Direction::Downstream => "down",
            Direction::Upstream => "up",
        }
    }
}

/// Flow-control class of a TLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FcClass {
    Posted,
    NonPosted,
    Completion,
}

impl FcClass {
    pub const ALL: [FcClass; 3] = [FcClass::Posted, FcClass::NonPosted, FcClass::Completion];

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Kind of TLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TlpKind {
    MemWrite,
    MemRead,
    CompletionData,
}

impl TlpKind {
    pub fn class(self) -> FcClass {
        match self {
            TlpKind::MemWrite => FcClass::Posted,
            TlpKind::MemRead => FcClass::NonPosted,
            TlpKind::CompletionData => FcClass::Completion,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlpKind::MemWrite => "MWr",
            TlpKind::MemRead => "MRd",
            TlpKind::CompletionData => "CplD",
        }
    }
}

/// A transaction layer packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tlp {
    pub kind: TlpKind,
    /// Address of the first byte (requests) or of the completion's data.
    pub addr: u64,
    /// Bytes the request asks for or the completion carries (byte-exact).
    pub len_bytes: u64,
    /// Data bytes on the wire: whole DWs (0 for a read request).
    pub data_bytes: u64,
    pub tag: u16,
    /// Data link layer sequence number (12 bits), given when the TLP is transmitted.
    pub seq: u16,
}

/// A data link layer packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dllp {
    /// Acknowledges every TLP up to and including `seq`.
    Ack { seq: u16 },
    /// A TLP arrived bad (or out of sequence): replay everything after `seq`, which it
    /// acknowledges.
    Nak { seq: u16 },
    /// Credits allocated so far for one class (cumulative, as the specification counts them).
    UpdateFc { class: FcClass, header: u64, data: u64 },
}

/// Anything that occupies the lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Packet {
    Tlp(Tlp),
    Dllp(Dllp),
    /// A SKP ordered set (with the EDS token before it at 128b/130b).
    Skp,
    /// A Gen6 flit (its TLPs and DLP contents are recorded beside it).
    Flit(super::flit::FlitSummary),
}

/// 12-bit sequence numbers wrap at 4096.
pub const SEQ_MODULO: u16 = 4096;

/// Data bytes on the wire for `[addr, addr + len)`: the whole DWs it touches.
pub fn dw_bytes(addr: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (addr + len).div_ceil(4) * 4 - addr / 4 * 4
}
