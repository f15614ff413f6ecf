//! Measurement procedures of the source documents, written once against [`crate::engine::Engine`].
//! A procedure never asks which engine it drives.

pub mod cancel;
pub mod clock;
pub mod conditions;
pub mod crosscheck;
pub mod demo;
pub mod demo_run;
pub mod diagnose;
pub mod dma;
pub mod host;
pub mod inspect_run;
pub mod interrupts;
pub mod link_watch;
pub mod machine;
pub mod numa;
pub mod nvml;
pub mod pin;
pub mod pio;
pub mod pio_run;
pub mod predict;
pub mod results;
pub mod run;
pub mod stalls;
pub mod stats;
pub mod stream;
pub mod trace;
pub mod verify;
