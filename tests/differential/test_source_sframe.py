"""``--source sframe``: an existing section converted between versions without DWARF.

- GNU as 2.40 objects (V1) -> V2 means what V1 means, function by function;
- our V2 -> V3 -> V2 on the corpus: equivalent at every step;
- GNU ld 2.40 programs (V1, PLT FDEs) -> V3 in a rewritten program that runs,
  -> V2 in place; a program stripped of .eh_frame is converted by default;
- a hand-built V3 section with what V2 cannot say (FLEX rules, an outermost
  frame): those FDEs are left out with reasons, the others kept exactly.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from cfi2sframe import convert_asm
from cfi2sframe.analysis.compare import diff_sections
from cfi2sframe.convert import convert_sframe
from cfi2sframe.elf.read import open_elf
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import at_least, gsframe_program, readelf_section, require
from tests.corpus import csmith_asm

from .test_gas import SEEDS
from .test_replace import _output, _sframe_version, cli


def _keyed(loaded):
    return lambda fde: (loaded.section_of(fde.field_offset), fde.start_address)


def test_v1_objects_from_gas_convert_to_v2_with_the_same_meaning(tmp_path: Path,
                                                                 report) -> None:
    require("as", "csmith", "gcc")
    same = 0
    files = csmith_asm(SEEDS)[::3]
    for asm in files:
        gas = tmp_path / "gas.o"
        subprocess.run(["as", "--gsframe", str(asm), "-o", str(gas)], check=True)
        out = tmp_path / "v2.o"
        # --linker-reads any: V2 out, though ld 2.40 (on PATH) merges V1 only
        proc = cli(str(gas), "--source", "sframe", "--linker-reads", "any", "-w", "-o",
                   str(out))
        assert proc.returncode == 0, proc.stderr
        before, after = load_sframe(str(gas)), load_sframe(str(out))
        assert after.section.version == 2
        diff = diff_sections(before.section, after.section, _keyed(before), _keyed(after))
        assert diff.equivalent, (asm, diff.differing[:1], diff.only_a[:1])
        same += diff.same
    report(f"--source sframe, GNU as V1 objects -> V2: {len(files)} objects, {same} functions "
           "equivalent")
    # Measured here: 42 objects, 1037 functions; floors 10% lower.
    at_least("objects", len(files), 37)
    at_least("functions equivalent", same, 933)


def test_v2_v3_round_trips_on_the_corpus(tmp_path: Path, report) -> None:
    """Objects, so functions keep their sections: our V2 object -> V3 -> V2."""
    require("as", "csmith", "gcc")
    same = 0
    files = csmith_asm(SEEDS)[::3]
    for asm in files:
        steps = [convert_asm(asm.read_text(), str(asm)).obj()]
        for version in (3, 2):
            converted = convert_sframe("in.o", steps[-1], version)
            assert not converted.skips, converted.skips[:1]
            steps.append(converted.obj())
        loaded = []
        for index, data in enumerate(steps):
            path = tmp_path / f"step{index}.o"
            path.write_bytes(data)
            loaded.append(load_sframe(str(path)))
        assert [x.section.version for x in loaded] == [2, 3, 2]
        for a, b in zip(loaded, loaded[1:], strict=False):
            diff = diff_sections(a.section, b.section, _keyed(a), _keyed(b))
            assert diff.equivalent, (asm, diff.differing[:1], diff.only_a[:1])
        same += len(loaded[0].section.fdes)
    report(f"--source sframe, our V2 objects -> V3 -> V2: {len(files)} objects, {same} "
           "functions equivalent at each step")
    # Measured here: 42 objects, 1037 functions; floors 10% lower.
    at_least("objects", len(files), 37)
    at_least("functions equivalent", same, 933)


def test_ld_programs_convert_and_run(tmp_path: Path) -> None:
    program = gsframe_program(tmp_path)
    expected = _output(program)
    v3 = tmp_path / "v3"
    proc = cli(str(program), "--source", "sframe", "--sframe-version", "3", "--emit", "elf",
               "-o", str(v3))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert _sframe_version(v3) == 3 and _output(v3) == expected
    # Agrees at every PC; but ld 2.40 gave .plt.got no FDE, nor _start (an outermost
    # frame: V2 cannot hold it, V3 can), and a section made from that one has none.
    proc = cli("verify", "-q", str(v3))
    plt_got = readelf_section(program, ".plt.got")[0]
    assert proc.returncode == 1 and " 0 mismatches" in proc.stdout, proc.stdout
    assert (": not covered: 2 functions have no SFrame FDE though SFrame can describe them; "
            f"the first: 'pc+{plt_got:#x}' at {plt_got:#x}\n") in proc.stdout, proc.stdout
    kept = tmp_path / "v3.copy"
    kept.write_bytes(v3.read_bytes())
    proc = cli(str(v3), "--source", "sframe", "--in-place")
    assert proc.returncode == 0, proc.stderr
    # Written where V3 was, the file's last bytes: shorter by the difference.
    sizes = [open_elf(path.read_bytes(), path.name).section(".sframe").size
             for path in (kept, v3)]
    assert _sframe_version(v3) == 2 and sizes[1] < sizes[0]
    assert v3.stat().st_size == kept.stat().st_size - sizes[0] + sizes[1]
    assert cli("diff", str(kept), str(v3)).returncode == 0
    assert _output(v3) == expected
    # Stripped of DWARF CFI: the default source is the .sframe it still has.
    stripped = tmp_path / "stripped"
    subprocess.run(["objcopy", "--remove-section=.eh_frame", "--remove-section=.eh_frame_hdr",
                    str(program), str(stripped)], check=True)
    raw = tmp_path / "s.sframe"
    assert cli(str(stripped), "-o", str(raw)).returncode == 0
    address = next(line.split()[3] for line in subprocess.run(
        ["readelf", "-SW", str(stripped)], capture_output=True, text=True,
        check=True).stdout.splitlines() if " .sframe " in line)
    proc = cli("diff", "--address", "0x" + address, str(program), str(raw))
    assert proc.returncode == 0, proc.stdout


def _v3_section() -> bytes:
    """Three AMD64 V3 FDEs written from the V3 spec: a default FDE (CFA = SP+8), a FLEX
    FDE with CFA = r12+16 (V2 has SP/FP-based CFAs only), and a default FDE without FREs
    (an outermost frame, which V2 cannot say)."""
    order = "<"
    fres = bytearray()
    attrs = []
    # FDE 0: default, one FRE at 0: SP-based, one 1-byte word 8.
    attrs.append(len(fres))
    fres += struct.pack(order + "HBBB", 1, 0x00, 0, 0) + bytes([0, 0x03, 8])
    # FDE 1: FLEX, one FRE: words (control, offset) for the CFA: reg 12, no deref.
    attrs.append(len(fres))
    fres += struct.pack(order + "HBBB", 1, 0x00, 1, 0) + bytes([0, 0x04]) + \
        bytes([(12 << 3) | 1, 16])
    # FDE 2: default, no FREs.
    attrs.append(len(fres))
    fres += struct.pack(order + "HBBB", 0, 0x00, 0, 0)
    header = struct.pack(order + "HBBBbbBIIIII", 0xDEE2, 3, 5, 3, 0, -8, 0, 3, 2, len(fres),
                         0, 48)
    index = b"".join(struct.pack(order + "qII", 0x1000 * (i + 1) - (28 + 16 * i), 0x20, at)
                     for i, at in enumerate(attrs))
    return header + index + bytes(fres)


def test_what_v2_cannot_say_is_left_out_with_reasons() -> None:
    section = _v3_section()
    decoded = decode(section)
    assert [fde.flex for fde in decoded.fdes] == [False, True, False]
    result = convert_sframe("v3.sframe", section, 2)
    assert [f.start for f in result.functions] == [0x1000]
    assert sorted(s.reason for s in result.skips) == ["cfa-not-sp-fp", "ra-undefined"]
    again = convert_sframe("v3.sframe", section, 3)
    assert not again.skips
    diff = diff_sections(decoded, decode(again.raw()))
    assert diff.equivalent, diff.differing


def test_a_flex_cfa_word_without_a_register_is_left_out() -> None:
    """A FLEX CFA control word with the register bit clear (here 0x02: dereference
    only) names no base for the CFA; it is left out, never read as register 0."""
    order = "<"
    fres = struct.pack(order + "HBBB", 1, 0x00, 1, 0) + bytes([0, 0x04, 0x02, 16])
    header = struct.pack(order + "HBBBbbBIIIII", 0xDEE2, 3, 5, 3, 0, -8, 0, 1, 1, len(fres),
                         0, 16)
    section = header + struct.pack(order + "qII", 0x1000 - 28, 0x20, 0) + fres
    for version in (2, 3):
        result = convert_sframe("v3.sframe", section, version)
        assert not result.functions
        assert [s.reason for s in result.skips] == ["cfa-undefined"]
