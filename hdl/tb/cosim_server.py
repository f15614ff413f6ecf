"""Co-simulation server: pcieperf drives the core through a Unix socket (docs/cosim.md).

Run by `run.py cosim --socket PATH` (pcieperf's `--target cosim` starts it). One client; one
text line per request and per answer. Simulated time advances only while a request needs it
(a register access crosses the modelled link; `advance` waits), so the client sees a device
whose clock stands still between requests.
"""

import os
import socket

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from pcieperf_regmap import PCI_STATUS, PCI_STATUS_MPS_MASK, PCI_STATUS_MPS_SHIFT, PCI_STATUS_MRRS_MASK, PCI_STATUS_MRRS_SHIFT
from pcieperf_stream_host import StreamHost
from pcieperf_tb import LINKS, Testbench

PROTOCOL_VERSION = 1

# Host memory at the bus addresses `pcieperf demo` programs as document 001 §4's two 8 KiB
# buffers (steps 1-2; crate::bench::demo::DemoOptions::default().buffers).
DEMO_BUFFERS = (0x1000_0000, 0x4000)


class Session:
    def __init__(self, tb):
        self.tb = tb
        self.regions = []
        self.stream = None

    def now_ns(self):
        return int(get_sim_time("ns"))

    async def handle(self, words):
        tb = self.tb
        command, args = words[0], words[1:]
        if command == "hello":
            gen, width, bits, clk_hz = LINKS[tb.link]
            status = await tb.read(PCI_STATUS)
            mps = 128 << ((status >> PCI_STATUS_MPS_SHIFT) & PCI_STATUS_MPS_MASK)
            mrrs = 128 << ((status >> PCI_STATUS_MRRS_SHIFT) & PCI_STATUS_MRRS_MASK)
            return [f"pcieperf-cosim/{PROTOCOL_VERSION}", f"link={tb.link}", f"clock_hz={clk_hz}",
                    f"mps={mps}", f"mrrs={mrrs}", f"data_width={bits}"]
        if command == "read32":
            bar, offset = int(args[0]), int(args[1], 0)
            return [f"{await tb.bars[bar].read_dword(offset):#010x}"]
        if command == "write32":
            bar, offset, value = int(args[0]), int(args[1], 0), int(args[2], 0)
            await tb.bars[bar].write_dword(offset, value)
            return []
        if command == "alloc":
            size = int(args[0], 0)
            region, start, addr = tb.alloc(size)
            self.regions.append((addr, size, region, start))
            return [f"{addr:#x}"]
        if command in ("memwrite", "memread"):
            addr = int(args[0], 0)
            region, start, length = self.find(addr, len(args[1]) // 2 if command == "memwrite" else int(args[1], 0))
            if command == "memwrite":
                await region.write(start, bytes.fromhex(args[1]))
                return []
            return [(await region.read(start, length)).hex()]
        if command == "advance":
            ns = int(args[0], 0)
            if ns > 0:
                await Timer(ns, "ns")
            return []
        if command == "time":
            return []
        if command == "stream_start":
            # MESSAGES MESSAGE_BYTES BUFFERS BUFFER_BYTES DWELL_CYCLES LOSSY [RELEASE_DELAY_NS [DURATION_CYCLES]]
            messages, message_bytes, buffers, buffer_bytes, dwell, lossy = (int(a, 0) for a in args[:6])
            delay_ns = int(args[6], 0) if len(args) > 6 else 0
            duration_cycles = int(args[7], 0) if len(args) > 7 else 0
            if self.stream is not None and self.stream.result is None:
                raise ValueError("a stream is still running: read it to its end with stream_next")
            if self.stream is not None:
                self.stream.close()
            self.stream = StreamHost(tb, buffers, buffer_bytes)
            await self.stream.start(messages, message_bytes, dwell_cycles=dwell, lossy=bool(lossy),
                                    release_delay_ns=(lambda _: delay_ns) if delay_ns else None,
                                    duration_cycles=duration_cycles)
            return []
        if command == "stream_next":
            if self.stream is None:
                raise ValueError("no stream: send stream_start first")
            taken, result = await self.stream.next(int(args[0], 0))
            records = ";".join(
                f"{m.sequence},{m.bytes},{m.start_cycles},{m.service_cycles},{m.arrived_ns:.3f},{m.seen_ns:.3f},"
                f"{m.released_ns:.3f},{m.occupancy},{int(m.data_ok)}" for m in taken)
            values = [f"done={int(result is not None)}"]
            if result is not None:
                values += [f"{name}={getattr(result, name)}" for name in
                           ("produced", "sent", "dropped", "wait_cycles", "max_wait_cycles", "rq_stall_cycles", "cycles")]
            return values + [f"messages={records}"]
        raise ValueError(f"unknown command '{command}'")

    def find(self, addr, length):
        for base, size, region, start in self.regions:
            if base <= addr and addr + length <= base + size:
                return region, start + addr - base, length
        raise ValueError(f"{length} bytes at {addr:#x} are not in allocated host memory")


def read_line(conn, pending):
    while b"\n" not in pending:
        chunk = conn.recv(1 << 20)
        if not chunk:
            return None, pending
        pending += chunk
    line, _, rest = pending.partition(b"\n")
    return line.decode(), rest


@cocotb.test()
async def serve(dut):
    """Serve one client until it sends `quit` or disconnects."""
    path = os.environ["PCIEPERF_COSIM_SOCKET"]
    tb = Testbench(dut)
    await tb.init(int(os.environ.get("PCIEPERF_COSIM_MPS", "256")), int(os.environ.get("PCIEPERF_COSIM_MRRS", "512")))
    tb.map_fixed(*DEMO_BUFFERS)
    session = Session(tb)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    os.rename(path + ".tmp", path)          # the client connects once the name exists
    server.listen(1)
    conn, _ = server.accept()               # blocks the simulator: nothing moves without a client
    pending = b""
    try:
        while True:
            line, pending = read_line(conn, pending)
            if line is None or line.strip() == "quit":
                break
            words = line.split()
            if not words:
                continue
            try:
                values = await session.handle(words)
                answer = " ".join(["ok", str(session.now_ns()), *values])
            except Exception as error:  # one bad request gets an answer, not a dead server
                answer = f"err {session.now_ns()} {type(error).__name__}: {error}".replace("\n", " ")
            conn.sendall(answer.encode() + b"\n")
        conn.sendall(f"ok {session.now_ns()}\n".encode())
    except BrokenPipeError:
        pass
    finally:
        conn.close()
        server.close()
        os.unlink(path)
