"""cocotb tests of the pcieperf core (run by run.py on each modelled link).

Every test builds a fresh root complex + hard-block model around the RTL, enumerates it and
programs it through BAR accesses, as a host driver would.
"""

import json
import os
import random

import cocotb
from cocotb.triggers import Timer

from pcieperf_regmap import (
    BAR_BYTES, BLOCK_AMOUNT, BUFFER1, BUFFER2, CLOCK, CLOCK_HZ, COMPLETION_ERRORS, CORE_INFO,
    D2H_CYCLES, DMA_D2H_ADDR, DMA_D2H_BYTES, DMA_D2H_OFFSET, DMA_H2D_ADDR, DMA_H2D_BYTES,
    DMA_H2D_OFFSET, ERROR_FOUND, FIRST_ERROR, FIXED, H2D_CRC32, H2D_CYCLES, MAX_OUTSTANDING,
    MAX_STALL, MAX_STALL_CYCLES, PCI_STATUS, RX_BIT_ERRORS, RX_RESULT, SEED, START, STALL_COUNT,
    STREAM_DURATION, TAGS, THRESHOLD, TX_BIT_ERRORS, TX_RESULT, VERSION,
)
from pcieperf_tb import MODE_CYCLES, Testbench, crc32, pattern


async def setup(dut, mps=256, mrrs=512):
    tb = Testbench(dut)
    await tb.init(mps, mrrs)
    return tb


async def host_pattern(tb, size, seed, offset, align=4096, skew=0):
    """Host buffer holding the pattern at `offset`; returns (region, start, bus address)."""
    region, start, addr = tb.alloc(size + skew, align)
    await region.write(start + skew, pattern(seed, offset, size))
    return region, start + skew, addr + skew


def crossings(requests):
    return [r for r in requests if r[1] // 4096 != (r[1] + r[2] - 1) // 4096]


@cocotb.test()
async def registers(dut):
    """Every register: values after reset, read/write, read-only, the status word, BAR3 RAM."""
    tb = await setup(dut, mps=256, mrrs=512)
    gen, width = {"gen1x4": (1, 4), "gen3x8": (3, 8)}[tb.link]
    assert await tb.read(VERSION) == 0x08021600
    assert await tb.read(THRESHOLD) == 0x0C35, "threshold resets to 50 µs"
    for reg in (BUFFER1, BUFFER2, FIXED, BLOCK_AMOUNT, TX_RESULT, RX_RESULT, MAX_STALL, STALL_COUNT,
                RX_BIT_ERRORS, TX_BIT_ERRORS):
        assert await tb.read(reg) == 0, reg
    for reg, value in ((BUFFER1, 0x1000_0000), (BUFFER2, 0x1000_2000), (FIXED, 0x2000),
                       (BLOCK_AMOUNT, 0xA343C * 4), (THRESHOLD, 0x10), (DMA_H2D_BYTES, 4096),
                       (DMA_D2H_BYTES, 8192), (TAGS, 7)):
        await tb.write(reg, value)
        assert await tb.read(reg) == value, reg
    for reg, value in ((SEED, 0x0123_4567_89AB_CDEF), (DMA_H2D_ADDR, 0x1_2345_6000),
                       (DMA_D2H_ADDR, 0x2_0000_1000), (DMA_H2D_OFFSET, 0x5000), (DMA_D2H_OFFSET, 0x7000)):
        await tb.write64(reg, value)
        assert await tb.read64(reg) == value, reg
    # The stream's duration holds 48 bits of device cycles.
    assert await tb.read64(STREAM_DURATION) == 0
    await tb.write64(STREAM_DURATION, 0xFFFF_1234_5678_9ABC)
    assert await tb.read64(STREAM_DURATION) == 0x1234_5678_9ABC
    # Tags are clamped to 1..32.
    await tb.write(TAGS, 0)
    assert await tb.read(TAGS) == 1
    await tb.write(TAGS, 99)
    assert await tb.read(TAGS) == 32
    # Read-only registers ignore writes.
    for reg in (VERSION, TX_RESULT, RX_RESULT, MAX_STALL, STALL_COUNT, PCI_STATUS, CLOCK_HZ):
        before = await tb.read(reg)
        await tb.write(reg, 0xDEAD_BEEF)
        assert await tb.read(reg) == before, reg
    # PCI-status word (document 001 §3 layout) from the hard block's configuration outputs.
    status = await tb.read(PCI_STATUS)
    assert (status >> 5) & 7 == 1, "MPS 256"
    assert (status >> 12) & 7 == 2, "MRRS 512"
    assert (status >> 16) & 0xF == gen
    assert (status >> 20) & 0x3F == width
    await tb.set_limits(128, 4096)
    status = await tb.read(PCI_STATUS)
    assert ((status >> 5) & 7, (status >> 12) & 7) == (0, 5)
    # Core description and the free-running device clock.
    assert await tb.read(CLOCK_HZ) == tb.clk_hz
    assert await tb.read(CORE_INFO) == (32 << 16) | len(dut.s_axis_rq_tdata)
    first = await tb.read64(CLOCK)
    await Timer(1, "us")
    second = await tb.read64(CLOCK)
    elapsed = (second - first) / tb.clk_hz
    assert 1e-6 < elapsed < 2e-6, elapsed
    # BAR3: 32 KiB RAM, first, last and scattered words.
    words = {0: 0x1111_1111, 4: 0x2222_2222, 0x4000: 0xA5A5_5A5A, BAR_BYTES[3] - 4: 0xFFFF_0001}
    for offset, value in words.items():
        await tb.write((3, offset), value)
    for offset, value in words.items():
        assert await tb.read((3, offset)) == value
    assert await tb.read((0, 0x800)) == 0, "unimplemented registers read 0"


async def check_d2h(tb, size, seed, offset, mps, skew=0):
    region, start, addr = tb.alloc(size + skew)
    tb.requests.clear()
    await tb.dma(d2h=(addr + skew, size, offset), seed=seed)
    data = await region.read(start + skew, size)
    expected = pattern(seed, offset, size)
    assert data == expected, f"d2h {size} bytes at {addr + skew:#x}: first difference at {next(i for i in range(size) if data[i] != expected[i])}"
    writes = [r for r in tb.requests if r[0] == "write"]
    assert sum(r[2] for r in writes) == size
    assert max(r[2] for r in writes) <= mps, "a write longer than MaxPayload"
    assert not crossings(writes), f"writes crossing 4 KiB: {crossings(writes)}"
    return writes


@cocotb.test()
async def dma_write_engine(dut):
    """d2h at several MaxPayload sizes, 4 KiB boundaries and unaligned pattern offsets:
    the host finds pcieperf's LFSR pattern, TLPs never exceed MPS or cross 4 KiB."""
    tb = await setup(dut)
    for mps in (128, 256, 512):
        await tb.set_limits(mps, 512)
        writes = await check_d2h(tb, 16384, seed=mps, offset=0, mps=mps)
        assert len(writes) == 16384 // mps
    # Host buffer starting 64 bytes before a 4 KiB boundary: the first TLP must stop there.
    await tb.set_limits(512, 512)
    writes = await check_d2h(tb, 8192, seed=7, offset=0, mps=512, skew=4096 - 64)
    assert writes[0][2] == 64
    # Pattern offset in the middle of a pattern block and an odd size.
    await check_d2h(tb, 3000, seed=9, offset=4096 * 3 + 1236, mps=512)
    assert await tb.read(TX_BIT_ERRORS) == 0


async def check_h2d(tb, size, seed, offset, tags, skew=0, corrupt=None):
    region, start, addr = await host_pattern(tb, size, seed, offset, skew=skew)
    if corrupt is not None:
        data = bytearray(await region.read(start, size))
        data[corrupt[0]] ^= corrupt[1]
        await region.write(start, bytes(data))
    sent = await region.read(start, size)
    tb.requests.clear()
    await tb.dma(h2d=(addr, size, offset), seed=seed, tags=tags)
    assert await tb.read(H2D_CRC32) == crc32(sent), "device CRC32 differs from the host's"
    assert await tb.read(COMPLETION_ERRORS) == 0
    return [r for r in tb.requests if r[0] == "read"]


@cocotb.test()
async def dma_read_engine(dut):
    """h2d at several MaxReadRequest sizes and tag counts, with and without completions split
    at every RCB: the device's CRC32 matches the host's, no bit errors, requests never exceed
    MRRS or cross 4 KiB, and no more than `tags` are in flight."""
    tb = await setup(dut)
    for mrrs, tags, split in ((128, 1, False), (512, 4, True), (1024, 32, False), (4096, 8, True)):
        await tb.set_limits(256, mrrs)
        tb.rc.split_on_all_rcb = split
        reads = await check_h2d(tb, 32768, seed=mrrs, offset=4096, tags=tags, skew=4096 - 128)
        assert await tb.read(RX_BIT_ERRORS) == 0
        assert await tb.read(ERROR_FOUND) == 0
        assert max(r[2] for r in reads) <= mrrs
        assert not crossings(reads), crossings(reads)
        outstanding = await tb.read(MAX_OUTSTANDING)
        assert 1 <= outstanding <= tags, (outstanding, tags)
    tb.rc.split_on_all_rcb = False


@cocotb.test()
async def tag_exhaustion(dut):
    """With more requests than tags the engine waits for tags: exactly `tags` in flight at the
    peak when the host answers slowly, and every byte still arrives."""
    tb = await setup(dut, mrrs=128)
    tb.delay_reads(lambda index: 2000)
    for tags in (2, 5):
        reads = await check_h2d(tb, 8192, seed=3, offset=0, tags=tags)
        assert len(reads) == 8192 // 128
        assert await tb.read(MAX_OUTSTANDING) == tags
        assert set(r[3] for r in reads) <= set(range(32))


@cocotb.test()
async def completions_reordered(dut):
    """Completions split at every RCB and returned out of order (later requests answered
    first): reassembly by tag still gives the host's CRC and no bit errors."""
    tb = await setup(dut, mrrs=512)
    tb.rc.split_on_all_rcb = True
    rng = random.Random(5)
    tb.delay_reads(lambda index: (8 - index % 8) * 300 + rng.randrange(0, 200))
    await check_h2d(tb, 16384, seed=11, offset=0, tags=8)
    assert await tb.read(RX_BIT_ERRORS) == 0


@cocotb.test()
async def bit_errors_found_with_offset(dut):
    """A flipped bit in host memory is reported: bit count and the byte's pattern offset."""
    tb = await setup(dut)
    for byte, mask in ((5000, 0x10), (0, 0x01), (8191, 0x80)):
        offset = 8192
        await check_h2d(tb, 8192, seed=2, offset=offset, tags=4, corrupt=(byte, mask))
        assert await tb.read(RX_BIT_ERRORS) == 1
        assert await tb.read(ERROR_FOUND) == 1
        assert await tb.read64(FIRST_ERROR) == offset + byte
    # Three flipped bits in one byte count as three.
    await check_h2d(tb, 4096, seed=2, offset=0, tags=4, corrupt=(100, 0x07))
    assert await tb.read(RX_BIT_ERRORS) == 3


@cocotb.test()
async def stalls_with_throttled_link(dut):
    """Stall detection: reads answered after a pause longer than the threshold count as stalls
    over the threshold, and the longest stall is reported in 16 ns units; a write path held
    off by the hard block (tready low) stalls the d2h engine."""
    tb = await setup(dut, mrrs=512)
    await tb.write(THRESHOLD, 0x80)                     # 128 x 16 ns = 2.048 µs
    tb.delay_reads(lambda index: 4000 if index % 4 == 3 else 0)
    await check_h2d(tb, 8 * 512, seed=4, offset=0, tags=1)
    stalls = await tb.read(STALL_COUNT)
    longest_us = await tb.read(MAX_STALL) * 16e-3
    assert stalls == 2, stalls                          # requests 3 and 7 of 8
    assert 4.0 <= longest_us < 5.0, longest_us
    # d2h: the link refuses data for 5 µs in the middle of the run.
    region, start, addr = tb.alloc(65536)

    async def throttle():
        await Timer(3, "us")
        tb.dev.rq_sink.pause = True
        await Timer(5, "us")
        tb.dev.rq_sink.pause = False

    cocotb.start_soon(throttle())
    await tb.dma(d2h=(addr, 65536, 0), seed=4)
    assert await tb.read(STALL_COUNT) >= 1
    assert await tb.read(MAX_STALL_CYCLES) >= 4.5e-6 * tb.clk_hz
    assert await region.read(start, 65536) == pattern(4, 0, 65536)


@cocotb.test()
async def demo_register_flow(dut):
    """Document 001 §4 steps 0-11 with a small block amount: results appear only when the
    run ends, in 0.1 s units, with per-mode cycle counters, and a start without the buffer
    addresses is ignored."""
    tb = await setup(dut, mps=128, mrrs=512)
    await tb.write(START, 2)
    await tb.read(VERSION)                              # the write has arrived
    assert not (dut.h2d_busy.value or dut.d2h_busy.value), "start ignored before setup"
    buffers = [tb.alloc(8192)[2] for _ in range(2)]
    await tb.write(BUFFER1, buffers[0])
    await tb.write(BUFFER2, buffers[1])
    await tb.write(FIXED, 0x2000)
    blocks = 4
    await tb.write(BLOCK_AMOUNT, blocks)
    await tb.write(THRESHOLD, 0x0C35)
    for mode in (2, 1, 3):
        tb.requests.clear()
        await tb.write(START, mode)
        assert await tb.read(TX_RESULT if mode != 1 else RX_RESULT) == 0, "0 while running"
        assert dut.h2d_busy.value or dut.d2h_busy.value
        while True:                                     # step 8: poll until != 0
            tx, rx = await tb.read(TX_RESULT), await tb.read(RX_RESULT)
            if (tx or not mode & 2) and (rx or not mode & 1):
                break
            await Timer(1, "us")
        if mode & 2:
            assert tx == 1, tx                         # < 0.1 s rounds up to one unit
        if mode & 1:
            assert rx == 1, rx
        cycles = await tb.read(MODE_CYCLES[mode])
        assert cycles > 0
        moved = {kind: sum(r[2] for r in tb.requests if r[0] == kind) for kind in ("read", "write")}
        assert moved["write"] == (blocks * 0x2000 if mode & 2 else 0)
        assert moved["read"] == (blocks * 0x2000 if mode & 1 else 0)
        # Every TLP falls inside one of the two 8 KiB buffers, and both are used.
        used = [next((i for i, b in enumerate(buffers) if b <= r[1] and r[1] + r[2] <= b + 8192), None) for r in tb.requests]
        assert set(used) == {0, 1}, used
        assert await tb.read(STALL_COUNT) == 0
        assert await tb.read(MAX_STALL) < 0x0C35


@cocotb.test()
async def throughput(dut):
    """Throughput in device cycles for 64 KiB each way, one direction at a time, written to
    build/<link>/throughput.json for run.py to compare with `pcieperf model`."""
    tb = await setup(dut)
    mps, mrrs = {"gen1x4": (128, 512), "gen3x8": (256, 512)}[tb.link]
    await tb.set_limits(mps, mrrs)
    size = 65536
    region, start, addr = await host_pattern(tb, size, 1, 0)
    await tb.dma(h2d=(addr, size, 0), seed=1, tags=32)
    h2d_cycles = await tb.read64(H2D_CYCLES)
    await tb.dma(d2h=(addr, size, 0), seed=1)
    d2h_cycles = await tb.read64(D2H_CYCLES)
    result = {
        "link": tb.link, "mps_bytes": mps, "mrrs_bytes": mrrs, "tags": 32, "bytes": size,
        "clock_hz": tb.clk_hz, "h2d_cycles": h2d_cycles, "d2h_cycles": d2h_cycles,
        "h2d_MBps": size / (h2d_cycles / tb.clk_hz) / 1e6, "d2h_MBps": size / (d2h_cycles / tb.clk_hz) / 1e6,
    }
    out = os.environ.get("PCIEPERF_THROUGHPUT_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(result, f)
    dut._log.warning("throughput (co-simulated): %s", result)
