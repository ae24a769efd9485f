"""Tests written for the survivors of tests/support/mutate.py (issue 24, item 6) that need
GNU as and readelf as oracles; the pure ones are in tests/unit/test_mutation_kills.py.

Each test names the mutants it kills.  Expected values come from a real tool (GNU as and
readelf) or from the ABI documents, never from our own output.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.arch import get_arch
from tests.conftest import require

# Names in our register tables that GNU as 2.40 refuses in `.cfi_offset` ("bad register
# expression"); their numbers are checked against the ABI documents below instead.
NOT_IN_GAS = {
    "x86_64": {"eax", "edx", "ecx", "ebx", "esi", "edi", "ebp", "esp", "eip"},
    "i386": set(),
    "aarch64": {f"v{n}" for n in range(32)} | {"ra_sign_state"},
    "s390x": {f"c{n}" for n in range(16)} | {f"a{n}" for n in range(16)} | {"pswm", "pswa"},
}

ASSEMBLERS = {
    "x86_64": (["as"], "%", "readelf"),
    "i386": (["as", "--32"], "%", "readelf"),
    "aarch64": (["aarch64-linux-gnu-as"], "", "readelf"),
    "s390x": (["s390x-linux-gnu-as"], "%", "readelf"),
}


@pytest.mark.parametrize("arch_name", sorted(ASSEMBLERS))
def test_register_numbers_are_the_ones_gnu_as_writes(arch_name: str, tmp_path: Path) -> None:
    """Every register name GNU as accepts maps to the DWARF column gas encodes for it.

    One `.cfi_offset NAME, -8*(i+1)` per name, in table order; readelf's raw dump of the
    FDE lists the DW_CFA_offset* register numbers in the same order.  Kills the +-1
    mutants of the register tables (x86_64.py: mm0 41, ds 53, fs.base 58, ...).
    """
    assembler, prefix, readelf = ASSEMBLERS[arch_name]
    require(assembler[0], readelf)
    regs = get_arch(arch_name).registers
    names = [name for name in regs if name not in NOT_IN_GAS[arch_name]]
    body = "".join(f"\t.cfi_offset {prefix}{name}, {-8 * (i + 1)}\n"
                   for i, name in enumerate(names))
    source = tmp_path / "r.s"
    source.write_text(f"\t.text\nf:\n\t.cfi_startproc\n\tnop\n{body}\tnop\n\t.cfi_endproc\n")
    subprocess.run([*assembler, "-o", str(tmp_path / "r.o"), str(source)], check=True)
    dump = subprocess.run([readelf, "--debug-dump=frames", str(tmp_path / "r.o")],
                          check=True, capture_output=True, text=True).stdout
    fde = dump[dump.index(" FDE "):]
    written = [int(n) for n in
               re.findall(r"DW_CFA_offset(?:_extended(?:_sf)?)?: r(\d+)", fde)]
    if arch_name == "s390x":
        # GNU as 2.40 numbers %fN as column 16 + N, but the s390x ELF ABI supplement
        # numbers the FPRs f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 f11 f13 f15 from
        # 16, and readelf 2.40 names the columns so ("r17 (f2)").  Check the FPRs
        # against readelf's names of the columns gas wrote.
        named = dict(re.findall(r"DW_CFA_offset[a-z_]*: r(\d+) \((f\d+)\)", fde))
        assert len(named) == 16
        assert {name: regs[name] for name in named.values()} == \
            {name: int(column) for column, name in named.items()}
        pairs = [(name, column) for name, column in zip(names, written, strict=True)
                 if not re.fullmatch(r"f\d+", name)]
        names, written = [p[0] for p in pairs], [p[1] for p in pairs]
    assert written == [regs[name] for name in names]


def _assembled(tmp_path: Path, stem: str, text: str) -> tuple[Path, str]:
    """``text`` assembled by GNU as, and readelf's raw dump of its CFI."""
    require("as", "readelf")
    source = tmp_path / f"{stem}.s"
    source.write_text(text)
    obj = tmp_path / f"{stem}.o"
    subprocess.run(["as", "-o", str(obj), str(source)], check=True)
    dump = subprocess.run(["readelf", "--debug-dump=frames", str(obj)], check=True,
                          capture_output=True, text=True).stdout
    return obj, dump


def test_signal_frame_augmentation_from_an_object(tmp_path: Path) -> None:
    """A CIE with the 'S' augmentation (readelf: "zRS") marks its FDEs' functions as
    signal frames; a plain CIE ("zR") does not.  Kills `signal = True` -> False in
    dwarf/ehframe.py."""
    from cfi2sframe.elf.cfi import read_elf_cfi

    obj, dump = _assembled(tmp_path, "s", (
        "\t.text\n\t.globl sig\nsig:\n\t.cfi_startproc\n\t.cfi_signal_frame\n"
        "\tnop\n\t.cfi_endproc\n\t.globl plain\nplain:\n\t.cfi_startproc\n"
        "\tnop\n\t.cfi_endproc\n"))
    assert sorted(re.findall(r'Augmentation:\s+"(\w+)"', dump)) == ["zR", "zRS"]
    signal = {t.name: t.signal_frame for t in read_elf_cfi(str(obj)).timelines}
    assert signal == {"sig": True, "plain": False}


def test_debug_frame_fde_ending_at_the_section_end(tmp_path: Path) -> None:
    """`.cfi_sections .debug_frame` and no CFI instruction: the FDE is 4-byte length,
    CIE pointer, 8-byte start, 8-byte range (24 bytes, already 8-aligned), so the range
    is the section's last 8 bytes.  It must be read, not refused as truncated; readelf
    shows the FDE covering the one-byte function.  Kills `pos + size > len(data)` ->
    `>=` in ehframe._Reader.fixed."""
    from cfi2sframe.elf.cfi import read_elf_cfi

    obj, dump = _assembled(tmp_path, "d", (
        "\t.cfi_sections .debug_frame\n\t.text\n\t.globl f\nf:\n"
        "\t.cfi_startproc\n\tnop\n\t.cfi_endproc\n"))
    # The FDE at 0x18 has length 0x14 (20 bytes after the length word), so it ends at
    # 0x30, the end of the section: nothing follows it in the dump.
    assert re.search(r"\n00000018 0+14 0+ FDE cie=0+ pc=0+\.\.0+1\n\s*$", dump), dump
    cfi = read_elf_cfi(str(obj))
    assert [(t.name, t.start, t.size) for t in cfi.timelines] == [("f", 0, 1)]


def test_cie_lsda_and_fde_pointer_encodings_from_an_object(tmp_path: Path) -> None:
    """`.cfi_lsda 0x3, sym` gives a "zLR" CIE whose augmentation data is the LSDA
    encoding then the FDE pointer encoding (readelf: "03 1b"); the reader takes each from
    its own byte.  Kills `data[need(pos + 1) - 1]` -> `data[need(pos - 1) - 1]` for 'L'
    in dwarf/ehframe.py."""
    from cfi2sframe.elf.cfi import read_elf_cfi

    obj, dump = _assembled(tmp_path, "l", (
        "\t.text\n\t.globl f\nf:\n\t.cfi_startproc\n\t.cfi_lsda 0x3, .Lx\n"
        "\tnop\n\t.cfi_endproc\n\t.section .rodata\n.Lx:\n\t.long 0\n"))
    assert 'Augmentation:          "zLR"' in dump
    match = re.search(r"Augmentation data:\s+(\w\w) (\w\w)\n", dump)  # the CIE's
    assert match, dump
    (fde,) = read_elf_cfi(str(obj)).fdes
    assert (fde.cie.lsda_encoding, fde.cie.fde_encoding) == \
        (int(match[1], 16), int(match[2], 16)) == (0x03, 0x1B)
