"""The DW_CFA, DW_OP and DW_EH_PE numbers we name (``dwarf/opcodes.py``, their one home)
against pyelftools' own tables, written independently from the DWARF spec and the LSB."""

from __future__ import annotations

from elftools.dwarf.callframe import DW_CFA as PYELF_CFA
from elftools.dwarf.dwarf_expr import DW_OP_name2opcode
from elftools.dwarf.enums import DW_EH_encoding_flags

from cfi2sframe.dwarf.opcodes import CFA, EH_PE, OP


def test_cfa_opcodes_match_pyelftools() -> None:
    known = {member.name: member.value for member in PYELF_CFA}
    compared = 0
    for name, value in CFA.numbers().items():
        if name in known:
            assert known[name] == value, name
            compared += 1
    assert compared >= 28  # every DWARF 5 opcode and the GNU/AArch64 ones pyelftools has


def test_op_numbers_match_pyelftools() -> None:
    for name, value in OP.numbers().items():
        spelled = "DW_OP_" + name.rstrip("_")
        assert DW_OP_name2opcode[spelled] == value, spelled
    assert len(OP.numbers()) >= 40


def test_eh_pe_numbers_match_pyelftools() -> None:
    for name, value in EH_PE.numbers().items():
        assert DW_EH_encoding_flags["DW_EH_PE_" + name] == value, name
