//! The conditions a measurement runs under, resolved once from what the engine knows: a
//! modelled engine states its configuration, a real one names its PCI address and the pci layer
//! reads the link along its path. Every ceiling of the run comes from this one value.

use crate::engine::Engine;
use crate::model::Conditions;
use crate::pci;

/// The engine's conditions, or why there are none (the target names no device with a link).
pub fn resolve(engine: &dyn Engine) -> Result<Conditions, String> {
    resolve_in(engine, &pci::sysfs::default_root())
}

/// [`resolve`] with sysfs at `sysfs_root` (tests, chroots).
pub fn resolve_in(engine: &dyn Engine, sysfs_root: &std::path::Path) -> Result<Conditions, String> {
    let info = engine.info();
    let mut conditions = match (engine.conditions(), &info.pci_address) {
        (Some(conditions), _) => conditions,
        (None, Some(address)) => pci::conditions::live(sysfs_root, address)?,
        (None, None) => return Err(format!("target {} names no PCI device and models no link", info.target)),
    };
    // An engine that keeps several transfers outstanding is bounded by the stream, not by one
    // isolated transfer.
    conditions.params.in_flight = conditions.params.in_flight.max(info.in_flight);
    Ok(conditions)
}
