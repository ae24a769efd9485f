"""The conversion pipeline as library calls: text -> timelines -> SFrame -> output.

``Conversion`` with ``raw/asm/obj/elf`` and ``output(form)`` (kinds ``AsmConversion``,
``ElfConversion``), ``convert_file`` (any input), ``convert_archive`` (a static library,
member by member), ``convert_asm``, ``convert_elf``, ``convert_sframe``,
``sframe_from_dwarf`` (handed to ``analysis.process``), ``verify_as_converted``
(``verify`` of a file without ``.sframe``: a linked file's section as the conversion
builds it, never placed in the file; an object's in the object), ``rewrite_in_place``,
``already_converted`` and ``archive_already_converted`` (a file that is exactly what
this conversion writes: ``--resume``'s ``ok`` for a file converted by a killed run). An
assembled object must hold one ``.sframe``, ours."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

from .arch import arch_for_machine, as_arch, by_sframe_abi
from .arch.base import Arch
from .elf.compressed import DEFAULT_LIMITS, Limits
from .elf.read import PT_LOAD, ElfView, elf_arch, open_elf, open_elf_file
from .errors import Cfi2SframeError, DecodeError, InternalError, decoding
from .files import Payload, bytes_of, read_bytes, release, rewrite, same_bytes
from .kinds import Kind, is_archive, is_elf, refuse_unreadable
from .sframe.selfcheck import check_written
from .typed import TYPE_CHECKING, NamedTuple

# The pipeline's other modules are imported where used: the command line starts the
# assembler (convert_file) before they load, and ELF input never needs the assembly
# frontend (the assembler run, the scanner, Lark).
if TYPE_CHECKING:
    from typing import Final

    from .analysis.assembler import Disagreement
    from .analysis.compare import VerifyResult
    from .dwarf.cfi import Cfi
    from .elf.linked import OldKernels
    from .frontend.launch import Launch
    from .frontend.probe import Assembler, ProbeRun
    from .frontend.timelines import AsmUnit
    from .model import Timeline
    from .sframe.decode import DecodedFde
    from .sframe.encode import SectionImage
    from .sframe.format import SFrameFunction
    from .sframe.lower import Skip


class Conversion:
    """Everything one conversion produced, and the outputs made from it.

    ``raw()`` is the section's bytes; ``asm()``, ``obj()`` and ``elf()`` exist for the
    inputs they make sense for, and say which input they need otherwise.  Plain
    classes (the forms differ by input), their fields not written after ``__init__``.
    """

    def __init__(self, arch: Arch, source: str, functions: Sequence[SFrameFunction],
                 skips: tuple[Skip, ...], image: SectionImage,
                 assembler_messages: str = "") -> None:
        self.arch: Final = arch
        self.source: Final = source  # the input's name in messages
        self.functions: Final = functions
        self.skips: Final = skips
        self.image: Final = image
        self.assembler_messages: Final = assembler_messages

    @property
    def empty(self) -> bool:
        """Nothing to describe: no function has SFrame.  No output form then holds a
        section: an ``.sframe`` with no FDE makes GNU ld refuse to merge the sections
        of every later link (``error in Scrt1.o(.sframe)``); gas writes none either."""
        return not self.functions

    def output(self, emit: str) -> Payload | str:
        """The output form ``emit`` (``raw``, ``asm``, ``obj`` or ``elf``), as a file
        holds it: what the method of that name gives (the library's answer is the
        command's)."""
        forms: dict[str, Callable[[], Payload | str]] = {
            "raw": self.raw, "asm": self.asm, "obj": self.obj, "elf": self.elf_copy}
        if emit not in forms:
            raise Cfi2SframeError(self.source, f"unknown output form '{emit}'")
        return forms[emit]()

    def raw(self) -> bytes:
        """The section bytes, every input section placed at address 0; with nothing to
        describe, a header and no FDE (a section that says "no functions", which every
        reader reads; the forms a linker takes in hold none, ``empty``).

        A decoded FDE start then equals the function's offset in its own
        section, which is how binutils prints relocatable objects.
        """
        return self.placed(0)

    def placed(self, address: int) -> bytes:
        """The section at ``address``, as every output that holds it is given it: checked
        first (``sframe.selfcheck``: a writer's bug is an internal error, no output)."""
        section = self.image.to_bytes(address, where=self.source)
        check_written(self.source, section, address)
        return section

    def asm(self) -> str:
        """An assembly fragment holding the section (assembly input only)."""
        raise asm_needs_assembly(self.source)

    def obj(self) -> bytes:
        """A relocatable object with ``.sframe`` and its relocations."""
        raise Cfi2SframeError(self.source, "--emit obj needs assembly input or a relocatable "
                                           "object; use --emit elf for executables and "
                                           "libraries")

    def elf(self) -> bytes:
        """A linked file with a loadable ``.sframe`` and ``PT_GNU_SFRAME``."""
        raise Cfi2SframeError(self.source, "--emit elf needs a linked file (executable or "
                                           "shared library); use --emit obj for objects and "
                                           "assembly")

    def elf_copy(self) -> Payload:
        """``elf`` as the writers take it (``ElfConversion``: never whole in memory)."""
        return self.elf()


def asm_needs_assembly(source: str) -> Cfi2SframeError:
    """The error for ``--emit asm`` of an ELF file (its fragment names the input's
    symbols, which only assembly input has)."""
    return Cfi2SframeError(source, "--emit asm needs assembly input; use --emit raw, obj "
                                   "(objects) or elf (executables, libraries)")


class AsmConversion(Conversion):
    """SFrame made from the ``.cfi_*`` directives of an assembly file."""

    def __init__(self, arch: Arch, source: str, functions: Sequence[SFrameFunction],
                 skips: tuple[Skip, ...], image: SectionImage, assembler_messages: str = "",
                 unit: AsmUnit | None = None, assembler: Assembler | None = None) -> None:
        super().__init__(arch, source, functions, skips, image, assembler_messages)
        self.unit: Final = unit
        self.assembler: Final = assembler  # (for an object whose labels cannot go)

    def assembler_disagreements(self) -> list[Disagreement]:
        """Where the CFI the assembler wrote for a function differs from the one the
        directives give (``analysis.assembler``): an assembler bug, or ours."""
        if self.unit is None or not self.unit.timelines or self.unit.agrees:
            return []  # (placed by the assembler's own FDEs, agreeing by construction)
        from .analysis.assembler import assembler_disagreements
        from .elf.cfi import read_elf_cfi

        # The source's symbols as the probe read them: else reading the CFI names its
        # FDEs from the whole table, our probe labels included (six a function).
        assembled = self.unit.assembled or read_elf_cfi(self.source, self.unit.obj,
                                                        symbols=self.unit.symbols or None)
        return assembler_disagreements(self.unit.timelines, assembled)

    def asm(self) -> str:
        """An assembly fragment to assemble together with the input (``as in.s out.s``);
        with nothing to describe, a comment (the object it joins gets no section, as
        ``obj``)."""
        from .sframe.fragment import anchor_expression, section_asm

        if self.empty:
            return f"{self.arch.line_comment} cfi2sframe: no function has SFrame; no section\n"

        missing = [f for f in self.functions if anchor_expression(f) is None]
        if missing:
            func = missing[0]
            raise Cfi2SframeError(
                self.source,
                f"function '{func.name}' has no symbol at or before its start to refer to; "
                "use --emit obj",
            )
        return section_asm(self.image, anchor_expression, self.arch.line_comment)

    def obj(self) -> bytes:
        """The input assembled by the real assembler, plus ``.sframe`` and its relocations.

        The object is the assembler's run of the input as it is, or the probe run's
        (``frontend.probe``) with its probe labels taken out: the input is assembled
        again only where a section of the object refers to symbols in a way
        ``elf.obj.without_local_symbols`` does not know.
        It has ``.sframe`` of its own where the assembler writes one (``--gsframe``
        in its command, or built to by default), which ours then replaces.
        """
        from .elf.obj import without_local_symbols
        from .frontend.probe import PROBE

        assert self.unit is not None and self.assembler is not None  # set by the makers
        obj: bytes | None = self.unit.obj
        if self.unit.probed:
            with decoding(self.source, "assembler output"):
                obj = without_local_symbols(self.unit.obj, PROBE.encode(), self.source)
        if obj is None:
            obj, _ = self.assembler.run(self.unit.text, self.source, ".")
        with decoding(self.source, "assembler output"):
            if self.empty:  # the object as the assembler writes it, without a section
                return obj
            has_own = open_elf(obj, "assembler output").section(".sframe") is not None
        return _object_with(obj, self.image, self.source, replace=has_own)


def _without_sframe(obj: bytes, where: str) -> bytes:
    """The object without the ``.sframe`` an earlier conversion gave it (nothing is left
    to describe), or a one-line error where that section cannot be taken out here."""
    from .elf.obj import remove_sframe

    with decoding(where):
        if open_elf(obj, "object").section(".sframe") is None:
            return obj
    removed = remove_sframe(obj)
    if removed is None:
        raise Cfi2SframeError(where, "no function has SFrame, and the object's .sframe is "
                                     "not its last section: remove it with objcopy "
                                     "--remove-section=.sframe --remove-section=.rela.sframe")
    return removed


def _object_with(obj: bytes, image: SectionImage, where: str, replace: bool) -> bytes:
    """The relocatable object ``obj`` with ``image`` added as ``.sframe`` and each FDE's
    start relocated to its function."""
    from .elf.obj import StartField, add_sframe

    starts = [StartField(image.start_field_offset(index), func.section, func.start, func.name)
              for index, func in enumerate(image.functions)]
    section = image.unplaced_bytes()
    check_written(where, section)
    return add_sframe(obj, section, starts, image.start_size, where, replace)


def convert_asm(
    text: str,
    filename: str = "<input>",
    arch: str | Arch = "x86_64",
    assembler: str | None = None,
    include_dir: str = ".",
    version: int = 2,
    flex: bool = True,
    probes: bool = False,
    pcrel: bool = True,
) -> AsmConversion:
    """Assembly text -> SFrame: the whole pipeline of ``cfi2sframe foo.s``.  ``flex``
    False: V3 without FLEX FDEs (``sframe.lower.lower``).  ``probes``: place the
    directives by probe labels (``frontend.timelines.parse_asm``).  ``pcrel`` False: V2
    without the errata-1 flag (``sframe.build.encode_sframe``)."""
    arch = as_arch(arch)
    from .frontend.probe import Assembler
    from .frontend.timelines import parse_asm

    runner = Assembler.from_string(assembler or arch.default_assembler)
    unit, messages = parse_asm(text, filename, arch, runner, include_dir, probes)
    return _lower_and_encode(unit, messages, arch, runner, version, flex, pcrel)


def convert_probe(run: ProbeRun, arch: Arch, runner: Assembler, version: int = 2,
                  flex: bool = True, pcrel: bool = True) -> AsmConversion:
    """Finish a conversion whose assembler run was started with ``start_run``."""
    from .frontend.timelines import finish_asm

    unit, messages = finish_asm(run, arch, _import_what_follows)
    return _lower_and_encode(unit, messages, arch, runner, version, flex, pcrel)


# What lowering, encoding, the object writer and reading the assembler's CFI load (the
# cross-check loads its own modules only for a unit the probes placed).
_FOLLOWING = ("cfi2sframe.sframe.build", "cfi2sframe.sframe.encode", "cfi2sframe.elf.obj",
              "cfi2sframe.elf.cfi")


def _import_what_follows() -> None:
    """Load the modules the rest of an assembly conversion uses while the assembler runs
    (this process would only wait for it)."""
    import importlib

    for name in _FOLLOWING:
        importlib.import_module(name)


def _lower_and_encode(unit: AsmUnit, messages: str, arch: Arch, runner: Assembler,
                      version: int, flex: bool = True, pcrel: bool = True) -> AsmConversion:
    from .sframe.build import encode_sframe, lower_all, require_sframe_abi

    require_sframe_abi(arch, unit.filename)
    functions, skips = lower_all(unit.timelines, arch, version, flex)
    image = encode_sframe(functions, arch, version, pcrel)
    return AsmConversion(arch, unit.filename, image.functions, tuple(skips), image, messages,
                         unit, runner)


def timelines_from_asm(text: str, filename: str = "<input>", arch: str | Arch = "x86_64",
                       assembler: str | None = None,
                       include_dir: str = ".") -> tuple[Timeline, ...]:
    """Parse assembly text into one ``Timeline`` per ``.cfi_startproc`` region."""
    arch = as_arch(arch)
    from .frontend.probe import Assembler
    from .frontend.timelines import parse_asm

    unit, _ = parse_asm(text, filename, arch,
                        Assembler.from_string(assembler or arch.default_assembler), include_dir)
    return unit.timelines


class ElfConversion(Conversion):
    """SFrame made from the DWARF CFI of an ELF file (object, library or program)."""

    def __init__(self, arch: Arch, source: str, functions: Sequence[SFrameFunction],
                 skips: tuple[Skip, ...], image: SectionImage, assembler_messages: str = "",
                 elf_type: str = "ET_REL", fde_count: int = 0, sframe_address: int = 0,
                 data: bytes = b"", replace: bool = False, from_sframe: bool = False,
                 old_kernels: OldKernels = "keep", append_only: bool = False,
                 view: ElfView | None = None) -> None:
        super().__init__(arch, source, functions, skips, image, assembler_messages)
        self.elf_type: Final = elf_type
        self.fde_count: Final = fde_count
        self.sframe_address: Final = sframe_address
        self.data: Final = data
        # An .sframe already in the file is replaced, not refused.
        self.replace: Final = replace
        self.from_sframe: Final = from_sframe  # made from the file's .sframe (--source sframe)
        self.old_kernels: Final = old_kernels  # elf form: see elf.linked.OldKernels
        # The elf form never writes over old bytes (elf.linked.plan).
        self.append_only: Final = append_only
        self.view: Final = view  # data's section headers, where read already

    def laid_out(self, old_kernels: OldKernels | None = None,
                 append_only: bool | None = None) -> ElfConversion:
        """This conversion, its elf form written with other layout choices."""
        return ElfConversion(
            self.arch, self.source, self.functions, self.skips, self.image,
            self.assembler_messages, self.elf_type, self.fde_count, self.sframe_address,
            self.data, self.replace, self.from_sframe,
            self.old_kernels if old_kernels is None else old_kernels,
            self.append_only if append_only is None else append_only, self.view)

    @property
    def linked(self) -> bool:
        return self.elf_type != "ET_REL"

    @property
    def rewrite_form(self) -> str:
        """The output form that rewrites the input itself: ``elf`` or ``obj``."""
        return "elf" if self.linked else "obj"

    def raw(self) -> bytes:
        """The section bytes.

        Relocatable input: every section at address 0, as for assembly input.
        Linked input: placed at ``sframe_address`` with final addresses.
        """
        return self.placed(self.sframe_address if self.linked else 0)

    def obj(self) -> bytes:
        """A copy of the relocatable input with ``.sframe`` and ``.rela.sframe`` added."""
        if self.linked:
            return super().obj()
        if self.empty and not self.replace:
            return self.data  # nothing to describe: the object as it was
        if self.empty:  # --replace: no section with no FDE, so the old one goes
            return _without_sframe(self.data, self.source)
        return _object_with(self.data, self.image, self.source, self.replace)

    def elf(self) -> bytes:
        """A copy of the linked input with a loadable ``.sframe`` and ``PT_GNU_SFRAME``."""
        return bytes_of(self.elf_copy())

    def elf_copy(self) -> Payload:
        """``elf`` as the writers take it: the input's bytes with the changes over them,
        produced a chunk at a time as it is written (``files.PatchedCopy``)."""
        from .elf.linked import add_loadable_sframe, replace_in_place

        if not self.linked:
            return super().elf()
        if self.empty and not self.replace:
            return self.data  # nothing to describe: the file as it was

        build = self.placed
        if self.replace:
            with decoding(self.source):
                done = replace_in_place(self.data, build, self.source)
            if done is not None:
                return done
        with decoding(self.source):
            return add_loadable_sframe(self.data, self.image.size, build, self.source,
                                       self.replace, self.old_kernels, self.append_only,
                                       self.view)[0]


def convert_sframe(path: str, data: bytes | None = None, version: int = 2,
                   sframe_address: int | None = None,
                   limits: Limits = DEFAULT_LIMITS, flex: bool = True,
                   pcrel: bool = True) -> ElfConversion:
    """An existing SFrame section (ELF file or raw section) -> SFrame ``version``.

    For files whose only unwind information is ``.sframe``; V1, V2 or V3 in.
    The obj and elf outputs replace the section.
    """
    from .elf.symbols import function_names
    from .sframe.load import load_sframe
    from .sframe.reencode import fde_names, lower_section

    if data is None:
        data = read_bytes(path)
    loaded = load_sframe(path, data, limits=limits)
    arch = by_sframe_abi(loaded.section.abi)
    names: dict[tuple[str, int], str] = {}
    elf_type, address = "ET_REL", 0
    if loaded.is_elf:
        with decoding(path):
            view = open_elf(data, "ELF file")
        names = function_names(view)
        elf_type = loaded.elf_type
        section = view.section(loaded.section_name)
        if elf_type != "ET_REL" and section is not None:
            address = section.addr if sframe_address is None else sframe_address

    def section_of(fde: DecodedFde) -> str:
        return loaded.section_of(fde.field_offset)

    from .sframe.build import encode_sframe

    functions, skips = lower_section(loaded.section, arch, version, path,
                                     fde_names(names, section_of), section_of, flex)
    image = encode_sframe(functions, arch, version, pcrel)
    return ElfConversion(arch, path, image.functions, tuple(skips), image, "", elf_type,
                         len(loaded.section.fdes), address, data if loaded.is_elf else b"",
                         replace=True, from_sframe=True)


def default_sframe_address(data: bytes, path: str = "", view: ElfView | None = None) -> int:
    """Where a new loadable ``.sframe`` goes: after the last PT_LOAD, page aligned
    (``view``: ``data``'s, where the caller has it)."""
    with decoding(path):
        segments = (view or open_elf(data, "ELF file")).segments()
    end = max((seg.vaddr + seg.memsz for seg in segments if seg.kind == PT_LOAD), default=0)
    page = 0x1000
    return (end + page - 1) // page * page


def check_sframe_address(data: bytes, path: str, address: int,
                         kind: Kind | None = None) -> None:
    """Refuse, before any work, an ``--sframe-address`` no section can have: one for an
    input the linker places (an object, assembly), one inside a ``PT_LOAD`` of the file
    (over its code or data), or one beyond the 32-bit PC-relative reach of its code
    (an FDE's start field); ``kind``: the input's, told already."""
    kind = refuse_unreadable(path, data, kind)
    if kind != Kind.elf:
        if kind != Kind.sframe:
            raise Cfi2SframeError(path, "--sframe-address places a linked file's section; "
                                        "the linker places an object's")
        return
    with decoding(path):
        loads = [seg for seg in open_elf(data, "ELF file").segments() if seg.kind == PT_LOAD]
    if not loads:
        raise Cfi2SframeError(path, "--sframe-address places a linked file's section; "
                                    "the linker places an object's")
    inside = next((seg for seg in loads if seg.vaddr <= address < seg.vaddr + seg.memsz), None)
    if inside is not None:
        raise Cfi2SframeError(path, f"--sframe-address {address:#x} lies inside the segment "
                                    f"[{inside.vaddr:#x}, {inside.vaddr + inside.memsz:#x})")
    low, high = loads[0].vaddr, max(seg.vaddr + seg.memsz for seg in loads)
    if max(address - high, low - address) >= 1 << 31:  # (each function's is checked later)
        raise Cfi2SframeError(path, f"--sframe-address {address:#x} is 2 GiB or more from "
                                    f"all of the file's segments [{low:#x}, {high:#x}): no "
                                    "function is in reach of a 32-bit PC-relative start")


def sframe_from_eh_frame(data: bytes, address: int, sframe_address: int,
                         arch: str | Arch = "x86_64", version: int = 2,
                         debug_frame: bool = False) -> tuple[bytes, tuple[Skip, ...]]:
    """A raw ``.eh_frame`` blob loaded at ``address`` (what a JIT hands to
    ``__register_frame``; ``debug_frame``: a ``.debug_frame`` blob) as the SFrame
    section that will live at ``sframe_address`` (its function starts are relative to
    it), with the functions left out and why.  Bad CFI is a located error ("<eh_frame>:
    at byte N: ...")."""
    from .dwarf.cfi import Cfi, parse_cfi
    from .sframe.build import encode_sframe, lower_fdes, require_sframe_abi

    target = as_arch(arch)
    require_sframe_abi(target, "<eh_frame>")
    with decoding("<eh_frame>", ".debug_frame" if debug_frame else ".eh_frame"):
        fdes = parse_cfi(data, not debug_frame, address, {}, target.address_size,
                         not target.big_endian, {})
    cfi = Cfi("<eh_frame>", target.elf_machine, "ET_DYN", tuple(fdes),
              ".debug_frame" if debug_frame else ".eh_frame", target.big_endian)
    functions, skips = lower_fdes(cfi, target, version)
    image = encode_sframe(functions, target, version)
    return image.to_bytes(sframe_address, where="<eh_frame>"), tuple(skips)


def sframe_from_dwarf(path: str, data: bytes) -> tuple[bytes, int]:
    """A V3 section made from an ELF file's DWARF CFI, in memory, and its address: what
    a process's file without ``.sframe`` is walked with (V3 keeps outermost frames)."""
    conversion = convert_elf(path, data, version=3)
    address = conversion.sframe_address
    return conversion.image.to_bytes(address, where=path), address


def convert_elf(path: str, data: bytes | None = None, version: int = 2,
                sframe_address: int | None = None, replace: bool = False,
                limits: Limits = DEFAULT_LIMITS, cfi: Cfi | None = None,
                flex: bool = True, pcrel: bool = True,
                view: ElfView | None = None) -> ElfConversion:
    """ELF file -> SFrame from its ``.eh_frame`` (or ``.debug_frame``).

    ``replace``: the obj and elf outputs replace an ``.sframe`` the file has;
    ``limits``: how far a compressed section may expand; ``cfi``: the file's CFI
    when the caller has read it already (one file lowered for several versions);
    ``view``: its section headers, likewise (a tree run opens each file once).
    """
    from .elf.cfi import cfi_of, cfi_section
    from .elf.symbols import function_names
    from .sframe.build import (
        eh_table,
        encode_sframe,
        lower_eh_frame,
        lower_fdes,
        require_sframe_abi,
    )

    if data is None:
        data = read_bytes(path)
    lowered = table = None
    if cfi is None:
        if view is None:  # (cfi_section's first step) once for the steps below too
            view = open_elf_file(path, data)
        # Named below: the table pass names only the functions the general path makes.
        found = cfi_section(path, data, limits, view=view, named=False)
        cfi = cfi_of(found, ())  # its FDEs below: read in one pass with the lowering
        arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
        if found.linked_eh_frame and arch.sframe_abi:
            address_size = 8 if view.is64 else 4
            names_of = partial(function_names, view)
            with decoding(path, found.name):
                # V2 (the default): the section's table in the same pass; else functions
                if version == 2 and pcrel:
                    table = eh_table(found.contents, found.address, address_size, names_of,
                                     cfi, arch, flex)
                if table is None:
                    found = found._replace(names=function_names(view))
                    lowered = lower_eh_frame(found.contents, found.address, address_size,
                                             found.names, cfi, arch, version, flex)
        if lowered is None and table is None:  # the FDEs read and named for lower_fdes
            cfi = cfi_of(found._replace(names=found.names or function_names(view)))
    else:
        arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    require_sframe_abi(arch, path)
    if table is not None:
        image, skips, fde_count = table
    else:
        if lowered is None:
            functions, skips = lower_fdes(cfi, arch, version, flex)
            fde_count = len(cfi.fdes)
        else:
            functions, skips, fde_count = lowered
        image = encode_sframe(functions, arch, version, pcrel)
    # An empty .sframe (binutils 2.45's Scrt1.o) holds nothing to keep: replaced
    # without --replace where there is something to write, else left as it is.
    replace = replace or (bool(image.functions) and _empty_sframe(data, view))
    address = 0
    if cfi.elf_type != "ET_REL":
        address = default_sframe_address(data, path, view) if sframe_address is None \
            else sframe_address
    release(data)  # its CFI and symbols are read: a mapped file's pages go back
    return ElfConversion(arch, path, image.functions, tuple(skips), image, "", cfi.elf_type,
                         fde_count, address, data, replace, view=view)


class ArchiveConversion(NamedTuple):
    """A static library converted member by member: the archive written back
    (``payload``), the conversions of the members that got a section, and the names of
    those kept as they were (not an object, no CFI, a section of their own, or nothing
    to describe)."""

    source: str
    converted: tuple[ElfConversion, ...]
    kept: tuple[str, ...]
    payload: bytes

    @property
    def skips(self) -> tuple[Skip, ...]:
        return tuple(skip for conversion in self.converted for skip in conversion.skips)


def convert_archive(source: str, data: bytes, version: int = 2, replace: bool = False,
                    limits: Limits = DEFAULT_LIMITS, flex: bool = True,
                    pcrel: bool = True) -> ArchiveConversion:
    """A static library with SFrame added to each relocatable object in it that has
    something to describe; every rewritten member verifies before the archive is built
    (``elf.archive``: names, order, dates and modes kept; the symbol index re-pointed).

    A member that already has ``.sframe`` is kept unless ``replace``; members are
    named ``LIB(MEMBER)`` in messages, as ld names them."""
    from .analysis.compare import check_rewritten
    from .elf.archive import read_archive, write_archive

    with decoding(source, "ar archive"):
        members = read_archive(data)
    contents: list[bytes] = []
    converted: list[ElfConversion] = []
    kept: list[str] = []
    for member in members:
        where = f"{source}({member.name})"
        payload = member.data
        if not member.special and is_elf(payload):
            with decoding(where):
                view = open_elf(payload, "ELF file")
            names = set(view.section_names)
            if view.elf_type == "ET_REL" and (".eh_frame" in names or ".debug_frame" in names) \
                    and (replace or not view.holds_sframe):
                conversion = convert_elf(where, payload, version, None, replace, limits,
                                         flex=flex, pcrel=pcrel)
                payload = conversion.obj()
                if payload is not member.data:
                    check_rewritten(where, payload, limits, member.data)
                    converted.append(conversion)
        if payload is member.data and not member.special:
            kept.append(member.name)
        contents.append(payload)
    with decoding(source, "ar archive"):
        archive = write_archive(members, contents)
    return ArchiveConversion(source, tuple(converted), tuple(kept), archive)


def object_arch(source: str, data: bytes, view: ElfView | None = None) -> Arch | None:
    """The target of the objects a conversion writes into: a relocatable object's own,
    a static library's first object member's; None for a linked file (no linker takes
    it in) or a library without an ELF member (``view``: an ELF file's, where the
    caller has it)."""
    if is_archive(data):
        from .elf.archive import read_archive

        with decoding(source, "ar archive"):
            members = read_archive(data)
        first = next((m for m in members if not m.special and is_elf(m.data)), None)
        return None if first is None else elf_arch(f"{source}({first.name})", first.data)
    with decoding(source):
        if (view or open_elf(data, "ELF file")).elf_type != "ET_REL":
            return None
    return elf_arch(source, data)


def _only_sframe(data: bytes, view: ElfView | None = None) -> bool:
    """An ELF file's only unwind information is ``.sframe`` (no DWARF CFI)."""
    try:
        view = view or open_elf(data, "ELF file")
    except DecodeError:
        return False  # convert_elf reports it, with the offset
    names = view.section_names
    return view.holds_sframe and ".eh_frame" not in names and ".debug_frame" not in names


def _empty_sframe(data: bytes, view: ElfView | None = None) -> bool:
    """An ELF file whose SFrame section is empty (0 bytes: no header, no FDE)."""
    return (view or open_elf(data, "ELF file")).empty_sframe() is not None


def convert_file(source: str, data: bytes, arch: str | Arch = "x86_64",
                 assembler: str | None = None, include_dir: str = ".", version: int = 2,
                 sframe_address: int | None = None, replace: bool = False,
                 source_kind: str = "auto", limits: Limits = DEFAULT_LIMITS,
                 flex: bool = True, launched: Launch | None = None,
                 pcrel: bool = True, kind: Kind | None = None,
                 view: ElfView | None = None) -> Conversion:
    """Any input -> SFrame: an ELF file (``arch`` is its own), a raw SFrame section, or
    assembly, told from the bytes (``kinds``; ``kind``: told already, as
    ``inputs.Input`` tells it); other kinds are refused in one line.

    For assembly the assembler is started before the directive parser (Lark) is
    loaded, so the two overlap.  ``source`` names the input in messages; ``flex``
    False: V3 without FLEX FDEs (``sframe.lower.lower``); ``launched``: the
    assembler's run started already (``cli.early``), taken over where it is the one
    this conversion starts; ``pcrel`` False: V2 without the errata-1 flag; ``view``:
    an ELF file's section headers, read by the caller (``open_elf_file``).
    """
    kind = refuse_unreadable(source, data, kind)
    if sframe_address is not None:
        check_sframe_address(data, source, sframe_address, kind)
    if source_kind == "sframe" or (source_kind == "auto" and (
            kind == Kind.sframe or (kind == Kind.elf and _only_sframe(data, view)))):
        return convert_sframe(source, data, version, sframe_address, limits, flex, pcrel)
    if kind == Kind.elf:
        return convert_elf(source, data, version, sframe_address, replace, limits, flex=flex,
                           pcrel=pcrel, view=view)
    from .frontend.macho_probe import darwin_text
    from .frontend.probe import Assembler, start_run

    text = data.decode("utf-8", "surrogateescape")
    target = as_arch(arch)
    runner = Assembler.from_string(assembler or target.default_assembler)
    run = start_run(text, source, target.comment_chars, runner, include_dir, data=data,
                    launched=launched)
    if darwin_text(text) and assembler is None:  # (looked for while it runs)
        run.job.cancel()
        raise Cfi2SframeError(source, "assembly for an Apple target (Mach-O sections): SFrame "
                                      "is for ELF; 'cfi2sframe compact' gives its compact "
                                      "unwind")
    return convert_probe(run, target, runner, version, flex, pcrel)


def verify_as_converted(path: str, data: bytes, limits: Limits = DEFAULT_LIMITS,
                        view: ElfView | None = None, cfi: Cfi | None = None
                        ) -> tuple[VerifyResult, int] | None:
    """``verify`` of the section ``cfi2sframe FILE --in-place`` would add to an ELF file
    without ``.sframe``, made in memory (``verify_elf``'s result and ABI id); None when
    it would write no section (nothing SFrame can describe).

    A linked file's section is checked as built for the address the conversion gives
    it, against the file's CFI, never placed in the file: where it goes, and whether
    that layout suits old kernels, is the rewrite's business (``elf.linked``), which
    checks the file it writes.  An object's is checked in the object it would write
    (its relocations with it).  ``view`` and ``cfi``: ``data``'s section headers and
    CFI, where the caller has read them (a tree run reads each once)."""
    from .analysis.compare import verify_elf
    from .sframe.load import SFrameBytes

    if cfi is not None and view is not None:  # an ELF file with DWARF CFI: convert_file's
        conversion: Conversion = convert_elf(path, data, limits=limits, cfi=cfi, view=view)
    else:
        conversion = convert_file(path, data, limits=limits, view=view)
    if conversion.empty or not isinstance(conversion, ElfConversion):
        return None
    if conversion.linked:
        section = SFrameBytes(path, ".sframe", conversion.raw(), conversion.sframe_address,
                              False, True, conversion.elf_type)
        return verify_elf(path, data, limits, made=section, view=view)
    payload = conversion.output(conversion.rewrite_form)
    if isinstance(payload, str):
        return None
    return verify_elf(path, bytes_of(payload), limits)


def rewrite_in_place(path: str, conversion: ElfConversion, data: bytes,
                     read_stat: os.stat_result, limits: Limits = DEFAULT_LIMITS,
                     preserve_dates: bool = False) -> Payload:
    """``--in-place``: the input file replaced by its converted copy, once the copy
    verifies as written; returns what was written (``files.bytes_of`` gives its bytes).

    A file with several names is converted append-only, so that it can be
    rewritten in its own inode (``files.rewrite``).
    """
    from .analysis.compare import check_rewritten

    if conversion.empty and not conversion.replace:
        return data  # nothing to describe: the file is left as it is
    payload = _in_place_payload(path, conversion, read_stat)

    def check(written: bytes) -> None:
        if conversion.empty:  # --replace took the old section out: nothing to verify
            with decoding(path):
                open_elf(written, "rewritten file")
        else:
            check_rewritten(path, written, limits, data)

    rewrite(path, data, read_stat, payload, preserve_dates, check)
    return payload


def _in_place_payload(path: str, conversion: ElfConversion,
                      read_stat: os.stat_result) -> Payload:
    """The file ``--in-place`` writes for ``conversion`` (append-only where the file has
    several names: ``files.rewrite`` writes it in its own inode)."""
    if read_stat.st_nlink > 1:
        conversion = conversion.laid_out(append_only=True)
    payload = conversion.output(conversion.rewrite_form)
    if isinstance(payload, str):
        raise Cfi2SframeError(path, "--in-place rewrites ELF files only")
    return payload


def already_converted(path: str, data: bytes, read_stat: os.stat_result, version: int = 2,
                      old_kernels: OldKernels = "keep", limits: Limits = DEFAULT_LIMITS,
                      flex: bool = True, pcrel: bool = True) -> ElfConversion | None:
    """The conversion of an ELF file with ``.sframe`` whose ``--in-place --replace``
    output, with these options, is the file itself byte for byte and verifies; None
    when there is none (the file is not, or not exactly, what this conversion writes,
    or it cannot be converted).

    ``--resume`` asks it of a file with no record to say it is done: a run killed
    between a file's rewrite and its record left the file converted.  Replacing our
    own section gives the same bytes again (in place, where they were), so the file
    is then exactly what this conversion writes, whoever wrote it; any other
    ``.sframe`` (GNU ld's, another version's, other options') or a changed file
    gives other bytes.  No mark in the file or note before its rename is needed,
    which a file replaced since could not fool either; it costs one conversion in
    memory, paid only for such files.  A file with several names is converted
    append-only, which adds again: never recognised (it stays ``has-sframe``)."""
    from .analysis.compare import check_rewritten

    try:
        conversion = convert_file(path, data, version=version, replace=True, limits=limits,
                                  flex=flex, pcrel=pcrel)
        if not isinstance(conversion, ElfConversion) or conversion.empty:
            return None
        conversion = conversion.laid_out(old_kernels=old_kernels)
        if not same_bytes(_in_place_payload(path, conversion, read_stat), data):
            return None
        check_rewritten(path, data, limits, data)
    except (Cfi2SframeError, DecodeError, InternalError):
        return None  # not converted by this conversion: it would not be converted at all
        # (one that does not verify is converted again, whose check then says so)
    return conversion


def archive_already_converted(path: str, data: bytes, version: int = 2,
                              limits: Limits = DEFAULT_LIMITS, flex: bool = True,
                              pcrel: bool = True) -> ArchiveConversion | None:
    """``already_converted`` for a static library: its conversion with ``--replace``,
    where that gives the library itself byte for byte and describes something (each
    member it rewrites verifies in ``convert_archive``); else None."""
    try:
        archive = convert_archive(path, data, version, True, limits, flex, pcrel)
    except (Cfi2SframeError, DecodeError):
        return None
    if not any(c.functions for c in archive.converted) or archive.payload != data:
        return None
    return archive
