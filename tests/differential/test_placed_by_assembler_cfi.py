"""Assembly is first assembled as it is, and each function's directives are placed by
the FDE the assembler wrote for it (``_Builder.place_by_cfi``): where that FDE has
exactly the function's operations, its advances are where the assembler put them.

The reference is the probe run (a label before every directive, its value read from
the symbol table; ``probes=True``).  Both must give the same timelines, field for
field (names, places, rows, the line of each operation), on csmith programs from gcc
for x86-64, AArch64 and big-endian s390x and from clang-14 through llvm-mc.  Where the
assembler's CFI cannot place a function (a directive it skipped, a trailing
``DW_CFA_nop`` it cannot be told from padding, a section switched inside a function),
the probes place it, with the same result or error as before.
"""

from __future__ import annotations

import pytest

from cfi2sframe.arch import as_arch
from cfi2sframe.convert import convert_asm
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.frontend.probe import PROBE, Assembler
from cfi2sframe.frontend.timelines import parse_asm
from tests.conftest import require
from tests.corpus import csmith_asm


@pytest.mark.parametrize("arch, compiler, tag, command", [
    ("x86_64", "gcc", "x86_64", "as"),
    ("aarch64", "aarch64-linux-gnu-gcc", "aarch64", "aarch64-linux-gnu-as"),
    ("s390x", "s390x-linux-gnu-gcc", "s390x", "s390x-linux-gnu-as"),
    ("x86_64", "clang-14", "x86_64-clang", "llvm-mc -filetype=obj -triple=x86_64-linux-gnu"),
])
def test_placed_by_the_assemblers_cfi_as_by_probes(arch, compiler, tag, command) -> None:
    require(compiler, command.split()[0])
    files = csmith_asm(range(1, 9), ["O0", "O2"], compiler=compiler, tag=tag)
    assert len(files) >= 10
    target, runner = as_arch(arch), Assembler.from_string(command)
    plain = 0
    for path in files:
        text = path.read_text()
        ours, _ = parse_asm(text, str(path), target, runner)
        probed, _ = parse_asm(text, str(path), target, runner, probes=True)
        assert probed.probed and PROBE.encode() in probed.obj
        assert ours.timelines == probed.timelines, path
        assert len(ours.timelines) > 1
        plain += not ours.probed and ours.agrees
    # Every file: compiler output switches sections between functions only, and for
    # s390x inside them too (string literals), which GNU as's FDEs still place.
    assert plain == len(files)


def _frame(body: str, name: str = "f") -> str:
    return (f"\t.text\n\t.globl {name}\n\t.type {name}, @function\n{name}:\n"
            "\t.cfi_startproc\n\tpushq %rbp\n\t.cfi_def_cfa_offset 16\n\t.cfi_offset 6, -16\n"
            f"{body}\tpopq %rbp\n\t.cfi_def_cfa 7, 8\n\tret\n\t.cfi_endproc\n"
            f"\t.size {name}, .-{name}\n")


@pytest.mark.parametrize("body", [
    "\tnop\n\t.cfi_escape 0x0\n",  # a DW_CFA_nop the FDE's padding would hide
    "\t.cfi_escape 0x2e, 0x10\n\tnop\n",  # DW_CFA_GNU_args_size
    "\t.cfi_restore 3, 12\n\tnop\n\t.cfi_remember_state\n\tnop\n\t.cfi_restore_state\n",
    "\t.cfi_rel_offset 3, 8\n\tsubq $8, %rsp\n\t.cfi_adjust_cfa_offset 8\n"
    "\taddq $8, %rsp\n\t.cfi_adjust_cfa_offset -8\n",
])
def test_small_functions_placed_alike(body) -> None:
    require("as")
    text = _frame(body)
    ours = convert_asm(text, "t.s")
    probed = convert_asm(text, "t.s", probes=True)
    assert ours.unit is not None and probed.unit is not None
    assert ours.unit.timelines == probed.unit.timelines
    assert ours.raw() == probed.raw() and ours.obj() == probed.obj()


def test_a_trailing_nop_is_placed_by_probes() -> None:
    """The FDE's padding is DW_CFA_nop too: a function whose last operation is one
    cannot be matched with its FDE, and probes place it."""
    require("as")
    text = _frame("").replace("\tret\n", "\tret\n\t.cfi_escape 0\n")
    unit, _ = parse_asm(text, "t.s", as_arch("x86_64"), Assembler(("as",)))
    probed, _ = parse_asm(text, "t.s", as_arch("x86_64"), Assembler(("as",)), probes=True)
    assert unit.probed and unit.timelines == probed.timelines


def test_a_directive_the_assembler_skips_is_still_an_error() -> None:
    """A directive under ``.if 0`` is not in the FDE: the probe run says which."""
    require("as")
    text = _frame("\t.if 0\n\t.cfi_offset 3, -24\n\t.endif\n")
    with pytest.raises(Cfi2SframeError, match="t.s:10: .*did not assemble this directive"):
        convert_asm(text, "t.s")


def test_a_section_switched_inside_a_function_is_still_found() -> None:
    """llvm-mc writes an FDE for a function whose directives are in two sections, its
    advances counting only one of them.  That FDE has the function's operations, so
    only the section directive between ``.cfi_startproc`` and ``.cfi_endproc`` sends
    it to the probes, which find the directive in the other section."""
    require("llvm-mc")
    text = _frame('\t.section .text.other,"ax",@progbits\n\tnop\n\t.cfi_offset 3, -24\n'
                  "\t.text\n")
    with pytest.raises(Cfi2SframeError, match="t.s:11: error: CFI directive in section "
                                              "'.text.other' but the function started in "
                                              "'.text'"):
        convert_asm(text, "t.s", assembler="llvm-mc -filetype=obj -triple=x86_64-linux-gnu")


def test_a_macro_is_placed_by_cfi_for_gnu_as_by_probes_for_llvm() -> None:
    """A macro without CFI used inside a function: GNU as's FDE still places the
    directives; for LLVM's assembler a macro may hide a section switch, and probes
    place them.  The timelines are the same."""
    require("as", "llvm-mc")
    text = ".macro two\n\tnop\n\tnop\n.endm\n" + _frame("\ttwo\n")
    target = as_arch("x86_64")
    for command, probed in (("as", False),
                            ("llvm-mc -filetype=obj -triple=x86_64-linux-gnu", True)):
        unit, _ = parse_asm(text, "t.s", target, Assembler.from_string(command))
        reference, _ = parse_asm(text, "t.s", target, Assembler.from_string(command),
                                 probes=True)
        assert unit.probed is probed
        assert unit.timelines == reference.timelines
        assert [t.size for t in unit.timelines] == [5]  # push, nop, nop, pop, ret


def test_cxx_with_section_groups_placed_alike(tmp_path) -> None:
    """g++ -O2 -g: functions in COMDAT section groups, an LSDA, debug information; the
    FDEs place them as the probes do."""
    import subprocess

    from tests.differential.test_one_assembler_run import CXX

    require("g++", "as")
    source, asm = tmp_path / "t.cpp", tmp_path / "t.s"
    source.write_text(CXX)
    subprocess.run(["g++", "-O2", "-g", "-S", str(source), "-o", str(asm)], check=True)
    text, target = asm.read_text(), as_arch("x86_64")
    ours, _ = parse_asm(text, str(asm), target, Assembler(("as",)))
    probed, _ = parse_asm(text, str(asm), target, Assembler(("as",)), probes=True)
    assert not ours.probed and ours.agrees and ours.timelines == probed.timelines
    assert any(t.lsda for t in ours.timelines)


@pytest.mark.parametrize("sections", [".debug_frame", ".eh_frame, .debug_frame"])
def test_cfi_in_debug_frame_placed_alike(sections) -> None:
    """``.cfi_sections .debug_frame``: the FDEs read are .debug_frame's (version 1 CIE,
    no augmentation), and they place the functions as the probes do.  With both
    sections each FDE is written twice: the probe run's FDE count took them for twice
    the functions (an error, until this test)."""
    require("as")
    text = f"\t.cfi_sections {sections}\n" + _frame("\tnop\n") + _frame("\tnop\n\tnop\n", "g")
    target = as_arch("x86_64")
    ours, _ = parse_asm(text, "t.s", target, Assembler(("as",)))
    probed, _ = parse_asm(text, "t.s", target, Assembler(("as",)), probes=True)
    assert not ours.probed and ours.agrees
    assert ours.timelines == probed.timelines
    assert [t.size for t in ours.timelines] == [4, 5]  # push, nop(s), pop, ret


def test_cfi_from_an_included_file_is_an_error(tmp_path) -> None:
    """An FDE the directives do not account for (its function is in an ``.include``d
    file the scan does not read) cannot be placed, and the probe run says so."""
    require("as")
    (tmp_path / "inc.s").write_text(_frame("\tnop\n", "g"))
    text = '\t.include "inc.s"\n' + _frame("")
    with pytest.raises(Cfi2SframeError, match="t.s: error: the assembler made 2 FDEs in "
                                              ".eh_frame but 1 .cfi_startproc regions"):
        parse_asm(text, "t.s", as_arch("x86_64"), Assembler(("as",)), str(tmp_path))
