"""DWARF CFI: ``.eh_frame`` / ``.debug_frame`` bytes -> FDEs -> the same ``Timeline``s.

Container-free, as gimli's and pyelftools' readers are: the caller (``elf.cfi`` for
ELF) finds, inflates and relocates the section and names the functions, then hands
over its bytes, its address, the relocation placements, the address size and the
byte order.  The instructions decode into the same DWARF operations the assembly
frontend produces, replayed by the same interpreter.  (pyelftools' CFI decoder is too
slow for large libraries and rejects ``DW_CFA_GNU_args_size``; its errors carry no
byte offsets.)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property, lru_cache
from types import ModuleType

from ..core import compiled as compiled_core
from ..errors import CfiError, DecodeError, located
from ..memo import Memo
from ..model import CfaReg, Location, Row, Rule, RuleKind, Timeline, span_of
from ..typed import TYPE_CHECKING, NamedTuple
from .frames import entries
from .interpret import interpret
from .opcodes import EH_PE, EH_PE_APPLICATION, EH_PE_FORMAT
from .ops import LOCATIONS, AdvanceLoc, Op, SetLoc, decode_ops, read_sleb, read_uleb

if TYPE_CHECKING:
    from typing import Final

# Field offset in the section -> (section the relocation points into, target value).
Placements = dict[int, tuple[str, int]]
# (section or "", address) -> function name.
Names = dict[tuple[str, int], str]

_COMPILED = compiled_core()
# (CIE offset, FDE body) -> what ``_rows`` gave for it.
RowsCache = dict[tuple[int, bytes], tuple[tuple[Row, ...], str | None, bool]]


class Cie(NamedTuple):
    code_align: int
    data_align: int
    ra: int
    fde_encoding: int
    lsda_encoding: int
    signal: bool
    b_key: bool
    augmented: bool
    initial: bytes
    address_size: int
    # The personality routine's pointer as stored ("P"; an indirect one is the address
    # of the slot holding the routine's address), None without one.
    personality: int | None = None


class Fde(NamedTuple):
    """One FDE as found: where its function is, and its CIE and instruction bytes.

    ``offset`` is the FDE's byte offset in the CFI section, ``body_at`` that of
    its instructions (for messages).
    """

    name: str
    section: str
    start: int
    size: int
    cie: Cie
    cie_at: int
    body: bytes
    offset: int
    body_at: int
    lsda: int | None = None  # the LSDA's address (the CIE's "L"), None without one


class Cfi:
    """The call-frame information of one file, with what its container says of it
    (``machine`` and ``elf_type`` in ELF's terms: ``EM_X86_64``, ``ET_DYN``).

    ``fdes`` are decoded eagerly; ``timelines`` (one per FDE) are interpreted
    on first use, each distinct (CIE, instruction bytes) once, so a caller
    that has a faster way for most FDEs (``sframe.fastpath``) can skip them.
    A plain class (it keeps ``timelines``); its fields are not written after
    ``__init__``.
    """

    def __init__(self, path: str, machine: str, elf_type: str, fdes: tuple[Fde, ...],
                 section_name: str, big_endian: bool = False) -> None:
        self.path: Final = path
        self.machine: Final = machine
        self.elf_type: Final = elf_type
        self.fdes: Final = fdes
        self.section_name: Final = section_name
        self.big_endian: Final = big_endian

    def _key(self) -> tuple[object, ...]:
        return (self.path, self.machine, self.elf_type, self.fdes, self.section_name,
                self.big_endian)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cfi) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @cached_property
    def timelines(self) -> tuple[Timeline, ...]:
        return tuple(self.each_timeline())

    def each_timeline(self) -> Iterator[Timeline]:
        """``timelines`` one at a time, none kept: for one pass over a large file."""
        cache: RowsCache = {}
        for fde in self.fdes:
            yield self.timeline(fde, cache)

    def timeline(self, fde: Fde, cache: RowsCache) -> Timeline:
        """The ``Timeline`` of one FDE; ``cache`` (the caller's) shares equal bodies."""
        return self.placed(fde, *self.rows(fde, cache))

    def placed(self, fde: Fde, rows: tuple[Row, ...], invalid: str | None) -> Timeline:
        """The ``Timeline`` of one FDE whose ``rows`` the caller has (``rows``)."""
        cie = fde.cie
        return Timeline(*span_of(fde), rows, cie.ra,
                        Location(self.path, 0, fde.offset), signal_frame=cie.signal,
                        pauth_b_key=cie.b_key, invalid=invalid)

    def rows(self, fde: Fde, cache: RowsCache) -> tuple[tuple[Row, ...], str | None]:
        """One FDE's rows (those that start within it) and why its CFI has no meaning,
        if it has none: its timeline's, for a caller that needs no more."""
        # Compilers repeat the same instruction bytes across thousands of FDEs:
        # rows depend only on (CIE, bytes), so each distinct body is interpreted once
        # (and FDEs alike get the same rows tuple).
        key = (fde.cie_at, fde.body)
        hit = cache.get(key)
        if hit is None:
            try:  # (``decoding``'s adapter, without its object and two calls per body)
                hit = _rows(fde.cie, fde.body, fde.start, self.big_endian)
            except DecodeError as exc:
                raise located(self.path, exc, self.section_name, fde.body_at) from None
            if hit[2]:
                cache[key] = hit
        rows, invalid, _ = hit
        if rows and rows[-1].start >= fde.size:
            rows = tuple(row for row in rows if row.start < fde.size)
        return rows, invalid


# The fixed-size pointer formats: (bytes, signed).
_FIXED_POINTERS: dict[int, tuple[int, bool]] = {
    EH_PE.udata2: (2, False), EH_PE.udata4: (4, False), EH_PE.udata8: (8, False),
    EH_PE.sdata2: (2, True), EH_PE.sdata4: (4, True), EH_PE.sdata8: (8, True)}
_PCREL_SDATA4 = EH_PE.pcrel | EH_PE.sdata4  # how nearly every FDE gives its start


class _Reader:
    def __init__(self, data: bytes, little: bool, address_size: int, base: int) -> None:
        self.data = data
        self.order = "<" if little else ">"
        self.little = little
        self.address_size = address_size
        self.base = base
        self.pcrel4 = struct.Struct(self.order + "iI")  # the usual FDE: pcrel|sdata4 begin
        self.pcrel8 = struct.Struct(self.order + "QQ")  # Mach-O's 64-bit FDE: pcrel|absptr
        self.address_mask = (1 << (8 * address_size)) - 1

    def fixed(self, pos: int, size: int, signed: bool = False) -> int:
        if pos + size > len(self.data):
            raise DecodeError(pos, "truncated CFI entry")
        return int.from_bytes(self.data[pos : pos + size], "little" if self.little else "big",
                              signed=signed)

    def pointer(self, pos: int, encoding: int) -> tuple[int, int]:
        """Decode an encoded pointer at ``pos``; return (value, next position)."""
        fmt = encoding & EH_PE_FORMAT
        if fmt == EH_PE.absptr:
            value, end = self.fixed(pos, self.address_size), pos + self.address_size
        elif fmt == EH_PE.uleb128:
            value, end = read_uleb(self.data, pos)
        elif fmt == EH_PE.sleb128:
            value, end = read_sleb(self.data, pos)
        elif fmt in _FIXED_POINTERS:
            size, signed = _FIXED_POINTERS[fmt]
            value, end = self.fixed(pos, size, signed), pos + size
        else:
            raise DecodeError(pos, f"unknown pointer encoding {encoding:#04x}")
        if encoding & EH_PE_APPLICATION == EH_PE.pcrel:
            value += self.base + pos
        return value & self.address_mask, end  # addresses wrap at the target's width


def function_name(names: Names, section: str, address: int) -> str:
    """The function symbol at ``address`` of ``section`` ("" when linked), else
    ``SECTION+ADDR`` (``pc+ADDR`` when linked)."""
    return names.get((section, address)) or f"{section or 'pc'}+{address:#x}"


def parse_cfi(data: bytes, is_eh: bool, address: int, placements: Placements,
              address_size: int, little: bool, names: Names,
              compiled: ModuleType | None = _COMPILED) -> list[Fde]:
    """Every FDE of a CFI section (``.eh_frame`` when ``is_eh``, else ``.debug_frame``)
    whose bytes are ``data``, loaded at ``address`` (0 in a relocatable object, whose
    ``placements`` say where each relocated field points); ``names`` name the functions.
    Errors are ``DecodeError`` at an offset in ``data``.  ``compiled``: the compiled
    core, which walks an ``.eh_frame`` itself (``_core.eh_fdes``, each CIE read here)
    and leaves anything out of the ordinary to the walk below, its reference; None:
    that walk alone."""
    reader = _Reader(data, little, address_size, address)
    if compiled is not None and is_eh:
        fdes: list[Fde] | None = compiled.eh_fdes(
            data, address, names, cie_reader(data, address, address_size, little),
            placements, _eh_target(address_size, not little))
        if fdes is not None:
            return fdes
    return _walk(reader, is_eh, placements, names)


def cie_reader(data: bytes, address: int, address_size: int,
               little: bool) -> Callable[[int], Cie]:
    """The ``Cie`` at an offset of an ``.eh_frame``, as this reader reads it: what the
    compiled walkers ask once per CIE they meet (a ``DecodeError`` where this reader
    finds none there)."""
    reader = _Reader(data, little, address_size, address)
    cies: dict[int, Cie] = {}

    def cie_of(at: int) -> Cie:
        cie = _parse_cie_at(reader, at, True, cies)
        if cie is None:  # the core found a CIE there: so does this reader
            raise DecodeError(at, "no CIE starts here")
        return cie

    return cie_of


@lru_cache(maxsize=8)
def _eh_target(address_size: int, big_endian: bool) -> dict[str, object]:
    """``_core.eh_fdes``'s target parameters by name; built once, never changed."""
    return {"address_size": address_size, "big_endian": big_endian, "fde_type": Fde}


def fdes_at(data: bytes, offsets: Iterable[int], address: int, address_size: int,
            little: bool, placements: Placements | None = None) -> list[Fde]:
    """The ``.eh_frame`` FDEs whose entries start at ``offsets`` (a caller that found
    them in a walk of its own), with their CIEs, unnamed: ``parse_cfi`` for a few
    (``placements``: as it takes them)."""
    reader = _Reader(data, little, address_size, address)
    cies: dict[int, Cie] = {}
    out = []
    for offset in offsets:
        start, end, ident_pos, pos, ident, is_cie = next(entries(data, True, little, offset))
        cie_at = ident_pos - ident
        cie = cies.get(cie_at) or _parse_cie_at(reader, cie_at, True, cies)
        if is_cie or start != offset or cie is None:
            raise DecodeError(offset, "no FDE with a CIE starts here")
        out.append(_parse_fde(reader, pos, end, cie, cie_at, placements or {}, {}, start))
    return out


def _walk(reader: _Reader, is_eh: bool, placements: Placements, names: Names) -> list[Fde]:
    data = reader.data
    cies: dict[int, Cie] = {}
    out: list[Fde] = []
    for start, end, ident_pos, pos, ident, is_cie in entries(data, is_eh, reader.little):
        if is_cie:
            cies[start] = _parse_cie(reader, pos, end, is_eh, start)
            continue
        cie_at = ident_pos - ident if is_eh else ident
        cie = cies.get(cie_at)
        if cie is None:
            if cie_at in range(len(data)):
                cie = _parse_cie_at(reader, cie_at, is_eh, cies)
            if cie is None:
                raise DecodeError(start, f"FDE refers to a missing CIE at {cie_at:#x}")
        out.append(_parse_fde(reader, pos, end, cie, cie_at, placements, names, start))
    return out


def _parse_cie_at(reader: _Reader, at: int, is_eh: bool, cies: dict[int, Cie]) -> Cie | None:
    """The CIE an FDE points at before the walk reached it; None if no entry starts there."""
    entry = next(entries(reader.data, is_eh, reader.little, at), None)
    if entry is None or entry[0] != at:
        return None
    cies[at] = cie = _parse_cie(reader, entry[3], entry[1], is_eh, at)
    return cie


def _parse_cie(reader: _Reader, pos: int, end: int, is_eh: bool, start: int) -> Cie:
    data = reader.data

    def need(at: int) -> int:
        """``at``, when the CIE's fields so far end within the entry."""
        if at > end:
            raise DecodeError(start, f"CIE of {end - start} bytes is shorter than its fields")
        return at

    version = data[need(pos + 1) - 1]
    pos += 1
    aug_end = data.find(b"\0", pos, end)
    if aug_end < 0:
        raise DecodeError(start, "CIE augmentation string runs past the entry")
    augmentation = data[pos:aug_end].decode("ascii", "replace")
    pos = aug_end + 1
    address_size = reader.address_size
    if "eh" in augmentation:
        pos += reader.address_size
    if not is_eh and version >= 4:
        address_size = data[need(pos + 2) - 2]
        pos += 2  # address size, segment selector size
    code_align, pos = read_uleb(data, need(pos))
    data_align, pos = read_sleb(data, need(pos))
    if version == 1:
        ra = data[need(pos + 1) - 1]
        pos += 1
    else:
        ra, pos = read_uleb(data, need(pos))
    fde_encoding: int = EH_PE.absptr
    lsda_encoding: int = EH_PE.omit
    signal = b_key = False
    personality = None
    augmented = augmentation.startswith("z")
    if augmented:
        aug_len, pos = read_uleb(data, need(pos))
        aug_data_end = need(need(pos) + aug_len)
        for letter in augmentation[1:]:
            if letter == "R":
                fde_encoding = data[need(pos + 1) - 1]
                pos += 1
            elif letter == "L":
                lsda_encoding = data[need(pos + 1) - 1]
                pos += 1
            elif letter == "P":
                encoding = data[need(pos + 1) - 1]
                personality, pos = reader.pointer(pos + 1, encoding & ~EH_PE.indirect)
            elif letter == "S":
                signal = True
            elif letter == "B":
                b_key = True
        pos = aug_data_end
    elif augmentation not in ("", "eh"):
        raise DecodeError(start, f"unknown CIE augmentation '{augmentation}'")
    need(pos)
    return Cie(code_align, data_align, ra, fde_encoding, lsda_encoding, signal, b_key,
                augmented, data[pos:end], address_size, personality)


def _parse_fde(reader: _Reader, pos: int, end: int, cie: Cie, cie_at: int,
               placements: Placements, names: Names, start: int) -> Fde:
    field = pos
    if cie.fde_encoding == _PCREL_SDATA4 and pos + 8 <= len(reader.data):
        begin, pc_range = reader.pcrel4.unpack_from(reader.data, pos)
        pc_begin = (begin + reader.base + pos) & reader.address_mask
        pos += 8
    elif cie.fde_encoding == EH_PE.pcrel and reader.address_size == 8 and \
            pos + 16 <= len(reader.data):
        begin, pc_range = reader.pcrel8.unpack_from(reader.data, pos)
        pc_begin = (begin + reader.base + pos) & reader.address_mask
        pos += 16
    else:
        pc_begin, pos = reader.pointer(pos, cie.fde_encoding)
        pc_range, pos = reader.pointer(pos, cie.fde_encoding & EH_PE_FORMAT)
    lsda = None
    if cie.augmented:
        aug_len, pos = read_uleb(reader.data, pos)
        if aug_len and cie.lsda_encoding != EH_PE.omit:
            try:  # only Mach-O checks read it: an odd encoding costs nothing else
                lsda = reader.pointer(pos, cie.lsda_encoding & ~EH_PE.indirect)[0] or None
            except DecodeError:
                lsda = None
        pos += aug_len
    placed = placements.get(field)
    section = ""
    if placed is not None:
        section, pc_begin = placed
    name = function_name(names, section, pc_begin)
    return Fde(name, section, pc_begin, pc_range, cie, cie_at, reader.data[pos:end], start,
               pos, lsda)


@lru_cache(maxsize=256)
def initial_ops(cie: Cie, big: bool) -> tuple[Op, ...]:
    """A CIE's initial instructions as operations (decoded once per CIE)."""
    ops = decode_ops(cie.initial, cie.code_align, cie.data_align, cie.address_size, big)
    return tuple(op for op in ops if not isinstance(op, LOCATIONS))


def _rows(cie: Cie, body: bytes, pc_begin: int, big: bool,
          compiled: ModuleType | None = _COMPILED
          ) -> tuple[tuple[Row, ...], str | None, bool]:
    """(rows for an unbounded range, why invalid, whether the result may be cached):
    by the compiled replay's full mode (``_core.cfi_rows``) where it expresses the body,
    else by the interpreter (``_interpreted``, its reference)."""
    if compiled is not None and _INT64 <= cie.code_align < -_INT64 and \
            _INT64 <= cie.data_align < -_INT64:
        rows = compiled.cfi_rows(body, cie.initial,
                                 _replay(cie.code_align, cie.data_align, big, compiled))
        if rows is not None:
            return rows, None, True
    return _interpreted(cie, body, pc_begin, big)


_INT64 = -(1 << 63)  # the compiled replay's numbers are int64


# A row state's words' hash -> (its words, its Python objects), per parameter set: 986
# distinct on libLLVM-14; bounded as a tree run's other memos are (a worker keeps it
# from file to file).  Emptying it drops no row: each row holds its own objects.
STATE_ENTRIES = 1 << 14
RowState = tuple[CfaReg | None, tuple[tuple[int, Rule], ...], bool, bool]


def _replay_params(code_align: int, data_align: int, big: bool) -> dict[str, object]:
    """``_core.cfi_rows``' parameters by name, made once per parameter set by
    ``_replay`` (which keeps them); the states memo is kept with them.  The
    core looks a state up in ``states`` by its words' hash (an int: a bytes key cost a
    siphash of its words per row) and compares the words kept with it; where they
    differ or none are kept, ``state_of`` makes the state and keeps it (``keep``:
    after emptying a full memo, so the memo holds at most ``STATE_ENTRIES``)."""
    states: Memo[int, tuple[bytes, RowState]] = Memo(STATE_ENTRIES)

    def state_of(number: int, key: bytes) -> tuple[bytes, RowState]:
        return states.keep(number, (key, row_state(key)))

    return {"code_align": code_align, "data_align": data_align, "big_endian": big,
            "row_type": Row, "states": states, "state_of": state_of}


@lru_cache(maxsize=16)
def _replay(code_align: int, data_align: int, big: bool, compiled: ModuleType) -> object:
    """``_replay_params`` read by the core once (``_core.replay_params``' capsule, which
    holds its states memo): a dict read by name per body cost ~5k instructions, 180M
    on libLLVM-14's 34k bodies."""
    return compiled.replay_params(_replay_params(code_align, data_align, big))


# The compiled replay's row flags and rule kinds (``_core.ROW_STATE``, bound to these by
# tests/differential/test_core_constants.py).
ROW_FLAGS = {"cfa": 1, "ra_signed": 2, "ra_signed_pc": 4}
RULE_KINDS = (RuleKind.undefined, RuleKind.same_value, RuleKind.offset, RuleKind.val_offset,
              RuleKind.register)


def row_state(key: bytes) -> RowState:
    """A row's rules from the compiled replay's words (native int64: flags, CFA register
    and offset, then register, kind and value of each rule), asked once per distinct
    state: (cfa, regs, ra_signed, ra_signed_pc) as ``Row`` holds them."""
    words = memoryview(key).cast("q").tolist()
    flags = words[0]
    cfa = CfaReg(words[1], words[2]) if flags & ROW_FLAGS["cfa"] else None
    regs = tuple((words[i], Rule(RULE_KINDS[words[i + 1]], words[i + 2]))
                 for i in range(3, len(words), 3))
    return (cfa, regs, bool(flags & ROW_FLAGS["ra_signed"]),
            bool(flags & ROW_FLAGS["ra_signed_pc"]))


# The interpreter's answers by all they depend on (CIE, body bytes, start, byte order):
# the bodies the compiled replay leaves to it are few (a PLT's expression, a signal
# frame's), and ``--in-place`` interprets the same PLT FDE twice, in the input it
# converts and in the written file it checks.  Another byte is another key.  Bounded.
INTERPRETED_ENTRIES = 64
_INTERPRETED: Memo[tuple[Cie, bytes, int, bool],
                   tuple[tuple[Row, ...], str | None, bool]] = Memo(INTERPRETED_ENTRIES)


def _interpreted(cie: Cie, body: bytes, pc_begin: int,
                 big: bool) -> tuple[tuple[Row, ...], str | None, bool]:
    """``_rows`` by the interpreter (``_interpret``), remembered."""
    key = (cie, bytes(body), pc_begin, big)
    known = _INTERPRETED.get(key)
    if known is None:
        known = _INTERPRETED.keep(key, _interpret(cie, body, pc_begin, big))
    return known


def _interpret(cie: Cie, body: bytes, pc_begin: int,
               big: bool) -> tuple[tuple[Row, ...], str | None, bool]:
    """``_rows`` by the interpreter."""
    initial = initial_ops(cie, big)
    ops = decode_ops(body, cie.code_align, cie.data_align, cie.address_size, big)
    placed_ops = []
    at = 0
    cacheable = True
    for op in ops:
        if type(op) is AdvanceLoc:
            at += op.delta
        elif type(op) is SetLoc:
            at = op.address - pc_begin
            cacheable = False
        else:
            placed_ops.append((at, op))
    try:
        rows = interpret(initial, placed_ops, 1 << 64)
    except CfiError as exc:
        return (), exc.message, cacheable
    return rows, None, cacheable
