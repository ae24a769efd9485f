"""SFrame from ELF input (.eh_frame of objects, libraries and programs).

- csmith objects assembled by GNU as: SFrame made from the object's .eh_frame
  means exactly what SFrame made from the .s means, and what as --gsframe says;
- every ELF file Debian installed here (within a time budget): no crash, no
  traceback, each file converted or its error reported, reasons counted;
- verify passes on real libraries once they carry our SFrame (issue 4's
  --emit elf will write it in; here the check runs on our section and the
  library's own .eh_frame).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from cfi2sframe import convert_asm
from cfi2sframe.analysis.compare import diff_sections, verify
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.convert import convert_elf
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.sframe.decode import decode
from tests.conftest import at_least, require, require_path
from tests.corpus import csmith_asm

from .test_gas import SEEDS

SCAN_SECONDS = float(os.environ.get("CFI2SFRAME_SCAN_SECONDS", "90"))


def test_object_eh_frame_gives_the_same_sframe_as_the_source(tmp_path: Path, report) -> None:
    require("as", "csmith", "gcc")
    same = 0
    files = csmith_asm(SEEDS)
    for asm in files:
        obj = tmp_path / "plain.o"
        subprocess.run(["as", str(asm), "-o", str(obj)], check=True)
        from_elf = convert_elf(str(obj))
        from_asm = convert_asm(asm.read_text(), str(asm))
        assert [(f.section, f.start, f.size) for f in from_elf.functions] == [
            (f.section, f.start, f.size) for f in from_asm.functions]
        assert sorted(s.reason for s in from_elf.skips) == sorted(
            s.reason for s in from_asm.skips)
        result = diff_sections(
            decode(from_elf.raw()), decode(from_asm.raw()),
            lambda fde, c=from_elf: (c.functions[fde.index].section, fde.start_address),
            lambda fde, c=from_asm: (c.functions[fde.index].section, fde.start_address))
        assert result.equivalent, asm
        same += result.same
    report(f"SFrame from .eh_frame of GNU as objects = SFrame from their .s: {len(files)} "
           f"objects, {same} functions")
    # Measured here: 125 objects, 2880 functions; floors 10% lower.
    at_least("objects", len(files), 112)
    at_least("functions the same both ways", same, 2592)


def _elf_files() -> list[Path]:
    roots = ["/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/sbin", "/bin", "/sbin"]
    seen: set[tuple[int, int]] = set()
    out = []
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            try:
                if not path.is_file():
                    continue
                stat = path.stat()
                if (stat.st_dev, stat.st_ino) in seen or stat.st_size < 64:
                    continue
                seen.add((stat.st_dev, stat.st_ino))
                with open(path, "rb") as handle:
                    if handle.read(4) != b"\x7fELF":
                        continue
            except OSError:
                continue
            out.append(path)
    return out


def test_every_installed_elf_file_converts_or_reports(report) -> None:
    files = _elf_files()
    assert files, "no ELF files found"
    # Small files first, so the budget covers as many files as it can.
    files.sort(key=lambda p: p.stat().st_size)
    deadline = time.monotonic() + SCAN_SECONDS
    converted, errors = 0, Counter()
    reasons: Counter = Counter()
    fdes = emitted = masks = 0
    for path in files:
        if time.monotonic() > deadline:
            break
        try:
            conversion = convert_elf(str(path))
        except Cfi2SframeError as exc:
            errors[exc.message.split(":")[0]] += 1
            continue
        decode(conversion.raw(), conversion.sframe_address)  # what we wrote reads back
        converted += 1
        fdes += conversion.fde_count
        emitted += len(conversion.functions)
        masks += sum(f.pc_mask for f in conversion.functions)
        reasons.update(s.reason for s in conversion.skips)
    report(f"installed ELF files: {converted} converted + {sum(errors.values())} reported "
           f"of {len(files)} ({dict(errors)}); {emitted} SFrame FDEs ({masks} PC-mask for "
           f"PLT entries) from {fdes} DWARF FDEs; "
           f"left out: {dict(reasons.most_common())}")
    assert converted > 50
    # Measured here: 1302 ELF files found, 97888 DWARF FDEs in those converted
    # within the budget; the files floor 10% lower, the FDEs floor half the measured
    # figure (the time budget, on a slower or busier machine, converts fewer files), and
    # in proportion for a shorter budget (CFI2SFRAME_SCAN_SECONDS).
    at_least("ELF files found", len(files), 1171)
    at_least("DWARF FDEs converted", fdes, int(48000 * min(1.0, SCAN_SECONDS / 90)))


@pytest.mark.parametrize("library", ["/lib/x86_64-linux-gnu/libc.so.6",
                                     "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"])
def test_verify_passes_on_real_libraries(library: str, report) -> None:
    path = Path(library)
    require_path(path)  # Debian's libc6 / libllvm14
    start = time.monotonic()
    conversion = convert_elf(str(path))
    section = decode(conversion.raw(), conversion.sframe_address)
    cfi = read_elf_cfi(str(path))
    result = verify(section, cfi.timelines, arch_for_machine(cfi.machine, ""))
    assert result.ok, result.mismatches[:1]
    assert not result.extra
    # Every function is checked or left out with a reason; the PLT is one DWARF FDE
    # and two SFrame FDEs (PLT0, PC-mask entries).
    assert result.checked + len(result.missing) == len(cfi.timelines)
    assert not result.unevaluated
    assert len(conversion.functions) == result.checked + sum(f.pc_mask for f in section.fdes)
    # Measured here: libc 3705, libLLVM 94994 functions checked; floors 10% lower.
    at_least("functions checked", result.checked,
             {"libc.so.6": 3334, "libLLVM-14.so.1": 85494}[path.name])
    report(f"verify {path.name}: {result.checked} of {len(cfi.timelines)} functions in "
           f"SFrame, checked at every PC, 0 mismatches; left out: "
           f"{dict(Counter(why for _, why in result.missing).most_common())} "
           f"({time.monotonic() - start:.0f} s)")
