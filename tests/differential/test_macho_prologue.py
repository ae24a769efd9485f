"""arm64 Mach-O objects whose functions have no FDE (clang writes none where every
function is in compact mode): their encodings worked out from the prologue in the code
(``compact/prologue.py``), against LLVM's own rows as ``llvm-objdump-14 --unwind-info``
reads them; and the rows of Darwin assembly named by their functions."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import cfi2sframe, require

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
