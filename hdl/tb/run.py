#!/usr/bin/env python3
"""Build the pcieperf core with Icarus Verilog and run its cocotb tests, or serve it to pcieperf.

    run.py test [--link gen1x4|gen3x8|all] [--testcase NAME]   # the HDL test suite
    run.py cosim --socket PATH [--link gen3x8]                  # co-simulation server (docs/cosim.md)

Needs iverilog (Debian `iverilog`) and the Python packages cocotb 2.x, cocotbext-pcie,
cocotbext-axi (.ci/run installs them). Exit status: 0 all tests passed, 1 a test failed,
77 prerequisites missing (the line printed names them). `test` also synthesises the core for
UltraScale+ with Yosys where it is installed (synth.py: no latches, no errors).
"""

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RTL = HERE.parent / "rtl"
LINKS = {"gen1x4": (64, 125_000_000), "gen3x8": (256, 250_000_000)}
SKIP = 77
# The cocotb test modules: the core's registers and DMA engines, its streaming mode.
MODULES = ("test_core", "test_stream")


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


def build_dir_of(link, root=None):
    return Path(root or os.environ.get("PCIEPERF_HDL_BUILD", HERE.parent / "build")) / link


def build(link, root=None):
    from cocotb_tools.runner import get_runner

    bits, clk_hz = LINKS[link]
    runner = get_runner("icarus")
    build_dir = build_dir_of(link, root)
    runner.build(
        sources=sorted(RTL.glob("*.v")),
        includes=[RTL],
        hdl_toplevel="pcieperf_top",
        parameters={"DATA_WIDTH": bits, "CLK_HZ": clk_hz},
        build_dir=build_dir,
        timescale=("1ns", "1ps"),
        log_file=build_dir / "build.log",
        always=True,  # a change to an included file (.vh) is not seen by the outdated check
    )
    return runner, build_dir


def run(link, module, testcase=None, extra_env=None, log_file=None, build_root=None):
    from cocotb_tools.runner import get_results

    runner, build_dir = build(link, build_root)
    extra_env = {"PCIEPERF_THROUGHPUT_JSON": str(build_dir / "throughput.json"), **(extra_env or {})}
    env = {"PCIEPERF_LINK": link, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(extra_env)
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


def pcieperf_binary():
    """The pcieperf binary cargo built (debug first: `cargo test` builds it)."""
    if os.environ.get("PCIEPERF_BIN"):
        return Path(os.environ["PCIEPERF_BIN"])
    for profile in ("debug", "release"):
        path = HERE.parents[1] / "target" / profile / "pcieperf"
        if path.exists():
            return path
    return None


# The co-simulated throughput may not beat pcieperf's model by more than cocotbext-pcie's link
# leaves out (SKP ordered sets, ~0.4 % at 8b/10b and 128b/130b, and DLLPs beyond the ones the
# port model sends), nor fall below the engines' own per-TLP cost (docs/hdl.md).
MODEL_RATIO_BOUNDS = (0.80, 1.03)


def compare_with_model(link, measured_path):
    """Measured device-cycle throughput vs `pcieperf model` for the same link, MPS, MRRS,
    tags and size. Returns the number of failed comparisons."""
    binary = pcieperf_binary()
    if binary is None:
        print(f"hdl {link}: skipped: model comparison (no pcieperf binary; run cargo build first)")
        return 0
    import json
    import subprocess

    measured = json.loads(Path(measured_path).read_text())
    # The root complex model answers reads at once; the link adds ~10 ns each way.
    command = [str(binary), "model", "--link", link, "--mps", str(measured["mps_bytes"]),
               "--mrrs", str(measured["mrrs_bytes"]), "--tags", str(measured["tags"]),
               "--read-latency-ns", "20", "--sizes", str(measured["bytes"]), "--json"]
    model = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)["rows"][0]
    failed = 0
    for direction, model_key in (("h2d", "read_MBps"), ("d2h", "write_MBps")):
        got, want = measured[f"{direction}_MBps"], model[model_key]
        ratio = got / want
        ok = MODEL_RATIO_BOUNDS[0] <= ratio <= MODEL_RATIO_BOUNDS[1]
        failed += not ok
        print(f"hdl {link}: {direction} {measured['bytes']} bytes, MPS {measured['mps_bytes']}, "
              f"MRRS {measured['mrrs_bytes']}: co-simulated {got:.0f} MB/s "
              f"({measured[direction + '_cycles']} cycles at {measured['clock_hz'] / 1e6:.1f} MHz), "
              f"model {want:.0f} MB/s, ratio {ratio:.3f} {'ok' if ok else 'OUT OF BOUNDS'}")
    return failed


def lint():
    """verilator --lint-only -Wall at each interface width: (checks, failures)."""
    if shutil.which("verilator") is None:
        print("hdl lint: skipped: verilator not installed (apt install verilator)", flush=True)
        return 0, 0
    import subprocess

    failures = 0
    for link, (bits, clk_hz) in LINKS.items():
        command = ["verilator", "--lint-only", "-Wall", f"-I{RTL}", f"-GDATA_WIDTH={bits}", f"-GCLK_HZ={clk_hz}",
                   "--top-module", "pcieperf_top", *map(str, sorted(RTL.glob("*.v")))]
        done = subprocess.run(command, capture_output=True, text=True)
        ok = done.returncode == 0 and "%Warning" not in done.stderr
        failures += not ok
        print(f"hdl lint {link} ({bits}-bit): {'clean' if ok else 'FAILED'}", flush=True)
        if not ok:
            print(done.stderr, flush=True)
    return len(LINKS), failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    test = sub.add_parser("test")
    test.add_argument("--link", default="all", choices=["all", *LINKS])
    test.add_argument("--testcase")
    test.add_argument("--module", action="append", choices=MODULES, help="run only this test module (repeatable)")
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
        # A private build next to the socket: several servers may start at once.
        run(args.link, "cosim_server", extra_env={"PCIEPERF_COSIM_SOCKET": args.socket}, log_file=log,
            build_root=Path(args.socket).resolve().parent / "build")
        return 0

    total, failed = lint()
    # Yosys takes minutes on one core: it runs beside the simulations (the whole suite only).
    import synth
    synthesis = None if args.module or args.testcase else synth.start()
    for link in LINKS if args.link == "all" else [args.link]:
        throughput = build_dir_of(link) / "throughput.json"
        throughput.unlink(missing_ok=True)
        started = time.monotonic()
        tests = fails = 0
        logs = []
        for module in args.module or MODULES:
            log = build_dir_of(link) / f"{module}.log"
            logs.append(log)
            ran, failed_here = run(link, module, testcase=args.testcase, log_file=log)
            tests += ran
            fails += failed_here
        if throughput.exists():
            tests += 1
            fails += compare_with_model(link, throughput)
        print(f"hdl {link}: {tests - fails} passed, {fails} failed in {time.monotonic() - started:.0f} s "
              f"(logs: {', '.join(str(log) for log in logs)})", flush=True)
        if fails:
            for log in logs:
                for line in log.read_text(errors="replace").splitlines():
                    if " FAIL " in line or "Error" in line or "assert" in line:
                        print("  " + line.strip(), flush=True)
        total += tests
        failed += fails
    if synthesis:
        ok, line = synthesis()
        print(line, flush=True)
        if "skipped" not in line:
            total += 1
            failed += not ok
    # The same shape as cargo's summary lines, so test.sh's closing line counts these tests.
    print(f"test result: {'ok' if failed == 0 else 'FAILED'}. {total - failed} passed; {failed} failed; "
          "(HDL: Icarus Verilog + cocotb, verilator lint, yosys synth_xilinx)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
