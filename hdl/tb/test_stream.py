"""cocotb tests of the core's streaming mode (docs/hdl.md#streaming-mode), run by run.py on each
modelled link: messages arrive whole and in order, TLPs respect MaxPayload and 4 KiB, the ring
back-pressures the device, lossy mode counts its drops exactly, and the dwell shows as bubbles
of exactly that many device cycles."""

import cocotb

from pcieperf_stream_host import META_BYTES, StreamHost
from pcieperf_tb import Testbench


async def setup(dut, mps=256, mrrs=512):
    tb = Testbench(dut)
    await tb.init(mps, mrrs)
    return tb


def ring_writes(tb, host):
    """The core's writes into the ring, as (kind, slot, address, bytes), in arrival order."""
    out = []
    for kind, address, length, _ in tb.requests:
        if kind != "write":
            continue
        if host.data_addr <= address < host.data_addr + host.buffers * host.buffer_bytes:
            out.append(("data", (address - host.data_addr) // host.buffer_bytes, address, length))
        elif host.meta_addr <= address < host.meta_addr + host.buffers * META_BYTES:
            out.append(("meta", (address - host.meta_addr) // META_BYTES, address, length))
        elif host.flag_addr <= address < host.flag_addr + host.buffers * 4:
            out.append(("flag", (address - host.flag_addr) // 4, address, length))
    return out


def check_lossless_order(result, buffers):
    """A message never lands in a buffer the host has not given back: message k arrives after
    the host released message k - buffers."""
    messages = result.messages
    for k in range(buffers, len(messages)):
        assert messages[k].arrived_ns >= messages[k - buffers].released_ns, (
            f"message {k} arrived at {messages[k].arrived_ns} ns, before its buffer was released "
            f"at {messages[k - buffers].released_ns} ns")


@cocotb.test()
async def stream_messages_in_order(dut):
    """Data, metadata and flag of every message, in that order, in ring order; data TLPs of at
    most MaxPayload that never cross 4 KiB (1500-byte buffers put boundaries inside messages)."""
    tb = await setup(dut)
    for mps in (128, 256):
        await tb.set_limits(mps, 512)
        host = StreamHost(tb, buffers=5, buffer_bytes=1500)
        tb.requests.clear()
        result = await host.run(messages=12, message_bytes=1400, opcode=0xA5)
        assert (result.produced, result.sent, result.dropped) == (12, 12, 0)
        assert [m.sequence for m in result.messages] == list(range(12))
        assert [m.slot for m in result.messages] == [k % 5 for k in range(12)]
        for m in result.messages:
            assert m.data_ok, f"message {m.sequence}: data or flag wrong"
            assert (m.bytes, m.opcode) == (1400, 0xA5)
            assert m.seen_ns >= m.arrived_ns and m.released_ns >= m.seen_ns
        starts = [m.start_cycles for m in result.messages]
        assert starts == sorted(starts) and len(set(starts)) == 12, "device timestamps increase"
        writes = ring_writes(tb, host)
        assert writes, "no ring writes seen"
        assert all(length <= mps for kind, _, _, length in writes), f"a TLP above MPS {mps}"
        assert not [w for w in writes if w[2] // 4096 != (w[2] + w[3] - 1) // 4096], "a TLP crosses 4 KiB"
        assert any((host.data_addr + 1500 * s) // 4096 != (host.data_addr + 1500 * s + 1399) // 4096 for s in range(5)), \
            "the layout should put a 4 KiB boundary inside a message"
        # Per message: its data TLPs (1400 bytes), then one 16-byte metadata write, then one 1-DW flag.
        k = 0
        i = 0
        while i < len(writes):
            slot = k % 5
            data = 0
            while writes[i][0] == "data":
                assert writes[i][1] == slot, f"data of slot {writes[i][1]} while message {k} (slot {slot}) was going"
                data += writes[i][3]
                i += 1
            assert data == 1400, f"message {k}: {data} data bytes before its metadata"
            assert writes[i][:2] == ("meta", slot) and writes[i][3] == 16, writes[i]
            assert writes[i + 1][:2] == ("flag", slot) and writes[i + 1][3] == 4, writes[i + 1]
            i += 2
            k += 1
        assert k == 12
        check_lossless_order(result, 5)


@cocotb.test()
async def stream_backpressure(dut):
    """A host that stops ringing the doorbell stops the device: nothing is lost or overwritten,
    the ring fills, and the device counts the cycles it waited."""
    tb = await setup(dut)
    pause_ns = 3000
    host = StreamHost(tb, buffers=3, buffer_bytes=256)
    result = await host.run(messages=10, message_bytes=64, release_delay_ns=lambda k: pause_ns if k == 2 else 0)
    assert (result.produced, result.sent, result.dropped) == (10, 10, 0)
    assert [m.sequence for m in result.messages] == list(range(10))
    assert all(m.data_ok for m in result.messages)
    check_lossless_order(result, 3)
    assert max(m.occupancy for m in result.messages) == 3, "the ring should fill while the host holds a buffer"
    # Message 5 needs message 2's buffer: the device waited through most of the pause.
    period_ns = 1e9 / tb.clk_hz
    assert result.max_wait_cycles * period_ns > 0.7 * pause_ns, (result.max_wait_cycles, pause_ns)
    assert result.wait_cycles >= result.max_wait_cycles
    assert result.messages[5].arrived_ns > result.messages[2].released_ns


@cocotb.test()
async def stream_lossy_counts_drops(dut):
    """Lossy mode with a slow host: every message without a free buffer is dropped, counted by
    the device, and its sequence number is skipped; the gaps the host sees are the count."""
    tb = await setup(dut)
    host = StreamHost(tb, buffers=2, buffer_bytes=128)
    result = await host.run(messages=24, message_bytes=64, dwell_cycles=40, lossy=True, release_delay_ns=lambda k: 700)
    sequences = [m.sequence for m in result.messages]
    assert sequences == sorted(set(sequences)), "sequence numbers increase"
    gaps = sum(b - a - 1 for a, b in zip(sequences, sequences[1:])) + sequences[0] + (23 - sequences[-1])
    assert result.dropped > 0, "the slow host should cause drops"
    assert gaps == result.dropped, f"host sees {gaps} missing, device counted {result.dropped}"
    assert (result.produced, result.sent) == (24, 24 - result.dropped)
    assert len(result.messages) == result.sent
    assert all(m.data_ok for m in result.messages)
    assert result.wait_cycles == 0, "lossy mode never waits"


@cocotb.test()
async def stream_dwell_bubbles(dut):
    """The gap between one message's flag write and the next message's start is the core's fixed
    turnaround plus the dwell, exactly, in device cycles: a dwell of 1 cycle is visible."""
    tb = await setup(dut)
    gaps = {}
    for dwell in (0, 1, 5):
        host = StreamHost(tb, buffers=16, buffer_bytes=256)
        result = await host.run(messages=6, message_bytes=256, dwell_cycles=dwell)
        assert result.wait_cycles == 0, "16 buffers for 6 messages: never a full ring"
        m = result.messages
        seen = {m[k].start_cycles - (m[k - 1].start_cycles + m[k - 1].service_cycles) for k in range(1, len(m))}
        assert len(seen) == 1, f"dwell {dwell}: gaps {seen}"
        gaps[dwell] = seen.pop()
    lanes = len(dut.s_axis_rq_tdata) // 32
    flag_beats = -(-5 // lanes)   # descriptor (4 DW) + 1 DW
    # The flag is queued, sent in flag_beats beats, then the next message takes its buffer one
    # cycle later (and sends its first beat two cycles after that).
    assert gaps[0] == flag_beats + 1, f"turnaround {gaps[0]} cycles: flag beats {flag_beats} + 1 (docs/hdl.md)"
    assert gaps[1] - gaps[0] == 1 and gaps[5] - gaps[0] == 5, gaps


@cocotb.test(timeout_time=500, timeout_unit="us")
async def stream_duration_ends_on_the_device_clock(dut):
    """STREAM_DURATION ends a stream on the device clock, however many messages STREAM_MESSAGES
    allows: every message starts less than the duration after the first, the next one could
    not have (the count is what the clock allows, to the message), and nothing after the
    deadline is sent, dropped or waited for."""
    tb = await setup(dut)
    lanes = len(dut.s_axis_rq_tdata) // 32
    flag_beats = -(-5 // lanes)
    unbounded = 0xFFFF_FFFF
    duration = 600

    # Lossless, a ring that never fills: the stream stops when the clock says so.
    host = StreamHost(tb, buffers=32, buffer_bytes=256)
    result = await host.run(messages=unbounded, message_bytes=64, duration_cycles=duration)
    m = result.messages
    assert len(m) > 3, f"{len(m)} messages in {duration} cycles"
    assert (result.produced, result.sent, result.dropped, result.wait_cycles) == (len(m), len(m), 0, 0)
    assert [x.sequence for x in m] == list(range(len(m)))
    assert all(x.data_ok for x in m)
    first, last = m[0].start_cycles, m[-1].start_cycles
    assert last - first < duration, f"message {len(m) - 1} started {last - first} cycles in"
    # With no dwell and a free buffer, the next message would have started one cycle after the
    # last flag's beats: at or past the duration, or it would be here.
    next_start = last + m[-1].service_cycles + flag_beats + 1
    assert next_start - first >= duration, f"another message could start at {next_start - first} cycles"
    # The run ends with the last message: within one message of the duration.
    assert result.cycles <= duration + m[-1].service_cycles + flag_beats + 1, (result.cycles, duration)

    # Lossless with the host holding a buffer past the deadline: the device stops waiting when
    # the clock passes the duration, and the message it waited for is neither sent nor dropped.
    period_ns = 1e9 / tb.clk_hz
    host = StreamHost(tb, buffers=2, buffer_bytes=256)
    result = await host.run(messages=unbounded, message_bytes=64, duration_cycles=duration,
                            release_delay_ns=lambda k: 2 * duration * period_ns if k == 1 else 0)
    m = result.messages
    assert (result.produced, result.sent, result.dropped) == (len(m), len(m), 0)
    assert result.wait_cycles > 0, "the device should have waited for the held buffer"
    assert all(x.start_cycles - m[0].start_cycles < duration for x in m)
    assert duration <= result.cycles <= duration + 1, f"the stream ran {result.cycles} cycles, not to its deadline"

    # Lossy with a slow host: drops happen only before the deadline and are counted exactly.
    host = StreamHost(tb, buffers=2, buffer_bytes=128)
    result = await host.run(messages=unbounded, message_bytes=64, dwell_cycles=10, lossy=True,
                            duration_cycles=duration, release_delay_ns=lambda k: 400)
    sequences = [x.sequence for x in result.messages]
    assert result.dropped > 0, "the slow host should cause drops"
    assert result.produced == result.sent + result.dropped
    assert sequences[-1] < result.produced
    gaps = sum(b - a - 1 for a, b in zip(sequences, sequences[1:])) + sequences[0] + (result.produced - 1 - sequences[-1])
    assert gaps == result.dropped, f"host sees {gaps} missing, device counted {result.dropped}"
    assert all(x.start_cycles - result.messages[0].start_cycles < duration for x in result.messages)

    # Whichever comes first: a count below what the duration allows ends the stream.
    host = StreamHost(tb, buffers=8, buffer_bytes=256)
    result = await host.run(messages=3, message_bytes=64, duration_cycles=1 << 40)
    assert (result.produced, result.sent) == (3, 3)
