"""PLT entries: the linker's CFA expression lowered to a PC-increment FDE for PLT0 and a
PC-mask FDE for the entries, checked against what GNU ld 2.40 writes and at every PC.

- programs linked here by ``gcc -Wa,--gsframe`` (ld 2.40 adds PLT FDEs to the V1
  section it merges): our PLT rules from the program's DWARF equal ld's at every
  PC ld covers, and our section verifies against the DWARF at every PC;
- installed programs and libraries: no PLT left out, every byte of ``.plt``,
  ``.plt.sec`` and ``.plt.got`` covered and correct.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cfi2sframe.analysis.compare import verify
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.convert import convert_elf
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.elf.read import open_elf
from cfi2sframe.sframe.decode import DecodedSection, decode
from cfi2sframe.sframe.load import load_sframe
from cfi2sframe.sframe.rules import rules_at
from tests.conftest import (
    HELLO_C,
    at_least,
    gsframe_program,
    readelf_section,
    require,
    require_path,
)
from tests.corpus import csmith_asm

from .test_gas import SEEDS

PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")


def _rules(section: DecodedSection, pc: int) -> object:
    """What a reader finds for ``pc``: the rules of the FDE that covers it."""
    for fde in section.fdes:
        if fde.start_address <= pc < fde.start_address + fde.size:
            return rules_at(section, fde, pc)
    return None


def _plt_ranges(data: bytes) -> list[tuple[str, int, int]]:
    view = open_elf(data, "program")
    return [(s.name, s.addr, s.size) for s in view.sections if s.name in PLT_SECTIONS]


def _ours(path: Path) -> tuple[DecodedSection, object]:
    conversion = convert_elf(str(path))
    section = decode(conversion.raw(), conversion.sframe_address)
    cfi = read_elf_cfi(str(path))
    return section, verify(section, cfi.timelines, arch_for_machine(cfi.machine, ""))


def test_plt_means_what_gnu_ld_writes(tmp_path: Path, report) -> None:
    require("gcc", "csmith", "as")
    programs = pcs = 0
    for asm in csmith_asm(SEEDS)[::10]:
        program = tmp_path / "prog"
        subprocess.run(["gcc", "-Wa,--gsframe", str(asm), "-o", str(program)], check=True)
        ld = load_sframe(str(program)).section
        ours, result = _ours(program)
        assert result.ok and not result.extra, (asm, result.mismatches[:1])
        assert not result.unevaluated
        masks = [fde for fde in ours.fdes if fde.pc_mask]
        assert masks and all(fde.rep_size == 16 for fde in masks)
        for name, start, size in _plt_ranges(program.read_bytes()):
            for pc in range(start, start + size):
                mine = _rules(ours, pc)
                assert mine is not None, (asm, name, hex(pc))
                theirs = _rules(ld, pc)
                if theirs is not None:
                    assert mine == theirs, (asm, name, hex(pc), mine, theirs)
                    pcs += 1
        programs += 1
    assert pcs
    report(f"PLT vs GNU ld 2.40: {programs} programs, {pcs} PLT PCs with the same rules")
    # Measured here: 13 programs, 624 PCs; floors 10% lower.
    at_least("programs", programs, 11)
    at_least("PLT PCs with ld's rules", pcs, 561)


def test_ld_v1_plt_verifies_at_every_pc(tmp_path: Path) -> None:
    """ld 2.40's own V1 section (PC-mask FDE for the PLT entries) against the program's
    DWARF: the same rules wherever it has an FDE; its .plt.got has none, the one gap."""
    program = gsframe_program(tmp_path)
    loaded = load_sframe(str(program))
    cfi = read_elf_cfi(str(program))
    result = verify(loaded.section, cfi.timelines, arch_for_machine(cfi.machine, ""))
    assert result.agrees and not result.unevaluated, result.mismatches[:1]
    assert [t.start for t in result.uncovered] == [readelf_section(program, ".plt.got")[0]]
    assert not result.ok
    assert [fde.rep_size for fde in loaded.section.fdes if fde.pc_mask] == [16]
    assert result.checked >= 2


def test_installed_files_have_every_plt_byte_covered(report) -> None:
    files = [Path(p) for p in ("/lib/x86_64-linux-gnu/libc.so.6",
                               "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/ls",
                               "/usr/bin/gdb", "/usr/bin/python3")]
    require_path(*files)  # libc6, libstdc++6, coreutils, gdb, python3: all installed
    total = masks = 0
    for path in files:
        ours, result = _ours(path)
        assert result.ok and not result.extra and not result.unevaluated, \
            (path, result.mismatches[:1])
        plts = _plt_ranges(path.read_bytes())
        assert not [t for t, _ in result.missing
                    if any(t.start < start + size and start < t.start + t.size
                           for _, start, size in plts)], path
        for name, start, size in plts:
            uncovered = [pc for pc in range(start, start + size) if _rules(ours, pc) is None]
            assert not uncovered, (path, name, hex(uncovered[0]))
            total += size
        masks += sum(fde.pc_mask for fde in ours.fdes)
    report(f"PLT of installed files: {len(files)} files, {total} PLT bytes covered and "
           f"verified, {masks} PC-mask FDEs")
    # Measured here: 39272 PLT bytes, 5 PC-mask FDEs; floors 10% lower.
    at_least("PLT bytes covered", total, 35344)
    at_least("PC-mask FDEs", masks, 4)


def test_ibt_plt_where_gnu_ld_2_40_is_wrong(tmp_path: Path) -> None:
    """``-fcf-protection -z ibtplt``: each lazy entry is ``endbr64; push $n; jmp`` (the
    push ends at byte 9, and ld's DWARF says ``lit9``), entries go through ``.plt.sec``
    (``endbr64; jmp *GOT``: CFA = SP+8 throughout).  GNU ld 2.40's SFrame keeps the
    non-IBT FRE at 11 and gives .plt.sec PLT0's rows; ours follows the DWARF."""
    require("gcc")
    source = tmp_path / "hello.c"
    source.write_text(HELLO_C)  # four libc calls: a PLT of four entries
    program = tmp_path / "ibt"
    subprocess.run(["gcc", "-O1", "-fcf-protection", "-Wa,--gsframe", "-Wl,-z,ibtplt",
                    str(source), "-o", str(program)], check=True)
    ranges = {name: (start, size) for name, start, size in _plt_ranges(program.read_bytes())}
    plt, plt_sec = ranges[".plt"], ranges[".plt.sec"]
    cfi = read_elf_cfi(str(program))
    theirs = verify(load_sframe(str(program)).section, cfi.timelines,
                    arch_for_machine(cfi.machine, ""))
    wrong = {t.start: r for t, r in theirs.mismatches}
    entries = (plt[1] - 16) // 16
    assert [(plt[0] + lo, plt[0] + hi, have.cfa.offset, want.cfa.offset)
            for lo, hi, have, want in wrong[plt[0]]] == [
        (plt[0] + 16 * k + 9, plt[0] + 16 * k + 11, 8, 16) for k in range(1, entries + 1)]
    assert wrong[plt_sec[0]] and all(
        want.cfa.offset == 8 and have != want for _, _, have, want in wrong[plt_sec[0]])
    ours, result = _ours(program)
    assert result.ok and not result.unevaluated, result.mismatches[:1]
    body = next(f for f in ours.fdes if f.pc_mask)
    assert (body.rep_size, [fre.start for fre in body.fres]) == (16, [0, 9])
