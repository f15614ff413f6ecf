#!/usr/bin/env python3
"""Synthesise the pcieperf core for an UltraScale+ part with Yosys and count what it takes.

    synth.py [--variant NAME ...] [--json FILE]    # the resource table of docs/hdl.md

Runs `synth_xilinx -family xcup -top pcieperf_top` (Debian's `yosys`) on the RTL and fails when
Yosys errors (an unsupported construct, a parse error) or the netlist holds a latch (LDCE/LDPE).
run.py's test flow runs the default variant. Exit status: 0 synthesised clean, 1 failed, 77
yosys missing (the line printed says so).
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RTL = Path(__file__).resolve().parent.parent / "rtl"
SKIP = 77

# name -> (what it is, parameters of pcieperf_top). Gen1 x4's 64-bit interface at 125 MHz: the
# width of document 001's design.
VARIANTS = {
    "full": ("the whole core: registers, both DMA engines, counters, streaming mode", {}),
    "no_stream": ("without the streaming mode", {"ENABLE_STREAM": 0}),
    "no_counters": ("without the busy/stall counters", {"ENABLE_COUNTERS": 0}),
    "full_256": ("the whole core with a 256-bit interface (Gen3 x8)", {"DATA_WIDTH": 256, "CLK_HZ": 250_000_000}),
}
BASE_PARAMETERS = {"DATA_WIDTH": 64, "CLK_HZ": 125_000_000}

# Cell types counted as each resource (Yosys' Xilinx primitives).
LUTS = ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6")
FFS = ("FDRE", "FDSE", "FDCE", "FDPE")
LUTRAM = ("RAM32M16", "RAM32M", "RAM64M", "RAM64M8", "RAM32X1D", "RAM64X1D", "RAM128X1D", "RAM256X1D", "RAM512X1S")
LATCHES = ("LDCE", "LDPE")


def resources(cells):
    """LUT/FF/BRAM/DSP counts of one module's or the design's cells by type. BRAM in 36 Kb
    blocks (a RAMB18 is half)."""
    count = lambda types: sum(cells.get(t, 0) for t in types)
    return {
        "luts": count(LUTS),
        "lut1": cells.get("LUT1", 0),
        "lutram": count(LUTRAM),
        "ffs": count(FFS),
        "bram36": cells.get("RAMB36E2", 0) + cells.get("RAMB18E2", 0) / 2,
        "dsp": cells.get("DSP48E2", 0),
        "latches": count(LATCHES),
    }


def synthesise(variant, workdir):
    """Run Yosys on a variant: ({"design": ..., "modules": {name: ...}}, seconds); raises
    RuntimeError with Yosys' last lines when it fails."""
    parameters = {**BASE_PARAMETERS, **VARIANTS[variant][1]}
    stat = Path(workdir) / f"{variant}.stat"
    log = Path(workdir) / f"{variant}.log"
    sources = " ".join(str(p) for p in sorted(RTL.glob("*.v")))
    chparam = " ".join(f"-set {k} {v}" for k, v in parameters.items())
    script = (f"read_verilog -sv -I{RTL} {sources}; chparam {chparam} pcieperf_top; "
              f"synth_xilinx -family xcup -top pcieperf_top; "
              f"select -assert-none t:{' t:'.join(LATCHES)}; tee -q -o {stat} stat")
    started = time.monotonic()
    done = subprocess.run(["yosys", "-q", "-l", str(log), "-p", script], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = " | ".join(line.strip() for line in (done.stderr or done.stdout).splitlines()[-4:])
        raise RuntimeError(f"yosys failed on variant {variant} (latch, unsupported construct or error): {tail}")
    sections = parse_stat(stat.read_text())
    # Module names carry their parameters ($paramod$...\\pcieperf_regs): keep the module's own.
    modules = {next(p for p in name.split("\\") if p.startswith("pcieperf_")): resources(cells)
               for name, cells in sections.items() if "pcieperf_" in name}
    return {"design": resources(sections["design hierarchy"]), "modules": modules}, seconds


def parse_stat(text):
    """Cells by type of each section of Yosys' `stat` text ("=== NAME ===", then "Number of
    cells:" and one "TYPE COUNT" line per type); the totals are the "design hierarchy" section.
    (Yosys 0.23's `stat -json` writes invalid JSON for parameterised hierarchies.)"""
    sections, current, cells = {}, None, None
    for line in text.splitlines():
        header = re.match(r"^=== (.+) ===$", line.strip())
        if header:
            current, cells = header.group(1), None
            continue
        if current is None:
            continue
        if line.strip().startswith("Number of cells:"):
            cells = sections.setdefault(current, {})
            continue
        row = re.match(r"^\s+(\S+)\s+(\d+)$", line)
        if cells is not None and row:
            cells[row.group(1)] = int(row.group(2))
        elif cells is not None and line.strip():
            cells = None
    # A single-module design has no hierarchy section: its module is the total.
    if "design hierarchy" not in sections and len(sections) == 1:
        sections["design hierarchy"] = next(iter(sections.values()))
    return sections


def start(variant="full"):
    """Start synthesising in the background (run.py's test flow): a callable that waits and
    returns (ok, line)."""
    if shutil.which("yosys") is None:
        return lambda: (True, "hdl synth: skipped: yosys not installed (apt install yosys)")
    command = [sys.executable, __file__, "--variant", variant]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish():
        out, _ = process.communicate()
        lines = [line for line in out.splitlines() if line.strip()]
        return process.returncode == 0, "\n".join(lines[-3:])

    return finish


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=list(VARIANTS))
    parser.add_argument("--json", type=Path, help="write every variant's counts here")
    args = parser.parse_args()
    if shutil.which("yosys") is None:
        print("skipped: yosys not installed (apt install yosys)", flush=True)
        return SKIP
    results = {}
    with tempfile.TemporaryDirectory(prefix="pcieperf-synth-") as workdir:
        for variant in args.variant or ["full"]:
            try:
                counts, seconds = synthesise(variant, workdir)
            except RuntimeError as error:
                print(f"hdl synth: {error}", flush=True)
                return 1
            results[variant] = counts
            d = counts["design"]
            print(f"hdl synth {variant} (xcup, Yosys): clean, no latches: {d['luts']} LUTs ({d['lut1']} LUT1), "
                  f"{d['lutram']} LUTRAM cells, {d['ffs']} FFs, {d['bram36']:g} BRAM36, {d['dsp']} DSP in {seconds:.0f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
