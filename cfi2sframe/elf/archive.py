"""Static libraries: the ar format (GNU and System V) read, and written back with new
member contents.

An archive is ``!<arch>\\n`` and members, each a 60-byte header (name, date, uid,
gid, mode, size, ``\\x60\\n``) and its data padded to an even length.  GNU ar adds
two special members: ``/`` (or ``/SYM64/``), the symbol index, which maps every
global symbol to the offset of its member's header, and ``//``, the long names
(``/123`` names the entry at 123).  Writing back keeps every header as it was but
for its size, the members in order, and re-points the index at the members' new
offsets: ``ar t`` and ``nm -s`` read the same archive, and the linker finds the same
members.
"""

from __future__ import annotations

from ..cstruct import CStruct
from ..errors import DecodeError
from ..kinds import AR_MAGIC, Kind, input_kind, is_archive
from ..typed import NamedTuple

# A member's header: text fields, space-padded (System V ABI, ar(5)): no byte order.
AR_HDR = CStruct("ar_hdr", (("ar_name", "16s"), ("ar_date", "12s"), ("ar_uid", "6s"),
                            ("ar_gid", "6s"), ("ar_mode", "8s"), ("ar_size", "10s"),
                            ("ar_fmag", "2s")))
HEADER_SIZE = AR_HDR.size
_NAME, _SIZE, _FMAG = AR_HDR.span("ar_name"), AR_HDR.span("ar_size"), AR_HDR.span("ar_fmag")
_SIZE_AT = AR_HDR.offset("ar_size")
_INDEXES = {"/": 4, "/SYM64/": 8}  # the symbol index and its word size
_LONG_NAMES = "//"
ARFMAG = b"`\n"  # every header's last field


class Member(NamedTuple):
    """One member as stored: its header (as it was), resolved name, data and where its
    header is in the archive."""

    header: bytes
    name: str
    data: bytes
    offset: int

    @property
    def special(self) -> bool:
        """The symbol index or the long names table, not a file of the library."""
        return self.name in _INDEXES or self.name == _LONG_NAMES


def read_archive(data: bytes) -> list[Member]:
    """Every member in order; ``DecodeError`` at the offset of what is malformed."""
    if not is_archive(data):
        thin = input_kind(data[:8]) == Kind.thin_archive
        raise DecodeError(0, "a thin archive (its members are other files): convert those"
                          if thin else "not an ar archive")
    members: list[Member] = []
    long_names = b""
    pos = len(AR_MAGIC)
    while pos < len(data):
        if data[pos:pos + 1] == b"\n":  # the padding of an odd-sized last member
            pos += 1
            continue
        header = data[pos:pos + HEADER_SIZE]
        if len(header) < HEADER_SIZE or header[_FMAG] != ARFMAG:
            raise DecodeError(pos, "truncated or malformed ar member header")
        try:
            size = int(header[_SIZE].decode("ascii").strip() or "0")
        except (UnicodeDecodeError, ValueError):
            raise DecodeError(pos + _SIZE_AT, "ar member size is not a decimal number") from None
        start = pos + HEADER_SIZE
        if start + size > len(data):
            raise DecodeError(pos + _SIZE_AT, f"ar member of {size} bytes runs past the end")
        raw_name = header[_NAME].decode("ascii", "replace").rstrip(" ")
        name = _name(raw_name, long_names, pos)
        member = Member(header, name, data[start:start + size], pos)
        if name == _LONG_NAMES:
            long_names = member.data
        members.append(member)
        pos = start + size + (size & 1)
    return members


def _name(raw: str, long_names: bytes, at: int) -> str:
    """A member's name: ``name/`` (GNU), ``/123`` (in the long names), or as written."""
    if raw in _INDEXES or raw == _LONG_NAMES:
        return raw
    if raw.startswith("/") and raw[1:].isdigit():
        offset = int(raw[1:])
        end = long_names.find(b"/\n", offset)
        if offset >= len(long_names) or end < 0:
            raise DecodeError(at, f"ar member name '{raw}' is not in the long names table")
        return long_names[offset:end].decode("utf-8", "replace")
    return raw[:-1] if raw.endswith("/") else raw


def write_archive(members: list[Member], contents: list[bytes]) -> bytes:
    """The archive with ``contents[i]`` as member ``i``'s data: headers kept but for the
    size, order kept, the symbol index re-pointed at the new member offsets."""
    moved: dict[int, int] = {}
    at = len(AR_MAGIC)
    for member, data in zip(members, contents, strict=True):
        moved[member.offset] = at
        at += HEADER_SIZE + len(data) + (len(data) & 1)
    out = bytearray(AR_MAGIC)
    for member, data in zip(members, contents, strict=True):
        if member.name in _INDEXES:
            data = _repoint(data, _INDEXES[member.name], moved, member.offset)
        out += member.header[:_SIZE_AT] + f"{len(data):<{_SIZE.stop - _SIZE_AT}}".encode() \
            + ARFMAG + data
        if len(data) & 1:
            out += b"\n"
    return bytes(out)


def _repoint(index: bytes, word: int, moved: dict[int, int], at: int) -> bytes:
    """The symbol index with every member offset replaced by that member's new one."""
    count = int.from_bytes(index[:word], "big")
    if word + count * word > len(index):
        raise DecodeError(at, f"the ar symbol index claims {count} symbols")
    out = bytearray(index)
    for i in range(count):
        field = word + i * word
        old = int.from_bytes(index[field:field + word], "big")
        if old not in moved:
            raise DecodeError(at + HEADER_SIZE + field, f"the ar symbol index points at "
                                                        f"{old:#x}, where no member starts")
        out[field:field + word] = moved[old].to_bytes(word, "big")
    return bytes(out)
