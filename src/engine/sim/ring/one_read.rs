//! "Pull mode keeps one read in flight" (document 003), in one place for both pull rings: the
//! reader (the d2h host in `ring_pull.rs`, the h2d device in `ring_h2d_pull.rs`) reads a message
//! with MRd requests of at most MRRS that never cross 4 KiB, and the next request leaves only
//! when every completion of the one before has arrived. The completions come from the link
//! simulator's completer on the far side (cut at RCB and MPS); only this reader's completions
//! travel back in its direction's opposite, so the delivered count says when its read is answered.

use crate::link::{transaction, Direction as LinkDirection, SimConfig, TlpKind};

use super::drive::Lanes;

/// A message being read, one request in flight.
pub struct OneRead {
    /// Requests go this way; their completions come back the other.
    direction: LinkDirection,
    mrrs_bytes: u64,
    mps_bytes: u64,
    rcb_bytes: u64,
    /// Bytes not yet requested: `[next_addr, end_addr)`.
    next_addr: u64,
    end_addr: u64,
    /// Completions delivered back once the request in flight is answered.
    completions_due: u64,
}

/// What the read did after the link moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The request in flight is not answered yet, or the next one just left.
    Reading,
    /// The last completion arrived: the whole message is in.
    Done,
}

impl OneRead {
    /// Start reading `bytes` at `addr` with requests `direction`: the first request leaves now.
    /// Returns the read and that request's number in `direction`.
    pub fn start(lanes: &mut Lanes, link: &SimConfig, direction: LinkDirection, addr: u64, bytes: u64) -> (OneRead, u64) {
        let mut read = OneRead {
            direction,
            mrrs_bytes: link.mrrs_bytes,
            mps_bytes: link.mps_bytes,
            rcb_bytes: link.rcb_bytes,
            next_addr: addr,
            end_addr: addr + bytes,
            completions_due: 0,
        };
        let number = read.request(lanes);
        (read, number)
    }

    /// After the link moved: the next request leaves once the one in flight is answered.
    pub fn advance(&mut self, lanes: &mut Lanes) -> Progress {
        if lanes.sim.delivered_completions(self.direction.opposite()) < self.completions_due {
            return Progress::Reading;
        }
        if self.next_addr >= self.end_addr {
            return Progress::Done;
        }
        self.request(lanes);
        Progress::Reading
    }

    /// Issue the next request and count the completions that answer it (every earlier one of
    /// this reader's has arrived: one in flight).
    fn request(&mut self, lanes: &mut Lanes) -> u64 {
        let mut split = transaction::Splitter::new(self.next_addr, self.end_addr - self.next_addr, self.mrrs_bytes);
        let (addr, len) = split.next_piece().expect("bytes left to read");
        self.next_addr = addr + len;
        let answers = transaction::completions(addr, len, self.mps_bytes, self.rcb_bytes).count() as u64;
        self.completions_due = lanes.sim.delivered_completions(self.direction.opposite()) + answers;
        lanes.send(self.direction, TlpKind::MemRead, addr, len)
    }
}
