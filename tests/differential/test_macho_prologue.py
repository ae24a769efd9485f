"""arm64 Mach-O objects whose functions have no FDE (clang writes none where every
function is in compact mode): their encodings worked out from the prologue in the code
(``compact/prologue.py``), against LLVM's own rows as ``llvm-objdump-14 --unwind-info``
reads them; and the rows of Darwin assembly named by their functions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.arch import get_arch
from cfi2sframe.compact.prologue import built_rules, prologue_encoding
from cfi2sframe.compact.rules import CompactRules
from cfi2sframe.macho.read import open_macho
from tests.conftest import cfi2sframe, require
from tests.corpus import csmith_source
from tests.differential.test_macho import _objdump_rows

FRAME = """	.p2align	2
_{name}:
	.cfi_startproc
	sub	sp, sp, #32
	stp	x29, x30, [sp, #16]
	add	x29, sp, #16
	.cfi_def_cfa w29, 16
	.cfi_offset w30, -8
	.cfi_offset w29, -16
	ldp	x29, x30, [sp, #16]
	add	sp, sp, #32
	ret
	.cfi_endproc
"""
HEAD = "\t.section\t__TEXT,__text,regular,pure_instructions\n\t.build_version macos, 11, 0\n"


def test_rows_of_darwin_assembly_are_named_by_their_functions(tmp_path: Path) -> None:
    """llvm-mc relocates a row's start against the symbol it finds there: the section's
    ``ltmp0`` for the first of these local functions, a probe label (placed on the
    previous function's ``.cfi_endproc``, at this one's start) for the others.  Each
    row is its function's, and computed from its directives."""
    require("llvm-mc")
    source = tmp_path / "t.s"
    source.write_text(HEAD + "".join(FRAME.format(name=n) for n in ("one", "two", "three"))
                      + ".subsections_via_symbols\n")
    out = cfi2sframe("compact", str(source), cwd=tmp_path).stdout
    assert "3 rows as computed here, 0 differ, 0 not computed" in out, out
    for name in ("_one", "_two", "_three"):
        assert re.search(rf"^{name} .*0x04000000  frame; = ours$", out, re.M), out


def _objdump_encodings(path: Path) -> dict[int, int]:
    """Start -> compact encoding of each ``__compact_unwind`` row, as llvm-objdump-14
    reads them (the oracle)."""
    return {row[0]: row[2] for row in _objdump_rows(path)}


def _listed(out: str) -> dict[int, tuple[int, str]]:
    """Start -> (LLVM's encoding, our verdict) of each object row ``compact`` lists."""
    rows = out.split("__compact_unwind (its compiler's or assembler's)")[1]
    return {int(start, 16): (int(encoding, 16), verdict) for start, encoding, verdict in
            re.findall(r"^\S+\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]{8})\s.*; (.*)$",
                       rows, re.M)}


@pytest.mark.slow
def test_arm64_O0_objects_every_row_from_the_prologue_equals_llvms(tmp_path: Path,
                                                                   report) -> None:
    """csmith programs at -O0 for arm64 macOS, by llc-14 from clang-14's IR and by
    clang-14 itself: LLVM writes no __eh_frame (every function compact), so every row
    is computed from its function's code, and each equals LLVM's own row as
    llvm-objdump-14 reads it; verify checks every row against the prologue."""
    require("csmith", "clang-14", "llc-14", "llvm-objdump-14")
    rows = 0
    for seed in (1, 3, 4):
        source = tmp_path / f"s{seed}.c"
        source.write_bytes(csmith_source(seed, "--max-funcs", "10"))
        ir = tmp_path / f"s{seed}.ll"
        subprocess.run(["clang-14", "-O0", "-w", "-S", "-emit-llvm", "-I/usr/include/csmith",
                        str(source), "-o", str(ir)], check=True, capture_output=True)
        pre = tmp_path / f"s{seed}.i"
        subprocess.run(["clang-14", "-E", "-P", "-I/usr/include/csmith", str(source), "-o",
                        str(pre)], check=True, capture_output=True)
        by_llc, by_clang = tmp_path / f"s{seed}-llc.o", tmp_path / f"s{seed}-clang.o"
        subprocess.run(["llc-14", "-O0", "-mtriple=arm64-apple-macosx11", "-filetype=obj",
                        str(ir), "-o", str(by_llc)], check=True, capture_output=True)
        subprocess.run(["clang-14", "-target", "arm64-apple-macosx11", "-O0", "-w", "-c",
                        str(pre), "-o", str(by_clang)], check=True, capture_output=True)
        for obj in (by_llc, by_clang):
            llvm = _objdump_encodings(obj)
            out = cfi2sframe("compact", str(obj), cwd=tmp_path).stdout
            listed = _listed(out)
            assert {start: enc for start, (enc, _) in listed.items()} == llvm, out
            assert all(verdict == "= ours (from the prologue)"
                       for _, verdict in listed.values()), out
            proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
            assert proc.returncode == 0 and \
                f"0 checked against their DWARF CFI, {len(llvm)} against their prologue's " \
                "code, 0 problems" in proc.stdout, proc.stdout
            rows += len(llvm)
    report(f"arm64 -O0 objects (csmith 1, 3, 4; llc-14 and clang-14): {rows} rows, every "
           "one computed from its prologue and equal to LLVM's")
    assert rows >= 150


PAIRS = """	.section	__TEXT,__text,regular,pure_instructions
	.build_version macos, 11, 0
	.globl	_f
	.p2align	2
_f:
	stp	x20, x19, [sp, #-32]!
	stp	x29, x30, [sp, #16]
	add	x29, sp, #16
	bl	_g
	ldp	x29, x30, [sp, #16]
	ldp	x20, x19, [sp], #32
	ret
Lend:
	.section	__LD,__compact_unwind,regular,debug
	.p2align	3
	.quad	_f
	.long	Lend-_f
	.long	{encoding}
	.quad	0
	.quad	0
.subsections_via_symbols
"""


def test_verify_names_a_hand_written_arm64_row_wrong_for_its_prologue(
        tmp_path: Path) -> None:
    """An arm64 object with a hand-written __compact_unwind row and no CFI: the frame
    saves x19 and x20 at CFA-24 and CFA-32 (UNWIND_ARM64_FRAME_X19_X20_PAIR, 0x1, in
    compact_unwind_encoding.h), so the right word is 0x04000001; a row that says a bare
    frame (0x04000000) is named by verify and listed as differing by compact."""
    require("llvm-mc", "llvm-objdump-14")
    for encoding, ok in ((0x04000001, True), (0x04000000, False)):
        source = tmp_path / "pairs.s"
        source.write_text(PAIRS.format(encoding=f"{encoding:#x}"))
        obj = tmp_path / f"pairs-{encoding:x}.o"
        subprocess.run(["llvm-mc", "-triple=arm64-apple-macosx11", "-filetype=obj",
                        str(source), "-o", str(obj)], check=True, capture_output=True)
        assert list(_objdump_encodings(obj).values()) == [encoding]  # the row as written
        proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
        compact = cfi2sframe("compact", str(obj), cwd=tmp_path).stdout
        if ok:
            assert proc.returncode == 0 and "1 against their prologue's code, 0 problems" \
                in proc.stdout, proc.stdout
            assert "= ours (from the prologue)" in compact, compact
        else:
            assert proc.returncode == 1, proc.stdout
            assert "'_f' at 0x0: its encoding 0x04000000 (frame) is not what its prologue " \
                "builds (CFA = x29+16; saved x29 at CFA-16, x19 at CFA-24, x20 at CFA-32)" \
                in proc.stdout, proc.stdout
            assert "DIFFERS: ours 0x04000001 (from the prologue)" in compact, compact


MOVES = ["add sp, sp, #16", "sub sp, sp, x9, uxtx", "mov sp, x29",
         "and sp, x9, #0xfffffffffffffff0", "str x30, [sp, #-16]!", "ldr x30, [sp], #16",
         "ldp x29, x30, [sp], #16", "stp d8, d9, [sp, #-16]!", "bl _g", "blr x8"]


def test_a_leaf_is_frameless_only_where_no_word_moves_sp_or_calls(tmp_path: Path) -> None:
    """The words llvm-mc assembles: a function whose code moves no sp and calls nothing
    keeps CFA = sp and its return address in x30 (0x02000000, as LLVM encodes a leaf);
    one instruction that moves sp or calls anywhere in it (after a first instruction the
    prologue reader does not know) leaves it unknown."""
    require("llvm-mc")
    arch = get_arch("aarch64")

    def code(body: list[str]) -> bytes:
        source = tmp_path / "leaf.s"
        source.write_text(HEAD + "_f:\n" + "".join(f"\t{line}\n" for line in body))
        obj = tmp_path / "leaf.o"
        subprocess.run(["llvm-mc", "-triple=arm64-apple-macosx11", "-filetype=obj",
                        str(source), "-o", str(obj)], check=True, capture_output=True)
        view = open_macho(obj.read_bytes())
        text = view.section("__TEXT", "__text")
        assert text is not None
        return view.section_data(text)

    plain = ["ldr w8, [x0]", "add w0, w8, w1", "str x0, [sp, #8]", "ret"]
    assert built_rules(code(plain), arch) == CompactRules(arch.sp, 0, None, ())
    assert prologue_encoding(code(plain), arch) == 0x02000000
    for move in MOVES:
        assert built_rules(code([*plain[:2], move, *plain[2:]]), arch) is None, move
