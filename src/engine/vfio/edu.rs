//! QEMU's `edu` teaching device as a DMA personality (QEMU `docs/specs/edu.rst`).
//!
//! BAR0 registers: 0x00 identification `0xRRrr00ed`, 0x04 liveness (reads back the inverse),
//! 0x24 interrupt status, 0x64 interrupt acknowledge, 0x80 DMA source, 0x88 DMA destination,
//! 0x90 DMA count, 0x98 DMA command (bit 0 start/busy, bit 1 direction: 1 = edu→RAM, bit 2
//! raise interrupt 0x100 when done). The device's side of every transfer is its 4 KiB buffer at
//! device address 0x40000. QEMU masks DMA addresses to 28 bits and completes each transfer on a
//! 100 ms virtual timer: timings through edu are emulation, never PCIe figures.

use crate::engine::bar::region::Region;
use crate::engine::{Direction, EngineError, Width};

const ID: u64 = 0x00;
const INTERRUPT_ACK: u64 = 0x64;
const DMA_SOURCE: u64 = 0x80;
const DMA_DESTINATION: u64 = 0x88;
const DMA_COUNT: u64 = 0x90;
const DMA_COMMAND: u64 = 0x98;
const COMMAND_START: u64 = 0x1;
const COMMAND_TO_RAM: u64 = 0x2;
const COMMAND_IRQ: u64 = 0x4;
const DMA_IRQ: u64 = 0x100;
/// The device's buffer, at this device address.
pub const BUFFER_ADDR: u64 = 0x40000;
pub const BUFFER_BYTES: u64 = 4096;
/// What transfers may use of it: QEMU 7.2's range check wants a transfer to end strictly before
/// the buffer's end and stops the whole virtual machine (`hw_error`) otherwise, so the last bytes
/// stay unused; half the buffer keeps power-of-two sizes.
pub const USABLE_BYTES: u64 = BUFFER_BYTES / 2;

#[derive(Debug, Default)]
pub struct Edu;

impl super::Personality for Edu {
    fn name(&self) -> &'static str {
        "edu"
    }

    fn bar(&self) -> u8 {
        0
    }

    fn identify(&mut self, regs: &Region) -> Result<String, EngineError> {
        let id = regs.read(ID, Width::B4)?;
        if id & 0xFFFF != 0x00ed {
            return Err(EngineError::Unsupported(format!("BAR0+0x0 reads {id:#010x}: not QEMU's edu device (expected 0xRRrr00ed)")));
        }
        Ok(format!("QEMU edu {}.{} (emulated: timings are the emulator's, not PCIe)", id >> 24, (id >> 16) & 0xFF))
    }

    fn capacity_bytes(&self) -> u64 {
        USABLE_BYTES
    }

    fn max_bus_address(&self) -> u64 {
        (1 << 28) - 1
    }

    fn start(&mut self, regs: &Region, direction: Direction, bus_addr: u64, device_offset: u64, bytes: u64) -> Result<(), EngineError> {
        if bytes == 0 || device_offset + bytes > USABLE_BYTES {
            // Never hand QEMU a range its check rejects: it would stop the machine.
            return Err(crate::error::InvalidInput::new(format!("edu transfers stay within the first {USABLE_BYTES} bytes of its buffer")).into());
        }
        let device_addr = BUFFER_ADDR + device_offset;
        let (source, destination, to_ram) = match direction {
            Direction::H2d => (bus_addr, device_addr, 0),
            Direction::D2h => (device_addr, bus_addr, COMMAND_TO_RAM),
        };
        regs.write(DMA_SOURCE, Width::B8, source)?;
        regs.write(DMA_DESTINATION, Width::B8, destination)?;
        regs.write(DMA_COUNT, Width::B8, bytes)?;
        regs.write(DMA_COMMAND, Width::B8, COMMAND_START | to_ram | COMMAND_IRQ)
    }

    fn finished(&mut self, regs: &Region) -> Result<bool, EngineError> {
        Ok(regs.read(DMA_COMMAND, Width::B8)? & COMMAND_START == 0)
    }

    fn acknowledge(&mut self, regs: &Region) -> Result<(), EngineError> {
        regs.write(INTERRUPT_ACK, Width::B4, DMA_IRQ)
    }
}
