//! pcieperf — what should a PCI Express link deliver, what does it deliver, and why the gap.
//!
//! Layers (each depends only on the ones above it, see `docs/architecture.md`):
//! - [`model`]: pure throughput theory, Gen1–Gen6, no I/O.
//! - [`device`]: the pcieperf device's register map, generated from `hdl/regs/pcieperf.rdl`.
//! - [`pci`]: config-space decoding, sysfs and lspci-dump input, the path to the root port.
//! - [`engine`]: one adapter per way of moving data, behind one small contract.
//! - [`bench`]: the measurement procedures, written once against the engine contract.
//! - [`report`]: tables, JSON, CSV, HTML — views of one results document.
//! - [`cli`]: argument parsing and wiring, nothing else.
//!
//! Units: `MBps` is 10^6 bytes per second (the source documents' convention), sizes are bytes
//! unless a name says otherwise, times are nanoseconds (`_ns`).

pub mod bounded;
pub mod cancel;
pub mod error;
pub mod exhaustion;
pub mod named;
pub mod printable;
pub mod table;
pub mod units;

pub mod model;
pub mod device;
pub mod pci;
pub mod link;
pub mod engine;
pub mod bench;
pub mod report;
pub mod cli;
