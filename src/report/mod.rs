//! Views of documents: terminal tables, JSON, CSV, HTML, metrics. No I/O to devices.
//!
//! Every procedure returns one typed document ([`view::Document`]); [`view::VIEWS`] names the
//! function that renders each (document kind, format), so `pcieperf report run.json`
//! reproduces any view later.

pub mod compare;
pub mod crosscheck;
pub mod csv;
pub mod demo;
pub mod dir_watch;
pub mod exporter;
pub mod html;
pub mod http;
pub mod http_server;
pub mod inspect;
pub mod json;
pub mod saved;
pub mod link_path;
pub mod metrics;
pub mod model;
pub mod output;
pub mod plot;
pub mod pio;
pub mod stream;
pub mod strip;
pub mod progress;
pub mod text;
pub mod trace;
pub mod view;
