"""AArch64 against GNU as: aarch64-linux-gnu-as --gsframe (binutils 2.40, SFrame V1).

Real compiler output (csmith through aarch64-linux-gnu-gcc -S) gives the same
CFA/FP/RA rules at every PC in our V2 as in GNU as's V1 (compared with our
``diff``), our objects verify against their own .eh_frame, and ``dump`` of
GNU as's objects is byte-identical to readelf's.
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
from cfi2sframe.sframe.dump import dump_text
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import at_least, require
from tests.corpus import csmith_asm

from .test_gas import SEEDS

AS = "aarch64-linux-gnu-as"
FLAGS = ["O0", "O2", "Os", "O2fp"]


def _keyed(loaded):
    return lambda fde: (loaded.section_of(fde.field_offset), fde.start_address)


def test_aarch64_csmith_corpus_matches_gnu_as(tmp_path: Path, report) -> None:
    require(AS, "aarch64-linux-gnu-gcc", "csmith", "readelf")
    files = csmith_asm(SEEDS, FLAGS, compiler="aarch64-linux-gnu-gcc", tag="aarch64")
    assert len(files) >= 100, len(files)
    same = checked = 0
    only_gas: Counter = Counter()
    for asm in files:
        gas = tmp_path / "gas.o"
        subprocess.run([AS, "--gsframe", str(asm), "-o", str(gas)], check=True)
        want = subprocess.run(["readelf", "--sframe", str(gas)], capture_output=True,
                              text=True, check=True).stdout
        as_readelf = load_sframe(str(gas), as_readelf=True)
        assert dump_text(as_readelf.section, as_readelf.section_name) == want, asm
        conversion = convert_asm(asm.read_text(), str(asm), "aarch64")
        ours = tmp_path / "ours.o"
        ours.write_bytes(conversion.obj())
        theirs, mine = load_sframe(str(gas)), load_sframe(str(ours))
        diff = diff_sections(theirs.section, mine.section, _keyed(theirs), _keyed(mine))
        assert not diff.differing and not diff.only_b, (asm, diff.differing[:1])
        skipped = {(s.section, s.start): s.reason for s in conversion.skips}
        for fde in diff.only_a:
            only_gas[skipped.get((theirs.section_of(fde.field_offset), fde.start_address),
                                 "not found")] += 1
        same += diff.same
        cfi = read_elf_cfi(str(ours))
        result = verify(mine.section, cfi.timelines, arch_for_machine(cfi.machine, ""),
                        lambda fde, ld=mine: ld.section_of(fde.field_offset))
        assert result.ok and not result.extra, (asm, result.mismatches[:1])
        checked += result.checked
    report(f"AArch64 vs aarch64-linux-gnu-as 2.40: {len(files)} files, {same} functions with "
           f"the same rules at every PC; only GNU as: {dict(only_gas)}; dump == readelf; "
           f"verify: {checked} functions, 0 mismatches")
    assert set(only_gas) <= {"fp-without-ra"}, only_gas
    # Measured here: 100 files, 2807 functions the same, 2807 verified;
    # floors 10% lower.
    at_least("files", len(files), 90)
    at_least("functions the same as GNU as's", same, 2526)
    at_least("functions verified", checked, 2526)


def test_big_endian_aarch64_matches_gnu_as(tmp_path: Path, report) -> None:
    """aarch64_be: the same corpus assembled with -EB (SFrame ABI 1, big-endian words)."""
    require(AS, "aarch64-linux-gnu-gcc", "csmith", "readelf")
    files = csmith_asm(SEEDS, FLAGS, compiler="aarch64-linux-gnu-gcc", tag="aarch64")[:40]
    same = checked = 0
    for asm in files:
        gas, plain = tmp_path / "gas.o", tmp_path / "plain.o"
        subprocess.run([AS, "-EB", "--gsframe", str(asm), "-o", str(gas)], check=True)
        subprocess.run([AS, "-EB", str(asm), "-o", str(plain)], check=True)
        want = subprocess.run(["readelf", "--sframe", str(gas)], capture_output=True,
                              text=True, check=True).stdout
        as_readelf = load_sframe(str(gas), as_readelf=True)
        assert as_readelf.section.abi == 1
        assert dump_text(as_readelf.section, as_readelf.section_name) == want, asm
        ours = tmp_path / "ours.o"
        ours.write_bytes(convert_asm(asm.read_text(), str(asm), "aarch64_be").obj())
        from_elf = tmp_path / "elf.o"
        from_elf.write_bytes(convert_elf(str(plain)).obj())
        theirs, mine, elf = (load_sframe(str(p)) for p in (gas, ours, from_elf))
        assert mine.section.abi == 1 and elf.section.abi == 1
        diff = diff_sections(theirs.section, mine.section, _keyed(theirs), _keyed(mine))
        assert not diff.differing and not diff.only_b, (asm, diff.differing[:1])
        assert diff_sections(mine.section, elf.section, _keyed(mine), _keyed(elf)).equivalent
        same += diff.same
        for path, loaded in ((ours, mine), (from_elf, elf)):
            cfi = read_elf_cfi(str(path))
            assert cfi.big_endian
            result = verify(loaded.section, cfi.timelines,
                            arch_for_machine(cfi.machine, "", cfi.big_endian),
                            lambda fde, ld=loaded: ld.section_of(fde.field_offset))
            assert result.ok and not result.extra, (asm, result.mismatches[:1])
            checked += result.checked
    report(f"AArch64 big-endian vs aarch64-linux-gnu-as -EB 2.40: {len(files)} files, {same} "
           f"functions with the same rules at every PC; dump == readelf; verify (.s and "
           f".eh_frame routes): {checked} functions, 0 mismatches")
    # Measured here: 40 files, 1142 functions the same, 2284 verified;
    # floors 10% lower.
    at_least("files", len(files), 36)
    at_least("functions the same as GNU as's", same, 1027)
    at_least("functions verified", checked, 2055)
