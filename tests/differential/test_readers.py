"""The reading side against real tools and real objects, over the csmith corpus.

- ``dump`` of GNU as's SFrame V1 objects is byte-identical to ``readelf --sframe``;
- ``verify`` passes on our objects (SFrame against the object's own .eh_frame)
  and finds a planted mismatch;
- ``diff`` says GNU as's V1 and our V2 mean the same for every function both emit.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cfi2sframe import convert_asm
from cfi2sframe.analysis.compare import diff_sections, verify
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.sframe.decode import DecodedSection
from cfi2sframe.sframe.dump import dump_text
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import at_least, require
from tests.corpus import csmith_asm

from .test_gas import SEEDS


def _dump_as_readelf_does(path: Path) -> DecodedSection:
    """Our dump of ``path``'s .sframe equals this machine's readelf --sframe (2.40, V1)."""
    want = subprocess.run(["readelf", "--sframe", str(path)], capture_output=True,
                          text=True, check=True).stdout
    loaded = load_sframe(str(path), as_readelf=True)
    assert dump_text(loaded.section, loaded.section_name) == want, path
    return loaded.section


def test_dump_of_v1_is_byte_identical_to_readelf(tmp_path: Path, report) -> None:
    require("as", "readelf", "csmith", "gcc")
    files = csmith_asm(SEEDS)
    assert len(files) >= 100
    fdes = 0
    for asm in files:
        obj = tmp_path / "gas.o"
        subprocess.run(["as", "--gsframe", str(asm), "-o", str(obj)], check=True)
        fdes += len(_dump_as_readelf_does(obj).fdes)
    report(f"dump vs readelf 2.40 (SFrame V1): {len(files)} objects ({fdes} FDEs) "
           "byte-identical")
    # Measured here: 125 objects, 2880 FDEs; floors 10% lower.
    at_least("objects", len(files), 112)
    at_least("FDEs dumped", fdes, 2592)


def test_dump_of_v1_linked_programs_is_byte_identical_to_readelf(tmp_path: Path,
                                                                report) -> None:
    """Programs linked by GNU ld 2.40 from ``as --gsframe`` objects: ld merges the V1
    sections and adds PC-mask FDEs for the PLT (V1 has no repeat size field), which
    readelf 2.40 prints; so do we, byte for byte."""
    require("as", "readelf", "csmith", "gcc")
    files = csmith_asm(SEEDS)[::10]
    plt = fdes = 0
    for asm in files:
        program = tmp_path / "prog"
        subprocess.run(["gcc", "-Wa,--gsframe", str(asm), "-o", str(program)], check=True)
        section = _dump_as_readelf_does(program)
        plt += sum(fde.pc_mask for fde in section.fdes)
        fdes += len(section.fdes)
    assert plt >= len(files)  # every dynamically linked program has a PLT FDE
    # Measured here: 13 programs, 1363 FDEs; floors 10% lower.
    at_least("programs", len(files), 11)
    at_least("FDEs dumped", fdes, 1226)
    report(f"dump vs readelf 2.40 (SFrame V1 linked by ld 2.40): {len(files)} programs "
           f"({fdes} FDEs) byte-identical, {plt} PC-mask PLT FDEs")


def test_verify_passes_on_our_objects_and_diff_agrees_with_gas(tmp_path: Path,
                                                                report) -> None:
    require("as", "readelf", "csmith", "gcc")
    files = csmith_asm(SEEDS)
    checked = same = 0
    for asm in files:
        ours = tmp_path / "ours.o"
        ours.write_bytes(convert_asm(asm.read_text(), str(asm)).obj())
        loaded = load_sframe(str(ours))
        cfi = read_elf_cfi(str(ours))
        result = verify(loaded.section, cfi.timelines, arch_for_machine(cfi.machine, ""),
                        lambda fde, ld=loaded: ld.section_of(fde.field_offset))
        assert result.ok, (asm, result.mismatches[:1])
        assert not result.extra
        checked += result.checked
        gas = tmp_path / "gas.o"
        subprocess.run(["as", "--gsframe", str(asm), "-o", str(gas)], check=True)
        theirs = load_sframe(str(gas))
        diff = diff_sections(
            theirs.section, loaded.section,
            lambda fde, ld=theirs: (ld.section_of(fde.field_offset), fde.start_address),
            lambda fde, ld=loaded: (ld.section_of(fde.field_offset), fde.start_address))
        assert diff.equivalent, (asm, diff.differing[:1], diff.only_a[:1], diff.only_b[:1])
        same += diff.same
    report(f"verify on our objects: {checked} functions checked at every PC, 0 mismatches; "
           f"diff GNU as V1 vs ours V2: {same} functions equivalent")
    # Measured here: 125 files, 2880 verified, 2880 equivalent; floors 10% lower.
    at_least("files", len(files), 112)
    at_least("functions verified", checked, 2592)
    at_least("functions equivalent to GNU as's", same, 2592)


def test_verify_finds_a_planted_mismatch(tmp_path: Path) -> None:
    require("as")
    src = Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s"
    obj = tmp_path / "f.o"
    obj.write_bytes(convert_asm(src.read_text(), str(src)).obj())
    data = bytearray(obj.read_bytes())
    loaded = load_sframe(str(obj))
    # Corrupt the CFA offset of the second FRE of the first function: sp+16 -> sp+24.
    section_bytes = loaded.section
    fde = section_bytes.fdes[0]
    sframe_at = data.find(b"\xe2\xde\x02")
    fre_base = sframe_at + 28 + section_bytes.freoff + fde.start_fre_off
    second = fre_base + 3  # first FRE: start, info, one 1-byte word
    assert data[second + 2] == 16
    data[second + 2] = 24
    bad = tmp_path / "bad.o"
    bad.write_bytes(bytes(data))
    loaded = load_sframe(str(bad))
    cfi = read_elf_cfi(str(bad))
    result = verify(loaded.section, cfi.timelines, arch_for_machine(cfi.machine, ""),
                    lambda fde: loaded.section_of(fde.field_offset))
    assert not result.ok
    (timeline, ranges), = result.mismatches
    assert timeline.name == "with_frame"
    assert ranges[0][2].cfa.offset == 24 and ranges[0][3].cfa.offset == 16
    assert dump_text(loaded.section)  # still readable


def test_v3_means_what_v2_means_and_verifies(tmp_path: Path, report) -> None:
    require("as", "csmith", "gcc")
    covered = {2: 0, 3: 0}
    files = csmith_asm(SEEDS)
    for asm in files:
        text = asm.read_text()
        v2 = convert_asm(text, str(asm))
        v3 = convert_asm(text, str(asm), version=3)
        covered[2] += len(v2.functions)
        covered[3] += len(v3.functions)
        assert len(v3.functions) >= len(v2.functions)
        ours = tmp_path / "v3.o"
        ours.write_bytes(v3.obj())
        loaded = load_sframe(str(ours))
        cfi = read_elf_cfi(str(ours))
        result = verify(loaded.section, cfi.timelines, arch_for_machine(cfi.machine, ""),
                        lambda fde, ld=loaded: ld.section_of(fde.field_offset))
        assert result.ok and not result.extra, (asm, result.mismatches[:1])
        from cfi2sframe.sframe.decode import decode

        a, b = decode(v2.raw()), decode(v3.raw())
        diff = diff_sections(
            a, b, lambda fde, c=v2: (c.functions[fde.index].section, fde.start_address),
            lambda fde, c=v3: (c.functions[fde.index].section, fde.start_address))
        assert not diff.differing and not diff.only_a, asm
    report(f"V2 vs V3 on the csmith corpus: {covered[2]} functions in V2, {covered[3]} in V3; "
           "every V2 function means the same in V3; V3 objects verify")
    # Measured here: 125 files, V2 2880 and V3 2880 functions; floors 10% lower.
    at_least("files", len(files), 112)
    at_least("V2 functions", covered[2], 2592)
    at_least("V3 functions", covered[3], 2592)
