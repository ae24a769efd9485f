"""The compiled core (``csrc/dwarf_replay.c``, ``csrc/sframe_fastpath.c``,
``csrc/sframe_encode.c``, ``csrc/sframe_decode.c``) against the pure-Python loop it
was written from.

The fast path's loop over one FDE's CFI bytes exists twice: ``fastpath._run`` (the
reference, and what runs without a C compiler) and ``_core.fast_fres``.  Both must
give the same FREs for every distinct FDE body of real libraries (x86-64 and, where
the cross toolchain is installed, AArch64) and for random programs that aim at every
way out of the subset, truncated ones included.  Where the two differ at all, the
compiled loop may only give up (None: the general path then decides) on rows that
start past 2**63 or on remember_state nested past 64 levels; the SFrame written is
the same either way (``test_fastpath.py`` holds every path equal to the general one,
with whichever core is built).  The FRE encoder exists twice too
(``encode._fres_bytes``, ``_core.fres_bytes``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.arch import arch_for_machine
from cfi2sframe.dwarf.cfi import Cie
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.errors import DecodeError
from cfi2sframe.sframe.fastpath import direct_fres
from tests.conftest import at_least, compiled_core, in_ci, require_path, unavailable

from .test_fastpath import _AARCH64_CIE, _AARCH64_OPS, _X86_CIE, _X86_OPS, LIBRARIES

AARCH64_LIBRARIES = ["/usr/aarch64-linux-gnu/lib/libc.so.6",
                     "/usr/aarch64-linux-gnu/lib/libstdc++.so.6"]
# Distinct (CIE, body) pairs compared, measured here: libc 1,872, libstdc++ 1,699,
# libLLVM 34,089; floors about 10% lower.
DISTINCT = {"libc.so.6": 1680, "libstdc++.so.6": 1530, "libLLVM-14.so.1": 30680}


def _both(cie: Cie, body: bytes, arch, big: bool) -> tuple:
    core = compiled_core()
    args = (cie.initial, body, cie.code_align, cie.data_align, arch, big)
    return direct_fres(*args, compiled=None), direct_fres(*args, compiled=core)


@pytest.mark.parametrize("path", LIBRARIES + AARCH64_LIBRARIES)
def test_every_distinct_fde_body_of_real_libraries(path: str, report) -> None:
    if path in AARCH64_LIBRARIES and not Path(path).exists() and not in_ci():
        unavailable(f"{path}: the AArch64 cross libc (libc6-arm64-cross)")
    require_path(path)
    cfi = read_elf_cfi(path)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    seen: set[tuple[int, bytes]] = set()
    handled = 0
    for fde in cfi.fdes:
        key = (fde.cie_at, fde.body)
        if key in seen:
            continue
        seen.add(key)
        python, c = _both(fde.cie, fde.body, arch, cfi.big_endian)
        assert c == python, (hex(fde.offset), fde.body.hex())
        handled += python is not None
    name = Path(path).name
    report(f"compiled core = pure-Python core, {path}: {len(seen)} distinct FDE bodies "
           f"({handled} on the fast path)")
    if path in LIBRARIES:
        at_least(f"{name}: distinct bodies", len(seen), DISTINCT[name])


def _same_or_beyond_c(python, c, body: bytes) -> bool:
    """Equal results; or the C loop gave up (None) where the Python one went past what
    64 bits hold in a row it emitted (a start at 2**63 or beyond, from 8-byte advances:
    such FREs start past any function's end and are dropped) or nested remember_state
    deeper than the C loop's 64 levels."""
    if c == python:
        return True
    return c is None and python is not None and (
        any(fre.start >= 1 << 63 for fre in python) or body.count(0x0A) > 64)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["x86", "a64"]), st.integers(0, 2))
def test_random_programs(data, target, cut) -> None:
    ops = _X86_OPS if target == "x86" else _AARCH64_OPS
    body = b"".join(data.draw(st.lists(ops, max_size=40)))
    body = body[:len(body) - cut] if cut <= len(body) else body
    if target == "x86":
        cie = Cie(1, -8, 16, 0, 0xFF, False, False, True, _X86_CIE, 8)
        arch = arch_for_machine("EM_X86_64", "t.o")
    else:
        cie = Cie(4, -8, 30, 0, 0xFF, False, False, True, _AARCH64_CIE, 8)
        arch = arch_for_machine("EM_AARCH64", "t.o")
    python, c = _both(cie, body, arch, False)
    assert _same_or_beyond_c(python, c, body), body.hex()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.booleans())
def test_random_bytes(body: bytes, big: bool) -> None:
    """Any bytes at all (unknown opcodes, operands cut anywhere, both byte orders).  This
    found the C loop without DW_CFA_MIPS_advance_loc8 (0x1d, an 8-byte delta), which
    ADVANCE_SIZES names and the Python loop takes."""
    cie = Cie(1, -8, 16, 0, 0xFF, False, False, True, _X86_CIE, 8)
    arch = arch_for_machine("EM_X86_64", "t.o")
    python, c = _both(cie, body, arch, big)
    assert _same_or_beyond_c(python, c, body), body.hex()


def test_the_compiled_opcodes_are_dwarfs() -> None:
    """The opcode numbers the C loop is written with are those of dwarf/opcodes.py."""
    from cfi2sframe.dwarf.opcodes import CFA

    for name, number in compiled_core().OPCODES.items():
        assert CFA.numbers()[name] == number, name


def _fres_bytes_both(fres, addr_size: int, arch) -> tuple[bytes, bytes]:
    return _fres_bytes_in(None, fres, addr_size, arch), _fres_bytes_in(compiled_core(), fres,
                                                                        addr_size, arch)


def _fres_bytes_in(core, fres, addr_size: int, arch) -> bytes:
    from cfi2sframe.sframe.encode import _fres_bytes

    return _fres_bytes(fres, addr_size, arch, {}, compiled=core)


@pytest.mark.parametrize("path", LIBRARIES[:1])
def test_the_fre_encoder_on_a_real_library(path: str) -> None:
    """Every function's FREs of a real library: the compiled encoder's bytes are the
    Python encoder's (the words of each FRE come from Python in both)."""
    from cfi2sframe.sframe.build import lower_fdes
    from cfi2sframe.sframe.format import FRE_ADDR_SIZE, fre_type_for

    require_path(path)
    cfi = read_elf_cfi(path)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    functions, _ = lower_fdes(cfi, arch)
    assert len(functions) > 1000
    for func in functions:
        size = FRE_ADDR_SIZE[fre_type_for(max((f.start for f in func.fres), default=0))]
        python, c = _fres_bytes_both(func.fres, size, arch)
        assert c == python, func.name


@settings(max_examples=800, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFF_FFFF), st.booleans(),
                          st.integers(-(1 << 31), (1 << 31) - 1),
                          st.none() | st.integers(-(1 << 15), 1 << 15),
                          st.none() | st.integers(-300, 300), st.booleans()), max_size=12),
       st.sampled_from(["EM_X86_64", "EM_AARCH64"]))
def test_the_fre_encoder_on_random_fres(rows, machine: str) -> None:
    """Random FREs of any start and offset size, each start in the smallest field that
    holds it or any wider one; a start too wide for its field is an error in both."""
    from cfi2sframe.sframe.format import Fre

    arch = arch_for_machine(machine, "t.o")
    fres = tuple(Fre(start, fp, cfa, fp_off, ra if arch.tracks_ra else None, mangled and
                     arch.tracks_ra) for start, fp, cfa, fp_off, ra, mangled in rows)
    for size in (1, 2, 4):
        try:
            python = _fres_bytes_in(None, fres, size, arch)
        except Exception as exc:  # noqa: BLE001 - C must fail the same way
            # a start too wide for its field (OverflowError), words past 32 bits (the
            # Python word layout's own error, raised in C from its callback)
            with pytest.raises(type(exc)):
                _fres_bytes_in(compiled_core(), fres, size, arch)
            continue
        assert _fres_bytes_in(compiled_core(), fres, size, arch) == python


def _decoded_both(data: bytes) -> tuple[object, object]:
    """A section decoded with each core's FRE loop (an error is the result too)."""
    from cfi2sframe.sframe import decode as decoding_module

    results = []
    for core in (None, compiled_core()):
        original = decoding_module._Reader.fres.__defaults__
        decoding_module._Reader.fres.__defaults__ = (core,)
        try:
            results.append(decoding_module.decode(data))
        except DecodeError as exc:
            results.append((type(exc), str(exc)))
        finally:
            decoding_module._Reader.fres.__defaults__ = original
    return results[0], results[1]


@pytest.mark.parametrize("version", [2, 3])
def test_the_fre_decoder_on_real_sections(version: int) -> None:
    """Sections made from real libraries (V2 and V3, FLEX included) and GNU ld's own V1
    sections: the compiled FRE loop reads what the Python loop reads."""
    from cfi2sframe.convert import convert_elf

    for path in [p for p in LIBRARIES if "LLVM" not in p]:  # libLLVM: a minute more
        require_path(path)
        conversion = convert_elf(path, version=version)
        python, c = _decoded_both(conversion.raw())
        assert c == python, path
        assert sum(len(fde.fres) for fde in c.fdes) > 1000


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=48), st.integers(0, 2), st.sampled_from([2, 3]))
def test_the_fre_decoder_on_damaged_sections(noise: bytes, where: int, version: int) -> None:
    """A real small section with bytes overwritten in its FRE area: both cores decode
    the same, or fail with the same located error (the compiled loop hands every
    error to the Python loop)."""
    from cfi2sframe.convert import convert_asm

    base = _SMALL_SECTIONS.setdefault(version, convert_asm(
        (Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s").read_text(),
        "fp.s", version=version).raw())
    start = len(base) - 1 - (where * len(base)) // 8
    damaged = base[:start] + noise + base[start + len(noise):]
    python, c = _decoded_both(damaged[:len(base)])
    assert c == python


_SMALL_SECTIONS: dict[int, bytes] = {}


# FRE bytes weighted to what decodes: info bytes with a valid size code (bits 5-6 below
# 3, SFrame spec "SFrame FRE Info Word") half the time, any byte otherwise.
_FRE_BYTES = st.lists(st.one_of(st.integers(0, 255), st.integers(0, 0x5F)), max_size=80)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_FRE_BYTES, st.integers(0, 90), st.integers(0, 90), st.integers(-1, 40),
       st.sampled_from([1, 2, 4]), st.booleans(), st.booleans())
def test_decode_fres_is_the_python_fre_loop(raw: list[int], pos: int, end: int, count: int,
                                            addr_size: int, big: bool, flex: bool) -> None:
    """``_core.decode_fres`` called as ``decode._Reader.fres`` calls it, on any bytes,
    position, end, count, FRE type, byte order and FDE type: the FREs of the Python loop
    (its reference) and the position after them, or None exactly where that loop raises
    its located error (the compiled loop reports none itself)."""
    from cfi2sframe.sframe.decode import DecodedFre, _Reader
    from cfi2sframe.sframe.format import FRE_ADDR_SIZE

    data = bytes(raw)
    end = min(end, len(data))
    fre_type = next(t for t, size in FRE_ADDR_SIZE.items() if size == addr_size)
    reader = _Reader(data, ">" if big else "<", 0, end, 3, 0)
    got = compiled_core().decode_fres(data, pos, count, addr_size, flex, reader.fre_params)
    if pos > end or count < 0:  # no call the Python loop makes: only no answer
        assert got is None
        return
    try:
        python = reader.fres(pos, count, fre_type, 0, flex, compiled=None)
    except DecodeError:
        assert got is None
        return
    assert got is not None
    fres, after = got
    assert fres == python and all(type(fre) is DecodedFre for fre in fres)
    assert after == pos + sum(addr_size + 1 + len(fre.offsets) * (1 << fre.offset_size)
                              for fre in python)


def test_decode_fres_leaves_a_foreign_table_to_python() -> None:
    """A table whose word widths are not SFrame's 1, 2 or 4 bytes (none of ours: a
    width of 8 once shifted a 32-bit word by 32 and more) or whose counts are negative
    is no answer, never a read."""
    from cfi2sframe.sframe.decode import FRE_TABLE, DecodedFre

    data = bytes(64)
    section = {"fre_end": 64, "big_endian": False, "fre_type": DecodedFre,
               "fre_table": FRE_TABLE}
    for bad in ((False, 1, 8, False, 0), (False, -1, 1, False, 0), (False, 1, 3, False, 0)):
        table = (bad,) * 256
        assert compiled_core().decode_fres(data, 0, 2, 1, False,
                                           {**section, "fre_table": table}) is None
    assert compiled_core().decode_fres(data, 0, 2, 1, False, section) is not None


def test_a_count_past_the_bytes_is_the_python_loops_error() -> None:
    """Found by the fuzzer (tests/support/fuzz.py sframe): an FDE claiming 2**32-ish
    FREs in a 100-byte section.  The compiled loop allocated a tuple of that many FREs
    (8 GB) before reading one; it now leaves the count to the Python loop, which reports
    the first FRE that does not fit, and both cores give that error."""
    import base64

    data = base64.b64decode(
        "4t4CBQMA+AACAAAABgAAABQAAAAAAAAAKAAAAOT///8WAAAAAAAAAAMAAEAAAAAA5v///xIIAAALAAAAAw"
        "AAAAAAAAAAAwj6+u8PBAQQ8AADCAEB8AAAABA=")
    python, c = _decoded_both(data)
    assert c == python and python[0] is DecodeError


@pytest.mark.parametrize("path", LIBRARIES + AARCH64_LIBRARIES
                         + ["/usr/s390x-linux-gnu/lib/libc.so.6"])
def test_the_fde_loop_and_the_v2_encoder_on_real_libraries(path: str, report) -> None:
    """``lower_fdes`` over a whole file (``_core.lower_fdes``: the fast path for every
    FDE in one call, None where the general path decides; ``lower_eh_frame``: the same
    from the ``.eh_frame``'s bytes, ``_core.eh_functions``) and the V2 FDE encoder
    (``_core.fdes_v2``) give what the Python loops give, object for object and byte for
    byte, in V2 and V3 (s390x takes the general path throughout: its FREs are not the
    fast path's, and ``lower_eh_frame`` declines it)."""
    from cfi2sframe.elf.cfi import cfi_of, cfi_section
    from cfi2sframe.sframe.build import lower_eh_frame, lower_fdes, order_functions
    from cfi2sframe.sframe.encode import build_v2

    if path not in LIBRARIES and not Path(path).exists() and not in_ci():
        unavailable(f"{path}: a cross libc (libc6-*-cross)")
    require_path(path)
    core = compiled_core()
    found = cfi_section(path)
    cfi = cfi_of(found)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    for version in (2, 3):
        python = lower_fdes(cfi, arch, version, compiled=None)
        assert lower_fdes(cfi, arch, version, compiled=core) == python, version
        one_pass = lower_eh_frame(found.contents, found.address, 8, found.names,
                                  cfi_of(found, ()), arch, version, compiled=core)
        assert one_pass == (None if arch.name == "s390x" else (*python, len(cfi.fdes)))
    functions, skips = python if version == 2 else lower_fdes(cfi, arch, 2, compiled=None)
    ordered, single = order_functions(functions)
    image = build_v2(ordered, arch, single, compiled=None)
    assert build_v2(ordered, arch, single, compiled=core) == image
    _same_table(found, arch, image, skips, len(cfi.fdes), core)
    report(f"compiled FDE loop and V2 encoder = Python's, {path}: {len(cfi.fdes)} FDEs, "
           f"{len(image.fres)} bytes of FREs")


def _same_table(found, arch, image, skips, fdes: int, core) -> None:
    """The one pass to the V2 table (``eh_table``: ``_core.eh_table_v2``, placed by
    ``_core.place_fdes``) gives the Python encoder's image of the Python loop's functions
    (None for s390x, as ``lower_eh_frame``), placed alike or refused alike where a start
    is out of its field's range; its functions, made when read, are those functions."""
    from functools import partial

    from cfi2sframe.elf.cfi import cfi_of
    from cfi2sframe.elf.symbols import function_names
    from cfi2sframe.errors import Cfi2SframeError
    from cfi2sframe.sframe.build import eh_table

    # the names of the general path's functions read alone, as the conversion reads them
    table = eh_table(found.contents, found.address, 8, partial(function_names, found.view),
                     cfi_of(found, ()), arch, compiled=core)
    if arch.name == "s390x":
        assert table is None
        return
    assert table is not None
    made, made_skips, count = table
    assert (made.header, made.fres, made.size, count, made_skips) == (
        image.header, image.fres, image.size, fdes, skips)
    for address in (found.address, 0x7000_0000):
        assert made.to_bytes(address) == image.to_bytes(address), hex(address)
    for address in (1 << 40, (1 << 64) - 4096):  # every start out of range: one error
        with pytest.raises(Cfi2SframeError) as python:
            image.to_bytes(address)
        with pytest.raises(Cfi2SframeError) as compiled:
            made.to_bytes(address)
        assert str(compiled.value) == str(python.value)
    assert tuple(made.fde_tails) == image.fde_tails
    assert made.functions == image.functions


@pytest.mark.parametrize(("machine", "big"), [("EM_X86_64", False), ("EM_AARCH64", True)])
def test_the_placed_table_at_the_ends_of_a_start_fields_range(machine: str, big: bool) -> None:
    """``_core.place_fdes`` (a table pass's image placed) against ``to_bytes``' Python
    loop, with the second of three functions' start minus its field's address at
    each end of a signed 32-bit field (-2**31 and 2**31 - 1 fit, one past does not:
    the SFrame spec's ``int32_t sfde_func_start_address``): the same bytes, or the
    same error naming that function."""
    from array import array

    from cfi2sframe.errors import Cfi2SframeError
    from cfi2sframe.sframe.columns import Packed
    from cfi2sframe.sframe.encode import build_v2
    from cfi2sframe.sframe.format import Fre, SFrameFunction

    arch = arch_for_machine(machine, "t.so", big)
    fres = (Fre(0, False, 8), Fre(1, False, 16))
    middle = 0x1_0000_0000
    for delta, fits in ((-(1 << 31), True), ((1 << 31) - 1, True), (-(1 << 31) - 1, False),
                        (1 << 31, False)):
        # the others' starts on the side that keeps them in range
        side = 1 if delta < 0 else -1
        starts = [middle + side * 0x100, middle, middle + side * 0x200]
        functions = [SFrameFunction(f"f{i}", "", start, 0x40, fres)
                     for i, start in enumerate(starts)]
        image = build_v2(functions, arch, True, compiled=None)
        columns = image._replace(fde_tails=Packed(b"".join(image.fde_tails), 16),
                                 starts=array("Q", starts).tobytes())
        field = len(image.header) + image.fde_size  # the second start field's offset
        address = middle - delta - field
        answer = compiled_core().place_fdes(columns.starts, columns.fde_tails.blob,
                                            address + len(image.header), 20, arch.big_endian)
        start = len(image.header)  # the C answer itself, not the Python fallback's
        assert answer == (1 if not fits else image.to_bytes(address)[start:start + 60]), delta
        if not fits:
            with pytest.raises(Cfi2SframeError, match="function 'f1' is"):
                columns.to_bytes(address)
            continue
        placed = columns.to_bytes(address)
        assert placed == image.to_bytes(address)
        assert int.from_bytes(placed[field:field + 4], "big" if arch.big_endian else
                              "little", signed=True) == delta


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 0xFFFF_FFFF), st.integers(0, 5), st.booleans(),
                          st.booleans(), st.integers(0, 255), st.integers(0, 3)),
                min_size=1, max_size=20),
       st.sampled_from(["EM_X86_64", "EM_AARCH64"]))
def test_the_v2_encoder_on_random_functions(rows, machine: str) -> None:
    """Random functions (sizes, FRE counts and starts, PC-mask, B-key, repeat sizes,
    FRE tuples shared between functions): the same image from both encoders."""
    from cfi2sframe.sframe.encode import build_v2
    from cfi2sframe.sframe.format import Fre, SFrameFunction

    arch = arch_for_machine(machine, "t.o")
    shared: list[tuple[Fre, ...]] = []
    functions = []
    for index, (size, count, mask, b_key, rep, reuse) in enumerate(rows):
        if reuse and shared:
            fres = shared[reuse % len(shared)]
        else:
            step = max(1, size // (count + 1))
            fres = tuple(Fre(i * step * 37 % 0x2_0000, i % 2 == 0, 16 + 8 * i,
                             -16 if i else None, -8 if arch.tracks_ra else None)
                         for i in range(count))
            shared.append(fres)
        functions.append(SFrameFunction(f"f{index}", "", 0x1000 * index, size, fres,
                                         pauth_b_key=b_key, pc_mask=mask,
                                         rep_size=rep if mask else 0))
    python = build_v2(functions, arch, True, compiled=None)
    assert build_v2(functions, arch, True, compiled=compiled_core()) == python
