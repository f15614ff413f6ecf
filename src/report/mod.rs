//! Views of results: terminal tables, JSON, CSV, HTML. No I/O to devices.
//!
//! A run produces one document ([`crate::bench::results::Results`]); every module here renders
//! it, so `pcieperf report run.json` reproduces any view later.

pub mod compare;
pub mod crosscheck;
pub mod csv;
pub mod exporter;
pub mod html;
pub mod http;
pub mod http_server;
pub mod json;
pub mod metrics;
pub mod output;
pub mod plot;
pub mod pio;
pub mod progress;
pub mod text;
pub mod trace;
