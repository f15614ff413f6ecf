//! Comparison against a peer in the same run: the two pieces of work alternate (ours, peer,
//! ours, peer …), each repeat gives one ratio, and the row reports the median ratio with its
//! min–max over the repeats. Rows print as Markdown table lines (`| … |`), the form
//! `scripts/perf-table` collects into `docs/performance.md` and the README.
#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::Instant;

/// `cargo bench` passes `--bench`; under `cargo test --all-targets` each bench runs once on small
/// inputs as a smoke test.
pub fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Repeats: `full` under `cargo bench`, one otherwise.
pub fn repeats(full_repeats: usize) -> usize {
    if full() { full_repeats } else { 1 }
}

/// How a row's ratio reads.
#[derive(Clone, Copy)]
pub enum Ratio {
    /// ours ÷ peer in rate (bytes/s or operations/s): above 1, we are faster.
    Rate,
    /// ours ÷ peer in time: below 1, we are faster.
    Time,
    /// ours ÷ peer in peak resident memory: below 1, we use less.
    Memory,
}

/// Nanoseconds per call of `work`, over enough calls to fill about `min_ns`.
pub fn ns_per_call(work: &mut dyn FnMut(), min_ns: f64) -> f64 {
    let start = Instant::now();
    work();
    let once = start.elapsed().as_nanos().max(1) as f64;
    let calls = ((min_ns / once) as usize).clamp(1, 1_000_000);
    let start = Instant::now();
    for _ in 0..calls {
        work();
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Median, min and max.
pub fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[0], values[values.len() - 1])
}

/// One row: our figure, the peer's, and the ratio over interleaved repeats.
pub struct Row {
    pub what: String,
    pub ours: String,
    pub peer: String,
    pub ratio: Ratio,
    pub ratios: Vec<f64>,
    pub goal: String,
}

impl Row {
    /// Print as a Markdown table line.
    pub fn print(&self) {
        let (median, min, max) = spread(self.ratios.clone());
        let reads = match self.ratio {
            Ratio::Rate => "rate",
            Ratio::Time => "time",
            Ratio::Memory => "memory",
        };
        println!(
            "| {} | {} | {} | {median:.2} ({min:.2}–{max:.2}, {} repeats, {reads}) | {} |",
            self.what,
            self.ours,
            self.peer,
            self.ratios.len(),
            self.goal
        );
    }
}

/// The table's header line.
pub fn header() {
    println!("| what | pcieperf | peer | ratio pcieperf/peer, median (min–max) | goal |");
    println!("|---|---|---|---|---|");
}

/// The fastest single call of `work`, in ns, over about `budget_ns` of calls (on a shared
/// machine the fastest call is the one no other process interrupted).
pub fn fastest_ns(work: &mut dyn FnMut(), budget_ns: f64) -> f64 {
    let start = Instant::now();
    let mut fastest = f64::INFINITY;
    while start.elapsed().as_nanos() as f64 <= budget_ns {
        let call = Instant::now();
        work();
        fastest = fastest.min(call.elapsed().as_nanos().max(1) as f64);
    }
    fastest
}

/// `ours` against `peer` (each one unit of work moving `bytes`), alternately for `repeats`
/// rounds, each side's fastest call per round; figures in GB/s (10^9 B/s).
pub fn compare_rate(what: &str, peer_name: &str, bytes: u64, repeats: usize, ours: &mut dyn FnMut(), peer: &mut dyn FnMut(), goal: &str) -> Row {
    let budget_ns = if full() { 20e6 } else { 1e6 };
    let (mut ours_ns, mut peer_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        let a = fastest_ns(ours, budget_ns);
        let b = fastest_ns(peer, budget_ns);
        ours_ns.push(a);
        peer_ns.push(b);
        ratios.push(b / a);
    }
    let gbps = |ns: Vec<f64>| bytes as f64 / spread(ns).0;
    Row {
        what: what.into(),
        ours: format!("{:.2} GB/s", gbps(ours_ns)),
        peer: format!("{peer_name} {:.2} GB/s", gbps(peer_ns)),
        ratio: Ratio::Rate,
        ratios,
        goal: goal.into(),
    }
}

/// What a child process cost: wall time and peak RSS.
#[derive(Clone, Copy, Debug)]
pub struct Cost {
    pub seconds: f64,
    /// `ru_maxrss` from `wait4` (KiB on Linux): the child's own high-water mark, plus whatever
    /// it inherited from the process that forked it (so spawn from a small process).
    pub max_rss_kib: f64,
}

/// Run `program args…` to its end with its output discarded: its [`Cost`], or how it failed.
pub fn child_cost(program: &std::path::Path, args: &[&str]) -> Result<Cost, String> {
    let start = Instant::now();
    let child = Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("cannot start: {e}"))?;
    let (mut status, mut usage) = (0i32, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child; status and usage are valid out-pointers.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    match pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        true => Ok(Cost { seconds, max_rss_kib: usage.ru_maxrss as f64 }),
        false if libc::WIFSIGNALED(status) => Err(format!("killed by signal {}", libc::WTERMSIG(status))),
        false => Err(format!("exit status {}", libc::WEXITSTATUS(status))),
    }
}
