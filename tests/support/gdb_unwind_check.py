"""Runs inside gdb: stop at given instruction addresses, unwind one frame with our
SFrame walker (and compact unwind stepper), and record gdb's own frame 1 (which
gdb computes from the DWARF CFI) next to ours.

    gdb -batch -nx -x tests/support/gdb_unwind_check.py --args ./program

Environment: CFI2SFRAME_ROOT (folder holding the cfi2sframe package),
SNAP_SFRAME (the raw .sframe section), SNAP_SFRAME_ADDR (its address),
SNAP_ADDRS (breakpoint addresses, hex, whitespace separated), SNAP_COMPACT
(JSON: [[function start, size, [[row start, length, encoding], ...]], ...]),
SNAP_OUT (JSON lines written here, one per stop), SNAP_ARCH (x86_64, the
default, or aarch64), SNAP_REMOTE (a gdbserver address such as localhost:1234,
e.g. ``qemu-aarch64 -g 1234``; otherwise gdb runs the program itself), SNAP_SYSROOT
(gdb's sysroot for a foreign program's shared libraries).
"""

from __future__ import annotations

import json
import os
import sys
import time

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.environ["CFI2SFRAME_ROOT"])

from cfi2sframe.analysis.unwind import PC, sframe_step  # noqa: E402
from cfi2sframe.compact.encoding import decode
from cfi2sframe.compact.rules import Code, CompactRules
from cfi2sframe.compact.step import step
from cfi2sframe.compact.words import NOT_FUNCTION_START, is_dwarf
from cfi2sframe.sframe.decode import decode as decode_sframe  # noqa: E402

ARCH = os.environ.get("SNAP_ARCH", "x86_64")
# gdb register name -> DWARF number; (SP, FP, RA column); compact unwind flavour.
if ARCH == "aarch64":
    REGS = {**{f"x{n}": n for n in range(31)}, "sp": 31}
    SP, FP, RA, FLAVOUR, NAMES = 31, 29, 30, "arm64", ("sp", "x29")
else:
    REGS = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
            **{f"r{n}": n for n in range(8, 16)}, "rip": 16}
    SP, FP, RA, FLAVOUR, NAMES = 7, 6, 16, "x86_64", ("rsp", "rbp")


def main() -> None:
    with open(os.environ["SNAP_SFRAME"], "rb") as handle:
        section = decode_sframe(handle.read(), int(os.environ["SNAP_SFRAME_ADDR"], 0))
    with open(os.environ["SNAP_ADDRS"]) as handle:
        addresses = [int(a, 16) for a in handle.read().split()]
    with open(os.environ["SNAP_COMPACT"]) as handle:
        compact = json.load(handle)
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    # gdb stops its backtrace at main unless asked: without this, every stop in main
    # (most of a csmith program at -O2) would have no frame 1 to compare with.
    gdb.execute("set backtrace past-main on")
    # gdb otherwise takes every breakpoint out at each stop and puts it back at each
    # continue (hundreds of memory writes, each a remote packet under qemu-user): most
    # of these tests' time.  Reads of memory still see the original bytes (gdb
    # shadows its breakpoints), so every stop records the same.
    gdb.execute("set breakpoint always-inserted on")
    for address in addresses:
        gdb.Breakpoint(f"*{address:#x}", internal=True, temporary=True)
    out = open(os.environ["SNAP_OUT"], "w")  # noqa: SIM115
    remote = os.environ.get("SNAP_REMOTE")
    if os.environ.get("SNAP_SYSROOT"):
        gdb.execute(f"set sysroot {os.environ['SNAP_SYSROOT']}")
    if remote:
        # gdb gives up on a remote reply after 2 s by default; a loaded machine running
        # qemu-user can take longer, and the loop below then ended early
        gdb.execute("set remotetimeout 30")
        _connect(remote)
        gdb.execute("continue", to_string=True)
    else:
        gdb.execute("run", to_string=True)
    while gdb.selected_inferior().pid:
        out.write(json.dumps(_snapshot(section, compact)) + "\n")
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error:
            break
    out.close()


def _connect(remote: str) -> None:
    """``target remote``, again while the server is not listening yet: on a loaded
    machine qemu-user can take longer to open its port than gdb takes to start (a
    program then gave no stops at all, and a CI run fell under the test's floor)."""
    for attempt in range(100):
        try:
            gdb.execute(f"target remote {remote}", to_string=True)
            return
        except gdb.error:
            if attempt == 99:
                raise
            time.sleep(0.1)


def _snapshot(section, compact) -> dict:
    inferior = gdb.selected_inferior()
    frame = gdb.newest_frame()
    regs = {num: int(frame.read_register(name)) & 0xFFFFFFFFFFFFFFFF
            for name, num in REGS.items()}
    regs[PC] = int(frame.pc())

    def read(address: int) -> int:
        try:
            return int.from_bytes(inferior.read_memory(address, 8).tobytes(), "little")
        except gdb.MemoryError:
            raise KeyError(hex(address)) from None

    record: dict = {"pc": regs[PC]}
    older = frame.older()
    if older is not None and older.is_valid():
        record["gdb"] = [int(older.pc()),
                         int(older.read_register(NAMES[0])) & 0xFFFFFFFFFFFFFFFF,
                         int(older.read_register(NAMES[1])) & 0xFFFFFFFFFFFFFFFF]
    ours = sframe_step(section, regs, read, topmost=True)
    record["sframe"] = ([ours.regs[PC], ours.regs[SP], ours.regs[FP]] if ours.regs
                        else ours.error)
    pc = regs[PC]
    for start, size, rows in compact:
        if not start <= pc < start + size:
            continue
        for row_start, length, encoding in rows:
            if not start + row_start <= pc < start + row_start + length:
                continue
            encoding &= ~NOT_FUNCTION_START
            if is_dwarf(encoding, FLAVOUR):
                record["compact"] = "DWARF"
                break
            code = Code(inferior.read_memory(start + row_start, 260).tobytes())
            rules = decode(encoding, FLAVOUR, code)
            if not isinstance(rules, CompactRules):  # why libunwind has no rules
                record["compact"] = rules.detail
                break
            try:
                caller = step(rules, regs, read, sp=SP, ra_reg=RA)
                record["compact"] = [caller[RA], caller[SP], caller[FP]]
            except KeyError as exc:
                record["compact"] = f"memory: {exc}"
            break
    return record


main()
