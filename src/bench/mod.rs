//! Measurement procedures of the source documents, written once against [`crate::engine::Engine`].
//! A procedure never asks which engine it drives.

pub mod demo;
