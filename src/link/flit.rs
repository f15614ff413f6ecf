//! Gen6 flit mode (64 GT/s, PAM4, 1b/1b): what a 256-byte flit carries.
//!
//! Layout (PCIe Base Specification 6.0 §4.2.3.4, the same numbers as [`crate::model::flit`]):
//! 236 TLP bytes, 6 DLP bytes, 8 CRC bytes, 6 FEC bytes. TLPs are packed back to back into the
//! TLP bytes and continue in the next flit, with no STP token, sequence number or LCRC of their
//! own (the flit's CRC and sequence number protect them). The DLP bytes carry the data link
//! layer: the flit sequence number or an Ack/Nak, and one DLLP payload (an UpdateFC). A flit
//! with TLP bytes gets a 10-bit flit sequence number and stays in the replay buffer until it is
//! acknowledged; a flit with none (IDLE, or NOP carrying only DLP content) is not replayed.

use super::packet::{Dllp, Tlp};

/// Bytes of one flit on the lanes.
pub const FLIT_BYTES: u64 = 256;
/// Bytes of a flit that carry TLPs.
pub const FLIT_TLP_BYTES: u64 = 236;
/// Data link payload bytes: sequence number or Ack/Nak, and one DLLP payload.
pub const FLIT_DLP_BYTES: u64 = 6;
pub const FLIT_CRC_BYTES: u64 = 8;
pub const FLIT_FEC_BYTES: u64 = 6;
/// Flit sequence numbers are 10 bits.
pub const FLIT_SEQ_MODULO: u16 = 1024;

/// A flit as the record shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlitSummary {
    /// Flit sequence number; `None` for a flit without TLP bytes.
    pub seq: Option<u16>,
    /// TLP bytes used (the rest of the 236 are IDLE).
    pub tlp_bytes: u16,
    /// Sent again by a replay.
    pub replay: bool,
}

/// What one flit carries, kept for its replay and for the receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct FlitContent {
    pub summary: FlitSummary,
    /// TLPs whose last byte is in this flit: the receiver gets them when the flit checks good.
    pub ends: Vec<Tlp>,
    /// DLLP contents in the DLP bytes (at most an Ack or Nak and one UpdateFC).
    pub dllps: Vec<Dllp>,
}

/// Take the DLP contents of the next flit from the queued DLLPs: the newest Ack or Nak (they
/// are cumulative), and the first queued UpdateFC with the newest values of its class (also
/// cumulative). Later UpdateFCs of other classes wait for the next flit.
pub fn take_dlp(queue: &mut std::collections::VecDeque<Dllp>) -> Vec<Dllp> {
    let mut dlp = Vec::with_capacity(2);
    if let Some(ack) = queue.iter().rev().find(|d| matches!(d, Dllp::Ack { .. } | Dllp::Nak { .. })) {
        dlp.push(*ack);
        queue.retain(|d| !matches!(d, Dllp::Ack { .. } | Dllp::Nak { .. }));
    }
    if let Some(Dllp::UpdateFc { class, .. }) = queue.front().copied() {
        let newest = queue.iter().rev().find(|d| matches!(d, Dllp::UpdateFc { class: c, .. } if *c == class)).copied();
        queue.retain(|d| !matches!(d, Dllp::UpdateFc { class: c, .. } if *c == class));
        dlp.extend(newest);
    }
    dlp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::FcClass;

    #[test]
    fn layout_is_the_models_and_adds_up() {
        assert_eq!(FLIT_TLP_BYTES + FLIT_DLP_BYTES + FLIT_CRC_BYTES + FLIT_FEC_BYTES, FLIT_BYTES);
        use crate::model::flit as model;
        assert_eq!(
            (FLIT_BYTES, FLIT_TLP_BYTES, FLIT_DLP_BYTES, FLIT_CRC_BYTES, FLIT_FEC_BYTES),
            (model::FLIT_BYTES, model::FLIT_TLP_BYTES, model::FLIT_DLP_BYTES, model::FLIT_CRC_BYTES, model::FLIT_FEC_BYTES)
        );
    }

    #[test]
    fn dlp_takes_the_newest_ack_and_one_update_fc_class() {
        let fc = |class, header| Dllp::UpdateFc { class, header, data: 0 };
        let mut queue: std::collections::VecDeque<Dllp> =
            [Dllp::Ack { seq: 1 }, fc(FcClass::Posted, 5), Dllp::Ack { seq: 2 }, fc(FcClass::NonPosted, 1), fc(FcClass::Posted, 6)].into();
        assert_eq!(take_dlp(&mut queue), vec![Dllp::Ack { seq: 2 }, fc(FcClass::Posted, 6)]);
        assert_eq!(queue, [fc(FcClass::NonPosted, 1)]);
        assert_eq!(take_dlp(&mut queue), vec![fc(FcClass::NonPosted, 1)]);
        assert!(take_dlp(&mut queue).is_empty());
    }
}
