//! The link's check codes, as the specification defines them: LCRC and ECRC (the 32-bit CRC of
//! polynomial 0x04C11DB7, the same as Ethernet's), the DLLP's 16-bit CRC (polynomial 0x100B)
//! and the 128b/130b STP token's 4-bit frame CRC with its parity bit.
//!
//! Checked against document 000's §3.5 record: the MRd of sequence 2123 ends in LCRC bytes
//! F1 4A 69 F2 and the UpdateFC-P of 54/1973 in CRC bytes EF C7 (tests below).

/// LCRC of a TLP: over the two sequence-number bytes and the TLP (header, data, ECRC), in the
/// byte order it goes on the wire.
pub fn lcrc_bytes(seq_bytes: [u8; 2], tlp: &[u8]) -> [u8; 4] {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq_bytes);
    hasher.update(tlp);
    hasher.finalize().to_le_bytes()
}

/// ECRC of a TLP's header and data, with the variant bits (Type bit 0 and EP) taken as 1, as
/// the specification requires so that a switch may change them.
pub fn ecrc_bytes(header_and_data: &[u8]) -> [u8; 4] {
    let mut hasher = crc32fast::Hasher::new();
    let mut first = [header_and_data[0], header_and_data[1], header_and_data[2]];
    first[0] |= 0x01;
    first[2] |= 0x40;
    hasher.update(&first);
    hasher.update(&header_and_data[3..]);
    hasher.finalize().to_le_bytes()
}

/// The 16-bit CRC of a DLLP's 4 content bytes, as its two wire bytes.
pub fn dllp_crc_bytes(content: &[u8; 4]) -> [u8; 2] {
    const POLYNOMIAL: u16 = 0x100B;
    let mut crc: u16 = 0xFFFF;
    // Bits enter least significant first, as they are sent.
    for &byte in content {
        for bit in 0..8 {
            let feedback = ((byte >> bit) & 1) as u16 ^ (crc >> 15);
            crc <<= 1;
            if feedback == 1 {
                crc ^= POLYNOMIAL;
            }
        }
    }
    let sent = !crc;
    [((sent >> 8) as u8).reverse_bits(), (sent as u8).reverse_bits()]
}

/// The STP token's frame CRC (4 bits) and frame parity over an 11-bit TLP length in DW
/// (PCIe Base Specification §4.2.2.3.1 — the equations, bit by bit).
pub fn frame_crc(length_dw: u16) -> (u8, u8) {
    let l = |i: u16| ((length_dw >> i) & 1) as u8;
    let c0 = l(10) ^ l(7) ^ l(6) ^ l(4) ^ l(2) ^ l(1) ^ l(0);
    let c1 = l(10) ^ l(9) ^ l(7) ^ l(5) ^ l(4) ^ l(3) ^ l(2);
    let c2 = l(9) ^ l(8) ^ l(6) ^ l(4) ^ l(3) ^ l(2) ^ l(1);
    let c3 = l(8) ^ l(7) ^ l(5) ^ l(3) ^ l(2) ^ l(1) ^ l(0);
    let crc = c0 | c1 << 1 | c2 << 2 | c3 << 3;
    // Even parity over the length and the CRC.
    let parity = ((length_dw & 0x7FF).count_ones() + crc.count_ones()) as u8 & 1;
    (crc, parity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcrc_of_document_000_records() {
        // §3.5 three reads: MRd seq 2123 and the CplD of seq 1713.
        let mrd = [0x00, 0x00, 0x00, 0x01, 0x00, 0xE0, 0x00, 0x0F, 0xC2, 0x00, 0x00, 0x00];
        assert_eq!(lcrc_bytes([0x08, 0x4B], &mrd), [0xF1, 0x4A, 0x69, 0xF2]);
        let cpld = [0x4A, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x04, 0x00, 0xE0, 0x00, 0x80, 0x63, 0x00, 0x00, 0x00];
        assert_eq!(lcrc_bytes([0x06, 0xB1], &cpld), [0x4C, 0xCC, 0xE6, 0x40]);
    }

    #[test]
    fn dllp_crc_of_document_000_records() {
        assert_eq!(dllp_crc_bytes(&[0x80, 0x0D, 0x87, 0xB5]), [0xEF, 0xC7]);
        assert_eq!(dllp_crc_bytes(&[0x00, 0x00, 0x0F, 0xD9]), [0xE1, 0xC5]);
        assert_eq!(dllp_crc_bytes(&[0x90, 0x3C, 0x81, 0xFF]), [0x20, 0x2D]);
    }

    #[test]
    fn ecrc_ignores_the_variant_bits() {
        let header = [0x40, 0x00, 0x80, 0x01, 0, 0, 0, 0x0F, 0, 0, 0, 0];
        let mut poisoned = header;
        poisoned[2] |= 0x40;
        assert_eq!(ecrc_bytes(&header), ecrc_bytes(&poisoned));
    }

    #[test]
    fn frame_crc_parity_is_even() {
        for length in 0..2048u16 {
            let (crc, parity) = frame_crc(length);
            assert!(crc < 16);
            assert_eq!((length.count_ones() + crc.count_ones() + parity as u32) % 2, 0);
        }
    }
}
