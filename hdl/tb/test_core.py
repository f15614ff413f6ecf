"""cocotb tests of the pcieperf core (run by run.py on each modelled link)."""

import cocotb

from pcieperf_tb import *  # noqa: F401,F403  (register names, helpers)
from pcieperf_tb import Testbench, pattern, crc32


@cocotb.test()
async def smoke(dut):
    tb = Testbench(dut)
    await tb.init()
    assert await tb.read(VERSION) == 0x08021600
