//! Views of results: terminal tables, JSON, CSV, HTML. No I/O to devices.

pub mod table;
