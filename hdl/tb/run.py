#!/usr/bin/env python3
"""Build the pcieperf core with Icarus Verilog and run its cocotb tests, or serve it to pcieperf.

    run.py test [--link gen1x4|gen3x8|all] [--testcase NAME]   # the HDL test suite
    run.py cosim --socket PATH [--link gen3x8]                  # co-simulation server (docs/cosim.md)

Needs iverilog (Debian `iverilog`) and the Python packages cocotb 2.x, cocotbext-pcie,
cocotbext-axi (.ci/run installs them). Exit status: 0 all tests passed, 1 a test failed,
77 prerequisites missing (the line printed names them).
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RTL = HERE.parent / "rtl"
LINKS = {"gen1x4": (64, 125_000_000), "gen3x8": (256, 250_000_000)}
SKIP = 77


def missing_prerequisites():
    missing = []
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        missing.append("iverilog (apt install iverilog)")
    for module, package in (("cocotb", "cocotb"), ("cocotbext.pcie", "cocotbext-pcie"), ("cocotbext.axi", "cocotbext-axi")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{package} (pip install {package})")
    return missing


def build(link):
    from cocotb_tools.runner import get_runner

    bits, clk_hz = LINKS[link]
    runner = get_runner("icarus")
    build_dir = Path(os.environ.get("PCIEPERF_HDL_BUILD", HERE.parent / "build")) / link
    runner.build(
        sources=sorted(RTL.glob("*.v")),
        includes=[RTL],
        hdl_toplevel="pcieperf_top",
        parameters={"DATA_WIDTH": bits, "CLK_HZ": clk_hz},
        build_dir=build_dir,
        timescale=("1ns", "1ps"),
        log_file=build_dir / "build.log",
    )
    return runner, build_dir


def run(link, module, testcase=None, extra_env=None, log_file=None):
    from cocotb_tools.runner import get_results

    runner, build_dir = build(link)
    env = {"PCIEPERF_LINK": link, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(extra_env or {})
    results = runner.test(
        test_module=module,
        hdl_toplevel="pcieperf_top",
        testcase=testcase,
        test_dir=HERE,
        build_dir=build_dir,
        extra_env=env,
        results_xml=str(build_dir / f"{module}.xml"),
        log_file=log_file,
    )
    return get_results(results)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    test = sub.add_parser("test")
    test.add_argument("--link", default="all", choices=["all", *LINKS])
    test.add_argument("--testcase")
    cosim = sub.add_parser("cosim")
    cosim.add_argument("--socket", required=True)
    cosim.add_argument("--link", default="gen3x8", choices=list(LINKS))
    cosim.add_argument("--log")
    args = parser.parse_args()

    missing = missing_prerequisites()
    if missing:
        print("skipped: HDL prerequisites missing: " + ", ".join(missing), flush=True)
        return SKIP

    if args.command == "cosim":
        log = Path(args.log) if args.log else None
        run(args.link, "cosim_server", extra_env={"PCIEPERF_COSIM_SOCKET": args.socket}, log_file=log)
        return 0

    total = failed = 0
    for link in LINKS if args.link == "all" else [args.link]:
        tests, fails = run(link, "test_core", testcase=args.testcase)
        print(f"hdl {link}: {tests - fails} passed, {fails} failed", flush=True)
        total += tests
        failed += fails
    print(f"hdl test result: {'ok' if failed == 0 else 'FAILED'}. {total - failed} passed; {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
