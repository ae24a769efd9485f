"""The library call for JITs: a raw .eh_frame blob at an address (what a JIT hands to
``__register_frame``) to an SFrame section, importing only from ``cfi2sframe``."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from cfi2sframe import Cfi2SframeError, decode_sframe, fre_rules, sframe_from_eh_frame
from tests.conftest import cfi2sframe, require, require_path
from tests.support.leb128 import uleb


def _jit_blob(pc_begin: int, address: int) -> bytes:
    """One CIE and one FDE, byte by byte from the DWARF 5 and LSB .eh_frame layouts:
    the x86-64 CIE (CFA rsp+8, RA at CFA-8), absolute 8-byte pointers (no augmentation),
    and a 12-byte function that pushes rbp (at 1: CFA rsp+16, rbp at CFA-16) and makes
    it the frame pointer (at 4: CFA rbp+16)."""
    cie_body = (b"\x00\x00\x00\x00" + b"\x01" + b"\x00" + uleb(1) + b"\x78" + uleb(16)
                + b"\x0c\x07\x08" + b"\x90\x01")
    cie_body += bytes(-(len(cie_body) + 4) % 8)
    cie = struct.pack("<I", len(cie_body)) + cie_body
    fde_at = len(cie)
    instructions = b"\x41\x0e\x10\x86\x02\x43\x0d\x06"
    fde_body = struct.pack("<I", fde_at + 4) + struct.pack("<QQ", pc_begin, 12) + instructions
    fde_body += bytes(-(len(fde_body) + 4) % 8)
    return cie + struct.pack("<I", len(fde_body)) + fde_body + bytes(4)


def test_a_hand_made_jit_blob():
    """The rules at each PC are those derived by hand above."""
    section_bytes, skips = sframe_from_eh_frame(_jit_blob(0x7000, 0x9000), 0x9000, 0xA000)
    assert skips == ()
    section = decode_sframe(section_bytes, 0xA000)
    (fde,) = section.fdes
    assert (fde.start_address, fde.size) == (0x7000, 12)
    got = {}
    for pc in (0x7000, 0x7001, 0x7003, 0x7004, 0x700B):
        rules = fre_rules(section, fde, fde.fre_at(pc))
        got[pc] = (rules.cfa.reg, rules.cfa.offset, rules.fp and rules.fp.offset)
    assert got == {0x7000: (7, 8, None), 0x7001: (7, 16, -16), 0x7003: (7, 16, -16),
                   0x7004: (6, 16, -16), 0x700B: (6, 16, -16)}


def test_bad_cfi_is_a_located_error():
    blob = _jit_blob(0x7000, 0x9000)
    with pytest.raises(Cfi2SframeError, match=r"^<eh_frame>: .*at byte 0x"):
        sframe_from_eh_frame(blob[:30], 0x9000, 0xA000)


@pytest.mark.parametrize("library", ["/usr/lib/x86_64-linux-gnu/libc.so.6",
                                     "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"])
def test_a_library_s_eh_frame_gives_what_the_command_gives(library: str, tmp_path: Path):
    """The blob of a real library's .eh_frame (where readelf -S says it is) gives the
    bytes the command writes for the library at the same section address."""
    require("readelf")
    require_path(library)
    headers = subprocess.run(["readelf", "-S", "-W", library], capture_output=True,
                             text=True, check=True).stdout
    match = re.search(r"\]\s+\.eh_frame\s+\S+\s+([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) ", headers)
    assert match, headers
    address, offset, size = (int(x, 16) for x in match.groups())
    blob = Path(library).read_bytes()[offset:offset + size]
    made, skips = sframe_from_eh_frame(blob, address, 0x40000000)
    out = tmp_path / "lib.sframe"
    proc = cfi2sframe(library, "--sframe-address", "0x40000000", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert made == out.read_bytes()
    assert len(skips) == proc.stderr.count("no SFrame FDE for")
