"""SFrame V3 writing, expectations derived by hand from the V3 spec and the notes' examples."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from cfi2sframe import CfaExpr, CfaReg, Location, Row, Rule, Skip, Timeline, lower
from cfi2sframe.arch import get_arch
from cfi2sframe.convert import convert_asm
from cfi2sframe.sframe.build import encode_sframe
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.rules import RA_UNDEFINED, FrameRules, Loc, fre_rules
from tests.conftest import require

X86 = get_arch("x86_64")
RA = (16, Rule("offset", -8))
FP16 = (6, Rule("offset", -16))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def timeline(rows, size=7, signal=False):
    return Timeline("f", ".text", 0, size, tuple(rows), 16, Location("t.s", 1),
                    signal_frame=signal)


def v3(*timelines) -> bytes:
    functions = [lower(t, X86, version=3) for t in timelines]
    assert not any(isinstance(f, Skip) for f in functions), functions
    return encode_sframe(functions, X86, version=3).to_bytes(0, lambda f: f.start)


def test_worked_example_bytes():
    """An x86-64 V3 section as the V3 spec lays it out (header, FDE index, attributes,
    FREs)."""
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(1, CfaReg(7, 16), (FP16, RA)),
            Row(4, CfaReg(6, 16), (FP16, RA)), Row(6, CfaReg(7, 8), (FP16, RA))]
    data = v3(timeline(rows))
    # Header: version 3, PCREL (+ SORTED: one section), AMD64, fixed RA -8, 1 FDE, 4 FREs,
    # FRE bytes 0x14 (5-byte attribute + 15), FDE index at 0, FREs at 16.
    assert data[:28] == struct.pack("<HBBBbbBIIIII", 0xDEE2, 3, 0x05, 3, 0, -8, 0, 1, 4,
                                    0x14, 0, 0x10)
    assert data[28:44] == struct.pack("<qII", -0x1C, 7, 0)
    assert data[44:49] == bytes([0x04, 0x00, 0x00, 0x00, 0x00])
    assert data[49:] == bytes([0x00, 0x03, 0x08, 0x01, 0x05, 0x10, 0xF0, 0x04, 0x04, 0x10,
                               0xF0, 0x06, 0x05, 0x08, 0xF0])


def test_drap_is_a_flex_fde_with_the_spec_control_words():
    # CFA = r10+0, then CFA = *(rbp-8) (DW_OP_breg6 -8; DW_OP_deref), FP = *(rbp+0).
    drap = CfaExpr(bytes([0x76, 0x78, 0x06]))
    fp = (6, Rule("expression", expr=bytes([0x76, 0x00])))
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(5, CfaReg(10, 0), (RA,)),
            Row(9, CfaReg(10, 0), (fp, RA)), Row(12, drap, (fp, RA))]
    data = v3(timeline(rows, size=20))
    section = decode(data)
    (fde,) = section.fdes
    assert fde.flex and fde.info2 == 1
    assert [f.offsets for f in fde.fres] == [
        (7 << 3 | 1, 8),                         # CFA = rsp+8
        (10 << 3 | 1, 0),                        # CFA = r10+0
        (10 << 3 | 1, 0, 0, 6 << 3 | 2 | 1, 0),  # RA padding, FP = *(rbp+0)
        (6 << 3 | 2 | 1, -8, 0, 6 << 3 | 2 | 1, 0),
    ]
    assert all(not f.info & 1 for f in fde.fres)  # base bit forced 0 in FLEX
    assert fre_rules(section, fde, fde.fres[3]) == FrameRules(
        Loc(6, -8, True), Loc(6, 0, True), Loc(None, -8, True))
    assert isinstance(lower(timeline(rows, size=20), X86), Skip)  # V2 cannot


def test_ra_undefined_rows_outermost_fdes_and_signal_frames():
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(2, CfaReg(7, 8), ((16, Rule("undefined")),))]
    section = decode(v3(timeline(rows, size=4, signal=True)))
    (fde,) = section.fdes
    assert fde.signal and fde.fres[1].offsets == () and fde.fres[1].info == 0
    assert fre_rules(section, fde, fde.fres[1]).ra == RA_UNDEFINED
    # RA undefined at every PC (e.g. _start): an FDE with no FREs.
    outermost = [Row(0, CfaReg(7, 8), ((16, Rule("undefined")),))]
    (fde,) = decode(v3(timeline(outermost, size=4))).fdes
    assert fde.fres == () and not fde.flex


def test_ra_and_fp_in_registers_use_flex():
    rows = [Row(0, CfaReg(7, 8), (RA,)),
            Row(2, CfaReg(7, 8), ((6, Rule("register", 3)), (16, Rule("register", 11))))]
    section = decode(v3(timeline(rows, size=4)))
    (fde,) = section.fdes
    assert fde.flex
    assert fre_rules(section, fde, fde.fres[1]) == FrameRules(
        Loc(7, 8, False), Loc(3, 0, False), Loc(11, 0, False))


def test_value_rules_based_on_the_cfa_have_no_flex_encoding():
    rows = [Row(0, CfaReg(7, 8), ((6, Rule("val_offset", -16)), RA))]
    result = lower(timeline(rows), X86, version=3)
    assert isinstance(result, Skip) and result.reason == "fp-val-offset"


def test_realigned_example_v3_object_verifies(tmp_path):
    require("as")
    out = tmp_path / "r.o"
    # --linker-reads any: a V3 object, though ld 2.40 merges V1 only (tests/unit/test_linker.py)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "--sframe-version", "3",
                           "--linker-reads", "any", str(EXAMPLES / "realigned.s"), "-o",
                           str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "verify", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert "1 functions checked at every PC, 0 mismatches, 0 without SFrame" in proc.stdout
    relocs = subprocess.run(["readelf", "-rW", str(out)], capture_output=True,
                            text=True).stdout
    assert "R_X86_64_PC64" in relocs.split("'.rela.sframe'")[1]
    conversion = convert_asm((EXAMPLES / "realigned.s").read_text(), "r.s", version=3)
    assert not conversion.skips and conversion.functions[0].flex


def test_outermost_start_function_verifies_and_looks_up(tmp_path):
    require("as")
    src = tmp_path / "start.s"
    src.write_text("\t.text\n_start:\n\t.cfi_startproc\n\t.cfi_undefined rip\n"
                   "\txor %ebp, %ebp\n\tcall main\n\thlt\n\t.cfi_endproc\n")
    obj = tmp_path / "start.o"

    def run(*args):
        return subprocess.run([sys.executable, "-m", "cfi2sframe", *args],
                              capture_output=True, text=True)

    assert run("--sframe-version", "3", "--linker-reads", "any", str(src), "-o",
               str(obj)).returncode == 0
    proc = run("verify", str(obj))
    assert proc.returncode == 0 and "1 functions checked at every PC, 0 mismatches" in \
        proc.stdout
    proc = run("lookup", str(obj), "0x2")
    assert proc.returncode == 0 and "outermost frame (RA undefined)" in proc.stdout
    assert '"fres": []' in run("dump", "--json", str(obj)).stdout
    v2 = run(str(src), "-o", str(tmp_path / "v2.sframe"))
    assert "[ra-undefined]" in v2.stderr


def test_ra_signed_with_pc_on_a_flex_target_names_its_offset_once():
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(4, CfaReg(7, 8), (RA,), True, True)]
    result = lower(timeline(rows), X86, version=3)
    assert isinstance(result, Skip) and result.reason == "ra-signed-with-pc"
    assert result.detail == "the return address is signed with the PC as a diversifier at " \
                            "offset 0x4"
