"""The SFrame back end as one call: timelines (or an ELF file's CFI) lowered, PC-dependent
CFAs retried per PC, functions ordered and encoded into a section image.

What the application (``convert``) and the library's callers run for every input:
it reads no file and prints nothing.

``lower_all``, ``lower_fdes`` (the fast path first; ``lower_eh_frame`` from a linked
file's ``.eh_frame`` bytes in one compiled pass), ``lower_function`` (one function's
decision: FDEs, with the per-PC retry of PC-dependent CFAs, or a ``Skip``; ``verify``
asks it of the functions a section lacks), ``order_functions``, ``encode_sframe``,
``require_sframe_abi``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from operator import attrgetter
from types import ModuleType

from ..arch import as_arch
from ..arch.base import Arch
from ..core import compiled as compiled_core
from ..dwarf.cfi import Cfi, Cie, Fde, Names, RowsCache, cie_reader, fdes_at, function_name
from ..errors import Cfi2SframeError
from ..model import Timeline
from ..reasons import SframeReason
from ..typed import cast
from .columns import Later, Packed
from .encode import SectionImage, build_v1, build_v2, build_v3, v2_encoding, v2_image
from .fastpath import ShapeMemo, core_target, direct_fres, initial_state, serves
from .format import (
    FDE_SIZE,
    MAX_FRES_V3,
    MAX_FUNCTION_SIZE,
    Fre,
    SFrameFunction,
    fits,
)
from .lower import LowerMemo, Skip, lower
from .pcmask import lower_pc_dependent

_COMPILED = compiled_core()
_SECTION = attrgetter("section")
_START_SIZE = attrgetter("start", "size")


def order_functions(functions: Sequence[SFrameFunction]) -> tuple[list[SFrameFunction], bool]:
    """FDE order: by section (first appearance), then start; sorted flag if one section."""
    sections = {name: n for n, name in enumerate(dict.fromkeys(map(_SECTION, functions)))}
    if len(sections) <= 1:  # a linked file's: the keys made in C (``attrgetter``)
        return sorted(functions, key=_START_SIZE), True
    return sorted(functions, key=lambda f: (sections[f.section], f.start, f.size)), False


def lower_all(timelines: Sequence[Timeline], arch: str | Arch,
              version: int = 2, flex: bool = True) -> tuple[list[SFrameFunction], list[Skip]]:
    """Lower every timeline for SFrame ``version``; split into functions and skips.
    ``flex`` False: V3 without FLEX FDEs (``lower``)."""
    arch = as_arch(arch)

    functions: list[SFrameFunction] = []
    skips: list[Skip] = []
    memo: LowerMemo = {}
    for timeline in timelines:
        _add(lower_function(timeline, arch, version, flex, memo), functions, skips)
    return functions, skips


def lower_function(timeline: Timeline, arch: Arch, version: int = 2, flex: bool = True,
                   memo: LowerMemo | None = None) -> list[SFrameFunction] | Skip:
    """The conversion's decision for one function: its SFrame FDEs, or why it has none.
    A CFA expression gets a second try, evaluated per PC (``sframe.pcmask``: a linker's
    PLT, then two FDEs).  ``verify`` asks the same of a function a section lacks."""
    result = lower(timeline, arch, memo, version, flex)
    if isinstance(result, Skip) and result.reason == SframeReason.cfa_expression:
        return lower_pc_dependent(timeline, arch, result, version, flex)
    return result if isinstance(result, Skip) else [result]


def _add(result: list[SFrameFunction] | Skip, functions: list[SFrameFunction],
         skips: list[Skip]) -> None:
    """File one function's decision (``lower_function``)."""
    if isinstance(result, Skip):
        skips.append(result)
    else:
        functions.extend(result)


def lower_fdes(cfi: Cfi, arch: Arch, version: int = 2, flex: bool = True,
               compiled: ModuleType | None = _COMPILED
               ) -> tuple[list[SFrameFunction], list[Skip]]:
    """``lower_all`` for an ELF file's FDEs, with the same result.

    Each distinct (CIE, instruction bytes) first tries ``sframe.fastpath`` (bytes
    to FREs in one loop); FDEs it declines go through the interpreter and
    ``lower``, as every timeline of the assembly path does (the fast path gives
    default FREs only, so ``flex`` concerns the general path alone).  ``compiled``:
    the compiled core, which runs this loop's fast path over every FDE in one call
    (``_core.lower_fdes``); None: the loop below, its reference.
    """
    functions: list[SFrameFunction] = []
    skips: list[Skip] = []
    memo: LowerMemo = {}
    rows_cache: RowsCache = {}
    direct: dict[tuple[int, bytes], tuple[Fre, ...] | None] = {}
    shapes: ShapeMemo = {}
    big_endian = cfi.big_endian
    fast = _compiled_fast_path(cfi, arch, version, direct, shapes, compiled)
    if fast is not None:  # the compiled loop below, run over every FDE at once
        return _with_general(fast, cfi, arch, version, flex)
    for fde in cfi.fdes:
        cie = fde.cie
        fres = None
        if 0 < fde.size and fits(fde.size, 0, version) and cie.ra == arch.ra:
            key = (fde.cie_at, fde.body)
            if key in direct:
                fres = direct[key]
            else:
                fres = direct[key] = direct_fres(cie.initial, fde.body, cie.code_align,
                                                 cie.data_align, arch, big_endian,
                                                 shapes=shapes)
        if fres is not None and fres[-1].start >= fde.size:
            fres = tuple(fre for fre in fres if fre.start < fde.size)
        if fres is None or not fits(fde.size, len(fres), version):
            timeline = cfi.timeline(fde, rows_cache)
            _add(lower_function(timeline, arch, version, flex, memo), functions, skips)
            continue
        # The span's four fields spelled out (not ``span_of``): this runs once per FDE.
        functions.append(SFrameFunction(fde.name, fde.section, fde.start, fde.size, fres,
                                        pauth_b_key=cie.b_key,
                                        signal=cie.signal and version == 3))
    return functions, skips


def lower_eh_frame(eh: bytes | bytearray, address: int, address_size: int, names: Names,
                   cfi: Cfi, arch: Arch, version: int = 2, flex: bool = True,
                   compiled: ModuleType | None = _COMPILED
                   ) -> tuple[list[SFrameFunction], list[Skip], int] | None:
    """``lower_fdes`` of a linked file's ``.eh_frame`` (``eh``, loaded at ``address``;
    ``names``: its functions'), with its FDE count: one compiled pass from the bytes to
    the functions (``_core.eh_functions``), no ``Fde`` made but for the FDEs the fast
    path leaves to the general path (``dwarf.cfi.fdes_at``).  ``cfi``: the file's
    ``Cfi`` without FDEs (what the general path reads of it).  None where the compiled
    core does not run, the target's FREs take the general path, or the section is out
    of the ordinary (``parse_cfi`` reads it then, or reports it)."""
    if compiled is None or not serves(arch):
        return None
    big_endian = cfi.big_endian
    data = eh if isinstance(eh, bytes) else bytes(eh)
    reader = cie_reader(data, address, address_size, not big_endian)

    def cie_entry(at: int) -> tuple[object, ...]:
        return _cie_entry(reader(at), arch, big_endian)

    walked = compiled.eh_functions(data, address, address_size, names, cie_entry,
                                   _lower_params(arch, big_endian, version))
    if walked is None:
        return None
    fast, todo, count = walked
    general = [fde._replace(name=function_name(names, fde.section, fde.start))
               for fde in fdes_at(data, todo, address, address_size, not big_endian)]
    functions, skips = _with_general(fast, cfi, arch, version, flex, general)
    return functions, skips, count


def eh_table(eh: bytes | bytearray, address: int, address_size: int,
             names: Callable[[Collection[int] | None], Names], cfi: Cfi, arch: Arch,
             flex: bool = True, compiled: ModuleType | None = _COMPILED
             ) -> tuple[SectionImage, list[Skip], int] | None:
    """``encode_sframe`` (V2) of ``lower_eh_frame``'s functions, with its skips and FDE
    count, in one compiled pass (``_core.eh_table_v2``): the FDE table sorted and the
    FREs encoded from columns, no ``Fre`` or ``SFrameFunction`` made but the general
    path's; the image's functions are made when read, by ``lower_eh_frame``.  None
    where ``lower_eh_frame`` gives None, or a function of the general path is not the
    linked file's (another section: ``order_functions`` sorts those otherwise).
    ``names(starts)``: the file's function names (``elf.symbols.function_names``), of
    functions at ``starts`` only (the general path's few), or all (None)."""
    if compiled is None or not serves(arch):
        return None
    big_endian = cfi.big_endian
    data = eh if isinstance(eh, bytes) else bytes(eh)
    reader = cie_reader(data, address, address_size, not big_endian)
    skips: list[Skip] = []

    def cie_entry(at: int) -> tuple[object, ...]:
        return _cie_entry(reader(at), arch, big_endian)

    def general(todo: list[int]) -> list[tuple[SFrameFunction, ...]] | None:
        memo: LowerMemo = {}
        rows_cache: RowsCache = {}
        made: list[tuple[SFrameFunction, ...]] = []
        fdes = fdes_at(data, todo, address, address_size, not big_endian)
        named = names({fde.start for fde in fdes}) if fdes else {}
        for fde in fdes:
            fde = fde._replace(name=function_name(named, fde.section, fde.start))
            result = lower_function(cfi.timeline(fde, rows_cache), arch, 2, flex, memo)
            if isinstance(result, Skip):
                skips.append(result)
                made.append(())
            elif any(func.section for func in result):
                return None
            else:
                made.append(tuple(result))
        return made

    table = compiled.eh_table_v2(data, address, address_size, cie_entry,
                                 _lower_params(arch, big_endian, 2), general,
                                 v2_encoding(arch))
    if table is None:
        return None
    starts, fdes, fres, num_fres, count, fde_count = table

    def functions() -> list[SFrameFunction]:
        lowered = lower_eh_frame(data, address, address_size, names(None), cfi, arch, 2,
                                 flex, compiled)
        assert lowered is not None  # the walk above took the section
        return order_functions(lowered[0])[0]

    image = v2_image(Later(count, functions), Packed(fdes, FDE_SIZE[2] - 4), fres, num_fres,
                     arch, starts)
    return image, skips, fde_count


def _cie_entry(cie: Cie, arch: Arch, big_endian: bool) -> tuple[object, ...]:
    """A CIE as the compiled pass takes it: (start state or None, code_align,
    data_align, ra, b_key, signal)."""
    return (initial_state(cie.initial, cie.code_align, cie.data_align, arch, big_endian),
            cie.code_align, cie.data_align, cie.ra, cie.b_key, cie.signal)


def _with_general(fast: list[SFrameFunction | None], cfi: Cfi, arch: Arch, version: int,
                  flex: bool, general: Sequence[Fde] | None = None
                  ) -> tuple[list[SFrameFunction], list[Skip]]:
    """The compiled pass's functions in FDE order, each None (an FDE the fast path does
    not take) replaced by what the general path decides: no Python step per FDE the
    compiled pass made (``list.index`` finds the few Nones).  ``general``: the FDEs of
    the Nones, in order (else ``cfi.fdes`` at the Nones' places)."""
    made = cast("list[SFrameFunction]", fast)  # (between the Nones)
    functions: list[SFrameFunction] = []
    skips: list[Skip] = []
    memo: LowerMemo = {}
    rows_cache: RowsCache = {}
    done = nones = 0
    while True:
        try:
            index = fast.index(None, done)
        except ValueError:
            break
        functions += made[done:index]
        fde = cfi.fdes[index] if general is None else general[nones]
        nones += 1
        timeline = cfi.timeline(fde, rows_cache)
        _add(lower_function(timeline, arch, version, flex, memo), functions, skips)
        done = index + 1
    return (functions + made[done:] if done else made), skips


def _compiled_fast_path(cfi: Cfi, arch: Arch, version: int,
                        direct: dict[tuple[int, bytes], tuple[Fre, ...] | None],
                        shapes: ShapeMemo,
                        compiled: ModuleType | None) -> list[SFrameFunction | None] | None:
    """Per FDE, the function ``lower_fdes``'s fast path makes of it, or None for the
    general path; None where the compiled core does not run (or the target's FREs
    take the general path: ``direct_fres``)."""
    if compiled is None or not serves(arch):
        return None
    cies: dict[int, tuple[object, ...]] = {}
    for fde in cfi.fdes:
        if fde.cie_at not in cies:
            cies[fde.cie_at] = _cie_entry(fde.cie, arch, cfi.big_endian)
    made: list[SFrameFunction | None] = compiled.lower_fdes(
        cfi.fdes, cies, shapes, direct, _lower_params(arch, cfi.big_endian, version))
    return made


@lru_cache(maxsize=16)
def _lower_params(arch: Arch, big_endian: bool, version: int) -> dict[str, object]:
    """``_core.lower_fdes``'s parameters by name: the target's (``core_target``) and the
    SFrame version's limits and function type; built once, never changed."""
    return {**core_target(arch, big_endian), "version": version,
            "max_size": MAX_FUNCTION_SIZE, "max_fres_v3": MAX_FRES_V3,
            "function_type": SFrameFunction}


def require_sframe_abi(arch: Arch, where: str) -> None:
    """SFrame defines AMD64, AArch64 and s390x only (i386 is for compact unwind)."""
    if not arch.sframe_abi:
        raise Cfi2SframeError(where, f"SFrame has no ABI for {arch.name}; "
                                     "'cfi2sframe compact' gives compact unwind for it")


def encode_sframe(functions: Sequence[SFrameFunction], arch: str | Arch = "x86_64",
                  version: int = 2, pcrel: bool = True) -> SectionImage:
    """Encode functions as an SFrame section image (FDEs sorted as ``order_functions``).
    ``pcrel`` False: V2 without the errata-1 flag (GNU ld 2.41-2.44's input); V1 (GNU ld
    2.40's input) never has it."""
    arch = as_arch(arch)
    if version not in (1, 2, 3):
        raise Cfi2SframeError("", f"SFrame version {version} is not supported")
    if arch.sframe_abi_errata1 and not pcrel and version < 3:
        raise Cfi2SframeError("", f"SFrame V{version} without the PC-relative flag has no ABI "
                                  f"for {arch.name} (SFrame V2 errata 1 added it)")
    ordered, single = order_functions(functions)
    if version == 1:
        return build_v1(ordered, arch, sort_flag=single)
    if version == 2:
        return build_v2(ordered, arch, sort_flag=single, pcrel=pcrel)
    return build_v3(ordered, arch, sort_flag=single)
