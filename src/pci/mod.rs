//! PCI devices: addresses, config-space decoding, sysfs and lspci-dump input, pci.ids names, the
//! path to the root port and what limits it. Reads sysfs only; never writes to a device.
