"""``--emit obj`` of assembly runs the assembler once: the object is the probe run's
(``frontend.probe``: a label before every CFI directive), with those labels taken out
(``elf.obj.without_local_symbols``) and ``.sframe`` added.

That is only right if the probe labels change nothing else.  With them taken out,
the object must be, byte for byte, the one GNU as writes for the input alone (x86-64,
AArch64, big-endian s390x; csmith programs through gcc).  Where the assembler shares
the bytes of a name that ends another (GNU as for C++'s ``_ZTIi`` in
``DW.ref._ZTIi``; LLVM's assembler for every such name, in one table for symbols and
sections), every section's contents, every symbol, relocation and group must be the
same, and only the string table (and the symbols' offsets into it) may differ.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.convert import convert_asm
from cfi2sframe.elf.obj import without_local_symbols
from cfi2sframe.elf.read import open_elf
from cfi2sframe.frontend.probe import PROBE
from tests.conftest import compiled_core, require
from tests.corpus import csmith_asm

SEEDS = range(1, 9)


def _plain(tmp_path: Path, text: str, command: list[str]) -> bytes:
    """The object ``command`` writes for ``text``, run as cfi2sframe runs it (the file
    named input.s in a folder of its own)."""
    folder = tmp_path / "plain"
    folder.mkdir(exist_ok=True)
    (folder / "input.s").write_text(text)
    subprocess.run([*command, "-o", str(folder / "input.o"), str(folder / "input.s")],
                   check=True, capture_output=True)
    return (folder / "input.o").read_bytes()


def _probe_object(path: Path, arch: str, command: list[str]) -> tuple[str, bytes]:
    text = path.read_text()
    unit = convert_asm(text, str(path), arch, assembler=" ".join(command), probes=True).unit
    assert unit is not None and PROBE.encode() in unit.obj  # the labels are there
    return text, unit.obj


@pytest.mark.parametrize("arch, compiler, tag, command", [
    ("x86_64", "gcc", "x86_64", ["as"]),
    ("aarch64", "aarch64-linux-gnu-gcc", "aarch64", ["aarch64-linux-gnu-as"]),
    ("s390x", "s390x-linux-gnu-gcc", "s390x", ["s390x-linux-gnu-as"]),
])
def test_gnu_as_object_without_probes_is_the_plain_object(tmp_path, arch, compiler, tag,
                                                          command) -> None:
    require(compiler, command[0])
    files = csmith_asm(SEEDS, ["O0", "O2"], compiler=compiler, tag=tag)
    assert len(files) >= 10
    for path in files:
        text, probed = _probe_object(path, arch, command)
        ours = without_local_symbols(probed, PROBE.encode(), str(path))
        assert PROBE.encode() not in ours
        assert ours == _plain(tmp_path, text, command), path
        # The compiled core finds the labels; the Python loop is its reference.
        assert without_local_symbols(probed, PROBE.encode(), str(path), compiled=None) == ours


def _readelf(path: Path, *options: str) -> str:
    """readelf's listing, without the file offsets of sections (a longer string table
    before them moves them)."""
    out = subprocess.run(["readelf", "-W", *options, str(path)], check=True,
                         capture_output=True, text=True).stdout
    return re.sub(r" at offset 0x[0-9a-f]+", "", out)


def test_llvm_mc_object_without_probes_has_the_plain_contents(tmp_path) -> None:
    require("llvm-mc", "clang-14")
    command = ["llvm-mc", "-filetype=obj", "-triple=x86_64-linux-gnu"]
    files = csmith_asm(range(1, 4), ["O0", "O2"], compiler="clang-14", tag="x86_64-clang")
    assert files
    for path in files:
        text, probed = _probe_object(path, "x86_64", command)
        ours = without_local_symbols(probed, PROBE.encode(), str(path))
        _same_but_string_table(tmp_path, ours, _plain(tmp_path, text, command), path)


def _same_but_string_table(tmp_path: Path, ours: bytes, plain: bytes, path: Path) -> None:
    """Every section's contents but the string and symbol tables' the same, and the
    same symbols, relocations and groups as readelf reads them."""
    ours_view, plain_view = open_elf(ours, "ours"), open_elf(plain, "plain")
    assert ours_view.section_names == plain_view.section_names
    for name in ours_view.section_names:
        if name not in ("", ".strtab", ".symtab"):  # (names at other offsets)
            assert ours_view.section_data(name) == plain_view.section_data(name), name
    (tmp_path / "ours.o").write_bytes(ours)
    (tmp_path / "plain.o").write_bytes(plain)
    for options in (("-s",), ("-r",), ("-g",)):
        assert _readelf(tmp_path / "ours.o", *options) == \
            _readelf(tmp_path / "plain.o", *options), (path, options)
    assert len(ours) - len(plain) < 256


CXX = """#include <map>
#include <string>
#include <vector>
template <class T> T twice(T x) { return x + x; }
struct S { virtual ~S() {} virtual int f(int x) { return twice(x) * 3; } };
int use(std::map<std::string, std::vector<int>>& m) {
  S s; int t = 0;
  for (auto& kv : m) for (int v : kv.second) t += s.f(v) + twice<long>(v);
  try { if (t > 100) throw 1; } catch (int e) { t += e; }
  return t;
}
"""


def test_gnu_as_cxx_object_without_probes_has_the_plain_contents(tmp_path) -> None:
    """C++ with -g: section groups (COMDAT), debug relocations, and symbol names that
    end other names (``_ZTIi`` in ``DW.ref._ZTIi``), whose bytes GNU as shares in its
    string table and we do not: the same contents, symbols, relocations and groups,
    a string table a little larger."""
    require("g++", "as")
    source, asm = tmp_path / "t.cpp", tmp_path / "t.s"
    source.write_text(CXX)
    subprocess.run(["g++", "-O2", "-g", "-S", str(source), "-o", str(asm)], check=True)
    text, probed = _probe_object(asm, "x86_64", ["as"])
    ours = without_local_symbols(probed, PROBE.encode(), str(asm))
    assert ours is not None
    assert "COMDAT group" in _readelf_bytes(tmp_path, ours, "-g")
    _same_but_string_table(tmp_path, ours, _plain(tmp_path, text, ["as"]), asm)


def _readelf_bytes(tmp_path: Path, data: bytes, *options: str) -> str:
    (tmp_path / "read.o").write_bytes(data)
    return _readelf(tmp_path / "read.o", *options)


def _frame_pointer_unit():
    require("as")
    root = Path(__file__).resolve().parents[2]
    path = root / "examples" / "frame_pointer.s"
    return path, convert_asm(path.read_text(), str(path), probes=True)


def test_a_section_it_cannot_renumber_leaves_the_labels_in(tmp_path) -> None:
    """A section of a kind it does not know that links to the symbol table could hold
    symbol indices: the object is then not rewritten (None), and ``--emit obj``
    assembles the input again instead, for the same object."""
    import struct

    path, conversion = _frame_pointer_unit()
    assert conversion.unit is not None
    probed = bytearray(conversion.unit.obj)
    view = open_elf(bytes(probed), "probe")
    symtab = next(i for i, s in enumerate(view.sections) if s.name == ".symtab")
    comment = next(s for s in view.sections if s.name == ".note.GNU-stack")
    struct.pack_into("<II", probed, comment.header_at + 4, 0x6FFF4C09, 0)  # its type
    struct.pack_into("<I", probed, comment.header_at + 40, symtab)  # its sh_link
    assert without_local_symbols(bytes(probed), PROBE.encode(), "t") is None
    assert conversion.unit is not None
    again = type(conversion)(**{**conversion.__dict__,
                                "unit": conversion.unit._replace(obj=bytes(probed))})
    assert again.obj() == conversion.obj()
    assert PROBE.encode() not in again.obj()


def test_probes_read_in_one_pass_are_those_of_the_symbol_table() -> None:
    """``read_probes`` (names of the probes never decoded), with the compiled core and
    without it, gives the places and source symbols the plain reading of every symbol
    gives (``probe_places``, ``source_symbols``), on objects of three targets."""
    from cfi2sframe.frontend.probe import probe_places, read_probes, source_symbols

    cases = [("x86_64", "gcc", "x86_64", "as"),
             ("aarch64", "aarch64-linux-gnu-gcc", "aarch64", "aarch64-linux-gnu-as"),
             ("s390x", "s390x-linux-gnu-gcc", "s390x", "s390x-linux-gnu-as")]
    for arch, compiler, tag, assembler in cases:
        require(compiler, assembler)
        for path in csmith_asm(range(1, 4), ["O2"], compiler=compiler, tag=tag):
            _, probed = _probe_object(path, arch, [assembler])
            view = open_elf(probed, "probe")
            every = view.symbols()
            count = sum(sym.name.startswith(PROBE) for sym in every)
            for asked in (count, count - 1):  # (a probe past the count is not placed)
                for core in (compiled_core(), None):  # the compiled loop and its reference
                    places, symbols = read_probes(view, asked, compiled=core)
                    assert places == probe_places(every, asked)
                    assert symbols == source_symbols(every)
            assert None not in places and len(symbols) == len(every) - count


def test_probes_of_a_32_bit_object() -> None:
    """The same in ELF32 (i386, whose entries are laid out otherwise)."""
    from cfi2sframe.arch import as_arch
    from cfi2sframe.frontend.probe import Assembler, probe_places, read_probes, source_symbols
    from cfi2sframe.frontend.timelines import parse_asm

    require("as")
    text = ("\t.text\n\t.globl f\n\t.type f, @function\nf:\n\t.cfi_startproc\n\tpushl %ebp\n"
            "\t.cfi_def_cfa_offset 8\n\t.cfi_offset 5, -8\n\tmovl %esp, %ebp\n"
            "\t.cfi_def_cfa_register 5\n\tpopl %ebp\n\t.cfi_def_cfa 4, 4\n\tret\n"
            "\t.cfi_endproc\n\t.size f, .-f\n")
    unit, _ = parse_asm(text, "t.s", as_arch("i386"), Assembler(("as", "--32")), probes=True)
    view = open_elf(unit.obj, "probe")
    assert not view.is64
    every = view.symbols()
    for core in (compiled_core(), None):
        places, symbols = read_probes(view, 6, compiled=core)
        assert places == probe_places(every, 6) and None not in places
        assert symbols == source_symbols(every)
    assert [t.size for t in unit.timelines] == [5]  # push, mov, pop, ret: 1 + 2 + 1 + 1


def test_a_reference_to_a_probe_label_is_an_error() -> None:
    """A relocation that refers to one of our labels (nothing the assembler writes
    for a source that cannot name them) is a one-line error, not a renumbering to
    some other symbol."""
    import struct

    from cfi2sframe.errors import Cfi2SframeError

    _, conversion = _frame_pointer_unit()
    assert conversion.unit is not None
    probed = bytearray(conversion.unit.obj)
    view = open_elf(bytes(probed), "probe")
    probe = next(i for i, sym in enumerate(view.symbols()) if sym.name.startswith(PROBE))
    rela = next(s for s in view.sections if s.name == ".rela.eh_frame")
    (info,) = struct.unpack_from("<Q", probed, rela.offset + 8)
    struct.pack_into("<Q", probed, rela.offset + 8, (probe << 32) | (info & 0xFFFFFFFF))
    with pytest.raises(Cfi2SframeError, match=f"a relocation refers to the assembler's "
                                              f"symbol {probe}, which is ours"):
        without_local_symbols(bytes(probed), PROBE.encode(), "t")
