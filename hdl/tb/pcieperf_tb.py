"""Testbench of the pcieperf core: cocotbext-pcie's root complex and UltraScale+ hard-block
model around the RTL, host memory, register access and DMA helpers.

The link is chosen by the PCIEPERF_LINK environment variable (set by the runner, run.py):
gen1x4 (64-bit interface at 125 MHz) or gen3x8 (256-bit at 250 MHz), the hard block's
configurations for those links.
"""

import logging
import os
import zlib

import cocotb
from cocotb.triggers import RisingEdge, Timer
from cocotbext.axi import AxiStreamBus
from cocotbext.axi.address_space import MemoryRegion
from cocotbext.pcie.core import RootComplex
from cocotbext.pcie.core.tlp import TlpType
from cocotbext.pcie.xilinx.us import UltraScalePlusPcieDevice

# The register map (BAR, offset): generated from hdl/regs/pcieperf.rdl (docs/regmap.md).
from pcieperf_regmap import (
    BAR_BYTES, DMA_CONTROL, DMA_CONTROL_D2H_MASK, DMA_CONTROL_D2H_SHIFT, DMA_CONTROL_H2D_MASK,
    DMA_CONTROL_H2D_SHIFT, DMA_D2H_ADDR, DMA_D2H_BYTES, DMA_D2H_OFFSET, DMA_H2D_ADDR, DMA_H2D_BYTES,
    DMA_H2D_OFFSET, READ_CYCLES, READ_WRITE_CYCLES, SEED, TAGS, WRITE_CYCLES,
)

# link name -> (generation, width, interface bits, user clock Hz)
LINKS = {
    "gen1x4": (1, 4, 64, 125_000_000),
    "gen3x8": (3, 8, 256, 250_000_000),
}

# DMA_CONTROL bits: writing starts those directions, reading shows those still busy.
DMA_H2D = DMA_CONTROL_H2D_MASK << DMA_CONTROL_H2D_SHIFT
DMA_D2H = DMA_CONTROL_D2H_MASK << DMA_CONTROL_D2H_SHIFT
# The per-mode cycle counters of the demo, by start code (1 read, 2 write, 3 both).
MODE_CYCLES = {1: READ_CYCLES, 2: WRITE_CYCLES, 3: READ_WRITE_CYCLES}


def block_seed(seed, block):
    """pcieperf's Pattern::block_seed (splitmix64 finaliser)."""
    mask = (1 << 64) - 1
    z = (seed ^ (block * 0x9E3779B97F4A7C15)) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    word = (z ^ (z >> 31)) & 0xFFFFFFFF
    return word or 0x12345678


def pattern(seed, offset, length):
    """pcieperf's Pattern::lfsr(seed) bytes at stream offset `offset` (both multiples of 4)."""
    out = bytearray()
    position = offset
    while len(out) < length:
        block, within = divmod(position, 4096)
        state = block_seed(seed, block)
        words = bytearray()
        for _ in range(4096 // 4):
            state ^= (state << 13) & 0xFFFFFFFF
            state ^= state >> 17
            state ^= (state << 5) & 0xFFFFFFFF
            words += state.to_bytes(4, "little")
        take = min(4096 - within, length - len(out))
        out += words[within:within + take]
        position += take
    return bytes(out)


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


class Testbench:
    def __init__(self, dut, link=None):
        self.dut = dut
        self.link = link or os.environ.get("PCIEPERF_LINK", "gen3x8")
        gen, width, bits, clk_hz = LINKS[self.link]
        assert len(dut.s_axis_rq_tdata) == bits, f"RTL built for {len(dut.s_axis_rq_tdata)} bits, link {self.link} needs {bits}"
        self.clk_hz = clk_hz
        self.rc = RootComplex()
        self.dev = UltraScalePlusPcieDevice(
            pcie_generation=gen, pcie_link_width=width, user_clk_frequency=clk_hz,
            alignment="dword", max_payload_size=1024, enable_client_tag=True,
            enable_extended_tag=False, pf0_msi_enable=True, pf0_msi_count=1,
            user_clk=dut.user_clk, user_reset=dut.user_reset, user_lnk_up=dut.user_lnk_up,
            rq_bus=AxiStreamBus.from_prefix(dut, "s_axis_rq"),
            rc_bus=AxiStreamBus.from_prefix(dut, "m_axis_rc"),
            cq_bus=AxiStreamBus.from_prefix(dut, "m_axis_cq"),
            pcie_cq_np_req=dut.pcie_cq_np_req,
            cc_bus=AxiStreamBus.from_prefix(dut, "s_axis_cc"),
            cfg_max_payload=dut.cfg_max_payload, cfg_max_read_req=dut.cfg_max_read_req,
            cfg_current_speed=dut.cfg_current_speed, cfg_negotiated_width=dut.cfg_negotiated_width,
            cfg_interrupt_msi_enable=dut.cfg_interrupt_msi_enable,
        )
        for bar, size in BAR_BYTES.items():
            self.dev.functions[0].configure_bar(bar, size)
        self.rc.make_port().connect(self.dev)
        # The model times the link at this speed and width but leaves the Link Status register
        # (which drives cfg_current_speed / cfg_negotiated_width) at its reset value: fill it in.
        self.dev.functions[0].pcie_cap.current_link_speed = gen
        self.dev.functions[0].pcie_cap.negotiated_link_width = width
        # The models log every TLP at INFO: that costs more time than simulating the RTL.
        for name in ("cocotb.pcie", "cocotb.pcieperf_top", f"cocotb.{dut._name}"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self.dev.log.setLevel(logging.WARNING)
        self.rc.log.setLevel(logging.ERROR)  # enumeration probes empty slots with warnings
        self.function = None
        self.bars = None
        # Keep bus address 0 unused: the demo treats a buffer address of 0 as "not set".
        self.rc.mem_pool.alloc_region(4096)
        # TLPs the root complex received from the core: (kind, address, bytes, tag)
        self.requests = []
        # Called with (address, bytes) after each memory write from the core reached host memory.
        self.write_hooks = []
        self._spy()

    def _spy(self):
        """Record every memory request the core sends, then let the root complex handle it."""
        for fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64, TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            handler = self.rc.rx_tlp_handler[fmt_type]

            async def spy(tlp, handler=handler, kind="read" if "READ" in fmt_type.name else "write"):
                self.requests.append((kind, tlp.address, tlp.length * 4, tlp.tag))
                await handler(tlp)
                if kind == "write":
                    for hook in self.write_hooks:
                        hook(tlp.address, tlp.length * 4)

            self.rc.rx_tlp_handler[fmt_type] = spy

    def delay_reads(self, delay_ns):
        """Answer each memory read after delay_ns(index) ns, concurrently: completions of
        different tags then return in the order the delays give, not in request order."""
        handler = self.rc.handle_mem_read_tlp
        count = [0]

        async def delayed(tlp, delay):
            if delay > 0:
                await Timer(delay, "ns")
            await handler(tlp)

        async def spy(tlp):
            self.requests.append(("read", tlp.address, tlp.length * 4, tlp.tag))
            cocotb.start_soon(delayed(tlp, delay_ns(count[0])))
            count[0] += 1

        for fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64):
            self.rc.rx_tlp_handler[fmt_type] = spy

    async def init(self, mps=256, mrrs=512):
        await self.rc.enumerate()
        self.function = self.rc.find_device(self.dev.functions[0].pcie_id)
        await self.function.enable_device()
        await self.function.set_master()
        self.bars = self.function.bar_window
        await self.set_limits(mps, mrrs)

    async def set_limits(self, mps, mrrs):
        """MaxPayload and MaxReadRequest as a host's enumeration would set them; the root
        complex's completions are limited by the same MaxPayload."""
        code = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
        self.rc.max_payload_size = code[mps]
        await self.function.set_mps(code[mps])
        await self.function.set_readrq(code[mrrs])
        for _ in range(4):
            await RisingEdge(self.dut.user_clk)

    async def read(self, reg):
        bar, offset = reg
        return await self.bars[bar].read_dword(offset)

    async def write(self, reg, value):
        bar, offset = reg
        await self.bars[bar].write_dword(offset, value & 0xFFFFFFFF)

    async def write64(self, reg, value):
        await self.write(reg, value)
        await self.write((reg[0], reg[1] + 4), value >> 32)

    async def read64(self, reg):
        low = await self.read(reg)
        return low | (await self.read((reg[0], reg[1] + 4))) << 32

    def map_fixed(self, addr, size):
        """Host memory at a fixed bus address (inside the root complex's pool)."""
        region = MemoryRegion(size)
        self.rc.mem_pool.register_region(region, addr)
        return region

    def alloc(self, size, align=4096):
        """Host memory: a region aligned to `align`, returned with its bus address."""
        region = self.rc.mem_pool.alloc_region(size + align)
        base = region.get_absolute_address(0)
        skip = (-base) % align
        return region, skip, base + skip

    async def wait_idle(self, poll_ns=500):
        """Poll the DMA status register as a driver would. The register read also orders: its
        completion cannot pass the engine's posted writes, so once the core reads idle every
        d2h byte is in host memory."""
        while await self.read(DMA_CONTROL) & (DMA_H2D | DMA_D2H):
            await Timer(poll_ns, "ns")

    async def dma(self, h2d=None, d2h=None, seed=1, tags=None):
        """Run the DMA engines: h2d=(address, bytes, pattern offset), d2h likewise."""
        await self.write64(SEED, seed)
        if tags is not None:
            await self.write(TAGS, tags)
        if h2d:
            await self.write64(DMA_H2D_ADDR, h2d[0])
            await self.write(DMA_H2D_BYTES, h2d[1])
            await self.write64(DMA_H2D_OFFSET, h2d[2])
        if d2h:
            await self.write64(DMA_D2H_ADDR, d2h[0])
            await self.write(DMA_D2H_BYTES, d2h[1])
            await self.write64(DMA_D2H_OFFSET, d2h[2])
        await self.write(DMA_CONTROL, (DMA_H2D if h2d else 0) | (DMA_D2H if d2h else 0))
        await self.wait_idle()
