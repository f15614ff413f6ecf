//! What a packet of the record looks like on the wire, byte by byte: the TLP header the
//! simulator's fields imply, the DLLP's six bytes, the framing of each encoding (8b/10b K codes,
//! 128b/130b tokens) and the check codes ([`super::crc`]). The traces (`report::trace`) show
//! these bytes; the simulator itself only counts them.
//!
//! The simulator carries no data: each DW of a payload holds its index within its 4 KiB page,
//! little-endian (document 000's Example 1 writes 0, 1, 2, … the same way); bytes outside the
//! requested range are 0.
//! Requester and completer IDs are document 000's: the root port 00:1c.0 and the device 02:00.0.

use std::collections::HashMap;

use super::crc;
use super::packet::{dw_bytes, Direction, Dllp, FcClass, Packet, Tlp, TlpKind};
use crate::model::{Encoding, HeaderFormat};

/// Routing ID of the host side (root port 00:1c.0).
pub const HOST_ID: u16 = 0x00E0;
/// Routing ID of the device (02:00.0).
pub const DEVICE_ID: u16 = 0x0200;

/// 8b/10b control symbols (K codes) as their 8-bit values.
pub mod k {
    pub const STP: u8 = 0xFB; // K27.7
    pub const SDP: u8 = 0x5C; // K28.2
    pub const END: u8 = 0xFD; // K29.7
    pub const COM: u8 = 0xBC; // K28.5
    pub const SKP: u8 = 0x1C; // K28.0
}

/// 128b/130b framing tokens and ordered-set symbols.
pub mod token {
    pub const SDP: [u8; 2] = [0xF0, 0xAC];
    pub const EDS: [u8; 4] = [0x1F, 0x80, 0x90, 0x00];
    /// SKP ordered set: SKP symbols, then SKP_END, then three symbols (LFSR/parity, sent as 0).
    pub const SKP: u8 = 0xAA;
    pub const SKP_END: u8 = 0xE1;
}

/// One byte on one lane; `control` marks a K code at 8b/10b, and a framing-token or
/// ordered-set byte at 128b/130b (which has no K codes; an analyser highlights them alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol {
    pub byte: u8,
    pub control: bool,
}

impl Symbol {
    /// Logical idle: data 00 (8b/10b) or IDL tokens (128b/130b).
    pub const IDLE: Symbol = Symbol { byte: 0, control: false };

    pub fn data(byte: u8) -> Symbol {
        Symbol { byte, control: false }
    }

    pub fn control(byte: u8) -> Symbol {
        Symbol { byte, control: true }
    }
}

/// Turns the record's packets into wire bytes. Keeps the outstanding read requests so that a
/// completion's Byte Count (what is left of its request) is known.
#[derive(Debug, Clone)]
pub struct Encoder {
    pub encoding: Encoding,
    pub header: HeaderFormat,
    pub ecrc: bool,
    /// End address of each outstanding read, by (direction of the request, tag).
    reads: HashMap<(Direction, u16), u64>,
}

impl Encoder {
    pub fn new(encoding: Encoding, header: HeaderFormat, ecrc: bool) -> Self {
        Encoder { encoding, header, ecrc, reads: HashMap::new() }
    }

    /// A TLP or DLLP with its framing, in the order its bytes go out (lane 0 first); a SKP
    /// ordered set as one lane carries it (EDS token first at 128b/130b).
    pub fn framed(&mut self, packet: &Packet, direction: Direction) -> Vec<Symbol> {
        match packet {
            Packet::Tlp(tlp) => {
                let body = self.tlp_bytes(tlp, direction);
                self.frame_tlp(tlp.seq, &body)
            }
            Packet::Dllp(dllp) => self.frame_dllp(&dllp_bytes(dllp)),
            Packet::Skp => self.skp_lane(),
            // Flit mode (Gen6) has no per-packet framing to show; traces refuse Gen6 links.
            Packet::Flit(_) => Vec::new(),
        }
    }

    /// Header, data and ECRC of `tlp` travelling in `direction`.
    pub fn tlp_bytes(&mut self, tlp: &Tlp, direction: Direction) -> Vec<u8> {
        let sender = if direction == Direction::Downstream { HOST_ID } else { DEVICE_ID };
        let receiver = if direction == Direction::Downstream { DEVICE_ID } else { HOST_ID };
        let mut bytes = match tlp.kind {
            TlpKind::CompletionData => {
                let end = self.reads.get(&(direction.opposite(), tlp.tag)).copied().unwrap_or(tlp.addr + tlp.len_bytes);
                if end <= tlp.addr + tlp.len_bytes {
                    self.reads.remove(&(direction.opposite(), tlp.tag));
                }
                completion_header(tlp, sender, receiver, end - tlp.addr)
            }
            TlpKind::MemRead | TlpKind::MemWrite => {
                if tlp.kind == TlpKind::MemRead {
                    self.reads.insert((direction, tlp.tag), tlp.addr + tlp.len_bytes);
                }
                request_header(tlp, self.header, sender)
            }
        };
        if self.ecrc {
            bytes[2] |= 0x80; // TD: a digest follows
        }
        if tlp.kind != TlpKind::MemRead {
            bytes.extend(payload(tlp.addr, tlp.len_bytes));
        }
        if self.ecrc {
            let ecrc = crc::ecrc_bytes(&bytes);
            bytes.extend(ecrc);
        }
        bytes
    }

    fn frame_tlp(&self, seq: u16, body: &[u8]) -> Vec<Symbol> {
        let seq_bytes = [(seq >> 8) as u8 & 0x0F, seq as u8];
        let lcrc = crc::lcrc_bytes(seq_bytes, body);
        let mut out = Vec::with_capacity(body.len() + 8);
        match self.encoding {
            Encoding::B8b10b => {
                out.push(Symbol::control(k::STP));
                out.extend(seq_bytes.map(Symbol::data));
            }
            _ => {
                // STP token: the TLP's length in DW (token and LCRC included), frame CRC and
                // parity, sequence number.
                let length_dw = ((4 + body.len() + 4) / 4) as u16;
                let (fcrc, parity) = crc::frame_crc(length_dw);
                let stp = [0x0F | (length_dw as u8 & 0x0F) << 4, (length_dw >> 4) as u8 & 0x7F | parity << 7, fcrc << 4 | seq_bytes[0], seq_bytes[1]];
                out.extend(stp.map(Symbol::control));
            }
        }
        out.extend(body.iter().copied().map(Symbol::data));
        out.extend(lcrc.map(Symbol::data));
        if self.encoding == Encoding::B8b10b {
            out.push(Symbol::control(k::END));
        }
        out
    }

    fn frame_dllp(&self, content: &[u8; 6]) -> Vec<Symbol> {
        let body = content.iter().copied().map(Symbol::data);
        match self.encoding {
            Encoding::B8b10b => std::iter::once(Symbol::control(k::SDP)).chain(body).chain([Symbol::control(k::END)]).collect(),
            _ => token::SDP.map(Symbol::control).into_iter().chain(body).collect(),
        }
    }

    /// The SKP ordered set on one lane (after the EDS token at 128b/130b).
    pub fn skp_lane(&self) -> Vec<Symbol> {
        match self.encoding {
            Encoding::B8b10b => vec![Symbol::control(k::COM), Symbol::control(k::SKP), Symbol::control(k::SKP), Symbol::control(k::SKP)],
            _ => token::EDS.iter().copied().chain(skp_block_lane()).map(Symbol::control).collect(),
        }
    }
}

/// The 16 symbols of a 128b/130b SKP ordered-set block on one lane.
pub fn skp_block_lane() -> [u8; 16] {
    let mut block = [token::SKP; 16];
    block[12] = token::SKP_END;
    block[13..].fill(0);
    block
}

/// The 10-bit Length field (1024 DW is written 0).
fn length_field(dws: u64) -> [u8; 2] {
    let field = (dws % 1024) as u16;
    [(field >> 8) as u8 & 0x03, field as u8]
}

/// Bytes 0–3 of a header: Fmt/Type, the tag's bits 9 and 8, Length.
fn first_dw(fmt_type: u8, tag: u16, dws: u64) -> [u8; 4] {
    let tag_high = (((tag >> 9) & 1) as u8) << 7 | (((tag >> 8) & 1) as u8) << 3;
    let [high, low] = length_field(dws);
    [fmt_type, tag_high, high, low]
}

/// Memory request header (3 or 4 DW): requester ID, tag, byte enables, address.
fn request_header(tlp: &Tlp, format: HeaderFormat, requester: u16) -> Vec<u8> {
    let with_data = if tlp.kind == TlpKind::MemWrite { 0x40 } else { 0x00 };
    let four_dw = if format == HeaderFormat::Dw4 { 0x20 } else { 0x00 };
    let dws = dw_bytes(tlp.addr, tlp.len_bytes) / 4;
    let mut bytes = first_dw(with_data | four_dw, tlp.tag, dws).to_vec();
    bytes.extend(requester.to_be_bytes());
    bytes.push(tlp.tag as u8);
    bytes.push(byte_enables(tlp.addr, tlp.len_bytes, dws));
    if format == HeaderFormat::Dw4 {
        bytes.extend(((tlp.addr >> 32) as u32).to_be_bytes());
    }
    bytes.extend((tlp.addr as u32 & !3).to_be_bytes());
    bytes
}

/// Last DW BE (high nibble) and First DW BE (low nibble).
fn byte_enables(addr: u64, len: u64, dws: u64) -> u8 {
    let first_offset = addr % 4;
    let end = addr + len;
    if dws == 1 {
        let mask = ((1u16 << (first_offset + len)) - 1) as u8 & !((1u8 << first_offset) - 1);
        return mask & 0x0F;
    }
    let first = 0x0F & !((1u8 << first_offset) - 1);
    let last = if end.is_multiple_of(4) { 0x0F } else { (1u8 << (end % 4)) - 1 };
    last << 4 | first
}

/// Completion header (3 DW): completer ID, status Successful, Byte Count, requester ID, tag,
/// Lower Address.
fn completion_header(tlp: &Tlp, completer: u16, requester: u16, byte_count: u64) -> Vec<u8> {
    let dws = tlp.data_bytes / 4;
    let mut bytes = first_dw(0x4A, tlp.tag, dws).to_vec();
    bytes.extend(completer.to_be_bytes());
    let count = (byte_count % 4096) as u16;
    bytes.extend([(count >> 8) as u8 & 0x0F, count as u8]);
    bytes.extend(requester.to_be_bytes());
    bytes.push(tlp.tag as u8);
    bytes.push(tlp.addr as u8 & 0x7F);
    bytes
}

/// The whole DWs of `[addr, addr + len)`, bytes outside it 0 (see the module's note on data).
pub fn payload(addr: u64, len: u64) -> Vec<u8> {
    let start = addr / 4 * 4;
    (start..start + dw_bytes(addr, len))
        .map(|x| if (addr..addr + len).contains(&x) { ((x % 4096 / 4) >> (8 * (x % 4))) as u8 } else { 0 })
        .collect()
}

/// The six bytes of a DLLP: type, three content bytes, CRC.
pub fn dllp_bytes(dllp: &Dllp) -> [u8; 6] {
    let content = match *dllp {
        Dllp::Ack { seq } => [0x00, 0x00, (seq >> 8) as u8 & 0x0F, seq as u8],
        Dllp::Nak { seq } => [0x10, 0x00, (seq >> 8) as u8 & 0x0F, seq as u8],
        Dllp::UpdateFc { class, header, data } => {
            // Credit counters are modulo 2^8 (header) and 2^12 (data) on the wire.
            let (header, data) = ((header % 256) as u8, (data % 4096) as u16);
            [update_fc_type(class), header >> 2, (header & 3) << 6 | (data >> 8) as u8, data as u8]
        }
    };
    let crc = crc::dllp_crc_bytes(&content);
    [content[0], content[1], content[2], content[3], crc[0], crc[1]]
}

/// UpdateFC DLLP type byte, virtual channel 0.
pub fn update_fc_type(class: FcClass) -> u8 {
    match class {
        FcClass::Posted => 0x80,
        FcClass::NonPosted => 0x90,
        FcClass::Completion => 0xA0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::transaction;

    fn bytes(symbols: &[Symbol]) -> Vec<u8> {
        symbols.iter().map(|s| s.byte).collect()
    }

    #[test]
    fn document_000_three_reads_mrd_on_the_wire() {
        let mut encoder = Encoder::new(Encoding::B8b10b, HeaderFormat::Dw3, false);
        let mut mrd = transaction::tlp(TlpKind::MemRead, 0xc200_0000, 4, 0);
        mrd.seq = 2123;
        let framed = encoder.framed(&Packet::Tlp(mrd), Direction::Downstream);
        let expected = [0xFB, 0x08, 0x4B, 0x00, 0x00, 0x00, 0x01, 0x00, 0xE0, 0x00, 0x0F, 0xC2, 0x00, 0x00, 0x00, 0xF1, 0x4A, 0x69, 0xF2, 0xFD];
        assert_eq!(bytes(&framed), expected);
        assert!(framed[0].control && framed[19].control && !framed[1].control);
        // Its completion carries 4 bytes; Byte Count 4, requester 00:1c.0, lower address.
        let mut cpl = transaction::tlp(TlpKind::CompletionData, 0xc200_0000, 4, 0);
        cpl.seq = 1713;
        let body = encoder.tlp_bytes(&cpl, Direction::Upstream);
        assert_eq!(body[..12], [0x4A, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x04, 0x00, 0xE0, 0x00, 0x00]);
    }

    #[test]
    fn document_000_update_fc_and_ack() {
        let fc = Dllp::UpdateFc { class: FcClass::Posted, header: 54, data: 1973 };
        assert_eq!(dllp_bytes(&fc), [0x80, 0x0D, 0x87, 0xB5, 0xEF, 0xC7]);
        assert_eq!(dllp_bytes(&Dllp::Ack { seq: 4057 }), [0x00, 0x00, 0x0F, 0xD9, 0xE1, 0xC5]);
        let encoder = Encoder::new(Encoding::B128b130b, HeaderFormat::Dw3, false);
        assert_eq!(encoder.frame_dllp(&dllp_bytes(&fc)).len(), 8);
    }

    #[test]
    fn byte_enables_and_payload_of_partial_dws() {
        assert_eq!(byte_enables(0x1001, 2, 1), 0x06);
        assert_eq!(byte_enables(0x1002, 4, 2), 0x3C);
        assert_eq!(byte_enables(0x1000, 8, 2), 0xFF);
        assert_eq!(payload(0x408, 2), vec![0x02, 0x01, 0, 0]);
        assert_eq!(payload(0x409, 2), vec![0, 0x01, 0, 0]);
        assert_eq!(payload(0xc200_0004, 4), vec![0x01, 0x00, 0x00, 0x00]);
    }

    #[test]
    fn framed_lengths_match_the_simulators_byte_counts() {
        for encoding in [Encoding::B8b10b, Encoding::B128b130b] {
            for (header, ecrc) in [(HeaderFormat::Dw3, false), (HeaderFormat::Dw4, true)] {
                let mut config = crate::link::SimConfig::for_link(if encoding == Encoding::B8b10b { "gen1x1" } else { "gen3x4" }).unwrap();
                (config.header, config.ecrc) = (header, ecrc);
                let phy = crate::link::phy::Phy::new(config.link);
                let mut encoder = Encoder::new(encoding, header, ecrc);
                for kind in [TlpKind::MemWrite, TlpKind::MemRead, TlpKind::CompletionData] {
                    let tlp = transaction::tlp(kind, 0x1003, 130, 5);
                    let framed = encoder.framed(&Packet::Tlp(tlp), Direction::Upstream);
                    assert_eq!(framed.len() as u64, transaction::wire_bytes(&config, &phy, &tlp), "{kind:?} {encoding:?} {header:?}");
                }
                assert_eq!(encoder.framed(&Packet::Dllp(Dllp::Ack { seq: 1 }), Direction::Upstream).len() as u64, phy.dllp_bytes());
            }
        }
    }
}
