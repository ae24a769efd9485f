"""The compiled relocation loop (``csrc/elf_reloc.c``) against ``elf/reloc.py``'s, which
it was written from and which stays the reference and the fallback.

On the objects the compilers of three targets write (x86-64 and AArch64 RELA, s390x
big-endian RELA), for their ``.eh_frame`` and for ``.sframe`` (gas's and ours), both
give the same placements and the same relocated bytes; on relocation sections damaged
at random (types, symbols, offsets, addends), the same bytes and placements, or the
same error.  No ELF target we convert is 32-bit or uses REL: i386's objects (32-bit,
SHT_REL, the addend in the field) are read with R_386_32 and R_386_PC32 (i386 psABI:
types 1 and 2) added to the tables for the test, so both loops take that path too."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from cfi2sframe.elf.read import ElfView, open_elf_file
from cfi2sframe.elf.reloc import relocate_view
from cfi2sframe.errors import Cfi2SframeError
from tests.conftest import cfi2sframe, compiled_core, require

SOURCE = "".join(f"int f{i}(int *p, int n) {{ int s = {i}; for (int j = 0; j < n; j++) "
                 f"s += p[j] * {i + 1}; return s + (n ? f{i + 1}(p + 1, n - 1) : 0); }}\n"
                 for i in range(60)) + "int f60(int *p, int n) { return n ? *p : 0; }\n"
PROTOTYPES = "".join(f"int f{i}(int *p, int n);\n" for i in range(61))


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reloc")
    source = folder / "f.c"
    source.write_text(PROTOTYPES + SOURCE)
    out = {}
    for name, command in (("x86_64", ["gcc", "-O2"]), ("i386", ["gcc", "-m32", "-O2"]),
                          ("aarch64", ["aarch64-linux-gnu-gcc", "-O2"]),
                          ("s390x", ["s390x-linux-gnu-gcc", "-O2"])):
        require(command[0])
        out[name] = folder / f"{name}.o"
        subprocess.run([*command, "-c", str(source), "-o", str(out[name])], check=True)
    require("as")
    asm = folder / "f.s"
    subprocess.run(["gcc", "-O2", "-S", str(source), "-o", str(asm)], check=True)
    out["gas-sframe"] = folder / "gas.o"
    subprocess.run(["as", "--gsframe", str(asm), "-o", str(out["gas-sframe"])], check=True)
    out["our-sframe"] = folder / "ours.o"
    assert cfi2sframe(str(asm), "--emit", "obj", "-o", str(out["our-sframe"]),
                      cwd=folder).returncode == 0
    return out


def _relocated(view: ElfView, name: str, compiled: ModuleType | None
               ) -> tuple[bytes, dict[int, tuple[str, int]]] | str:
    section = view.section(name)
    assert section is not None
    contents = bytearray(view.data[section.offset:section.offset + section.size])
    try:
        placed = relocate_view(view, view.sections.index(section), contents, "f.o", compiled)
    except Cfi2SframeError as exc:
        return str(exc)
    return bytes(contents), placed


def _relocated_sections(view: ElfView) -> list[str]:
    return [name for name in (".eh_frame", ".sframe") if view.section(name) is not None]


@pytest.fixture
def i386_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """R_386_32 (1, 4 bytes) and R_386_PC32 (2, 4 bytes, PC-relative) in both loops'
    tables."""
    from cfi2sframe.elf import reloc

    known = reloc.kinds_of
    i386 = {1: (4, False), 2: (4, True)}
    monkeypatch.setattr(reloc, "kinds_of",
                        lambda machine: i386 if machine == "EM_386" else known(machine))


def test_the_same_relocations_on_four_targets_objects(objects: dict[str, Path],
                                                      i386_kinds: None) -> None:
    core = compiled_core()
    checked = 0
    for name, path in objects.items():
        view = open_elf_file(str(path), path.read_bytes())
        for section in _relocated_sections(view):
            ours = _relocated(view, section, core)
            assert not isinstance(ours, str) and ours == _relocated(view, section, None), \
                (name, section)
            assert len(ours[1]) >= 60, (name, section)  # one per function at least
            checked += 1
    assert checked >= 7  # four .eh_frame, gas's .eh_frame and .sframe, ours


def _entry_size(view: ElfView, rel_kind: int) -> int:
    return (24 if rel_kind == 4 else 16) if view.is64 else (12 if rel_kind == 4 else 8)


@pytest.mark.parametrize("target", ["x86_64", "i386", "s390x", "our-sframe"])
def test_the_same_result_or_error_on_damaged_relocations(objects: dict[str, Path],
                                                        target: str, i386_kinds: None) -> None:
    """Random bytes written into the relocation entries (offsets past the section,
    symbols past the table or in missing sections, other types, addends)."""
    core = compiled_core()
    data = objects[target].read_bytes()
    view = open_elf_file(target, data)
    section = _relocated_sections(view)[-1]
    index = view.sections.index(view.section(section))
    rel = next(s for s in view.sections if s.kind in (4, 9) and s.info == index)
    entry = _entry_size(view, rel.kind)
    chance = random.Random(target)
    outcomes = {"same": 0, "error": 0}
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(chance.randint(1, 4)):
            at = rel.offset + entry * chance.randrange(rel.size // entry) + \
                chance.randrange(entry)
            damaged[at] = chance.choice([0, 1, 2, 0x7F, 0x80, 0xFF, chance.randrange(256)])
        broken = open_elf_file(target, bytes(damaged))
        ours = _relocated(broken, section, core)
        assert ours == _relocated(broken, section, None)
        outcomes["error" if isinstance(ours, str) else "same"] += 1
    assert outcomes["error"] >= 20 and outcomes["same"] >= 20, outcomes


def test_sums_past_64_bits(objects: dict[str, Path]) -> None:
    """S + A past 2**63 (a function symbol's value plus the largest addend): Python's
    numbers do not wrap, so the compiled loop hands over to Python's."""
    import struct

    core = compiled_core()
    data = bytearray(objects["x86_64"].read_bytes())
    view = open_elf_file("x86_64", bytes(data))
    index = view.sections.index(view.section(".eh_frame"))
    rel = next(s for s in view.sections if s.kind == 4 and s.info == index)
    function = next(n for n in range(1, view.symbol_table_size(rel.link))
                    if (view.symbol_entry(rel.link, n) or (0, 0, 0))[0] > 0)
    for addend in (2**63 - 1, 2**63 - 2, -(2**63)):
        struct.pack_into("<QQq", data, rel.offset, 0x20, function << 32 | 2, addend)
        broken = open_elf_file("x86_64", bytes(data))
        ours = _relocated(broken, ".eh_frame", core)
        assert ours == _relocated(broken, ".eh_frame", None)
        # (an R_X86_64_PC32 field holds none of these sums: test_a_value_its_field...)
        assert isinstance(ours, str) and "does not fit its 4-byte field" in ours, ours


def test_a_value_its_field_cannot_hold_is_an_error_at_the_bound(objects: dict[str, Path]
                                                                ) -> None:
    """S + A - P of an R_X86_64_PC32 (x86-64 psABI: type 2, a signed 32-bit field) from
    -2**31 to 2**31 - 1 is stored; one past either end is the input's error in both
    loops, as a linker's "relocation truncated to fit".  Found by fuzzing the rewrite
    path: the field was cut to its low 32 bits while the placement kept the whole sum,
    so the .sframe written and the DWARF read back named different functions."""
    import struct

    core = compiled_core()
    data = bytearray(objects["x86_64"].read_bytes())
    view = open_elf_file("x86_64", bytes(data))
    index = view.sections.index(view.section(".eh_frame"))
    rel = next(s for s in view.sections if s.kind == 4 and s.info == index)
    offset, info, addend = struct.unpack_from("<QQq", data, rel.offset)
    assert info & 0xFFFFFFFF == 2  # R_X86_64_PC32
    relocated = _relocated(view, ".eh_frame", None)
    assert not isinstance(relocated, str)
    symbol = relocated[1][offset][1] - addend  # S
    for stored, fits in ((2**31 - 1, True), (2**31, False), (-(2**31), True),
                         (-(2**31) - 1, False)):
        struct.pack_into("<QQq", data, rel.offset, offset, info, stored - symbol + offset)
        broken = open_elf_file("x86_64", bytes(data))
        ours = _relocated(broken, ".eh_frame", core)
        assert ours == _relocated(broken, ".eh_frame", None), stored
        if fits:
            assert not isinstance(ours, str), ours
            assert ours[0][offset:offset + 4] == (stored & 0xFFFFFFFF).to_bytes(4, "little")
        else:
            assert ours == (f"f.o: error: at byte {rel.offset:#x}: relocation at {offset:#x}: its "
                            f"value {stored:#x} does not fit its 4-byte field"), ours


def test_a_symbol_table_past_the_files_end(objects: dict[str, Path]) -> None:
    """A symbol table whose header points past the file (found by fuzzing: reading one
    entry raised struct.error): its entries are those the file holds, none here, and
    a relocation naming one is a located error from either loop."""
    import struct

    core = compiled_core()
    data = bytearray(objects["x86_64"].read_bytes())
    view = open_elf_file("x86_64", bytes(data))
    symtab = next(s for s in view.sections if s.name == ".symtab")
    struct.pack_into("<Q", data, symtab.header_at + 24, 0x3A00_0000_0000)  # sh_offset
    broken = open_elf_file("x86_64", bytes(data))
    ours = _relocated(broken, ".eh_frame", core)
    assert isinstance(ours, str) and ours == _relocated(broken, ".eh_frame", None)
    assert "of 0" in ours, ours
