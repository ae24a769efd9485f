"""CFI directives inside ``.macro``, ``.rept`` and ``.irp`` bodies: the assembler runs
them where the body is used, once per repetition, so the directives as written say
nothing about where they apply.  Such a file's CFI is read from the assembler's own
``.eh_frame`` (with a note saying so); the SFrame must then agree with GNU as 2.40's
own SFrame (``as --gsframe``, read by ``readelf --sframe``) at every PC."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cfi2sframe, require

from .compare import Tally, compare_file

BODIES = """\
\t.text
\t.macro PROLOGUE
\tpushq\t%rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\tmovq\t%rsp, %rbp
\t.cfi_def_cfa_register 6
\t.endm
\t.macro EPILOGUE
\tpopq\t%rbp
\t.cfi_def_cfa 7, 8
\tret
\t.endm
\t.globl\tf
\t.type\tf, @function
f:
\t.cfi_startproc
\tPROLOGUE
\tnop
\tEPILOGUE
\t.cfi_endproc
\t.size\tf, .-f
\t.globl\tg
\t.type\tg, @function
g:
\t.cfi_startproc
\t.rept 3
\tpushq %rbx
\t.cfi_adjust_cfa_offset 8
\t.endr
\t.irp r, rbx, rbx, rbx
\tpopq %\\r
\t.cfi_adjust_cfa_offset -8
\t.endr
\tret
\t.cfi_endproc
\t.size\tg, .-g
"""

# glibc's style: the function's whole frame description comes from ENTRY and END.
ENTRY_END = """\
\t.macro ENTRY name
\t.globl \\name
\t.type \\name, @function
\\name:
\t.cfi_startproc
\t.endm
\t.macro END name
\t.cfi_endproc
\t.size \\name, .-\\name
\t.endm
\t.text
ENTRY one
\tpushq %r12
\t.cfi_adjust_cfa_offset 8
\tpopq %r12
\t.cfi_adjust_cfa_offset -8
\tret
END one
ENTRY two
\tsubq $24, %rsp
\t.cfi_def_cfa_offset 32
\taddq $24, %rsp
\t.cfi_def_cfa_offset 8
\tret
END two
"""


def _agrees_with_gas(tmp_path: Path, name: str, text: str, functions: int) -> None:
    source = tmp_path / name
    source.write_text(text)
    tally = Tally()
    compare_file(source, tmp_path, tally)
    assert (tally.agree, tally.mismatches, dict(tally.gas_only), dict(tally.ours_only)) \
        == (functions, [], {}, {}), tally.summary()
    proc = cfi2sframe(str(source), "-o", str(tmp_path / "out.o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"{source}:{text.splitlines().index(_first_in_body(text)) + 1}: "
                           "note: CFI directives inside .macro, .rept or .irp bodies: every "
                           "function's CFI is read from the assembler's .eh_frame\n")
    verify = cfi2sframe("verify", str(tmp_path / "out.o"), cwd=tmp_path)
    assert verify.returncode == 0 and f"{functions} functions checked" in verify.stdout


def _first_in_body(text: str) -> str:
    """The first .cfi_ line between a .macro/.rept/.irp and its end (found by reading the
    text here, not by the scanner under test)."""
    depth = 0
    for line in text.splitlines():
        word = line.split()[0] if line.split() else ""
        if word in (".macro", ".rept", ".irp"):
            depth += 1
        elif word in (".endm", ".endr"):
            depth -= 1
        elif depth and word.startswith(".cfi_"):
            return line
    raise AssertionError("no CFI in a body")


def test_cfi_in_macro_rept_and_irp_bodies(tmp_path: Path) -> None:
    require("as", "readelf")
    _agrees_with_gas(tmp_path, "bodies.s", BODIES, 2)


def test_functions_made_by_entry_and_end_macros(tmp_path: Path) -> None:
    require("as", "readelf")
    _agrees_with_gas(tmp_path, "entry.s", ENTRY_END, 2)


def test_a_function_left_out_is_named_and_located_in_a_file_with_bodies(
        tmp_path: Path) -> None:
    """Where the CFI comes from the assembler's .eh_frame, a function left out is still
    named by the source's symbol (also one without .type: never a probe label of ours)
    and located at the directive outside a body that set the rules (here line 12's
    .cfi_def_cfa_register); derived by hand from the source below."""
    require("as")
    body = ("\t.text\n\t.macro PRO\n\tpush %rbp\n\t.cfi_def_cfa_offset 16\n\t.endm\n"
            "\t.globl f\n{type}f:\n\t.cfi_startproc\n\tPRO\n\tmov %rsp,%rbx\n"
            "\t.cfi_def_cfa_register %rbx\n\tret\n\t.cfi_endproc\n")
    for typed, line in ((True, 12), (False, 11)):
        source = tmp_path / f"m{int(typed)}.s"
        source.write_text(body.format(type="\t.type f,@function\n" if typed else ""))
        proc = cfi2sframe(source.name, "-o", "m.o", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        warnings = [w for w in proc.stderr.splitlines() if "no SFrame FDE" in w]
        assert warnings == [f"{source.name}:{line}: warning: no SFrame FDE for 'f': CFA is "
                            "based on rbx at offset 0x4 [cfa-not-sp-fp]"], proc.stderr
