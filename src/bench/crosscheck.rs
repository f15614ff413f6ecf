//! The analytic model against the link simulator, point by point over a grid of links, payload
//! sizes, headers, transfer sizes and read conditions (`pcieperf crosscheck`, issue 20 item 4).
//!
//! Each point is one transfer, computed twice and independently: by `model::write::write_flow`
//! or `model::read::read_flow` (`Span::Steady`, the simulator's Ack/UpdateFC interval) and
//! stepped symbol by symbol through [`crate::link`]. The time compared is from the first request
//! or write TLP's first symbol to the last data TLP's last symbol. Outside the tolerance a point
//! gets an explanation only when the cause is shown, not guessed: the same point simulated again
//! without the suspected effect (finite credits and wire delay, the Ack timer) must agree, or
//! the gap must lie within the bound the effect allows (flit phase at Gen6, read requests behind
//! writes, requests sent before the measuring window).

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::link::{self, AckPolicy, ClassCredits, Credits, Direction, FcPolicy, Packet, SimConfig, TlpKind, Workload};
use crate::model::bidir::RequestWait;
use crate::model::{self, Accounting, Generation, HeaderFormat, Link, LinkParams, Span};

/// Schema of the crosscheck document.
pub const SCHEMA: &str = "pcieperf.crosscheck/1";

/// Agreement asked of model and simulation: 0.5 %.
pub const TOLERANCE: f64 = 0.005;

/// Both at once compares steady rates: where fewer write TLPs or completions than this cross
/// while both streams run (a short transfer; writes that end while the first completions are
/// still on their way), there is no steady state, and the point is not compared. (Reads that
/// repeat in whole rounds of their tags are measured over those rounds, which need no count.)
pub const STEADY_WINDOW_TLPS: u64 = 64;

/// What a point transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Device DMA writes to host memory (posted).
    Write,
    /// Device DMA reads of host memory (requests up, completions down).
    Read,
    /// Both at once, compared as each stream's rate in the steady state (from the first
    /// completion to the end of the stream that finishes first) against
    /// `model::bidir::bidirectional` of back-to-back transfers.
    Both,
}

impl crate::named::Named for Kind {
    const ALL: &'static [Self] = &[Kind::Write, Kind::Read, Kind::Both];
    fn name(self) -> &'static str {
        match self {
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Both => "both",
        }
    }
}

/// The grid: every combination of generation, width, MaxPayload, header and kind; sizes and the
/// read conditions (MRRS, tags, latency) rotate through their lists so that every value appears
/// while the points stay about `sizes_per_point` per combination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    pub generations: Vec<Generation>,
    pub widths: Vec<u32>,
    pub mps_bytes: Vec<u64>,
    pub headers: Vec<HeaderFormat>,
    pub kinds: Vec<Kind>,
    pub sizes_bytes: Vec<u64>,
    pub mrrs_bytes: Vec<u64>,
    pub tags: Vec<u32>,
    pub latencies_ns: Vec<f64>,
    /// Sizes simulated per combination (taken in turn from `sizes_bytes`).
    pub sizes_per_point: usize,
    /// A point whose size would need more TLPs takes the largest listed size that needs fewer:
    /// this bounds the simulated time of the whole grid.
    pub max_tlps_per_point: u64,
    /// One Ack and one UpdateFC per this many TLPs on both sides (the model is told the same).
    pub ack_every_tlps: u32,
    /// Posted and non-posted data credits (16 bytes each) both sides advertise; `None`: so many
    /// that flow control never stalls.
    pub credits: Option<u64>,
    /// Flight time plus receive pipeline, one way, in ns (the model does not know it).
    pub wire_delay_ns: f64,
}

impl Default for Grid {
    /// Gen1–Gen6, x1–x16, every MaxPayload, 3DW and 4DW, 64 B to 16 MiB, writes, reads and both
    /// at once (one point per stream and combination at the largest size within the TLP budget).
    fn default() -> Self {
        Grid {
            generations: Generation::ALL.to_vec(),
            widths: vec![1, 2, 4, 8, 16],
            mps_bytes: model::PAYLOAD_SIZES.to_vec(),
            headers: vec![HeaderFormat::Dw3, HeaderFormat::Dw4],
            kinds: vec![Kind::Write, Kind::Read, Kind::Both],
            sizes_bytes: vec![64, 1000, 4096, 65_536, 1 << 20, 16 << 20],
            mrrs_bytes: vec![128, 512, 4096],
            tags: vec![1, 8, 32, 256],
            latencies_ns: vec![100.0, 500.0, 2000.0],
            sizes_per_point: 2,
            max_tlps_per_point: 20_000,
            ack_every_tlps: 1,
            credits: None,
            wire_delay_ns: 0.0,
        }
    }
}

/// One transfer, modelled and simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub kind: Kind,
    /// For `Both`: the stream this point compares (its rate, as the time to move `size_bytes`).
    pub stream: Option<Kind>,
    pub link: String,
    pub mps_bytes: u64,
    pub mrrs_bytes: u64,
    /// "3dw" or "4dw" (request headers; completions are always 3DW).
    pub header: String,
    pub tags: u32,
    pub latency_ns: f64,
    pub size_bytes: u64,
    pub model_ns: f64,
    pub sim_ns: f64,
    /// sim / model − 1, in percent: positive when the simulation is slower.
    pub difference_percent: f64,
    /// Why the point is outside the tolerance, where a second simulation showed it.
    pub explanation: Option<String>,
}

impl Point {
    pub fn agrees(&self) -> bool {
        self.difference_percent.abs() <= TOLERANCE * 100.0
    }

    /// Outside the tolerance with no cause shown.
    pub fn unexplained(&self) -> bool {
        !self.agrees() && self.explanation.is_none()
    }
}

/// The crosscheck document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crosscheck {
    pub schema: String,
    pub grid: Grid,
    pub tolerance_percent: f64,
    /// What the grid asked for that was not run, and why (one line each).
    pub skipped: Vec<String>,
    /// Points whose size was lowered to stay within `max_tlps_per_point`.
    pub sizes_lowered: usize,
    pub points: Vec<Point>,
}

impl Crosscheck {
    pub fn unexplained(&self) -> usize {
        self.points.iter().filter(|p| p.unexplained()).count()
    }

    pub fn explained(&self) -> usize {
        self.points.iter().filter(|p| !p.agrees() && !p.unexplained()).count()
    }

    /// The point with the largest difference in either direction.
    pub fn worst(&self) -> Option<&Point> {
        self.points.iter().max_by(|a, b| a.difference_percent.abs().total_cmp(&b.difference_percent.abs()))
    }
}

/// Run the grid. Bad values (an empty list, a width or size the link does not allow) are an
/// [`InvalidInput`] before anything is simulated.
pub fn run(grid: &Grid) -> Result<Crosscheck, InvalidInput> {
    check(grid)?;
    let mut skipped = Vec::new();
    let mut links = Vec::new();
    for &generation in &grid.generations {
        for &width in &grid.widths {
            let link = Link { generation, width };
            match SimConfig::new(link).validate() {
                Ok(()) => links.push(link),
                Err(why) if !skipped.iter().any(|s: &String| s.starts_with(&format!("{generation}:"))) => {
                    skipped.push(format!("{generation}: {why}"))
                }
                Err(_) => {}
            }
        }
    }
    let mut document = Crosscheck {
        schema: SCHEMA.into(),
        grid: grid.clone(),
        tolerance_percent: TOLERANCE * 100.0,
        skipped,
        sizes_lowered: 0,
        points: Vec::new(),
    };
    let (mut turn, mut too_short) = (0usize, 0usize);
    for link in links {
        for &mps in &grid.mps_bytes {
            for &header in &grid.headers {
                for &kind in &grid.kinds {
                    // Both at once needs a steady state: one point per combination, the largest size.
                    let sizes = if kind == Kind::Both { 1 } else { grid.sizes_per_point };
                    for _ in 0..sizes {
                        let case = grid.case(turn, link, mps, header, kind);
                        let wanted = match kind {
                            Kind::Both => grid.sizes_bytes.iter().copied().max().unwrap_or(1),
                            _ => grid.sizes_bytes[turn % grid.sizes_bytes.len()],
                        };
                        let (size, lowered) = grid.size_within_budget(&case, kind, wanted);
                        turn += 1;
                        document.sizes_lowered += lowered as usize;
                        let compared = points(&case, kind, size)?;
                        too_short += compared.is_empty() as usize;
                        document.points.extend(compared);
                    }
                }
            }
        }
    }
    if too_short > 0 {
        document.skipped.push(format!(
            "both at once: {too_short} combinations with fewer than {STEADY_WINDOW_TLPS} write TLPs or completions, or not one whole round of the read tags, while both streams ran (no steady window to compare rates in)"
        ));
    }
    Ok(document)
}

fn check(grid: &Grid) -> Result<(), InvalidInput> {
    let lists = [
        ("generations", grid.generations.len()),
        ("widths", grid.widths.len()),
        ("MaxPayload sizes", grid.mps_bytes.len()),
        ("headers", grid.headers.len()),
        ("kinds", grid.kinds.len()),
        ("sizes", grid.sizes_bytes.len()),
        ("MaxReadRequest sizes", grid.mrrs_bytes.len()),
        ("tag counts", grid.tags.len()),
        ("latencies", grid.latencies_ns.len()),
    ];
    if let Some((what, _)) = lists.iter().find(|(_, n)| *n == 0) {
        return Err(InvalidInput::new(format!("invalid crosscheck grid: no {what}")));
    }
    if grid.sizes_per_point == 0 || grid.max_tlps_per_point == 0 || grid.ack_every_tlps == 0 {
        return Err(InvalidInput::new("invalid crosscheck grid: sizes per point, TLPs per point and the Ack interval must be 1 or more"));
    }
    if let Some(&size) = grid.sizes_bytes.iter().find(|&&s| s == 0 || s > 1 << 30) {
        return Err(InvalidInput::new(format!("invalid crosscheck size {size} bytes: allowed 1 B to 1 GiB")));
    }
    // Everything else (widths, payload sizes, tags, latencies, credits) the simulator checks.
    let config = SimConfig::new("gen1x1".parse().expect("a valid link"));
    for &width in &grid.widths {
        SimConfig { link: Link { width, ..config.link }, ..config.clone() }.validate()?;
    }
    for &mps in &grid.mps_bytes {
        SimConfig { mps_bytes: mps, ..config.clone() }.validate()?;
    }
    for (&mrrs, (&tags, &latency)) in grid.mrrs_bytes.iter().zip(grid.tags.iter().cycle().zip(grid.latencies_ns.iter().cycle())) {
        let case = Grid { mrrs_bytes: vec![mrrs], tags: vec![tags], latencies_ns: vec![latency], ..grid.clone() };
        let largest_mps = grid.mps_bytes.iter().copied().max().unwrap_or(128);
        case.case(0, config.link, largest_mps, HeaderFormat::Dw3, Kind::Read).validate()?;
    }
    Ok(())
}

impl Grid {
    /// The simulator's configuration of the `turn`th point: read conditions in rotation, each
    /// list stepping when the one before it (sizes, MRRS, tags) has gone round, so that their
    /// values meet in every combination.
    fn case(&self, turn: usize, link: Link, mps: u64, header: HeaderFormat, kind: Kind) -> SimConfig {
        let mut config = SimConfig::new(link);
        config.record = false;
        config.mps_bytes = mps;
        config.header = header;
        if kind != Kind::Write {
            let mut step = self.sizes_bytes.len();
            config.mrrs_bytes = self.mrrs_bytes[(turn / step) % self.mrrs_bytes.len()];
            step *= self.mrrs_bytes.len();
            config.tags = self.tags[(turn / step) % self.tags.len()];
            step *= self.tags.len();
            config.host_completion_latency_ns = self.latencies_ns[(turn / step) % self.latencies_ns.len()];
        }
        let n = self.ack_every_tlps;
        let credits = match self.credits {
            Some(data) => {
                let class = ClassCredits::Finite { header: data.div_ceil(mps / 16).max(1), data };
                Credits { posted: class, non_posted: class, completion: ClassCredits::Infinite }
            }
            None => Credits::large(),
        };
        let receiver = link::Receiver { ack: AckPolicy::EveryTlps(n), fc: FcPolicy::EveryTlps(n), credits };
        config.host_rx = receiver;
        config.device_rx = receiver;
        config.wire_delay_ns = self.wire_delay_ns;
        if self.wire_delay_ns > 0.0 {
            // The specification's REPLAY_TIMER assumes a short link: over a long wire it would
            // run out before an Ack can come back and replay TLPs that arrived whole. The timer
            // is lengthened by the round trip, as a link with retimers adjusts it.
            let phy = link::phy::Phy::new(config.link);
            let spec_ns = link::replay::spec_timeout_ns(config.link, config.mps_bytes, phy.ns(phy.symbol_ticks()));
            config.replay.timeout_ns = Some(spec_ns + 2.0 * self.wire_delay_ns);
        }
        config
    }

    /// `size`, or the largest listed size below it whose TLPs stay within the budget (and
    /// whether it was lowered).
    fn size_within_budget(&self, config: &SimConfig, kind: Kind, size: u64) -> (u64, bool) {
        let streams = if kind == Kind::Both { 2 } else { 1 };
        let tlps = |bytes: u64| streams * bytes.div_ceil(config.mps_bytes.min(config.mrrs_bytes).min(4096));
        if tlps(size) <= self.max_tlps_per_point {
            return (size, false);
        }
        let smaller = self.sizes_bytes.iter().copied().filter(|&s| tlps(s) <= self.max_tlps_per_point).max();
        (smaller.unwrap_or(config.mps_bytes), true)
    }
}

/// Model and simulate one point (two for both at once), and explain where they disagree.
fn points(config: &SimConfig, kind: Kind, size_bytes: u64) -> Result<Vec<Point>, InvalidInput> {
    let simulated = simulated_ns(config, kind, size_bytes)?;
    let mut points = Vec::new();
    // No simulated time: both at once without a steady window (see [`STEADY_WINDOW_TLPS`]).
    for (&sim_ns, (stream, model_ns)) in simulated.iter().zip(modelled_ns(config, kind, size_bytes)) {
        let i = points.len();
        let difference = sim_ns / model_ns - 1.0;
        let explanation = match (difference.abs() > TOLERANCE, stream) {
            (false, _) => None,
            (true, Some(stream)) => explain_both(config, stream, size_bytes, sim_ns)
                .or(explain_requests_before_window(config, size_bytes, model_ns, sim_ns))
                .or(explain(config, kind, i, size_bytes, sim_ns)?),
            (true, None) => explain(config, kind, i, size_bytes, sim_ns)?
                .or(explain_ack_timer(config, kind, i, size_bytes, model_ns, sim_ns)?)
                .or(explain_flit_phase(config, kind, size_bytes, model_ns, sim_ns)),
        };
        points.push(Point {
            kind,
            stream,
            link: config.link.to_string(),
            mps_bytes: config.mps_bytes,
            mrrs_bytes: config.mrrs_bytes,
            header: crate::named::Named::name(config.header).into(),
            tags: config.tags,
            latency_ns: config.host_completion_latency_ns,
            size_bytes,
            model_ns,
            sim_ns,
            difference_percent: difference * 100.0,
            explanation,
        });
    }
    Ok(points)
}

/// The model's parameters for the simulator's configuration.
pub fn model_params(config: &SimConfig) -> LinkParams {
    let every = match config.host_rx.ack {
        AckPolicy::EveryTlps(n) => Some(n),
        _ => Some(1),
    };
    LinkParams {
        link: config.link,
        mps_bytes: config.mps_bytes,
        mrrs_bytes: config.mrrs_bytes,
        rcb_bytes: config.rcb_bytes,
        header: config.header,
        ecrc: config.ecrc,
        accounting: Accounting::WireAccurate,
        read_latency_ns: config.host_completion_latency_ns,
        tags: config.tags,
        include_skp: true,
        include_dllp: true,
        start_addr: 0,
        dllp_every_tlps: every,
        completion_bytes: None,
        in_flight: 1,
    }
}

/// The model's time per stream: one for a write or a read; (write, read) for both at once,
/// each the time its stream takes for `size_bytes` at the rate it gets while both run.
fn modelled_ns(config: &SimConfig, kind: Kind, size_bytes: u64) -> Vec<(Option<Kind>, f64)> {
    let params = model_params(config);
    match (kind, credit_loop(config)) {
        (Kind::Write, Some(credits)) => vec![(None, model::credit::write_ns(&params, &credits, size_bytes))],
        (Kind::Read, Some(credits)) => vec![(None, model::credit::read_ns(&params, &credits, size_bytes))],
        (Kind::Write, None) => vec![(None, model::write::isolated_write_ns(&params, size_bytes))],
        (Kind::Read, None) => vec![(None, model::read::read_flow(&params, size_bytes, Span::Steady).duration_ns)],
        (Kind::Both, _) => {
            let [write_ns, read_ns] = bidirectional_ns(&params, size_bytes);
            vec![(Some(Kind::Write), write_ns), (Some(Kind::Read), read_ns)]
        }
    }
}

/// The model's credit input for the simulator's configuration: the host's advertised posted
/// and non-posted credits, the wire delay and the UpdateFC interval; `None` when credits are
/// large and the wire has no delay (the model's default then holds).
pub fn credit_loop(config: &SimConfig) -> Option<model::credit::CreditLoop> {
    let class = |credits: ClassCredits| match credits {
        ClassCredits::Finite { header, data } => Some(model::credit::ClassCredits { header, data }),
        ClassCredits::Infinite => None,
    };
    let credits = &config.host_rx.credits;
    if *credits == Credits::large() && config.wire_delay_ns == 0.0 {
        return None;
    }
    let every = match config.host_rx.fc {
        FcPolicy::EveryTlps(n) => n,
        FcPolicy::Timer { .. } => 1,
    };
    Some(model::credit::CreditLoop {
        posted: class(credits.posted),
        non_posted: class(credits.non_posted),
        wire_delay_ns: config.wire_delay_ns,
        update_fc_every_tlps: every,
    })
}

/// `model::bidir::bidirectional` of back-to-back transfers (the first completion latency
/// overlaps data, as in the simulation's steady window), as [write, read] times for `size_bytes`.
fn bidirectional_ns(params: &LinkParams, size_bytes: u64) -> [f64; 2] {
    bidirectional_waiting_ns(params, size_bytes, RequestWait::Average)
}

fn bidirectional_waiting_ns(params: &LinkParams, size_bytes: u64, wait: RequestWait) -> [f64; 2] {
    let steady = LinkParams { in_flight: params.tags.max(2), ..params.clone() };
    let both = model::bidir::bidirectional_waiting(&steady, size_bytes, wait);
    let ns = |mbps: f64| size_bytes as f64 * 1e3 / mbps;
    [ns(both.write.mbps), ns(both.read.mbps)]
}

/// Both at once: a read request (and the Ack before it) cannot start inside a write TLP. The
/// model charges the wait by the schedule's phase (`model::bidir`); where its phase rule does
/// not hold exactly, the point is explained when the simulation lies between the model with no
/// wait and with every request delayed by a whole write TLP.
fn explain_both(config: &SimConfig, stream: Kind, size_bytes: u64, sim_ns: f64) -> Option<String> {
    let params = model_params(config);
    let mut write_tlp_ns = model::bidir::write_tlp_ns(&params, size_bytes);
    if config.link.generation == Generation::Gen6 {
        // In flit mode the request rides in the flit after the write TLP's last one, and its
        // completion waits for the completer's next flit boundary (see `explain_flit_phase`).
        let flit_ns = model::flit::flit_ns(config.link);
        let in_flits_ns = write_tlp_ns * model::flit::FLIT_BYTES as f64 / model::flit::FLIT_TLP_BYTES as f64;
        write_tlp_ns = model::flit::whole_flits_ns(config.link, in_flits_ns) + 2.0 * flit_ns;
    }
    let i = if stream == Kind::Write { 0 } else { 1 };
    let none_ns = bidirectional_waiting_ns(&params, size_bytes, RequestWait::Ns(0.0))[i];
    let whole_ns = bidirectional_waiting_ns(&params, size_bytes, RequestWait::Ns(write_tlp_ns))[i];
    let (low, high) = (none_ns.min(whole_ns), none_ns.max(whole_ns));
    let name = crate::named::Named::name(stream);
    if sim_ns >= low * (1.0 - TOLERANCE) && sim_ns <= high * (1.0 + TOLERANCE) {
        return Some(format!(
            "read requests wait behind write TLPs ({write_tlp_ns:.1} ns each on the requester's lanes): with every request delayed by 0 to one write TLP the model gives {low:.1}–{high:.1} ns for the {name} stream"
        ));
    }
    // Tags that all free within one write TLP can lock into one group per round, each round
    // then ending on a write TLP boundary after the last tag frees: more than one write TLP of
    // wait for the tags that free first (`model::bidir::RequestWait::Group`). Not at Gen6,
    // whose flit grid the group round does not follow.
    if config.link.generation == Generation::Gen6 {
        return None;
    }
    let group_ns = bidirectional_waiting_ns(&params, size_bytes, RequestWait::Group)[i];
    let (low, high) = (low.min(group_ns), high.max(group_ns));
    if group_ns == whole_ns || sim_ns < low * (1.0 - TOLERANCE) || sim_ns > high * (1.0 + TOLERANCE) {
        return None;
    }
    Some(format!(
        "read requests go out in one group per round behind a write TLP ({write_tlp_ns:.1} ns each on the requester's lanes): the tags free within one write TLP, and the round locks to the writes; with 0 wait to that locked round the model gives {low:.1}–{high:.1} ns for the {name} stream ({group_ns:.1} ns locked)"
    ))
}

/// Both at once: the read requests that fit in the tags (all of them, for a transfer of at most
/// `tags` requests) and the completer's Acks and UpdateFCs for them go out before the first
/// completion, i.e. before the window in which [`steady_both_ns`] measures the rates, while the
/// model spreads their cost over the transfer. Both streams are then faster in the window by up
/// to those requests' share of the payload's link bytes.
fn explain_requests_before_window(config: &SimConfig, size_bytes: u64, model_ns: f64, sim_ns: f64) -> Option<String> {
    if sim_ns >= model_ns {
        return None;
    }
    let requests = size_bytes.div_ceil(config.mrrs_bytes).max(1);
    let before = requests.min(config.tags as u64);
    let params = model_params(config);
    let request_bytes = (params.framing_bytes() + params.header.bytes()) as f64 + 2.0 * model::dllp::bytes(config.link, 1.0);
    let share = before as f64 * request_bytes / size_bytes as f64;
    if 1.0 - sim_ns / model_ns > share {
        return None;
    }
    Some(format!(
        "{before} of the {requests} read requests (as many as the {} tags allow) went out before the first completion, outside the window the rates are measured in; the model spreads them, and their DLLPs, over the transfer ({:.2} % of the payload's link bytes)",
        config.tags,
        share * 100.0
    ))
}

/// The simulation's times, in the order of [`modelled_ns`]: first TLP start (upstream) to the
/// last data TLP's end for one stream; for both at once, see [`steady_both_ns`].
pub fn simulated_ns(config: &SimConfig, kind: Kind, size_bytes: u64) -> Result<Vec<f64>, InvalidInput> {
    let workload = match kind {
        Kind::Write => Workload::DmaWrite { addr: 0, bytes: size_bytes },
        Kind::Read => Workload::DmaRead { addr: 0, bytes: size_bytes },
        Kind::Both => {
            let config = SimConfig { record: true, ..config.clone() };
            let outcome = link::simulate(&config, &Workload::DmaBoth { write_addr: 0, write_bytes: size_bytes, read_addr: 0, read_bytes: size_bytes })?;
            return Ok(steady_both_ns(&outcome.record, size_bytes, config.mrrs_bytes, config.tags).map(Vec::from).unwrap_or_default());
        }
    };
    let outcome = link::simulate(config, &workload)?;
    let up = outcome.direction(Direction::Upstream);
    let data = if kind == Kind::Write { up } else { outcome.direction(Direction::Downstream) };
    Ok(vec![data.last_tlp_end_ns - up.first_tlp_start_ns.unwrap_or(0.0)])
}

/// Writes and reads at once, from the record: each stream's payload rate while both run —
/// between the end of the first completion and the end of whichever stream finishes first — as
/// the time `size_bytes` would take at that rate: [write, read]. Where the reads repeat in whole
/// rounds of their tags ([`rounds`]), both rates are taken over those rounds: the schedule
/// repeats each round, and a least-squares slope over a few rounds depends on where the window
/// cuts one (+3.7 % at Gen6 x16, 32 tags, 2 µs, a staircase of bursts; −2.0 % at Gen3 x16,
/// MRRS 4096, 8 tags, 2 µs, 64 KiB, completions that stream but for a 3 % gap, over 1.2 rounds).
/// Where the tags drift against each other (no whole rounds) and are reused, the reads are
/// taken by their tag cycles ([`tag_cycles_ns`]): the slope over a few bursts of completions
/// read 1.4 % fast at Gen6 x16, 256 tags of 512 B, 2 µs (a tag cycle of 1983 ns, shorter than
/// the latency), where the cycles take 2010–2022 ns. The writes are slopes there, and both are
/// slopes where tags are not reused. A window that ends before the first tag's
/// second round has begun holds no steady read rate at all (a burst of the first round only),
/// so the point is not compared.
fn steady_both_ns(record: &[link::Crossing], size_bytes: u64, mrrs_bytes: u64, tags: u32) -> Option<[f64; 2]> {
    let tlps = |kind: TlpKind| {
        record.iter().filter_map(move |c| match c.packet {
            Packet::Tlp(t) if t.kind == kind => Some((c.end_ns, t)),
            _ => None,
        })
    };
    let from_ns = tlps(TlpKind::CompletionData).map(|(end, _)| end).fold(f64::INFINITY, f64::min);
    let last = |kind| tlps(kind).map(|(end, _)| end).fold(0.0, f64::max);
    let until_ns = last(TlpKind::MemWrite).min(last(TlpKind::CompletionData));
    let slope_ns = |kind: TlpKind| {
        let mut delivered = 0u64;
        let points: Vec<(f64, f64)> = tlps(kind)
            .filter(|(end, _)| *end >= from_ns && *end <= until_ns)
            .map(|(end, t)| {
                delivered += t.len_bytes;
                (end, delivered as f64)
            })
            .collect();
        let slope = least_squares_slope(&points);
        (points.len() as u64 >= STEADY_WINDOW_TLPS && slope > 0.0).then(|| size_bytes as f64 / slope)
    };
    let slope_write_ns = slope_ns(TlpKind::MemWrite)?;
    let tags_reused = size_bytes.div_ceil(mrrs_bytes) > tags as u64;
    let [write_ns, read_ns] = match rounds(record, from_ns, until_ns, mrrs_bytes, tags) {
        Rounds::Whole { until_ns: rounds_until_ns, bytes, .. } => {
            let writes = tlps(TlpKind::MemWrite).map(|(end, t)| (end, t.len_bytes));
            let write_ns = whole_tlps_ns(writes, from_ns, rounds_until_ns, size_bytes).unwrap_or(slope_write_ns);
            [write_ns, size_bytes as f64 * (rounds_until_ns - from_ns) / bytes as f64]
        }
        Rounds::NotYet if tags_reused => return None,
        Rounds::Irregular if tags_reused => {
            // The window holds enough completions, as for a slope.
            slope_ns(TlpKind::CompletionData)?;
            [slope_write_ns, tag_cycles_ns(record, from_ns, until_ns, size_bytes, mrrs_bytes, tags)?]
        }
        _ => [slope_write_ns, slope_ns(TlpKind::CompletionData)?],
    };
    Some([write_ns, read_ns])
}

/// A read stream whose tags drift against each other (no whole rounds), by Little's law: every
/// tag is always in use (a freed tag sends its next request), so the stream moves tags × MRRS
/// bytes per mean tag cycle — the time from one request's first completion to the next's on the
/// same tag — as the time `size_bytes` would take. Cycles wholly inside the window count.
/// `None` with fewer cycles than tags (not one cycle per tag on average).
fn tag_cycles_ns(record: &[link::Crossing], from_ns: f64, until_ns: f64, size_bytes: u64, mrrs_bytes: u64, tags: u32) -> Option<f64> {
    let mut opened: std::collections::HashMap<u16, f64> = std::collections::HashMap::new();
    let (mut cycles, mut total_ns) = (0u64, 0.0);
    for crossing in record.iter().filter(|c| c.end_ns >= from_ns && c.end_ns <= until_ns) {
        let Packet::Tlp(t) = crossing.packet else { continue };
        if t.kind != TlpKind::CompletionData || t.addr % mrrs_bytes != 0 {
            continue;
        }
        if let Some(before_ns) = opened.insert(t.tag, crossing.end_ns) {
            cycles += 1;
            total_ns += crossing.end_ns - before_ns;
        }
    }
    (cycles >= tags as u64).then(|| size_bytes as f64 * (total_ns / cycles as f64) / (tags as u64 * mrrs_bytes) as f64)
}

/// A stream's rate over a window of whole read rounds, as the time `size_bytes` would take:
/// from the end of its first TLP in the window to the end of its last, over the bytes of the
/// TLPs after the first. The schedule repeats each round (requests and Acks of the reads come
/// in bursts among the writes), so a rate over whole rounds sees each burst once; a slope does
/// not see a burst at the window's start at all (it shifts every later point alike): −0.53 %
/// at Gen3 x16, MPS 512, 8 tags, 2 µs, 64 KiB, a window of 1.2 rounds. `None` with fewer than
/// two TLPs (the window is whole rounds, which [`rounds`] found; its TLP count does not matter).
fn whole_tlps_ns(tlps: impl Iterator<Item = (f64, u64)>, from_ns: f64, until_ns: f64, size_bytes: u64) -> Option<f64> {
    let inside: Vec<(f64, u64)> = tlps.filter(|(end, _)| *end >= from_ns && *end <= until_ns).collect();
    let (&(first_ns, _), &(last_ns, _)) = (inside.first()?, inside.last()?);
    let bytes: u64 = inside[1..].iter().map(|(_, len)| len).sum();
    (inside.len() >= 2 && bytes > 0).then(|| size_bytes as f64 * (last_ns - first_ns) / bytes as f64)
}

/// What the window holds of a read stream's rounds (one request per tag, answered a latency later).
#[derive(Debug, PartialEq)]
enum Rounds {
    /// The first completion's tag opens no later request in the window.
    NotYet,
    /// Rounds that delivered more or less than one request per tag: the tags drift against
    /// each other, and the completions stream.
    Irregular,
    /// Whole rounds, from the first completion to the last one that opens a request on the
    /// same tag, each delivering exactly `tags` × MRRS bytes: `bytes` arrived after the first
    /// completion, up to `until_ns`.
    Whole { until_ns: f64, bytes: u64 },
}

fn rounds(record: &[link::Crossing], from_ns: f64, until_ns: f64, mrrs_bytes: u64, tags: u32) -> Rounds {
    let completions = record.iter().filter_map(|c| match c.packet {
        Packet::Tlp(t) if t.kind == TlpKind::CompletionData => Some((c, t)),
        _ => None,
    });
    let Some((_, first)) = completions.clone().find(|(c, _)| c.end_ns == from_ns) else { return Rounds::NotYet };
    let round_bytes = tags as u64 * mrrs_bytes;
    let (mut round, mut total, mut last_ns) = (0, 0, None);
    for (crossing, t) in completions.filter(|(c, _)| c.end_ns > from_ns && c.end_ns <= until_ns) {
        round += t.len_bytes;
        if t.tag == first.tag && t.addr % mrrs_bytes == first.addr % mrrs_bytes {
            // This completion opens the next round: a repeating schedule delivered one request
            // per tag since the previous opening.
            if round != round_bytes {
                return Rounds::Irregular;
            }
            total += round;
            round = 0;
            last_ns = Some(crossing.end_ns);
        }
    }
    match last_ns {
        None => Rounds::NotYet,
        Some(ns) => Rounds::Whole { until_ns: ns, bytes: total },
    }
}

/// Slope of the least-squares line through `points` (0 with fewer than two).
fn least_squares_slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mean_x, mean_y) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let covariance: f64 = points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    if variance > 0.0 { covariance / variance } else { 0.0 }
}

/// The cause of a disagreement, shown by simulating the point again without it: the model is
/// told finite credits and the wire delay ([`credit_loop`]), but where its credit term and the
/// simulation still differ, the same point with large credits and no wire must agree with the
/// model without them for the gap to be put on the credit loop.
fn explain(config: &SimConfig, kind: Kind, stream: usize, size_bytes: u64, sim_ns: f64) -> Result<Option<String>, InvalidInput> {
    let finite = config.host_rx.credits != Credits::large();
    if !finite && config.wire_delay_ns == 0.0 {
        return Ok(None);
    }
    let mut without = config.clone();
    for rx in [&mut without.host_rx, &mut without.device_rx] {
        rx.credits = Credits::large();
    }
    without.wire_delay_ns = 0.0;
    let sim_without_ns = simulated_ns(&without, kind, size_bytes)?[stream];
    let model_ns = modelled_ns(&without, kind, size_bytes)[stream].1;
    if (sim_without_ns / model_ns - 1.0).abs() > TOLERANCE {
        return Ok(None);
    }
    let credits = match config.host_rx.credits.posted {
        ClassCredits::Finite { data, .. } => format!("{data} data credits ({} B)", data * 16),
        ClassCredits::Infinite => "infinite credits".into(),
    };
    Ok(Some(format!(
        "flow control: {credits} with a {} ns wire each way; with large credits and no wire delay the simulation takes {:.1} ns ({:+.3} % of the model without them), so the gap lies in the credit loop and flight time ({:.1} ns of the simulation)",
        config.wire_delay_ns,
        sim_without_ns,
        (sim_without_ns / model_ns - 1.0) * 100.0,
        sim_ns - sim_without_ns
    )))
}

/// Flit mode: the model puts every phase of a read's round trip on whole flits as if the two
/// directions' flit grids were aligned (`model::flit::whole_flits_ns`); in the simulation each
/// direction's grid moves by its own SKPs, so a completion waits anywhere from 0 to one flit for
/// the completer's next boundary. The point is explained when the gap is within one flit per
/// round trip (and one for the transfer's end).
fn explain_flit_phase(config: &SimConfig, kind: Kind, size_bytes: u64, model_ns: f64, sim_ns: f64) -> Option<String> {
    if config.link.generation != Generation::Gen6 {
        return None;
    }
    let round_trips = match kind {
        Kind::Read => {
            let requests = size_bytes.div_ceil(config.mrrs_bytes).max(1);
            requests.div_ceil(config.tags as u64)
        }
        _ => 0,
    };
    let flit_ns = model::flit::flit_ns(config.link);
    let bound_ns = (round_trips + 1) as f64 * flit_ns;
    if (sim_ns - model_ns).abs() > bound_ns {
        return None;
    }
    Some(format!(
        "flit phase: each of the {round_trips} round trips may wait 0 to one flit ({flit_ns:.1} ns) for the completer's flit boundary, which SKPs shift on each direction separately; the gap ({:+.1} ns) is within {bound_ns:.1} ns",
        sim_ns - model_ns
    ))
}

/// With Acks coalesced over N TLPs, a group that never fills (one read request in flight at a
/// time) is acknowledged when the REPLAY_TIMER would otherwise run out, as the AckNak latency
/// timer does: more Acks than the model's one per N. Shown by simulating the point again with the
/// replay timer out of reach, so only the coalescing count sends Acks.
fn explain_ack_timer(config: &SimConfig, kind: Kind, stream: usize, size_bytes: u64, model_ns: f64, sim_ns: f64) -> Result<Option<String>, InvalidInput> {
    let coalesced = [&config.host_rx, &config.device_rx].iter().any(|rx| matches!(rx.ack, AckPolicy::EveryTlps(n) if n > 1));
    if !coalesced {
        return Ok(None);
    }
    let mut without = config.clone();
    without.replay.timeout_ns = Some(1e15);
    let sim_without_ns = simulated_ns(&without, kind, size_bytes)?[stream];
    if (sim_without_ns / model_ns - 1.0).abs() > TOLERANCE {
        return Ok(None);
    }
    Ok(Some(format!(
        "Ack timing: Acks of coalescing groups that never fill go out before the replay timer runs out, more than the model's one per group; with the replay timer out of reach the simulation takes {sim_without_ns:.1} ns ({:+.3} % of the model), so those Acks account for {:.1} ns",
        (sim_without_ns / model_ns - 1.0) * 100.0,
        sim_ns - sim_without_ns
    )))
}

#[cfg(test)]
mod tests {
    //! Each explanation both ways (docs/findings.md, the crosscheck family of the audit): given
    //! a gap its cause allows, it is named; given one it does not, or a point it does not apply
    //! to, it stays silent and the point is left unexplained.

    use super::*;

    fn config(grid: &Grid, link: &str, mps: u64, kind: Kind) -> SimConfig {
        grid.case(0, link.parse().unwrap(), mps, HeaderFormat::Dw3, kind)
    }

    #[test]
    fn the_flit_phase_explains_only_a_gen6_gap_within_one_flit_per_round_trip() {
        let grid = Grid::default();
        let gen6 = config(&grid, "gen6x16", 256, Kind::Read);
        let flit_ns = model::flit::flit_ns(gen6.link);
        let round_trips = 4096u64.div_ceil(gen6.mrrs_bytes).div_ceil(u64::from(gen6.tags));
        let within = explain_flit_phase(&gen6, Kind::Read, 4096, 1000.0, 1000.0 + 0.5 * flit_ns);
        assert!(within.as_deref().is_some_and(|e| e.starts_with("flit phase")), "{within:?}");
        let beyond_ns = (round_trips + 2) as f64 * flit_ns;
        assert_eq!(explain_flit_phase(&gen6, Kind::Read, 4096, 1000.0, 1000.0 + beyond_ns), None);
        let gen3 = config(&grid, "gen3x16", 256, Kind::Read);
        assert_eq!(explain_flit_phase(&gen3, Kind::Read, 4096, 1000.0, 1000.0 + 0.5 * flit_ns), None, "no flits below Gen6");
    }

    #[test]
    fn requests_before_the_window_explain_only_a_small_speed_up() {
        let both = config(&Grid::default(), "gen3x16", 512, Kind::Both);
        let size: u64 = 65_536;
        let requests = size.div_ceil(both.mrrs_bytes).min(u64::from(both.tags));
        let params = model_params(&both);
        let request_bytes = (params.framing_bytes() + params.header.bytes()) as f64 + 2.0 * model::dllp::bytes(both.link, 1.0);
        let share = requests as f64 * request_bytes / size as f64;
        let model_ns = 10_000.0;
        let faster = explain_requests_before_window(&both, size, model_ns, model_ns * (1.0 - share / 2.0));
        assert!(faster.as_deref().is_some_and(|e| e.contains("went out before the first completion")), "{faster:?}");
        assert_eq!(explain_requests_before_window(&both, size, model_ns, model_ns * (1.0 - 2.0 * share)), None, "faster than the requests account for");
        assert_eq!(explain_requests_before_window(&both, size, model_ns, model_ns * 1.01), None, "slower: not this cause");
    }

    #[test]
    fn requests_behind_writes_explain_only_a_read_rate_between_no_wait_and_a_whole_write_tlp() {
        let both = config(&Grid::default(), "gen3x16", 512, Kind::Both);
        let params = model_params(&both);
        let size = 65_536;
        let no_wait_ns = bidirectional_waiting_ns(&params, size, RequestWait::Ns(0.0))[1];
        let found = explain_both(&both, Kind::Read, size, no_wait_ns);
        assert!(found.as_deref().is_some_and(|e| e.starts_with("read requests wait behind write TLPs")), "{found:?}");
        assert_eq!(explain_both(&both, Kind::Read, size, 3.0 * no_wait_ns), None);
        assert_eq!(explain_both(&both, Kind::Read, size, 0.5 * no_wait_ns), None);
    }

    #[test]
    fn the_credit_loop_explains_only_where_finite_credits_or_a_wire_are_configured() {
        let plain = config(&Grid::default(), "gen3x8", 256, Kind::Write);
        assert_eq!(explain(&plain, Kind::Write, 0, 65_536, 1e6).unwrap(), None, "large credits, no wire: nothing to put the gap on");
        let grid = Grid { credits: Some(32), wire_delay_ns: 300.0, ..Grid::default() };
        let finite = config(&grid, "gen3x8", 256, Kind::Write);
        let found = explain(&finite, Kind::Write, 0, 65_536, 1e6).unwrap();
        assert!(found.as_deref().is_some_and(|e| e.starts_with("flow control: 32 data credits")), "{found:?}");
    }

    #[test]
    fn the_ack_timer_explains_only_where_acks_are_coalesced() {
        let every_tlp = config(&Grid::default(), "gen2x1", 256, Kind::Read);
        assert_eq!(explain_ack_timer(&every_tlp, Kind::Read, 0, 4096, 1000.0, 2000.0).unwrap(), None, "one Ack per TLP: no group to time out");
        let coalesced = config(&Grid { ack_every_tlps: 4, ..Grid::default() }, "gen2x1", 256, Kind::Read);
        let model_ns = modelled_ns(&coalesced, Kind::Read, 4096)[0].1;
        let sim_ns = simulated_ns(&coalesced, Kind::Read, 4096).unwrap()[0];
        let found = explain_ack_timer(&coalesced, Kind::Read, 0, 4096, model_ns, sim_ns).unwrap();
        assert!(found.as_deref().is_some_and(|e| e.starts_with("Ack timing")), "model {model_ns} ns, simulated {sim_ns} ns: {found:?}");
    }

    #[test]
    fn a_gap_with_no_cause_shown_is_unexplained_and_printed_so() {
        let point = Point {
            kind: Kind::Write,
            stream: None,
            link: "Gen3 x8".into(),
            mps_bytes: 256,
            mrrs_bytes: 512,
            header: "3dw".into(),
            tags: 32,
            latency_ns: 0.0,
            size_bytes: 65_536,
            model_ns: 1000.0,
            sim_ns: 1020.0,
            difference_percent: 2.0,
            explanation: None,
        };
        assert!(point.unexplained());
        let document = Crosscheck { schema: SCHEMA.into(), grid: Grid::default(), tolerance_percent: 0.5, skipped: Vec::new(), sizes_lowered: 0, points: vec![point.clone()] };
        assert!(crate::report::crosscheck::text(&document, true).contains("UNEXPLAINED"));
        let explained = Point { explanation: Some("flit phase: …".into()), ..point.clone() };
        assert!(!explained.unexplained());
        let within = Point { sim_ns: 1004.0, difference_percent: 0.4, ..point };
        assert!(!within.unexplained() && within.agrees());
    }
}
