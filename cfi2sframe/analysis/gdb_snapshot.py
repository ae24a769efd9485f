"""A gdb command that writes what ``cfi2sframe unwind`` needs: ``snapshot JSON MAPS``.

Source it in gdb (``cfi2sframe unwind --gdb-script`` prints this file's path) with a
live process or a core file, then ``snapshot snap.json maps.txt`` writes the
registers (PC, SP, FP; LR on AArch64), the stack from SP minus the red zone up to
the end of its mapping, and the mappings in ``/proc/PID/maps`` form (from gdb's
``info proc mappings``, which works for core files too).  This file runs inside
gdb's Python; imported elsewhere it defines nothing.
"""

from __future__ import annotations

import importlib
import json
from typing import Any  # gdb runs this file alone: no package, so no ..typed

try:
    gdb: Any = importlib.import_module("gdb")
except ImportError:  # not inside gdb
    gdb = None

RED_ZONE = {"i386:x86-64": 128, "aarch64": 0}
REGS = {"i386:x86-64": ("rip", "rsp", "rbp"), "aarch64": ("pc", "sp", "x29", "x30")}


def _mappings() -> list[tuple[int, int, int, str, str]]:
    """(start, end, offset, perms, file) from ``info proc mappings``."""
    out = []
    for line in gdb.execute("info proc mappings", to_string=True).splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].startswith("0x"):
            start, end, _size, offset = (int(x, 16) for x in parts[:4])
            perms = parts[4] if not parts[4].startswith("/") else "r-xp"
            name = parts[-1] if parts[-1].startswith("/") or parts[-1].startswith("[") \
                else ""
            out.append((start, end, offset, perms, name))
    return out


def _invoke(argument: str) -> None:
    """``snapshot JSON MAPS``: registers and stack memory (JSON) and the mappings."""
    json_path, maps_path = argument.split()
    arch = gdb.selected_frame().architecture().name()
    names = REGS.get(arch, ("pc", "sp"))
    frame = gdb.newest_frame()
    regs = {name: hex(int(frame.read_register(name)) & (2 ** 64 - 1)) for name in names}
    sp = int(regs[names[1]], 16)
    mappings = _mappings()
    low = sp - RED_ZONE.get(arch, 0)
    high = next((end for start, end, *_ in mappings if start <= sp < end), sp + 4096)
    memory = bytes(gdb.selected_inferior().read_memory(low, high - low))
    with open(json_path, "w") as out:
        json.dump({"regs": regs, "memory": [{"address": hex(low), "hex": memory.hex()}]}, out)
    with open(maps_path, "w") as out:
        for start, end, offset, perms, name in mappings:
            out.write(f"{start:x}-{end:x} {perms} {offset:08x} 00:00 0 {name}\n")


if gdb is not None:
    class Snapshot(gdb.Command):  # type: ignore[misc]
        """snapshot JSON MAPS: registers and stack memory (JSON) and the mappings (MAPS)."""

        def __init__(self) -> None:
            super().__init__("snapshot", gdb.COMMAND_DATA)

        def invoke(self, argument: str, from_tty: bool) -> None:
            _invoke(argument)

    Snapshot()
