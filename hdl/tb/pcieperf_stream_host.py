"""The host side of the core's streaming mode (docs/hdl.md#streaming-mode): a ring of buffers in
the root complex's memory and a consumer that takes each message when its flag write arrives,
checks it, clears the flag and rings the doorbell (OCDP's "remote done").

Used by the cocotb tests (test_stream.py) and by the co-simulation server's `stream` request.
Times: `arrived_ns`, `seen_ns`, `released_ns` are simulated host time; `start_cycles` and
`service_cycles` come from the device (its clock, in the metadata and the flag word).
"""

from dataclasses import dataclass

import cocotb
from cocotb.triggers import Event, FallingEdge, Timer
from cocotb.utils import get_sim_time

from pcieperf_regmap import (
    STREAM_BUFFER_BYTES, STREAM_BUFFERS, STREAM_CONTROL, STREAM_CONTROL_LOSSY_SHIFT, STREAM_CONTROL_RUN_SHIFT,
    STREAM_CYCLES, STREAM_DATA_ADDR, STREAM_DOORBELL, STREAM_DROPPED, STREAM_DURATION, STREAM_DWELL, STREAM_FLAG_ADDR,
    STREAM_MAX_WAIT_CYCLES, STREAM_MESSAGE_BYTES, STREAM_MESSAGES, STREAM_META_ADDR, STREAM_OPCODE,
    STREAM_PRODUCED, STREAM_RQ_STALL_CYCLES, STREAM_SENT, STREAM_WAIT_CYCLES,
)

META_BYTES = 16
FLAG_SET = 1 << 31


def payload(sequence, message_bytes):
    """What the core writes as message `sequence`: DW w is sequence[15:0] << 16 | w[15:0]."""
    return b"".join((((sequence & 0xFFFF) << 16) | (w & 0xFFFF)).to_bytes(4, "little") for w in range(message_bytes // 4))


@dataclass
class Message:
    sequence: int
    slot: int
    bytes: int
    opcode: int
    start_cycles: int      # device clock at the message's start (metadata)
    service_cycles: int    # start to the flag write queued (flag word)
    arrived_ns: float      # the flag write reached host memory
    seen_ns: float         # the consumer took it
    released_ns: float     # the consumer rang the doorbell for it
    occupancy: int         # full buffers just after its flag arrived
    data_ok: bool


@dataclass
class StreamResult:
    messages: list
    produced: int
    sent: int
    dropped: int
    wait_cycles: int
    max_wait_cycles: int
    rq_stall_cycles: int
    cycles: int


class StreamHost:
    def __init__(self, tb, buffers, buffer_bytes):
        self.tb = tb
        self.buffers, self.buffer_bytes = buffers, buffer_bytes
        self.data, _, self.data_addr = self._region(buffers * buffer_bytes)
        self.meta, _, self.meta_addr = self._region(buffers * META_BYTES)
        self.flags, _, self.flag_addr = self._region(buffers * 4)
        self.arrivals = []          # (time ns, slot) of each flag write, in arrival order
        self.arrived = Event()       # a flag write arrived, or the stream ended
        self.progress = Event()      # the consumer took a message, or the stream ended
        self.out, self.reported, self.result, self.task = [], 0, None, None
        tb.write_hooks.append(self._on_write)

    def close(self):
        """Stop watching host memory writes (the regions stay allocated)."""
        self.tb.write_hooks.remove(self._on_write)

    def _region(self, size):
        region, start, addr = self.tb.alloc(size)
        return _Window(region, start), start, addr

    def _on_write(self, address, length):
        if self.flag_addr <= address < self.flag_addr + 4 * self.buffers:
            self.arrivals.append((get_sim_time("ns"), (address - self.flag_addr) // 4))
            self.arrived.set()

    async def start(self, messages, message_bytes, dwell_cycles=0, lossy=False, opcode=0, release_delay_ns=None,
                    duration_cycles=0):
        """Program and start one stream of `messages`, and the consumer that takes them;
        `release_delay_ns(index)` is how long the consumer holds the index-th message it takes
        before ringing the doorbell (default: rings at once); `duration_cycles` (0: none) ends
        the stream on the device clock (STREAM_DURATION)."""
        tb = self.tb
        self.arrivals.clear()
        self.out, self.reported, self.result = [], 0, None
        await self.flags.write(0, bytes(4 * self.buffers))
        for reg, value in ((STREAM_DATA_ADDR, self.data_addr), (STREAM_META_ADDR, self.meta_addr), (STREAM_FLAG_ADDR, self.flag_addr),
                           (STREAM_DURATION, duration_cycles)):
            await tb.write64(reg, value)
        for reg, value in ((STREAM_BUFFERS, self.buffers), (STREAM_BUFFER_BYTES, self.buffer_bytes),
                           (STREAM_MESSAGE_BYTES, message_bytes), (STREAM_MESSAGES, messages),
                           (STREAM_DWELL, dwell_cycles), (STREAM_OPCODE, opcode)):
            await tb.write(reg, value)
        await tb.write(STREAM_CONTROL, 1 << STREAM_CONTROL_RUN_SHIFT | int(lossy) << STREAM_CONTROL_LOSSY_SHIFT)
        self.task = cocotb.start_soon(self._consume(release_delay_ns))

    async def run(self, *args, **kwargs):
        """start(), then wait for the whole stream: its StreamResult."""
        await self.start(*args, **kwargs)
        await self.task
        return self.result

    async def next(self, count):
        """Up to `count` messages the consumer took since the last call, waiting until there are
        `count` or the stream has ended; with the StreamResult once it has (else None)."""
        while len(self.out) - self.reported < count and self.result is None:
            self.progress.clear()
            await self.progress.wait()
        taken = self.out[self.reported:self.reported + count]
        self.reported += len(taken)
        return taken, self.result if self.reported == len(self.out) else None

    async def _consume(self, release_delay_ns):
        tb = self.tb
        finished = {}

        async def watch_end():
            # Busy falls after the last flag write left the core; a register read cannot pass
            # posted writes, so once it answers every flag is in host memory.
            await FallingEdge(tb.dut.stream_busy)
            finished["sent"] = await tb.read(STREAM_SENT)
            self.arrived.set()

        watcher = cocotb.start_soon(watch_end())
        taken, out = 0, self.out
        slot = 0
        while "sent" not in finished or taken < finished["sent"]:
            if taken >= len(self.arrivals):
                self.arrived.clear()
                await self.arrived.wait()
                continue
            arrived_ns, arrived_slot = self.arrivals[taken]
            assert arrived_slot == slot, f"flag of slot {arrived_slot} arrived where slot {slot} was next"
            seen_ns = get_sim_time("ns")
            flag = int.from_bytes(await self.flags.read(4 * slot, 4), "little")
            meta = await self.meta.read(META_BYTES * slot, META_BYTES)
            length = int.from_bytes(meta[0:4], "little")
            word1 = int.from_bytes(meta[4:8], "little")
            data = await self.data.read(self.buffer_bytes * slot, length)
            sequence = word1 & 0xFFFFFF
            # Occupancy when this flag arrived: landed so far minus released before that moment.
            released_before = sum(1 for m in out if m.released_ns <= arrived_ns)
            delay = release_delay_ns(taken) if release_delay_ns else 0
            if delay > 0:
                await Timer(delay, "ns")
            await self.flags.write(4 * slot, bytes(4))
            released_ns = get_sim_time("ns")
            await tb.write(STREAM_DOORBELL, 1)
            out.append(Message(
                sequence=sequence, slot=slot, bytes=length, opcode=word1 >> 24,
                start_cycles=int.from_bytes(meta[8:16], "little"), service_cycles=flag & ~FLAG_SET & 0xFFFFFFFF,
                arrived_ns=arrived_ns, seen_ns=seen_ns, released_ns=released_ns,
                occupancy=taken + 1 - released_before, data_ok=bool(flag & FLAG_SET) and data == payload(sequence, length),
            ))
            taken += 1
            slot = (slot + 1) % self.buffers
            self.progress.set()
        await watcher
        self.result = StreamResult(
            messages=out, produced=await tb.read(STREAM_PRODUCED), sent=finished["sent"],
            dropped=await tb.read(STREAM_DROPPED), wait_cycles=await tb.read(STREAM_WAIT_CYCLES),
            max_wait_cycles=await tb.read(STREAM_MAX_WAIT_CYCLES), rq_stall_cycles=await tb.read(STREAM_RQ_STALL_CYCLES),
            cycles=await tb.read64(STREAM_CYCLES),
        )
        self.progress.set()


class _Window:
    """Part of a memory region from `start`: offsets relative to the aligned buffer."""

    def __init__(self, region, start):
        self.region, self.start = region, start

    async def read(self, offset, length):
        return await self.region.read(self.start + offset, length)

    async def write(self, offset, data):
        await self.region.write(self.start + offset, data)
