"""The direct path (``sframe.fastpath``) against the general one (interpreter + ``lower``).

``lower_fdes`` takes the direct path wherever it applies; ``lower_all`` over
the file's timelines never does.  Both must give the same functions, FREs
and skips: on real libraries (every distinct FDE body they hold), on the
corpus objects of both architectures, and on random DWARF programs that also
aim at every way out of the direct path.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.arch import arch_for_machine
from cfi2sframe.dwarf.cfi import Cfi, Cie, Fde
from cfi2sframe.dwarf.ops import sleb as _sleb
from cfi2sframe.dwarf.ops import uleb as _uleb
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.sframe.build import lower_all, lower_fdes
from cfi2sframe.sframe.fastpath import direct_fres
from tests.conftest import at_least, require, require_path
from tests.corpus import csmith_asm

from .test_gas import SEEDS

LIBRARIES = ["/usr/lib/x86_64-linux-gnu/libc.so.6",
             "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
             "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"]
# FDEs compared per library: measured here libc 3713, libstdc++ 4867, libLLVM 94994;
# floors 10% lower.
LIBRARY_FDES = {"libc.so.6": 3341, "libstdc++.so.6": 4380, "libLLVM-14.so.1": 85494}


def _same_both_ways(cfi: Cfi, version: int) -> tuple[int, int]:
    """Assert equal results; return (FDEs, FDEs the direct path handled)."""
    arch = arch_for_machine(cfi.machine, cfi.path)
    fast = lower_fdes(cfi, arch, version)
    general = lower_all(cfi.timelines, arch, version)
    assert fast[0] == general[0]
    assert fast[1] == general[1]
    handled = 0
    seen: dict[tuple[int, bytes], bool] = {}
    for fde in cfi.fdes:
        key = (fde.cie_at, fde.body)
        if key not in seen:
            cie = fde.cie
            seen[key] = direct_fres(cie.initial, fde.body, cie.code_align, cie.data_align,
                                    arch, cfi.big_endian) is not None
        handled += seen[key]
    return len(cfi.fdes), handled


@pytest.mark.parametrize("path", LIBRARIES)
@pytest.mark.parametrize("version", [2, 3])
def test_real_libraries_give_the_same_sframe_both_ways(path: str, version: int,
                                                       report) -> None:
    require_path(path)  # libc6, libstdc++6, libllvm14 (with clang-14 and llvm-14)
    cfi = read_elf_cfi(path)
    total, handled = _same_both_ways(cfi, version)
    report(f"direct path, V{version}, {Path(path).name}: {handled} of {total} FDEs, "
           "same SFrame as the general path")
    at_least(f"{Path(path).name}: FDEs", total, LIBRARY_FDES[Path(path).name])


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_corpus_objects_give_the_same_sframe_both_ways(arch: str, tmp_path: Path,
                                                      report) -> None:
    assembler = "as" if arch == "x86_64" else "aarch64-linux-gnu-as"
    compiler = "gcc" if arch == "x86_64" else "aarch64-linux-gnu-gcc"
    require(assembler, compiler, "csmith")
    total = handled = 0
    # -mstackrealign is x86 only (aarch64-linux-gnu-gcc refuses it).
    flags = None if arch == "x86_64" else ["O0", "O2", "Os", "O2fp"]
    files = csmith_asm(SEEDS[:10], flags, compiler=compiler, tag=arch)
    for asm in files:
        obj = tmp_path / "t.o"
        subprocess.run([assembler, str(asm), "-o", str(obj)], check=True)
        for version in (2, 3):
            counts = _same_both_ways(read_elf_cfi(str(obj)), version)
        total += counts[0]
        handled += counts[1]
    report(f"direct path, {arch} corpus objects: {len(files)} objects, {handled} of {total} "
           "FDEs, same SFrame")
    # Measured here: 50 x86-64 and 40 AArch64 objects, FDEs 1175 and 1142; floors 10% lower.
    at_least("objects", len(files), {"x86_64": 45, "aarch64": 36}[arch])
    at_least("FDEs", total, {"x86_64": 1057, "aarch64": 1027}[arch])


# -- random DWARF programs ---------------------------------------------------------------

def _ops(sp: int, fp: int, ra: int, others: list[int]) -> st.SearchStrategy[bytes]:
    """One step of a random program: an operation, then mostly an advance.

    Weighted toward what real prologues do (the direct path's subset), with
    every way out of it (SP/RA rules, expressions, set_loc, huge offsets) too.
    """
    regs = st.sampled_from(others * 3 + [fp] * 6 + [sp, ra])
    cfa_regs = st.sampled_from([sp] * 4 + [fp] * 4 + [others[0]])
    offsets = st.integers(0, 64)
    huge = st.sampled_from([0x7FFFFFFF, 0x80000000, 1 << 32])
    small = st.integers(0, 8)
    common = [
        offsets.map(lambda n: b"\x0e" + _uleb(n)),
        cfa_regs.map(lambda r: b"\x0d" + _uleb(r)),
        st.tuples(regs, small).map(lambda t: bytes([0x80 | t[0]]) + _uleb(t[1])),
        regs.map(lambda r: bytes([0xC0 | r])),
        st.just(b"\x0a"),
    ]
    # remember; a change; a row; restore (as around an early return)
    common.append(st.sampled_from(list(common)).flatmap(lambda strategy: strategy).map(
        lambda op: b"\x0a" + op + b"\x41\x0b"))
    rare = [
        st.integers(0, 300).map(lambda d: bytes([0x02, d & 0xFF])),
        st.integers(0, 65535).map(lambda d: b"\x03" + d.to_bytes(2, "little")),
        st.tuples(cfa_regs, offsets).map(lambda t: b"\x0c" + _uleb(t[0]) + _uleb(t[1])),
        huge.map(lambda n: b"\x0e" + _uleb(n)),
        st.tuples(regs, st.integers(-8, 8)).map(lambda t: b"\x11" + _uleb(t[0]) + _sleb(t[1])),
        st.tuples(regs, small).map(lambda t: b"\x05" + _uleb(t[0]) + _uleb(t[1])),
        regs.map(lambda r: b"\x06" + _uleb(r)),
        st.just(b"\x00"), st.just(b"\x2d"), st.just(b"\x0b"),
        st.integers(0, 64).map(lambda n: b"\x2e" + _uleb(n)),
        regs.map(lambda r: b"\x07" + _uleb(r)),
        regs.map(lambda r: b"\x08" + _uleb(r)),
        st.tuples(regs, regs).map(lambda t: b"\x09" + _uleb(t[0]) + _uleb(t[1])),
        regs.map(lambda r: b"\x10" + _uleb(r) + b"\x02\x77\x08"),  # expression
        regs.map(lambda r: b"\x14" + _uleb(r) + b"\x00"),  # val_offset 0
        st.just(b"\x0f\x02\x77\x08"),  # def_cfa_expression
        st.just(b"\x01" + (0x1000).to_bytes(8, "little")),  # set_loc
    ]
    # sampled_from keeps repeats (one_of would merge them): common steps 20:1.
    step = st.sampled_from(common * 20 + rare).flatmap(lambda strategy: strategy)
    return st.tuples(step, st.integers(0, 3)).map(
        lambda t: t[0] + (bytes([0x40 | t[1]]) if t[1] else b""))


_X86_OPS = _ops(7, 6, 16, [3, 12, 15])
_AARCH64_OPS = _ops(31, 29, 30, [19, 20, 21])
_X86_CIE = b"\x0c\x07\x08\x90\x01"  # def_cfa rsp+8; rip at CFA-8
_AARCH64_CIE = b"\x0c\x1f\x00"  # def_cfa sp+0


def _both_ways(body: bytes, size: int, target: str, version: int) -> tuple:
    if target == "x86":
        cie = Cie(1, -8, 16, 0, 0xFF, False, False, True, _X86_CIE, 8)
        machine = "EM_X86_64"
    else:
        cie = Cie(4, -8, 30, 0, 0xFF, False, False, True, _AARCH64_CIE, 8)
        machine = "EM_AARCH64"
    fde = Fde("f", "", 0x1000, size, cie, 0, body, 0x20, 0x30)
    cfi = Cfi("t.o", machine, "ET_DYN", (fde,), ".eh_frame")
    arch = arch_for_machine(machine, "t.o")
    return lower_fdes(cfi, arch, version), lower_all(cfi.timelines, arch, version)


# The edges of the direct path's subset, each once for sure (random runs may miss one).
EDGES = {
    "cfa offset 2**31-1": ("x86", b"\x41\x0e\xff\xff\xff\xff\x07\x41"),
    "cfa offset 2**31": ("x86", b"\x41\x0e\x80\x80\x80\x80\x08\x41"),
    "fp saved then restored": ("x86", b"\x41\x86\x02\x41\xc6\x41"),
    "nested remember/restore": ("x86", b"\x0a\x41\x0e\x10\x0a\x41\x0e\x18\x41\x0b\x41"
                                       b"\x0b\x41"),
    "RA at CFA-16": ("x86", b"\x41\x90\x02\x41"),
    "CFA on rbx": ("x86", b"\x41\x0d\x03\x41"),
    "CFA on rbx past the end": ("x86", b"\x50\x0d\x03\x41"),
    "FP without RA (AArch64)": ("a64", b"\x41\x9d\x02\x41"),
    "FP and RA (AArch64)": ("a64", b"\x41\x0e\x10\x9d\x02\x9e\x01\x41\x2d\x41"),
}


@pytest.mark.parametrize("name", list(EDGES))
@pytest.mark.parametrize("version", [2, 3])
def test_edges_of_the_direct_path(name: str, version: int) -> None:
    target, body = EDGES[name]
    fast, general = _both_ways(body, 0x10, target, version)
    assert fast == general


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(0, 400), st.sampled_from(["x86", "a64"]), st.booleans(),
       st.sampled_from([2, 3]))
def test_random_programs_give_the_same_sframe_both_ways(data, size, target, truncate,
                                                        version) -> None:
    ops = _X86_OPS if target == "x86" else _AARCH64_OPS
    body = b"".join(data.draw(st.lists(ops, max_size=30)))
    if truncate and body:
        body = body[:-1]  # operands cut short: both paths must agree (or both fail)
    try:
        fast, general = _both_ways(body, size, target, version)
    except Cfi2SframeError:
        return  # corrupt CFI: both paths raise (the general one decides; see lower_fdes)
    assert fast == general
