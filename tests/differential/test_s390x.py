"""s390x on real compiler output: csmith through s390x-linux-gnu-gcc -S.

The GNU as here (binutils 2.40) predates s390x SFrame, so the oracle is the
object's own DWARF CFI: SFrame V2 and V3 written by cfi2sframe (from the .s,
assembled by s390x-linux-gnu-as, and from the .eh_frame of the plainly
assembled object) must give the CFA, FP and RA rules of that CFI at every PC
(``verify``); both routes must mean the same (``diff``).
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from cfi2sframe import convert_asm
from cfi2sframe.analysis.compare import diff_sections, verify
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.convert import convert_elf
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import at_least, require
from tests.corpus import csmith_asm

from .test_gas import SEEDS

AS = "s390x-linux-gnu-as"
GCC = "s390x-linux-gnu-gcc"
FLAGS = ["O0", "O2", "Os", "O2fp"]


def _keyed(loaded):
    return lambda fde: (loaded.section_of(fde.field_offset), fde.start_address)


def _verified(path: Path) -> int:
    loaded = load_sframe(str(path))
    cfi = read_elf_cfi(str(path))
    result = verify(loaded.section, cfi.timelines, arch_for_machine(cfi.machine, ""),
                    lambda fde: loaded.section_of(fde.field_offset))
    assert result.ok and not result.extra, (path, result.mismatches[:1])
    return result.checked


def test_s390x_csmith_corpus_verifies(tmp_path: Path, report) -> None:
    require(AS, GCC, "csmith")
    files = csmith_asm(SEEDS, FLAGS, compiler=GCC, tag="s390x")
    assert len(files) >= 100, len(files)
    checked = {2: 0, 3: 0}
    skips: dict[int, Counter] = {2: Counter(), 3: Counter()}
    register_words = flex = same = 0
    for asm in files:
        plain = tmp_path / "plain.o"
        subprocess.run([AS, str(asm), "-o", str(plain)], check=True)
        for version in (2, 3):
            conversion = convert_asm(asm.read_text(), str(asm), "s390x", version=version)
            skips[version].update(s.reason for s in conversion.skips)
            ours = tmp_path / f"v{version}.o"
            ours.write_bytes(conversion.obj())
            checked[version] += _verified(ours)
            from_elf = tmp_path / f"elf{version}.o"
            from_elf.write_bytes(convert_elf(str(plain), version=version).obj())
            _verified(from_elf)
            a, b = load_sframe(str(ours)), load_sframe(str(from_elf))
            diff = diff_sections(a.section, b.section, _keyed(a), _keyed(b))
            assert diff.equivalent, (asm, version, diff.differing[:1])
            if version == 2:
                same += diff.same
                register_words += sum(any(f.fp_reg is not None or f.ra_reg is not None
                                           for f in func.fres)
                                      for func in conversion.functions)
            else:
                flex += sum(func.flex for func in conversion.functions)
    report(f"s390x: {len(files)} csmith files (s390x-linux-gnu-gcc); verify at every PC: "
           f"V2 {checked[2]} functions, V3 {checked[3]}, 0 mismatches; .s and .eh_frame "
           f"routes the same for {same}; V2 functions with FP/RA in a register: "
           f"{register_words}, V3 FLEX FDEs: {flex}; left out V2 {dict(skips[2])}, "
           f"V3 {dict(skips[3])}")
    assert register_words and flex  # the corpus exercises the register cases
    # Measured here: 100 files, V2 2805 and V3 2805 functions verified, 2805
    # the same both routes; floors 10% lower.
    at_least("files", len(files), 90)
    at_least("V2 functions verified", checked[2], 2524)
    at_least("V3 functions verified", checked[3], 2524)
    at_least("functions the same by both routes", same, 2524)
