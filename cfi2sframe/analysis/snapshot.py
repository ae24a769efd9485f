"""Register and stack-memory snapshots, and walking them (``cfi2sframe unwind``).

A snapshot is JSON: ``{"regs": {"rip": "0x...", "rsp": ..., "rbp": ...},
"memory": [{"address": "0x...", "hex": "..."}]}``, numbers as ints or strings in
any base.  Register names are the target's (DWARF names from ``arch/``); ``pc``,
``ip``, ``rip``, ``eip`` and ``pswa`` name the PC.
"""

from __future__ import annotations

import json

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..elf.read import address_reader, open_elf
from ..errors import Cfi2SframeError
from ..files import read_bytes
from ..sframe.load import load_sframe
from .unwind import PC, Read, sframe_walk

_PC_NAMES = ("pc", "ip", "rip", "eip", "pswa")


def load_snapshot(path: str) -> tuple[dict[str, int], dict[int, bytes]]:
    """(register name -> value, block address -> bytes) of a snapshot file."""
    raw = read_bytes(path)
    try:
        doc = json.loads(raw)
        regs = {name.lower(): int(str(value), 0) for name, value in doc["regs"].items()}
        memory = {int(str(block["address"]), 0): bytes.fromhex(block["hex"])
                  for block in doc.get("memory", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Cfi2SframeError(path, f"not a register/memory snapshot: {exc}") from None
    return regs, memory


def registers(names: dict[str, int], arch: Arch, where: str) -> dict[int, int]:
    """Register values by DWARF number (the PC under ``unwind.PC``); SP, FP and the PC
    must be there."""
    regs = {}
    for name, value in names.items():
        name = name.lstrip("%")
        if name in _PC_NAMES:
            regs[PC] = value
            continue
        number = arch.registers.get(name)
        if number is None:
            raise Cfi2SframeError(where, f"unknown {arch.name} register '{name}'")
        regs[number] = value
    missing = [arch.reg_name(r) for r in (arch.sp, arch.fp) if r not in regs]
    missing += [] if PC in regs else ["the PC"]
    if missing:
        raise Cfi2SframeError(where, f"the snapshot lacks {', '.join(missing)}")
    return regs


def memory_reader(memory: dict[int, bytes], arch: Arch) -> Read:
    """A word reader over the snapshot's memory blocks (``KeyError`` outside them)."""
    size = arch.address_size

    def read(address: int) -> int:
        for base, block in memory.items():
            if base <= address and address + size <= base + len(block):
                return int.from_bytes(block[address - base:address - base + size],
                                      arch.byteorder)
        raise KeyError(f"{address:#x}")

    return read


def walk_snapshot(path: str, snapshot: str, compact: bool = False,
                  max_frames: int = 64) -> tuple[Arch, list[dict[int, int]], str]:
    """The frames of ``snapshot`` walked with ``path``'s SFrame section (or, with
    ``compact``, with compact unwind rows made from its CFI), and why the walk stopped."""
    names, memory = load_snapshot(snapshot)
    loaded = load_sframe(path)
    arch = by_sframe_abi(loaded.section.abi)
    regs = registers(names, arch, snapshot)
    read = memory_reader(memory, arch)
    if not compact:
        frames, why = sframe_walk(loaded.section, regs, read, max_frames)
        return arch, frames, why

    from ..compact.inputs import compact_arch, compact_elf  # (--compact only: start-up)
    from .compact_unwind import compact_walk

    data = read_bytes(path)
    functions = compact_elf(path, data, ranges=True)
    at_address = address_reader(open_elf(data, "ELF file"))

    def code_of(address: int, size: int) -> bytes:
        return at_address(address, size) or b""

    frames, why = compact_walk(functions, code_of, compact_arch(arch.name, path),
                               regs, read, arch.sp, arch.fp, arch.ra, max_frames)
    return arch, frames, why
