//! The PCI Express capability's `-vv` body as lspci 3.9 prints it (`ls-caps.c`:
//! `cap_express_dev`, `_link`, `_slot`, `_root`, `_dev2`, `_link2`), continuation lines and all:
//! DevCap/DevCtl/DevSta, LnkCap/LnkCtl/LnkSta with `(downgraded)`/`(overdriven)`, SltCap/SltCtl/
//! SltSta, RootCap/RootCtl/RootSta, DevCap2/DevCtl2, LnkCap2/LnkCtl2/LnkSta2. Lines are relative
//! to the capability's body: a leading tab is lspci's continuation indent.

use super::flag;
use super::regs::field;
use crate::pci::config::ConfigSpace;

// Device/Port Type codes (PCI Express Capabilities register bits 7:4).
const ENDPOINT: u8 = 0;
const LEGACY_ENDPOINT: u8 = 1;
const ROOT_PORT: u8 = 4;
const UPSTREAM: u8 = 5;
const DOWNSTREAM: u8 = 6;
const PCIE_TO_PCI_BRIDGE: u8 = 7;
const PCI_TO_PCIE_BRIDGE: u8 = 8;
const ROOT_INTEGRATED_ENDPOINT: u8 = 9;
const ROOT_EVENT_COLLECTOR: u8 = 10;

/// The registers at their offsets in the capability, read where present (0 otherwise: lspci
/// prints a block only when all of its registers were read, see [`lines`]).
struct Regs<'a> {
    config: &'a ConfigSpace,
    at: usize,
}

impl Regs<'_> {
    fn w(&self, offset: usize) -> u16 {
        self.config.u16_at(self.at + offset).unwrap_or(0)
    }
    fn l(&self, offset: usize) -> u32 {
        self.config.u32_at(self.at + offset).unwrap_or(0)
    }
}

fn f(value: impl Into<u32>, mask: u32) -> char {
    flag(value.into() & mask != 0)
}

/// Whether the function has a memory BAR (libpci's base addresses from the header), which
/// makes lspci show AtomicOps completer support.
fn has_memory_bar(config: &ConfigSpace) -> bool {
    let count = match config.u8_at(0x0e).map(|h| h & 0x7f) {
        Some(0) => 6,
        Some(1) => 2,
        Some(2) => 1,
        _ => 0,
    };
    let mut i = 0;
    while i < count {
        let x = config.u32_at(0x10 + 4 * i).unwrap_or(0);
        if x != 0 && x != u32::MAX {
            if x & 1 == 0 && (x & 0x6 != 0x4 || i + 1 < count) {
                return true;
            }
            if x & 0x7 == 0x4 {
                i += 1;
            }
        }
        i += 1;
    }
    false
}

/// The body lines lspci prints under `Express (v2) …` at `-vv`; `function_zero`: device 0
/// function 0 (lspci hides LnkCap2/LnkCtl2 of other endpoint functions).
pub fn lines(config: &ConfigSpace, at: usize, function_zero: bool) -> Vec<String> {
    let regs = Regs { config, at };
    let flags = regs.w(2);
    let kind = field(flags, 0x00f0u16) as u8;
    let version = flags & 0xf;
    let slot = flags & 0x0100 != 0 && matches!(kind, ROOT_PORT | DOWNSTREAM | PCI_TO_PCIE_BRIDGE);
    let link = !matches!(kind, ROOT_INTEGRATED_ENDPOINT | ROOT_EVENT_COLLECTOR);
    let root = matches!(kind, ROOT_PORT | ROOT_EVENT_COLLECTOR);
    let mut out = Vec::new();
    let size = if root { 32 } else if slot { 24 } else { 16 };
    if !config.has(at + 4, size) {
        return out;
    }
    device(&regs, kind, &mut out);
    if link {
        link_lines(&regs, kind, &mut out);
    }
    if slot {
        slot_lines(&regs, &mut out);
    }
    if root {
        root_lines(&regs, &mut out);
    }
    if version < 2 || !config.has(at + 0x24, if slot { 24 } else { 16 }) {
        return out;
    }
    device2(&regs, kind, has_memory_bar(config), &mut out);
    if link {
        link2(&regs, kind, function_zero, &mut out);
    }
    out
}

fn power_limit(value: u32, scale: u32) -> String {
    if scale == 0 && value == 0xff {
        return ">600W".to_string();
    }
    let value = if scale == 0 && (0xf0..=0xfe).contains(&value) { 250 + 25 * (value - 0xf0) } else { value };
    // C's %g of a float: at most six significant digits, no trailing zeros.
    let watts = value as f32 * [1.0f32, 0.1, 0.01, 0.001][scale as usize & 3];
    format!("{}W", format_g(f64::from(watts)))
}

/// C's `%g` for the values a power limit takes (0.001 to 600: never the exponent form).
fn format_g(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let exponent = value.abs().log10().floor() as i32;
    let decimals = (5 - exponent).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

const L0S: [&str; 8] = ["<64ns", "<128ns", "<256ns", "<512ns", "<1us", "<2us", "<4us", "unlimited"];
const L1: [&str; 8] = ["<1us", "<2us", "<4us", "<8us", "<16us", "<32us", "<64us", "unlimited"];

fn device(regs: &Regs, kind: u8, out: &mut Vec<String>) {
    let cap = regs.l(0x4);
    let endpoint = matches!(kind, ENDPOINT | LEGACY_ENDPOINT);
    let mut line = format!("DevCap:\tMaxPayload {} bytes, PhantFunc {}", 128 << (cap & 7), (1 << field(cap, 0x18u32)) - 1);
    if endpoint {
        line += &format!(", Latency L0s {}, L1 {}", L0S[field(cap, 0x1c0u32) as usize], L1[field(cap, 0xe00u32) as usize]);
    }
    out.push(line);
    let mut line = format!("\tExtTag{}", f(cap, 0x20));
    if endpoint || matches!(kind, UPSTREAM | PCIE_TO_PCI_BRIDGE) {
        line += &format!(" AttnBtn{} AttnInd{} PwrInd{}", f(cap, 0x1000), f(cap, 0x2000), f(cap, 0x4000));
    }
    line += &format!(" RBE{}", f(cap, 0x8000));
    let flr_kind = endpoint || kind == ROOT_INTEGRATED_ENDPOINT;
    if flr_kind {
        line += &format!(" FLReset{}", f(cap, 0x1000_0000));
    }
    if matches!(kind, ENDPOINT | UPSTREAM | PCIE_TO_PCI_BRIDGE) {
        line += &format!(" SlotPowerLimit {}", power_limit(field(cap, 0x3fc_0000u32), field(cap, 0xc00_0000u32)));
    }
    out.push(line);
    let ctl = regs.w(0x8);
    out.push(format!("DevCtl:\tCorrErr{} NonFatalErr{} FatalErr{} UnsupReq{}", f(ctl, 1), f(ctl, 2), f(ctl, 4), f(ctl, 8)));
    let mut line = format!("\tRlxdOrd{} ExtTag{} PhantFunc{} AuxPwr{} NoSnoop{}", f(ctl, 0x10), f(ctl, 0x100), f(ctl, 0x200), f(ctl, 0x400), f(ctl, 0x800));
    if kind == PCIE_TO_PCI_BRIDGE {
        line += &format!(" BrConfRtry{}", f(ctl, 0x8000));
    }
    if flr_kind && cap & 0x1000_0000 != 0 {
        line += &format!(" FLReset{}", f(ctl, 0x8000));
    }
    out.push(line);
    out.push(format!("\tMaxPayload {} bytes, MaxReadReq {} bytes", 128 << field(ctl, 0xe0u16), 128 << field(ctl, 0x7000u16)));
    let sta = regs.w(0xa);
    out.push(format!("DevSta:\tCorrErr{} NonFatalErr{} FatalErr{} UnsupReq{} AuxPwr{} TransPend{}", f(sta, 1), f(sta, 2), f(sta, 4), f(sta, 8), f(sta, 0x10), f(sta, 0x20)));
}

fn speed(code: u32) -> &'static str {
    match code {
        1 => "2.5GT/s",
        2 => "5GT/s",
        3 => "8GT/s",
        4 => "16GT/s",
        5 => "32GT/s",
        6 => "64GT/s",
        _ => "unknown",
    }
}

/// ` (downgraded)` when the link trained below what the port is capable of; a port facing
/// away from the root reports its child's limits, so lspci marks nothing there.
fn compare(kind: u8, now: u32, capable: u32) -> &'static str {
    if now > capable {
        " (overdriven)"
    } else if now == capable || matches!(kind, ROOT_PORT | DOWNSTREAM | PCI_TO_PCIE_BRIDGE) {
        ""
    } else {
        " (downgraded)"
    }
}

fn link_lines(regs: &Regs, kind: u8, out: &mut Vec<String>) {
    let cap = regs.l(0xc);
    let aspm = field(cap, 0xc00u32);
    let (cap_speed, cap_width) = (cap & 0xf, field(cap, 0x3f0u32));
    let mut line = format!("LnkCap:\tPort #{}, Speed {}, Width x{cap_width}, ASPM {}", cap >> 24, speed(cap_speed), super::pcie::aspm_support(aspm));
    if aspm != 0 {
        line += ", Exit Latency ";
        if aspm & 1 != 0 {
            line += &format!("L0s {}", L0S[field(cap, 0x7000u32) as usize]);
        }
        if aspm & 2 != 0 {
            line += &format!("{}L1 {}", if aspm & 1 != 0 { ", " } else { "" }, L1[field(cap, 0x38000u32) as usize]);
        }
    }
    out.push(line);
    out.push(format!("\tClockPM{} Surprise{} LLActRep{} BwNot{} ASPMOptComp{}", f(cap, 0x40000), f(cap, 0x80000), f(cap, 0x100000), f(cap, 0x200000), f(cap, 0x400000)));
    let ctl = regs.w(0x10);
    let mut line = format!("LnkCtl:\tASPM {};", super::pcie::aspm_control(ctl & 3));
    if matches!(kind, ROOT_PORT | ENDPOINT | LEGACY_ENDPOINT | PCIE_TO_PCI_BRIDGE) {
        line += &format!(" RCB {} bytes,", if ctl & 0x8 != 0 { 128 } else { 64 });
    }
    line += &format!(" Disabled{} CommClk{}", f(ctl, 0x10), f(ctl, 0x40));
    out.push(line);
    out.push(format!("\tExtSynch{} ClockPM{} AutWidDis{} BWInt{} AutBWInt{}", f(ctl, 0x80), f(ctl, 0x100), f(ctl, 0x200), f(ctl, 0x400), f(ctl, 0x800)));
    let sta = regs.w(0x12);
    let (speed_now, width_now) = (u32::from(sta & 0xf), field(sta, 0x3f0u16));
    out.push(format!("LnkSta:\tSpeed {}{}, Width x{width_now}{}", speed(speed_now), compare(kind, speed_now, cap_speed), compare(kind, width_now, cap_width)));
    out.push(format!("\tTrErr{} Train{} SlotClk{} DLActive{} BWMgmt{} ABWMgmt{}", f(sta, 0x400), f(sta, 0x800), f(sta, 0x1000), f(sta, 0x2000), f(sta, 0x4000), f(sta, 0x8000)));
}

fn indicator(code: u32) -> &'static str {
    ["Unknown", "On", "Blink", "Off"][code as usize & 3]
}

fn slot_lines(regs: &Regs, out: &mut Vec<String>) {
    let cap = regs.l(0x14);
    out.push(format!(
        "SltCap:\tAttnBtn{} PwrCtrl{} MRL{} AttnInd{} PwrInd{} HotPlug{} Surprise{}",
        f(cap, 0x1), f(cap, 0x2), f(cap, 0x4), f(cap, 0x8), f(cap, 0x10), f(cap, 0x40), f(cap, 0x20)
    ));
    out.push(format!(
        "\tSlot #{}, PowerLimit {}; Interlock{} NoCompl{}",
        cap >> 19,
        power_limit(field(cap, 0x7f80u32), field(cap, 0x18000u32)),
        f(cap, 0x20000),
        f(cap, 0x40000)
    ));
    let ctl = regs.w(0x18);
    out.push(format!(
        "SltCtl:\tEnable: AttnBtn{} PwrFlt{} MRL{} PresDet{} CmdCplt{} HPIrq{} LinkChg{}",
        f(ctl, 0x1), f(ctl, 0x2), f(ctl, 0x4), f(ctl, 0x8), f(ctl, 0x10), f(ctl, 0x20), f(ctl, 0x1000)
    ));
    out.push(format!("\tControl: AttnInd {}, PwrInd {}, Power{} Interlock{}", indicator(field(ctl, 0xc0u16)), indicator(field(ctl, 0x300u16)), f(ctl, 0x400), f(ctl, 0x800)));
    let sta = regs.w(0x1a);
    out.push(format!(
        "SltSta:\tStatus: AttnBtn{} PowerFlt{} MRL{} CmdCplt{} PresDet{} Interlock{}",
        f(sta, 0x1), f(sta, 0x2), f(sta, 0x20), f(sta, 0x10), f(sta, 0x40), f(sta, 0x80)
    ));
    out.push(format!("\tChanged: MRL{} PresDet{} LinkState{}", f(sta, 0x4), f(sta, 0x8), f(sta, 0x100)));
}

fn root_lines(regs: &Regs, out: &mut Vec<String>) {
    out.push(format!("RootCap: CRSVisible{}", f(regs.w(0x1e), 0x1)));
    let ctl = regs.w(0x1c);
    out.push(format!("RootCtl: ErrCorrectable{} ErrNon-Fatal{} ErrFatal{} PMEIntEna{} CRSVisible{}", f(ctl, 0x1), f(ctl, 0x2), f(ctl, 0x4), f(ctl, 0x8), f(ctl, 0x10)));
    let sta = regs.l(0x20);
    out.push(format!("RootSta: PME ReqID {:04x}, PMEStatus{} PMEPending{}", sta & 0xffff, f(sta, 0x10000), f(sta, 0x20000)));
}

fn device2(regs: &Regs, kind: u8, has_memory_bar: bool, out: &mut Vec<String>) {
    let cap = regs.l(0x24);
    out.push(format!("DevCap2: Completion Timeout: {}, TimeoutDis{} NROPrPrP{} LTR{}", super::pcie::completion_timeout_ranges(cap & 0xf), f(cap, 0x10), f(cap, 0x400), f(cap, 0x800)));
    let obff = ["Not Supported", "Via message", "Via WAKE#", "Via message/WAKE#"][field(cap, 0xc0000u32) as usize];
    let mut line = format!("\t 10BitTagComp{} 10BitTagReq{} OBFF {obff}, ExtFmt{} EETLPPrefix{}", f(cap, 0x10000), f(cap, 0x20000), f(cap, 0x100000), f(cap, 0x200000));
    if cap & 0x200000 != 0 {
        let prefixes = field(cap, 0xc00000u32);
        line += &format!(", MaxEETLPPrefixes {}", if prefixes != 0 { prefixes } else { 4 });
    }
    out.push(line);
    let epr = ["Not Supported", "Dev Specific", "Form Factor Dev Specific", "Reserved"][field(cap, 0x300_0000u32) as usize];
    out.push(format!("\t EmergencyPowerReduction {epr}, EmergencyPowerReductionInit{}", f(cap, 0x400_0000)));
    let mut line = format!("\t FRS{}", f(cap, 0x8000_0000));
    if kind == ROOT_PORT {
        let cls = ["Not Supported", "64byte cachelines", "128byte cachelines", "Reserved"][field(cap, 0xc000u32) as usize];
        line += &format!(" LN System CLS {cls},");
    }
    if matches!(kind, ROOT_PORT | ENDPOINT) {
        line += " ";
        line += ["TPHComp- ExtTPHComp-", "TPHComp+ ExtTPHComp-", "", "TPHComp+ ExtTPHComp+"][field(cap, 0x3000u32) as usize];
    }
    let forwarding = matches!(kind, ROOT_PORT | DOWNSTREAM);
    if forwarding {
        line += &format!(" ARIFwd{}", f(cap, 0x20));
    }
    out.push(line);
    let switch_or_root = matches!(kind, ROOT_PORT | UPSTREAM | DOWNSTREAM);
    if switch_or_root || has_memory_bar {
        let mut line = "\t AtomicOpsCap:".to_string();
        if switch_or_root {
            line += &format!(" Routing{}", f(cap, 0x40));
        }
        if kind == ROOT_PORT || has_memory_bar {
            line += &format!(" 32bit{} 64bit{} 128bitCAS{}", f(cap, 0x80), f(cap, 0x100), f(cap, 0x200));
        }
        out.push(line);
    }
    let ctl = regs.w(0x28);
    let obff = ["Disabled", "Via message A", "Via message B", "Via WAKE#"][field(ctl, 0x6000u16) as usize];
    let mut line = format!(
        "DevCtl2: Completion Timeout: {}, TimeoutDis{} LTR{} 10BitTagReq{} OBFF {obff},",
        super::pcie::completion_timeout_value(ctl as u16 & 0xf),
        f(ctl, 0x10),
        f(ctl, 0x400),
        f(ctl, 0x1000)
    );
    if forwarding {
        line += &format!(" ARIFwd{}", f(ctl, 0x20));
    }
    out.push(line);
    let requester = matches!(kind, ROOT_PORT | ENDPOINT | ROOT_INTEGRATED_ENDPOINT | LEGACY_ENDPOINT);
    if switch_or_root || requester {
        let mut line = "\t AtomicOpsCtl:".to_string();
        if requester {
            line += &format!(" ReqEn{}", f(ctl, 0x40));
        }
        if switch_or_root {
            line += &format!(" EgressBlck{}", f(ctl, 0x80));
        }
        out.push(line);
    }
}

fn target_speed(code: u32) -> &'static str {
    match code {
        0 | 1 => "2.5GT/s",
        2 => "5GT/s",
        3 => "8GT/s",
        4 => "16GT/s",
        5 => "32GT/s",
        6 => "64GT/s",
        _ => "Unknown",
    }
}

fn deemphasis(code: u32) -> &'static str {
    ["-6dB", "-3.5dB"][code as usize & 1]
}

fn compliance_preset(code: u32) -> &'static str {
    [
        "-6dB de-emphasis, 0dB preshoot",
        "-3.5dB de-emphasis, 0dB preshoot",
        "-4.4dB de-emphasis, 0dB preshoot",
        "-2.5dB de-emphasis, 0dB preshoot",
        "0dB de-emphasis, 0dB preshoot",
        "0dB de-emphasis, 1.9dB preshoot",
        "0dB de-emphasis, 2.5dB preshoot",
        "-6.0dB de-emphasis, 3.5dB preshoot",
        "-3.5dB de-emphasis, 3.5dB preshoot",
        "0dB de-emphasis, 3.5dB preshoot",
    ]
    .get(code as usize)
    .copied()
    .unwrap_or("Unknown")
}

fn transmit_margin(code: u32) -> &'static str {
    match code {
        0 => "Normal Operating Range",
        1 => "800-1200mV(full-swing)/400-700mV(half-swing)",
        2..=5 => "200-400mV(full-swing)/100-200mV(half-swing)",
        _ => "Unknown",
    }
}

fn downstream_component(code: u32) -> &'static str {
    match code {
        0 => "Link Down - Not Determined",
        1 => "Link Down - Not Present",
        2 => "Link Down - Present",
        4 => "Link Up - Present",
        5 => "Link Up - Present and DRS Received",
        _ => "Reserved",
    }
}

fn link2(regs: &Regs, kind: u8, function_zero: bool, out: &mut Vec<String>) {
    let mut cap = 0;
    // Link Capabilities/Control 2 of endpoint functions other than 0 are reserved.
    if !matches!(kind, ENDPOINT | LEGACY_ENDPOINT) || function_zero {
        cap = regs.l(0x2c);
        if cap != 0 {
            out.push(format!(
                "LnkCap2: Supported Link Speeds: {}, Crosslink{} Retimer{} 2Retimers{} DRS{}",
                super::pcie::supported_speeds_label(cap),
                f(cap, 0x100),
                f(cap, 0x80_0000),
                f(cap, 0x100_0000),
                f(cap, 0x8000_0000)
            ));
        }
        let ctl = regs.w(0x30);
        let mut line = format!("LnkCtl2: Target Link Speed: {}, EnterCompliance{} SpeedDis{}", target_speed(u32::from(ctl & 0xf)), f(ctl, 0x10), f(ctl, 0x20));
        if kind == DOWNSTREAM {
            line += &format!(", Selectable De-emphasis: {}", deemphasis(field(ctl, 0x40u16)));
        }
        out.push(line);
        out.push(format!("\t Transmit Margin: {}, EnterModifiedCompliance{} ComplianceSOS{}", transmit_margin(field(ctl, 0x380u16)), f(ctl, 0x400), f(ctl, 0x800)));
        out.push(format!("\t Compliance Preset/De-emphasis: {}", compliance_preset(field(ctl, 0xf000u16))));
    }
    let sta = regs.w(0x32);
    out.push(format!(
        "LnkSta2: Current De-emphasis Level: {}, EqualizationComplete{} EqualizationPhase1{}",
        deemphasis(u32::from(sta & 1)),
        f(sta, 0x2),
        f(sta, 0x4)
    ));
    out.push(format!("\t EqualizationPhase2{} EqualizationPhase3{} LinkEqualizationRequest{}", f(sta, 0x8), f(sta, 0x10), f(sta, 0x20)));
    let crosslink = ["unsupported", "Upstream Port", "Downstream Port", "incomplete"][field(sta, 0x300u16) as usize];
    let mut line = format!("\t Retimer{} 2Retimers{} CrosslinkRes: {crosslink}", f(sta, 0x40), f(sta, 0x80));
    let downstream = matches!(kind, ROOT_PORT | DOWNSTREAM | PCI_TO_PCIE_BRIDGE);
    if downstream && cap & 0x8000_0000 != 0 {
        line += &format!(", DRS{}", f(sta, 0x8000));
        out.push(line);
        out.push(format!("\t DownstreamComp: {}", downstream_component(field(sta, 0x7000u16))));
    } else {
        out.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_limits_as_c_prints_them() {
        assert_eq!(power_limit(0, 0), "0W");
        assert_eq!(power_limit(75, 0), "75W");
        assert_eq!(power_limit(25, 1), "2.5W");
        assert_eq!(power_limit(0xff, 0), ">600W");
        assert_eq!(power_limit(0xf1, 0), "275W");
        assert_eq!(power_limit(3, 3), "0.003W");
        assert_eq!(power_limit(0xf1, 1), "24.1W");
    }

    #[test]
    fn downgraded_only_upstream() {
        assert_eq!(compare(ENDPOINT, 3, 4), " (downgraded)");
        assert_eq!(compare(ROOT_PORT, 3, 4), "");
        assert_eq!(compare(ROOT_PORT, 5, 4), " (overdriven)");
    }
}
