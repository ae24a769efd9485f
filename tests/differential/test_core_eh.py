"""The compiled .eh_frame walker (``csrc/dwarf_cfi.c``, ``eh_fdes``) against the Python walker
it was written from (``dwarf/cfi._walk``), which stays the reference and the fallback.

``parse_cfi`` must give the same FDEs, field for field (names, starts and sizes, CIEs,
instruction bytes, offsets, LSDAs), with the core and without it, or raise the same
error: on the .eh_frame of installed programs and libraries of three targets (C++
ones with LSDAs, big-endian s390x), and on copies with bytes changed at random, where
the core must either give what the Python walker gives or leave the section to it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cfi2sframe.dwarf.cfi import parse_cfi
from cfi2sframe.dwarf.opcodes import EH_PE, EH_PE_APPLICATION, EH_PE_FORMAT
from cfi2sframe.elf.read import open_elf_file
from cfi2sframe.elf.symbols import function_names
from cfi2sframe.errors import DecodeError
from tests.conftest import compiled_core, in_ci, require_path, unavailable

FILES = ["/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libc.so.6",
         "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/ls",
         "/usr/aarch64-linux-gnu/lib/libc.so.6", "/usr/s390x-linux-gnu/lib/libc.so.6"]


def _eh_frame(path: str) -> tuple[bytes, int, int, bool, dict[tuple[str, int], str]]:
    if "-linux-gnu/lib/" in path and not Path(path).exists() and not in_ci():
        unavailable(f"{path}: a cross libc (libc6-*-cross)")
    require_path(path)
    data = Path(path).read_bytes()
    view = open_elf_file(path, data)
    section = view.section(".eh_frame")
    assert section is not None
    return (data[section.offset:section.offset + section.size], section.addr,
            8 if view.is64 else 4, view.little_endian, function_names(view))


def _walked(section: bytes, address: int, size: int, little: bool, names, core) -> object:
    try:
        return parse_cfi(section, True, address, {}, size, little, names, compiled=core)
    except DecodeError as exc:
        return f"{exc.offset}: {exc}"


@pytest.mark.parametrize("path", FILES)
def test_the_compiled_walker_gives_the_python_walkers_fdes(path: str, report) -> None:
    section, address, size, little, names = _eh_frame(path)
    python = _walked(section, address, size, little, names, None)
    assert isinstance(python, list) and python
    assert _walked(section, address, size, little, names, compiled_core()) == python
    lsdas = sum(fde.lsda is not None for fde in python)
    report(f"compiled .eh_frame walker = Python's, {path}: {len(python)} FDEs "
           f"({lsdas} with an LSDA)")


@pytest.mark.parametrize("path", FILES[1:3] + FILES[4:])
def test_changed_bytes_give_the_python_walkers_result(path: str) -> None:
    """Random bytes changed anywhere in the section (lengths, CIE ids, augmentations,
    pointer encodings, pointers, instructions): the same FDEs or the same error.  The
    first 30 copies also through the one pass from the bytes to SFrame functions
    (``sframe.build.lower_eh_frame``): None (the section left to the walkers), or what
    ``lower_fdes`` makes of the Python walker's FDEs, or its error."""
    from cfi2sframe.arch import arch_for_machine

    section, address, size, little, names = _eh_frame(path)
    arch = arch_for_machine(open_elf_file(path, Path(path).read_bytes()).machine, path,
                            not little)
    rng = random.Random(path)
    for trial in range(150):
        damaged = bytearray(section)
        for _ in range(rng.choice((1, 1, 2, 4))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        python = _walked(bytes(damaged), address, size, little, names, None)
        assert _walked(bytes(damaged), address, size, little, names,
                       compiled_core()) == python, trial
        if trial < 30:
            one_pass = _lowered(bytes(damaged), address, size, names, arch, None)
            assert one_pass is None or one_pass == _lowered(
                bytes(damaged), address, size, names, arch, python), trial
            assert _tabled(bytes(damaged), address, size, names, arch) == _encoded(
                one_pass, address, arch), trial


def _tabled(section: bytes, address: int, size: int, names, arch) -> object:
    """``eh_table`` of ``section`` (the one pass to a V2 image, ``_core.eh_table_v2``) as
    (the image placed at the section's address, skips, FDE count), None, or the error's
    text."""
    from cfi2sframe.dwarf.cfi import Cfi
    from cfi2sframe.errors import Cfi2SframeError
    from cfi2sframe.sframe.build import eh_table

    cfi = Cfi("t", arch.elf_machine, "ET_DYN", (), ".eh_frame", arch.big_endian)
    try:
        table = eh_table(section, address, size, lambda _starts: names, cfi, arch)
        return None if table is None else (table[0].to_bytes(address), *table[1:])
    except DecodeError as exc:
        return f"{exc.offset}: {exc}"
    except Cfi2SframeError as exc:
        return str(exc)


def _encoded(one_pass: object, address: int, arch) -> object:
    """What ``_tabled`` gives where ``lower_eh_frame`` gave ``one_pass``: its functions
    encoded by ``encode_sframe`` and placed alike, or the same None or error."""
    from cfi2sframe.errors import Cfi2SframeError
    from cfi2sframe.sframe.build import encode_sframe

    if not isinstance(one_pass, tuple):
        return one_pass
    functions, skips, count = one_pass
    try:
        return encode_sframe(functions, arch).to_bytes(address), skips, count
    except Cfi2SframeError as exc:
        return str(exc)


def _lowered(section: bytes, address: int, size: int, names, arch, fdes: object) -> object:
    """``lower_eh_frame`` of ``section`` (``fdes`` None), else ``lower_fdes`` of ``fdes``
    (the walker's FDEs, or its error) with the FDE count; an error as its text."""
    from cfi2sframe.dwarf.cfi import Cfi
    from cfi2sframe.errors import Cfi2SframeError
    from cfi2sframe.sframe.build import lower_eh_frame, lower_fdes

    if not isinstance(fdes, list | None):
        return fdes
    cfi = Cfi("t", arch.elf_machine, "ET_DYN", tuple(fdes or ()), ".eh_frame",
              arch.big_endian)
    try:
        if fdes is None:
            return lower_eh_frame(section, address, size, names, cfi, arch)
        return (*lower_fdes(cfi, arch), len(fdes))
    except DecodeError as exc:
        return f"{exc.offset}: {exc}"
    except Cfi2SframeError as exc:
        return str(exc)


def _entry(body: bytes) -> bytes:
    body += bytes(-(len(body) + 4) % 4)  # DW_CFA_nop padding to a word
    return len(body).to_bytes(4, "little") + body


def test_lsdas_and_ranges_read_as_the_python_walker_reads_them() -> None:
    """A hand-made section (derived from the DWARF and LSB .eh_frame layouts): a "zLR"
    CIE with an absolute 4-byte LSDA pointer and PC-relative 4-byte FDE starts; FDEs
    whose LSDA is 0 (no LSDA: None) or 0x1234, and one whose range has its top bit set
    (read unsigned, as the Python walker reads pcrel|sdata4 ranges)."""
    cie = _entry(bytes(4) + b"\x01zLR\x00\x01\x78\x10\x02\x03\x1b" + b"\x0c\x07\x08\x90\x01")
    section = bytearray(cie)
    for lsda, size in ((0, 0x40), (0x1234, 0x40), (0x1234, 0x8000_0010)):
        at = len(section)
        pointer = (at + 4).to_bytes(4, "little")  # back to the CIE at 0
        begin = (0x1000 - (at + 8)).to_bytes(4, "little", signed=True)
        section += _entry(pointer + begin + size.to_bytes(4, "little") + b"\x04"
                          + lsda.to_bytes(4, "little") + b"\x41\x0e\x10")
    data = bytes(section)
    python = _walked(data, 0, 8, True, {}, None)
    assert isinstance(python, list)
    assert [(fde.start, fde.size, fde.lsda) for fde in python] == [
        (0x1000, 0x40, None), (0x1000, 0x40, 0x1234), (0x1000, 0x8000_0010, 0x1234)]
    assert _walked(data, 0, 8, True, {}, compiled_core()) == python


@pytest.mark.parametrize("core", [None, "compiled"])
def test_fdes_without_a_symbol_are_named_by_section_and_address(core: str | None) -> None:
    """An FDE no symbol names is SECTION+ADDR, pc+ADDR where linked, the address in hex
    as ``f"{a:#x}"`` writes it (``dwarf/cfi.function_name``): three FDEs of one body
    after a "zR" CIE, their PC-relative starts read as 0x1000, 0x1010 and 0x1020, or,
    in an object, relocated to 0, 0xabc0 and 2**64 - 1 of ".text.f"; a symbol names
    the second of each.  Both walkers: the names are written here by hand."""
    cie = _entry(bytes(4) + b"\x01zR\x00\x01\x78\x10\x01\x1b" + b"\x0c\x07\x08\x90\x01")
    section = bytearray(cie)
    fields = []
    for start in (0x1000, 0x1010, 0x1020):
        at = len(section)
        fields.append(at + 8)
        begin = (start - (at + 8)).to_bytes(4, "little", signed=True)
        section += _entry((at + 4).to_bytes(4, "little") + begin + (16).to_bytes(4, "little")
                          + b"\x00\x41\x0e\x10")
    data = bytes(section)
    names = {("", 0x1010): "f", (".text.f", 0xABC0): "g"}
    compiled = compiled_core() if core else None
    if core and compiled is None:
        pytest.skip("the compiled core is not built")
    linked = parse_cfi(data, True, 0, {}, 8, True, names, compiled=compiled)
    assert [fde.name for fde in linked] == ["pc+0x1000", "f", "pc+0x1020"]
    placed = {field: (".text.f", target) for field, target
              in zip(fields, (0, 0xABC0, (1 << 64) - 1), strict=True)}
    relocated = parse_cfi(data, True, 0, placed, 8, True, names, compiled=compiled)
    assert [fde.name for fde in relocated] == [".text.f+0x0", "g",
                                               ".text.f+0xffffffffffffffff"]


@pytest.mark.parametrize("short_first", [True, False])
def test_one_body_under_two_ranges_keeps_each_ranges_fres(short_first: bool) -> None:
    """Two FDEs with one body (advance 4, CFA offset 16, advance 8, CFA offset 8) and
    ranges 0x15 and 0xc: the short one's FRE at 12 is at its end and dropped (SFrame
    V2: an FRE starts within its function), so it has FREs at 0 and 4, the long one at
    0, 4 and 12.  The table pass writes a body's FRE bytes once and copies them for
    its later rows: it copied three FREs' bytes for the short function (3 stray
    bytes in the section) or two for the long one (an FRE run past the section),
    before the copy was kept to rows with as many FREs."""
    from cfi2sframe.arch import get_arch
    from cfi2sframe.sframe.decode import decode

    if compiled_core() is None:
        pytest.skip(unavailable("the compiled core"))
    arch = get_arch("x86_64")
    cie = _entry(bytes(4) + b"\x01zR\x00\x01\x78\x10\x01\x1b" + b"\x0c\x07\x08\x90\x01")
    section, starts = bytearray(cie), []
    ranges = (0xC, 0x15) if short_first else (0x15, 0xC)
    start = 0x1000
    for size in ranges:
        at = len(section)
        pointer = (at + 4).to_bytes(4, "little")  # back to the CIE at 0
        begin = (start - (at + 8)).to_bytes(4, "little", signed=True)
        section += _entry(pointer + begin + size.to_bytes(4, "little") + b"\x00"
                          + b"\x44\x0e\x10\x48\x0e\x08")
        starts.append(start)
        start += size
    data = bytes(section)
    tabled = _tabled(data, 0, 8, {}, arch)
    assert isinstance(tabled, tuple)
    assert tabled == _encoded(_lowered(data, 0, 8, {}, arch, None), 0, arch)
    fres = {fde.start_address: [(fre.start, fre.offsets[0]) for fre in fde.fres]
            for fde in decode(tabled[0]).fdes}
    whole = [(0, 8), (4, 16), (12, 8)]
    assert fres == {start: whole[:2] if size == 0xC else whole
                    for start, size in zip(starts, ranges, strict=True)}


def test_rows_out_of_order_and_the_plts_sort_as_the_python_path_sorts() -> None:
    """The one pass's table sorted by start, then size, then walk order
    (``csrc/sframe_fastpath.c`` ``sort_rows``), where the walk's rows break their
    address order and the general path's rows (GNU ld's x86-64 PLT, lowered in
    Python into a head and a PC-mask body) come after them but belong between.  A
    hand-made section: a "zR" CIE (pcrel|sdata4 starts, CFA rsp + 8, RA at CFA - 8),
    FDEs in this order: 0x1000, 0x3000 (32 bytes), 0x5000, 0x4000, 0x3000 (16 bytes),
    the PLT at 0x2000 (PLT0 and 5 entries: the expression of tests/unit/test_pcmask).
    Expected by hand: the functions at 0x1000, the PLT's head 0x2000 (16 bytes) and
    body 0x2010 (80), 0x3000 (16 bytes, then 32), 0x4000, 0x5000; and the Python
    path's section (``lower_eh_frame`` then ``encode_sframe``), byte for byte."""
    from cfi2sframe.arch import get_arch
    from cfi2sframe.sframe.decode import decode

    plt_expr = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    plt = b"\x0e\x10\x46\x0e\x18\x4a\x0f" + bytes([len(plt_expr)]) + plt_expr
    section = bytearray(_entry(bytes(4) + b"\x01zR\x00\x01\x78\x10\x01\x1b"
                               + b"\x0c\x07\x08\x90\x01"))
    for start, size, body in ((0x1000, 0x20, b"\x41\x0e\x10"), (0x3000, 0x20, b"\x41\x0e\x10"),
                              (0x5000, 0x20, b"\x41\x0e\x10"), (0x4000, 0x20, b"\x41\x0e\x10"),
                              (0x3000, 0x10, b"\x42\x0e\x10"), (0x2000, 0x60, plt)):
        at = len(section)
        pointer = (at + 4).to_bytes(4, "little")  # back to the CIE at 0
        begin = (start - (at + 8)).to_bytes(4, "little", signed=True)
        section += _entry(pointer + begin + size.to_bytes(4, "little") + b"\x00" + body)
    data, arch = bytes(section), get_arch("x86_64")
    tabled = _tabled(data, 0, 8, {}, arch)
    assert isinstance(tabled, tuple), tabled
    fdes = decode(tabled[0]).fdes
    assert [(f.start_address, f.size, f.pc_mask) for f in fdes] == [
        (0x1000, 0x20, False), (0x2000, 0x10, False), (0x2010, 0x50, True),
        (0x3000, 0x10, False), (0x3000, 0x20, False), (0x4000, 0x20, False),
        (0x5000, 0x20, False)]
    assert tabled == _encoded(_lowered(data, 0, 8, {}, arch, None), 0, arch)


# FDE bodies for the random sections below (x86-64, code alignment 1): none; one
# change at 1; changes at 4 and 12; at 2, 4 and 6; at 4 and 300 (advance_loc2: a
# range past 300 needs 2-byte FRE starts, a shorter one keeps 1-byte starts).
_BODIES = (b"", b"\x41\x0e\x10", b"\x44\x0e\x10\x48\x0e\x08",
           b"\x42\x0e\x10\x42\x0e\x18\x42\x0e\x08",
           b"\x44\x0e\x10\x03\x28\x01\x0e\x08")


def test_random_sections_of_shared_bodies_give_the_python_paths_table() -> None:
    """Sections whose FDEs share a few bodies under ranges that keep all of a body's
    FREs, some or none past the first, at starts that repeat and come out of order:
    the one pass's table (``eh_table_v2``: a body's FRE bytes written once and copied,
    the rows sorted by taking out the strays) is the Python path's, byte for byte, or
    the same error.  It caught the copy taken by a row that keeps fewer FREs."""
    from cfi2sframe.arch import get_arch

    if compiled_core() is None:
        pytest.skip(unavailable("the compiled core"))
    arch, rng = get_arch("x86_64"), random.Random(43)
    cie = _entry(bytes(4) + b"\x01zR\x00\x01\x78\x10\x01\x1b" + b"\x0c\x07\x08\x90\x01")
    for trial in range(300):
        section = bytearray(cie)
        for _ in range(rng.randrange(1, 12)):
            start = 0x1000 + 0x400 * rng.randrange(8) + rng.choice((0, 0, 0x10))
            size = rng.choice((1, 3, 4, 5, 12, 13, 0x15, 0x12c, 0x12d, 0x200))
            at = len(section)
            pointer = (at + 4).to_bytes(4, "little")  # back to the CIE at 0
            begin = (start - (at + 8)).to_bytes(4, "little", signed=True)
            section += _entry(pointer + begin + size.to_bytes(4, "little") + b"\x00"
                              + rng.choice(_BODIES))
        data = bytes(section)
        tabled = _tabled(data, 0, 8, {}, arch)
        assert tabled == _encoded(_lowered(data, 0, 8, {}, arch, None), 0, arch), trial


def test_relocatable_objects_give_the_python_walkers_fdes(tmp_path: Path) -> None:
    """Objects, whose start fields are relocated (each function placed in its own
    section by -ffunction-sections, C++ with LSDAs): the same FDEs, sections, starts
    and names from both walkers, through ``read_elf_cfi`` as conversion reads them."""
    import subprocess

    from cfi2sframe.dwarf import cfi as dwarf_cfi
    from cfi2sframe.elf.cfi import read_elf_cfi
    from tests.conftest import require

    require("gcc", "g++")
    (tmp_path / "a.c").write_text("static int s(int x) { return x * 3; }\n"
                                  "int f(int x) { return s(x) + 1; }\n"
                                  "int g(int x) { return f(x) - 2; }\n")
    (tmp_path / "b.cc").write_text("#include <stdexcept>\nint h(int x) { if (x) throw "
                                   "std::runtime_error(\"x\"); return 1; }\n"
                                   "int k(int x) { try { return h(x); } catch (...) "
                                   "{ return 2; } }\n")
    objects = []
    for source, compiler in (("a.c", "gcc"), ("b.cc", "g++")):
        for flags in (["-O2"], ["-O0", "-ffunction-sections"]):
            obj = tmp_path / f"{source}{len(flags)}{flags[0]}.o"
            subprocess.run([compiler, *flags, "-c", source, "-o", obj.name], cwd=tmp_path,
                           check=True)
            objects.append(obj)
    original = dwarf_cfi.parse_cfi.__defaults__
    try:
        for obj in objects:
            dwarf_cfi.parse_cfi.__defaults__ = (None,)
            python = read_elf_cfi(str(obj))
            dwarf_cfi.parse_cfi.__defaults__ = (compiled_core(),)
            assert read_elf_cfi(str(obj)) == python, obj
            assert python.fdes and all(fde.section for fde in python.fdes), obj
    finally:
        dwarf_cfi.parse_cfi.__defaults__ = original


def test_the_compiled_pointer_encodings_are_dwarfs() -> None:
    """Every DW_EH_PE number csrc/dwarf_cfi.c reads is the one of ``dwarf/opcodes.EH_PE``,
    their Python home (bound there to pyelftools' tables), so neither can change alone."""
    numbers = dict(compiled_core().EH_PE)
    assert numbers.pop("FORMAT") == EH_PE_FORMAT
    assert numbers.pop("APPLICATION") == EH_PE_APPLICATION
    signed = numbers.pop("SIGNED")  # what sets the signed formats apart from the unsigned
    ours = EH_PE.numbers()
    for size in (2, 4, 8):
        assert ours[f"sdata{size}"] == ours[f"udata{size}"] | signed
        assert not ours[f"udata{size}"] & signed
    assert numbers == ours
