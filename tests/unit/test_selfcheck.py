"""The structural self-check of a written section (``sframe/selfcheck.py``), on sections
built here by hand from the SFrame V2 and V3 specs: each rule at its bound passes and
one past fails, in the Python reference and in the compiled pass alike.

The sound section: x86-64 (ABI 3, little-endian), flags SORTED, no auxiliary header,
two functions at 0x1000 (0x20 bytes) and 0x1020 (0x10 bytes); FDE 0 has two FREs,
FDE 1 one, each FRE a 1-byte start, info 0x03 (CFA base SP, one 1-byte word) and the
CFA offset: ``00 03 08``, ``04 03 10`` and ``00 03 08``.  V2: 28-byte header, 20-byte
FDEs (start i32, size u32, FRE offset u32, FRE count u32, info, rep size, 2 pad),
FREs at offsets 0 and 6, 9 bytes.  V3: 16-byte index entries (start i64, size u32,
attribute offset u32), each attribute 5 bytes (count u16, info, info2, rep size)
before the FDE's FREs: attributes at 0 and 11, 19 bytes."""

from __future__ import annotations

import struct

import pytest

from cfi2sframe.core import compiled
from cfi2sframe.sframe.selfcheck import compiled_sound, section_problem

CORE = compiled()
FRES = [[(0x00, 0x03, 0x08), (0x04, 0x03, 0x10)], [(0x00, 0x03, 0x08)]]


def section(version: int = 2, *, flags: int = 1, starts: tuple[int, int] = (0x1000, 0x1020),
            sizes: tuple[int, int] = (0x20, 0x10), fres: list[list[tuple[int, ...]]] | None = None,
            counts: tuple[int, int] | None = None, offsets: tuple[int, int] | None = None,
            num_fres: int | None = None, fre_len: int | None = None, extra: bytes = b"",
            tail: bytes = b"", info: int = 0x00, rep: int = 0, fdeoff: int = 0,
            freoff_delta: int = 0, magic: int = 0xDEE2, abi: int = 3) -> bytes:
    """The sound section above, with one field or part changed."""
    fres = FRES if fres is None else fres
    bodies = [b"".join(bytes(fre) for fre in fde) for fde in fres]
    counts = counts or (len(fres[0]), len(fres[1]))
    attr = 5 if version == 3 else 0
    natural = (0, attr + len(bodies[0]))
    offsets = offsets or natural
    sub = bytearray()
    for n in range(2):
        if version == 3:
            sub += struct.pack("<HBBB", counts[n], info, 0, rep)
        sub += bodies[n]
        if n == 0:
            sub += extra  # bytes between the two FDEs' FREs
    entry = 16 if version == 3 else 20
    table = b""
    for n in range(2):
        if version == 3:
            table += struct.pack("<qII", starts[n], sizes[n], offsets[n])
        else:
            table += struct.pack("<iIIIBBH", starts[n], sizes[n], offsets[n], counts[n], info,
                                 rep, 0)
    header = struct.pack("<HBBBbbBIIIII", magic, version, flags, abi, 0, -8, 0, 2,
                         sum(counts) if num_fres is None else num_fres,
                         len(sub) if fre_len is None else fre_len, fdeoff,
                         2 * entry + freoff_delta)
    return header + table + bytes(sub) + tail


def verdicts(data: bytes) -> tuple[str | None, bool | None]:
    """The reference's problem and the compiled pass's verdict (None without the core)."""
    return (section_problem(data, 0, None),
            None if CORE is None else compiled_sound(data, 0, CORE))


def sound(data: bytes) -> None:
    problem, verdict = verdicts(data)
    assert problem is None
    assert verdict in (True, None)


def unsound(data: bytes, words: str) -> None:
    problem, verdict = verdicts(data)
    assert problem is not None and words in problem, problem
    assert verdict in (False, None)


@pytest.mark.parametrize("version", [2, 3])
def test_the_hand_built_section_is_sound(version: int) -> None:
    sound(section(version))
    if CORE is not None:
        assert compiled_sound(section(version), 0, CORE)
    sound(section(version, flags=0))  # not flagged sorted
    sound(section(version, starts=(0x1020, 0x1000), flags=0))  # out of order, not flagged


@pytest.mark.parametrize("version", [2, 3])
def test_header_fields(version: int) -> None:
    unsound(section(version, magic=0xDEE3), "bad magic")
    unsound(section(version, magic=0xE2DE), "ABI 3 in the big-endian")  # order: not AMD64's
    unsound(section(version, abi=99), "ABI 99")
    top = {2: 0x7, 3: 0x5}[version]  # the flags each version defines
    sound(section(version, flags=top & ~0x4))
    unsound(section(version, flags=top | 0x8), "flags")
    unsound(section(version) [:27], "shorter than a header")


@pytest.mark.parametrize("version", [2, 3])
def test_the_sub_sections_offsets_and_the_end(version: int) -> None:
    unsound(section(version, fdeoff=1), "not right after the header")
    unsound(section(version, freoff_delta=1), "not at the FDE table's end")
    unsound(section(version, freoff_delta=-1), "not at the FDE table's end")
    sound(section(version, tail=bytes(7)))  # the most padding the writer puts
    unsound(section(version, tail=bytes(8)), "zero padding")
    unsound(section(version, tail=b"\x01"), "zero padding")
    length = len(section(version)) - 28 - 2 * (16 if version == 3 else 20)
    unsound(section(version, fre_len=length - 1), "zero padding")  # a byte past the end
    unsound(section(version, fre_len=length + 1), "FRE sub-section")  # runs past the data


@pytest.mark.parametrize("version", [2, 3])
def test_sorted_as_flagged(version: int) -> None:
    sound(section(version, starts=(0x1000, 0x1000)))  # equal starts: still in order
    unsound(section(version, starts=(0x1000, 0x0FFF)), "flagged sorted")


@pytest.mark.parametrize("version", [2, 3])
def test_fre_starts_inside_their_function(version: int) -> None:
    sound(section(version, fres=[FRES[0], [(0x0F, 0x03, 0x08)]]))  # the last byte: 0x10
    unsound(section(version, fres=[FRES[0], [(0x10, 0x03, 0x08)]]), "past its function")
    sound(section(version, sizes=(0x05, 0x10)))  # FDE 0's second FRE starts at 4
    unsound(section(version, sizes=(0x04, 0x10)), "past its function")


@pytest.mark.parametrize("version", [2, 3])
def test_pc_mask_fres_inside_the_repeat_block(version: int) -> None:
    sound(section(version, info=0x10, rep=5))  # PC-mask FDEs: starts 0 and 4
    unsound(section(version, info=0x10, rep=4), "past its repeat block")


@pytest.mark.parametrize("version", [2, 3])
def test_fres_inside_the_sub_section_and_the_header_count(version: int) -> None:
    # FDE 1 with two FREs: its second would run past the sub-section's end
    unsound(section(version, counts=(2, 2)), "")
    unsound(section(version, num_fres=4), "says 4 FREs but the FDEs hold 3")
    unsound(section(version, num_fres=2), "says 2 FREs but the FDEs hold 3")


@pytest.mark.parametrize("version", [2, 3])
def test_the_fdes_tile_the_sub_section(version: int) -> None:
    attr = 5 if version == 3 else 0
    # a stray byte between the two FDEs' FREs, FDE 1 placed after it or before it
    unsound(section(version, extra=b"\x00", offsets=(0, attr + 7)), "stray byte")
    unsound(section(version, extra=b"\x00"), "")
    # FDE 0 holding one FRE of its two bytes' worth: the other 3 bytes are no FDE's
    unsound(section(version, counts=(1, 1)), "stray byte")
    # FDE 1 read from FDE 0's second FRE (starts 4, inside it): an overlap
    if version == 2:
        unsound(section(version, offsets=(0, 3)), "overlaps")
    else:  # the attribute at 3 holds FDE 0's bytes: two overlaps at least
        unsound(section(version, offsets=(0, 3)), "")


def test_fdes_that_tile_in_another_order_are_sound() -> None:
    """The rule is a tiling, not the table's order: FDE 1's FRE first, then FDE 0's
    (the compiled pass leaves this to the reference, which finds it sound)."""
    fres = bytes(FRES[1][0]) + b"".join(bytes(fre) for fre in FRES[0])
    data = bytearray(section(2, offsets=(3, 0)))
    at = 28 + 40
    data[at:at + 9] = fres
    assert section_problem(bytes(data), 0, None) is None
    assert section_problem(bytes(data), 0) is None


def test_a_v2_fde_without_fres_holds_no_byte() -> None:
    sound(section(2, fres=[FRES[0] + FRES[1], []], offsets=(0, 0)))


# FDE 1 with 45 FREs (starts 0 to 44 in a 0x40-byte function): 135 bytes after FDE 0's
# FREs, room for FDE 0's two at their largest (4-byte start, info, 15 4-byte words:
# 65 bytes), where the compiled pass reads them without a bounds test each.
LONG = [FRES[0], [(start, 0x03, 0x08) for start in range(45)]]


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("fres", [FRES, LONG], ids=["short", "long"])
def test_fre_starts_and_info_bytes_either_way_the_pass_reads(
        version: int, fres: list[list[tuple[int, ...]]]) -> None:
    sizes = (0x05, 0x40)
    sound(section(version, fres=fres, sizes=sizes))
    unsound(section(version, fres=fres, sizes=(0x04, 0x40)), "past its function")
    # FDE 0's second FRE with word size code 3 (info 0x63), which no version defines
    bad = [[FRES[0][0], (0x04, 0x63, 0x10)], fres[1]]
    unsound(section(version, fres=bad, sizes=sizes), "info byte 0x63")
    # a FLEX FDE's FRE must have bit 0 clear (CFA base): V3's FDE type 1
    if version == 3:
        flex = section(version, fres=fres, sizes=sizes)
        at = 28 + 2 * 16 + 3  # FDE 0's attribute's info2
        unsound(flex[:at] + b"\x01" + flex[at + 1:], "info byte 0x03")


def test_unflagged_starts_read_relative_to_their_field_where_the_writer_says() -> None:
    """V1 and V2 without the PC-relative flag: ``SectionImage.to_bytes`` still writes each
    start relative to its own field (an object's PC32 relocations make it so), and
    ``check_written`` reads them so (``v1_pcrel``).  Found by fuzzing (``elf``): a
    library call's V1 section of two functions closer than an FDE entry was an internal
    error, its starts read as absolute going backwards.  Here functions at 0x1000 and
    0x1008 (sizes 8 and 0x10): fields 0x1000 - 28 = 0xFE4 and 0x1008 - 48 = 0xFD8."""
    data = section(2, flags=1, starts=(0xFE4, 0xFD8), sizes=(0x08, 0x10))
    assert section_problem(data, 0, None, v1_pcrel=True) is None
    assert "flagged sorted" in (section_problem(data, 0, None) or "")  # read as absolute
    if CORE is not None:
        assert compiled_sound(data, 0, CORE, v1_pcrel=True)
        assert not compiled_sound(data, 0, CORE)
        assert section_problem(data, 0, CORE, v1_pcrel=True) is None
    flagged = section(2, flags=5, starts=(0xFE4, 0xFD8), sizes=(0x08, 0x10))
    assert section_problem(flagged, 0, None) is None  # the flag alone says the same
