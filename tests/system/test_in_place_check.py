"""``--in-place`` checks the file as written, not as planned: the conversion's PLT rows
are kept for the check (its DWARF rows, ``dwarf.cfi._INTERPRETED``, and their values
at every PC, ``sframe.pcmask._RESOLVED``), and the compiled scan's ids of
states and FREs from file to file by target and header fields
(``analysis.compare._fast_check``), so a written file whose bytes differ from what
the conversion planned must still fail it.  Each damage below is made after the
conversion of the same file and the planned file's check filled those memos: a
flipped byte in the PLT's DWARF expression, in its CIE's RA rule, in the PLT's
SFrame FRE, in the SFrame
header's fixed RA offset, in a program header and in a section header.  Expected
outcomes from the specs: the PLT FDE's expression is GNU ld's (``lit11``: CFA + 16
from byte 11 of each 16-byte entry), its SFrame FRE at byte 11 is ``0b 03 10``
(SFrame V2: 1-byte start, info = SP base | one 1-byte offset, CFA offset 16); the
SFrame header's fixed RA offset is byte 6 (-8 on x86-64).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.analysis.compare import check_rewritten
from cfi2sframe.convert import ElfConversion, convert_file
from cfi2sframe.elf.grow import find_room
from cfi2sframe.elf.read import PT_GNU_SFRAME, ElfView, open_elf
from cfi2sframe.errors import Cfi2SframeError, InternalError
from cfi2sframe.files import bytes_of
from tests.conftest import require

# GNU ld's x86-64 PLT expression (as tests/unit/test_pcmask.py's LD_PLT) and the pc-mask
# FDE's two FREs: at 0 CFA = SP + 8, at 11 CFA = SP + 16.
LD_PLT = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
PLT_FRES = bytes([0x00, 0x03, 0x08, 0x0B, 0x03, 0x10])


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A gcc-linked program with three PLT entries, converted in memory (the PLT
    lowered, its rows kept): the file ``--in-place`` would write."""
    require("gcc")
    tmp = tmp_path_factory.mktemp("plt")
    (tmp / "p.c").write_text('#include <stdio.h>\n#include <stdlib.h>\n'
                             'int main(int c, char **v) { puts(v[0]); printf("%d\\n", c);'
                             ' return atoi(v[0]) & 1; }\n')
    subprocess.run(["gcc", "-O2", str(tmp / "p.c"), "-o", str(tmp / "plt")], check=True)
    conversion = convert_file("plt", (tmp / "plt").read_bytes())
    assert isinstance(conversion, ElfConversion)
    return bytes_of(conversion.elf_copy())


def _flip(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def _in(data: bytes, name: str, pattern: bytes) -> int:
    """Where ``pattern`` is, once, in section ``name``."""
    section = open_elf(data, "plt").section(name)
    assert section is not None, name
    offset, size = section.offset, section.size
    found = data.find(pattern, offset, offset + size)
    assert found >= 0 and data.find(pattern, found + 1, offset + size) < 0, name
    return found


def _plt_expression(data: bytes) -> bytes:  # lit11 -> lit10: + 16 from byte 10 on
    return _flip(data, _in(data, ".eh_frame", LD_PLT) + 6, bytes([0x3A]))


def _plt_fre(data: bytes) -> bytes:  # CFA = SP + 24 from byte 11 on, not + 16
    return _flip(data, _in(data, ".sframe", PLT_FRES) + 5, bytes([0x18]))


def _cie_ra_rule(data: bytes) -> bytes:  # the PLT's CIE: RA at CFA - 16 (offset r16, 2)
    section = open_elf(data, "plt").section(".eh_frame")
    assert section is not None
    # def_cfa r7 8; offset r16 1 (times data_align -8): every zR CIE gcc writes here; the
    # PLT's (and main's) is the second, readelf -wF's cie=00000030.
    at = data.rfind(bytes([0x0C, 7, 8, 0x90, 1]), section.offset, section.offset + section.size)
    assert at >= section.offset + 0x30
    return _flip(data, at + 4, bytes([2]))


def _fixed_ra_offset(data: bytes) -> bytes:  # the SFrame header's RA at CFA - 16, not - 8
    section = open_elf(data, "plt").section(".sframe")
    assert section is not None and data[section.offset + 6] == 0xF8  # -8
    return _flip(data, section.offset + 6, bytes([0xF0]))


def _sframe_segment(data: bytes) -> bytes:  # PT_GNU_SFRAME 8 bytes past the section
    view = open_elf(data, "plt")
    segment = next(seg for seg in view.segments() if seg.kind == PT_GNU_SFRAME)
    at = segment.header_at + 16  # p_vaddr
    return _flip(data, at, struct.pack("<Q", segment.vaddr + 8))


def _sframe_header(data: bytes) -> bytes:  # .sframe's sh_addr 8 bytes on
    section = open_elf(data, "plt").section(".sframe")
    assert section is not None
    return _flip(data, section.header_at + 16, struct.pack("<Q", section.addr + 8))


DAMAGES = {"PLT expression": (_plt_expression, r"SFrame and DWARF differ in "),
           "PLT FRE": (_plt_fre, r"SFrame and DWARF differ in "),
           # Every function SFrame describes differs from its first byte: the PLT (first
           # by address), .plt.got and main; _start is left out (RA undefined).
           "CIE's RA rule": (_cie_ra_rule, r"SFrame and DWARF differ in 'pc\+0x1020' "
                                          r"over \[0x1020, 0x1026\); 2 more problems\)"),
           "fixed RA offset": (_fixed_ra_offset, r"SFrame and DWARF differ in 'pc\+0x1020' "
                                                 r"over \[0x1020, 0x1026\); 2 more problems\)"),
           "PT_GNU_SFRAME": (_sframe_segment, r"bad layout: PT_GNU_SFRAME "),
           ".sframe header": (_sframe_header,
                              r"bad layout: section '.sframe' .* is outside every PT_LOAD")}


def test_the_planned_file_verifies(planned: bytes) -> None:
    check_rewritten("plt", planned)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_written_file_unlike_the_plan_fails_the_check(planned: bytes, damage: str) -> None:
    change, message = DAMAGES[damage]
    damaged = change(planned)
    assert damaged != planned and len(damaged) == len(planned)
    check_rewritten("plt", planned, original=planned)  # the memos filled first
    with pytest.raises(InternalError, match=message):  # the file is ours: the bug too
        check_rewritten("plt", damaged, original=planned)


def test_a_layout_problem_the_input_had_stays_the_inputs_error(planned: bytes) -> None:
    """A rewritten file that keeps a layout problem of its input (here the input is the
    damaged file itself) is an input error, not ours."""
    damaged = _sframe_segment(planned)
    with pytest.raises(Cfi2SframeError, match=r"bad layout: PT_GNU_SFRAME .*as the input's "):
        check_rewritten("plt", damaged, original=damaged)


def test_an_unreadable_sframe_section_we_wrote_is_ours(planned: bytes) -> None:
    """A section we cannot read back (its magic broken) is a bug of ours, named."""
    section = open_elf(planned, "plt").section(".sframe")
    assert section is not None
    damaged = _flip(planned, section.offset, b"\x00\x00")
    with pytest.raises(InternalError, match=r"does not verify \(.sframe: at byte 0x0: bad magic"):
        check_rewritten("plt", damaged, original=planned)


def test_cfi_verify_cannot_read_stays_the_inputs_error(planned: bytes) -> None:
    """The input's own .eh_frame, unreadable (its first CIE's length past the
    section), is the input's error, whoever copied it."""
    section = open_elf(planned, "plt").section(".eh_frame")
    assert section is not None
    damaged = _flip(planned, section.offset, struct.pack("<I", 0x7FFFFFF0))
    with pytest.raises(Cfi2SframeError, match=r"plt: error: .eh_frame: at byte 0x0: ") as caught:
        check_rewritten("plt", damaged, original=planned)
    assert not isinstance(caught.value, InternalError)



OVERLAPPING = """\t.cfi_sections .debug_frame
\t.text
outer:
\t.cfi_startproc
\tsubq $8, %rsp
\t.cfi_def_cfa_offset 16
\taddq $8, %rsp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
inner:
\t.cfi_startproc
\tpushq %rbx
\t.cfi_def_cfa_offset 16
\tpopq %rbx
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
"""


def _assembled(tmp_path: Path, name: str) -> tuple[Path, bytearray, ElfView]:
    """``OVERLAPPING`` assembled by GNU as: the object, its bytes to damage, its view."""
    require("as")
    source, obj = tmp_path / f"{name}.s", tmp_path / f"{name}.o"
    source.write_text(OVERLAPPING)
    subprocess.run(["as", str(source), "-o", str(obj)], check=True)
    data = bytearray(obj.read_bytes())
    return obj, data, open_elf(bytes(data), f"{name}.o")


def test_fdes_that_overlap_are_the_inputs_error(tmp_path) -> None:
    """Found by fuzzing the rewrite path: an FDE whose range (2**40 bytes: past SFrame's
    32-bit function size, so left out with a warning) covers the next function's FDE.
    Where two FDEs cover a PC the input's CFI gives two rules, and the rewritten file's
    check meets the outer one's where the section holds the inner one's: the input's
    error (exit 1), not an internal error, and the input untouched.  The .debug_frame
    layout (DWARF 5, 6.4.1, 64-bit object): the CIE, then the first FDE's length (4),
    CIE pointer (4), initial location (8) and address range (8, at byte 16 of it)."""
    obj, data, view = _assembled(tmp_path, "overlap")
    frame = view.section(".debug_frame")
    assert frame is not None
    cie_length = struct.unpack_from("<I", data, frame.offset)[0]
    fde = frame.offset + 4 + cie_length
    assert struct.unpack_from("<Q", data, fde + 16)[0] == 9  # outer: 4 + 4 + 1 bytes
    struct.pack_into("<Q", data, fde + 16, 1 << 40)
    obj.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", str(obj)],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "the input's FDEs overlap at 0x9, so its CFI gives two rules there; input " \
           "left untouched" in done.stderr, done.stderr
    assert obj.read_bytes() == bytes(data)


@pytest.mark.parametrize("addend, fits", [(45 + (1 << 31) - 1, True), (45 + (1 << 31), False),
                                          (1 << 54, False)])
def test_a_start_the_sframe_field_cannot_reach_is_the_inputs_error(tmp_path, addend: int,
                                                                    fits: bool) -> None:
    """Found by fuzzing the rewrite path: an object's FDE placed by an R_X86_64_64 at
    .text + 2**54 (its .debug_frame field is 8 bytes); the .sframe's start field of an
    FDE is 4 bytes, PC-relative (S + A - P, the sections at 0 as a reader relocates an
    object), so the written relocation could not be read back: an internal error.  Now
    the conversion says so.  The bound, from the layout of the V1 section an object
    gets by default (GNU ld 2.40 links only V1): a 28-byte header, FDEs of 17 bytes,
    the start field first; the second function sorts last, so its field is at P = 45
    and A - 45 = 2**31 - 1 is the last addend it holds."""
    obj, data, view = _assembled(tmp_path, "far")
    rela = view.section(".rela.debug_frame")
    assert rela is not None and rela.size == 4 * 24  # CIE pointer and start, each FDE
    offset, info, original = struct.unpack_from("<QQq", data, rela.offset + 3 * 24)
    assert info & 0xFFFFFFFF == 1 and original == 9  # R_X86_64_64 at .text + 9: inner
    struct.pack_into("<q", data, rela.offset + 3 * 24 + 16, addend)
    obj.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", str(obj)],
                          capture_output=True, text=True)
    if fits:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 1, done.stderr
    assert f"function '.text+{addend:#x}' starts at {addend:#x} in its section: the " \
           ".sframe's 4-byte PC-relative start field does not reach that" in done.stderr, \
        done.stderr
    assert obj.read_bytes() == bytes(data)


@pytest.mark.parametrize("align, room", [(8, True), (4096, True),
                                         ((1 << 64) - 0x1A34_0000_FFF8, False),
                                         (24, False), (1 << 40, False)])
def test_a_moved_sections_absurd_alignment_gives_no_room(tmp_path, align: int,
                                                         room: bool) -> None:
    """Found by fuzzing the rewrite path: a PIE whose .note.gnu.property (moved after
    the program headers to make room for more) held an sh_addralign of 2**64 - ..., not
    a power of two (gABI: 0, 1 or a power of two), so the room was placed ~2**64 bytes
    on and the write raised OverflowError.  Such a section, or one aligned past its
    segment's page (4 KiB here), gives no room (``find_room``: None, the conversion
    goes another way); a power of two up to the page does.  The command ends with
    the file's conversion or its error, never a traceback."""
    require("gcc")
    source, program = tmp_path / "p.c", tmp_path / "p"
    source.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-O2", "-pie", "-fPIE", "-Wl,-z,max-page-size=4096", str(source),
                    "-o", str(program)], check=True)
    data = bytearray(program.read_bytes())
    view = open_elf(bytes(data), "p")
    note = view.section(".note.gnu.property")
    if note is None:
        pytest.skip("this gcc writes no .note.gnu.property")
    index = view.sections.index(note)
    found = find_room(view, view.segments(), 2)
    if found is None or index not in found.moved:
        pytest.skip("this link moves no .note.gnu.property to make room")
    struct.pack_into("<Q", data, note.header_at + 48, align)  # sh_addralign (ELF64)
    changed = open_elf(bytes(data), "p")
    found = find_room(changed, changed.segments(), 2)
    assert (found is not None) == room, found
    program.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", str(program)],
                          capture_output=True, text=True)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr


def test_a_moved_symbol_leaving_64_bits_is_the_inputs_error(tmp_path) -> None:
    """Found by fuzzing the rewrite path: a symbol defined in a section that moves to
    make room after the program headers, its value 2**64 - 1 (nowhere near its
    section), moved past 64 bits: struct.error (a traceback).  Now the input's error,
    the file untouched.  ELF64 symbol: st_name 4, st_info 1, st_other 1, st_shndx 2,
    st_value 8 (at byte 8 of its 24)."""
    require("gcc")
    source, program = tmp_path / "p.c", tmp_path / "p"
    source.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-O2", "-pie", "-fPIE", str(source), "-o", str(program)],
                   check=True)
    data = bytearray(program.read_bytes())
    view = open_elf(bytes(data), "p")
    room = find_room(view, view.segments(), 2)
    symtab = view.section(".symtab")
    if room is None or symtab is None:
        pytest.skip("this link moves nothing, or has no symbol table")
    defined = [n for n in range(symtab.size // 24)
               if struct.unpack_from("<H", data, symtab.offset + 24 * n + 6)[0] in room.moved]
    if not defined:
        pytest.skip("no symbol is defined in a section that moves")
    struct.pack_into("<Q", data, symtab.offset + 24 * defined[0] + 8, (1 << 64) - 1)
    program.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", str(program)],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert f"symbol {defined[0]} of section {view.sections.index(symtab)} has value " \
           "0xffffffffffffffff: moved with its section" in done.stderr, done.stderr
    assert program.read_bytes() == bytes(data)
