#!/usr/bin/env python3
"""Generate every copy of the pcieperf register map from its one source, hdl/regs/pcieperf.rdl.

    generate.py              # rewrite the checked-in files in the repository
    generate.py --out DIR    # write them under DIR instead (same relative paths): the drift test
    generate.py --source F   # read another .rdl (tests of the rules below)

Outputs (paths relative to the repository root):
    src/device/regmap.rs        Rust constants (crate::device::regmap)
    hdl/rtl/pcieperf_regmap.vh  Verilog `defines the RTL register file includes
    hdl/tb/pcieperf_regmap.py   Python constants the cocotb testbench imports
    docs/regmap.md              the register tables

Reads the .rdl with systemrdl-compiler (the PeakRDL front end; .ci/run installs it). Exit
status: 0 written, 1 the map breaks one of the rules below, 77 systemrdl-compiler missing
(the printed line says so).
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = HERE / "pcieperf.rdl"
SKIP = 77

OUTPUTS = {
    "rust": Path("src/device/regmap.rs"),
    "verilog": Path("hdl/rtl/pcieperf_regmap.vh"),
    "python": Path("hdl/tb/pcieperf_regmap.py"),
    "markdown": Path("docs/regmap.md"),
}

# The RTL decodes a register by {BAR (3 bits), offset (12 bits)}: register BARs are 4 KiB at most.
OFFSET_BITS = 12
BAR_BITS = 3


class MapError(Exception):
    pass


# ---- reading the map ------------------------------------------------------------------------

class Field:
    def __init__(self, node):
        self.name = node.inst_name.upper()
        self.lsb, self.msb, self.width = node.lsb, node.msb, node.width
        self.writable = node.is_sw_writable
        self.reset = node.get_property("reset")
        self.desc = node.get_property("desc") or ""
        self.unit_ns = node.get_property("unit_ns", default=None)
        encode = node.get_property("encode")
        self.values = [(m.name.upper(), m.value, m.rdl_desc or "") for m in encode] if encode else []


class Register:
    def __init__(self, node, bar):
        self.name = node.inst_name.upper()
        self.bar = bar
        self.offset = node.address_offset
        self.bytes = node.size
        self.desc = node.get_property("desc") or ""
        self.fields = [Field(f) for f in node.fields()]
        self.writable = any(f.writable for f in self.fields)
        resets = [f.reset for f in self.fields]
        # A reset value only when every field has one (registers the hardware drives have none).
        self.reset = sum(r << f.lsb for r, f in zip(resets, self.fields)) if None not in resets else None

    def words(self):
        """(suffix, offset) of each 32-bit word: a 64-bit register is two, low first."""
        return [("" if i == 0 else "_HIGH", self.offset + 4 * i) for i in range(self.bytes // 4)]

    def split_fields(self):
        """Fields worth naming: those that do not simply fill the whole register."""
        if len(self.fields) == 1 and self.fields[0].width == 8 * self.bytes:
            return []
        return self.fields


class Block:
    """One BAR: an addrmap of registers or a mem."""

    def __init__(self, node, registers):
        self.name = node.inst_name.upper()
        self.bar = node.get_property("pcie_bar", default=None)
        self.bytes = node.get_property("bar_bytes", default=None)
        self.title = node.get_property("name") or self.name
        self.desc = node.get_property("desc") or ""
        self.registers = registers
        self.is_memory = registers is None


def read_map(source):
    try:
        from systemrdl import RDLCompiler, RDLCompileError
        from systemrdl.node import AddrmapNode, MemNode, RegNode
    except ImportError:
        print("skipped: systemrdl-compiler missing (pip install systemrdl-compiler; .ci/run pins it)", flush=True)
        sys.exit(SKIP)
    compiler = RDLCompiler()
    try:
        compiler.compile_file(str(source))
        top = compiler.elaborate().top
    except RDLCompileError as error:
        raise MapError(f"{source}: does not compile ({error})") from None
    blocks = []
    for node in top.children():
        if isinstance(node, MemNode):
            blocks.append(Block(node, None))
        elif isinstance(node, AddrmapNode):
            registers = [r for r in node.children() if isinstance(r, RegNode)]
            blocks.append(Block(node, [Register(r, node.get_property("pcie_bar", default=None)) for r in registers]))
    check(blocks)
    return top.get_property("name") or top.inst_name, blocks


def check(blocks):
    """The rules every generated copy relies on; a map that breaks one is refused."""
    names, bars = set(), set()
    for block in blocks:
        if block.bar is None or block.bytes is None:
            raise MapError(f"{block.name}: needs pcie_bar and bar_bytes")
        if block.bar in bars or not 0 <= block.bar < 1 << BAR_BITS:
            raise MapError(f"{block.name}: BAR{block.bar} is used twice or out of range")
        bars.add(block.bar)
        if block.is_memory:
            continue
        if block.bytes > 1 << OFFSET_BITS:
            raise MapError(f"{block.name}: register BARs are {1 << OFFSET_BITS} bytes at most (the RTL decodes {OFFSET_BITS} offset bits)")
        for reg in block.registers:
            if reg.name in names:
                raise MapError(f"register {reg.name} is defined twice: names must be unique across BARs")
            names.add(reg.name)
            if reg.offset % 4 or reg.offset + reg.bytes > block.bytes or reg.bytes not in (4, 8):
                raise MapError(f"{reg.name}: {reg.bytes} bytes at {reg.offset:#x} is not 32-bit aligned inside BAR{block.bar}")


# ---- writers ----------------------------------------------------------------------------------

HEADER = "GENERATED by hdl/regs/generate.py from hdl/regs/pcieperf.rdl: do not edit; edit the .rdl and rerun the script."


def constants(blocks):
    """Every named value, in map order: (name, kind, value, comment).

    kind: "place" (BAR, offset), "u32" / "u64" (a value), "field" ((lsb, msb, register bits),
    named without suffix: each language adds its own), "bar" (a BAR index), "bytes", "ns"."""
    out = []
    for block in blocks:
        if block.is_memory:
            out.append((f"{block.name}_BAR", "bar", block.bar, f"BAR{block.bar}: {block.desc or block.title}"))
            out.append((f"{block.name}_BYTES", "bytes", block.bytes, ""))
            continue
        for reg in block.registers:
            for suffix, offset in reg.words():
                comment = reg.desc if not suffix else f"High word of {reg.name}."
                out.append((reg.name + suffix, "place", (reg.bar, offset), comment))
            if reg.reset is not None and reg.reset != 0:
                out.append((f"{reg.name}_RESET", "u32" if reg.bytes == 4 else "u64", reg.reset, "Value after reset."))
            fields = reg.split_fields()
            for field in fields:
                # One field at bit 0 is the register's value: named by the register alone.
                alone = len(fields) == 1 and field.lsb == 0
                name = reg.name if alone else f"{reg.name}_{field.name}"
                out.append((name, "field", (field.lsb, field.msb, 8 * reg.bytes, alone), field.desc))
            for field in reg.fields:
                for value_name, value, desc in field.values:
                    out.append((f"{reg.name}_{value_name}", "u32", value, desc))
                if field.unit_ns:
                    out.append((f"{reg.name}_UNIT_NS", "ns", field.unit_ns, "Time unit of the count."))
    return out


def number(kind, value):
    """A value's literal in Rust and Python."""
    if kind in ("u32", "u64", "bytes"):
        return f"{value:#010x}" if value > 0xFFFF else f"{value:#x}"
    return str(value)


def shift_and_mask(name, value):
    """A field as (name, type, literal) constants: _SHIFT (unless it is the register's only
    field, at bit 0) and _MASK (before shifting)."""
    lsb, msb, bits, alone = value
    mask_type = "u32" if bits <= 32 else "u64"
    mask = number("u64", (1 << (msb - lsb + 1)) - 1)
    return ([] if alone else [(f"{name}_SHIFT", "u32", str(lsb))]) + [(f"{name}_MASK", mask_type, mask)]


def rust(title, blocks):
    lines = [f"//! {HEADER}", "//!", f"//! The {title} register map: each register is its (BAR, byte offset in the BAR); every",
             "//! access is 32 bits, a 64-bit register is two words (`_HIGH` the upper). Fields: `_SHIFT` and",
             "//! `_MASK` (before shifting). Tables: docs/regmap.md.", ""]
    sizes = {b.bar: b.bytes for b in blocks}
    lines.append("/// Size of each BAR in bytes, by BAR index.")
    lines.append(f"pub const BAR_BYTES: [u64; {max(sizes) + 1}] = [{', '.join(hex(sizes.get(i, 0)) for i in range(max(sizes) + 1))}];")
    types = {"place": "(u8, u64)", "u32": "u32", "u64": "u64", "bar": "u8", "bytes": "u64", "ns": "u64"}
    for name, kind, value, comment in constants(blocks):
        if comment:
            lines.append(f"/// {comment}")
        if kind == "field":
            lines += [f"pub const {n}: {t} = {v};" for n, t, v in shift_and_mask(name, value)]
            continue
        literal = f"({value[0]}, {value[1]:#05x})" if kind == "place" else number(kind, value)
        lines.append(f"pub const {name}: {types[kind]} = {literal};")
    lines += ["", "/// One register of the map, for checks that walk all of them.",
              "#[derive(Debug, Clone, Copy, PartialEq, Eq)]", "pub struct Register {", "    pub name: &'static str,",
              "    pub bar: u8,", "    pub offset: u64,", "    /// 4, or 8 for a 64-bit register (two words).", "    pub bytes: u64,",
              "    /// Whether the host may write it (read-only registers ignore writes).", "    pub writable: bool,",
              "    /// Value after reset; None for registers the hardware drives.", "    pub reset: Option<u64>,", "}", "",
              "pub const REGISTERS: &[Register] = &["]
    for block in blocks:
        for reg in block.registers or []:
            reset = "None" if reg.reset is None else f"Some({number('u64', reg.reset)})"
            lines.append(f"    Register {{ name: \"{reg.name}\", bar: {reg.bar}, offset: {reg.offset:#05x}, bytes: {reg.bytes}, "
                         f"writable: {str(reg.writable).lower()}, reset: {reset} }},")
    lines.append("];")
    return "\n".join(lines) + "\n"


def verilog(title, blocks):
    lines = [f"// {HEADER}", "//", f"// The {title} register map for the RTL. A register is named by its decode key",
             f"// {{BAR ({BAR_BITS} bits), offset in the BAR ({OFFSET_BITS} bits)}}; a 64-bit register is two words (_HIGH the",
             "// upper). Fields: _LSB and _MSB. Tables: docs/regmap.md.", "`ifndef PCIEPERF_REGMAP_VH", "`define PCIEPERF_REGMAP_VH", ""]
    key_bits = BAR_BITS + OFFSET_BITS
    defines = []
    for name, kind, value, comment in constants(blocks):
        if kind == "place":
            defines.append((name, f"{key_bits}'h{value[0] << OFFSET_BITS | value[1]:04x}"))
        elif kind == "field":
            defines += [(f"{name}_LSB", str(value[0])), (f"{name}_MSB", str(value[1]))]
        elif kind == "bar":
            defines.append((name, f"{BAR_BITS}'d{value}"))
        elif kind in ("u32", "u64"):
            defines.append((name, f"32'h{value:08x}" if kind == "u32" else f"64'h{value:016x}"))
        else:
            defines.append((name, str(value)))
    width = max(len(name) for name, _ in defines) + len("PCIEPERF_")
    lines += [f"`define {'PCIEPERF_' + name:<{width}} {literal}" for name, literal in defines]
    lines += ["", "`endif"]
    return "\n".join(lines) + "\n"


def python(title, blocks):
    lines = [f'"""{HEADER}', "", f"The {title} register map for the cocotb testbench: each register is its (BAR, byte",
             "offset in the BAR); every access is 32 bits, a 64-bit register is two words (_HIGH the upper).",
             'Fields: _SHIFT and _MASK (before shifting). Tables: docs/regmap.md."""', ""]
    sizes = {b.bar: b.bytes for b in blocks}
    lines.append(f"BAR_BYTES = {{{', '.join(f'{bar}: {size:#x}' for bar, size in sorted(sizes.items()))}}}")
    for name, kind, value, comment in constants(blocks):
        if kind == "field":
            lines += [f"{n} = {v}" for n, _, v in shift_and_mask(name, value)]
            continue
        literal = f"({value[0]}, {value[1]:#05x})" if kind == "place" else number(kind, value)
        lines.append(f"{name} = {literal}")
    return "\n".join(lines) + "\n"


def markdown(title, blocks):
    lines = [f"<!-- {HEADER} -->", "", f"# Register map: {title}", "",
             "Generated from [hdl/regs/pcieperf.rdl](../hdl/regs/pcieperf.rdl) (SystemRDL), like the Rust, Verilog and",
             "Python copies of it; how to change it: [hdl.md](hdl.md#the-register-map). Every access is one",
             "32-bit word; a 64-bit register is two words, the low one first. Unimplemented offsets read 0",
             "and ignore writes; so do writes to read-only registers. A register NAME is `crate::device::regmap::NAME`",
             "(BAR, offset) in Rust, `` `PCIEPERF_NAME `` ({BAR, offset} decode key) in Verilog and",
             "`pcieperf_regmap.NAME` in the testbench; a named value V of a register is `NAME_V`, a field F",
             "`NAME_F_SHIFT` and `NAME_F_MASK` (Verilog: `NAME_F_LSB`, `NAME_F_MSB`).", ""]
    for block in blocks:
        lines.append(f"## {block.title} ({block.bytes // 1024} KiB)")
        lines.append("")
        if block.is_memory:
            lines += [block.desc, ""]
            continue
        lines += ["| offset | register | access | reset | meaning |", "|---|---|---|---|---|"]
        for reg in block.registers:
            access = "rw" if reg.writable else "r"
            reset = "—" if reg.reset is None else number("u64", reg.reset)
            meaning = reg.desc.replace("|", "\\|")
            details = [f"`{f.name.lower()}` [{f.msb}:{f.lsb}] {f.desc}".rstrip() for f in reg.split_fields()]
            details += [f"`{reg.name}_{n}` = {v:#x}" + (f" ({d})" if d else "") for f in reg.fields for n, v, d in f.values]
            details += [f"unit {f.unit_ns} ns" for f in reg.fields if f.unit_ns]
            if details:
                meaning += " " + "; ".join(details) + "."
            width = f" ({8 * reg.bytes}-bit)" if reg.bytes > 4 else ""
            lines.append(f"| {reg.offset:#05x} | {reg.name}{width} | {access} | {reset} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


WRITERS = {"rust": rust, "verilog": verilog, "python": python, "markdown": markdown}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="root to write under (default: the repository)")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the .rdl to read (default: hdl/regs/pcieperf.rdl)")
    args = parser.parse_args()
    try:
        title, blocks = read_map(args.source)
    except MapError as error:
        print(f"generate.py: {error}", file=sys.stderr)
        return 1
    for kind, path in OUTPUTS.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(WRITERS[kind](title, blocks))
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
