"""What several subcommands share: argument types and writing the output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Container, Sequence

from ..arch import get_arch
from ..errors import Cfi2SframeError, decoding
from ..files import Payload, StartedCopy, write_output
from ..typed import TYPE_CHECKING
from .stdout import StdoutFailed

if TYPE_CHECKING:  # the ELF modules are imported where a command reads ELF
    from ..analysis.process import Module
    from ..elf.compressed import Limits
    from ..elf.read import ElfView
    from ..inputs import Input
    from ..sframe.load import LoadedSFrame
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time before Python 3.12
    Subparsers = argparse._SubParsersAction


def arch_name(text: str) -> str:
    """argparse type of ``--arch``: a known architecture or alias, as its canonical name."""
    try:
        return get_arch(text).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


ADDRESS_LIMIT = 1 << 64  # every address a 64-bit file can hold is below it


def address(text: str) -> int:
    """argparse type of an address option (``0x...`` or decimal): one a 64-bit file can
    hold, else no file could be read or written at it."""
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value < ADDRESS_LIMIT:
        raise argparse.ArgumentTypeError(f"'{text}' is not an address (0 to "
                                         f"{ADDRESS_LIMIT - 1:#x})")
    return value


def count(text: str) -> int:
    """argparse type of a number of things, 1 or more."""
    value = int(text) if text.isdecimal() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of 1 or more")
    return value


def parse_pc(text: str) -> int:
    """An address given as a positional argument (a located error, not a usage one)."""
    try:
        return int(text, 0)
    except ValueError:
        raise Cfi2SframeError("", f"'{text}' is not an address (use 0x... or decimal)") from None


def write(output: str, payload: Payload | str, mode_of: str | None = None,
          started: StartedCopy | None = None) -> None:
    """``files.write_output`` with a one-line error naming the output."""
    try:
        write_output(output, payload, mode_of, started)
    except OSError as exc:
        if output == "-":
            raise StdoutFailed(exc) from None
        raise Cfi2SframeError(output, f"cannot write output: {exc.strerror or exc}") from None


def add_module_options(p: argparse.ArgumentParser) -> None:
    """``--module FILE@ADDRESS`` (repeatable) and ``--maps FILE``: a process's files."""
    p.add_argument("--module", action="append", default=[], metavar="FILE@ADDRESS",
                   help="a file of the process and its load bias (runtime address minus "
                        "its own; 0 for a -no-pie program); repeatable. A file without "
                        ".sframe gets one made from its DWARF CFI, in memory")
    p.add_argument("--maps", metavar="FILE",
                   help="the process's /proc/PID/maps (or what 'snapshot' of unwind "
                        "--gdb-script writes): every ELF file it maps, at its bias")


def modules_of(args: argparse.Namespace) -> list[Module]:
    """The modules ``--maps`` and ``--module`` name, in that order."""
    from ..analysis.process import load_module, modules_from_maps, parse_module
    from ..convert import sframe_from_dwarf

    modules = modules_from_maps(args.maps, sframe_from_dwarf) if args.maps else []
    return modules + [load_module(*parse_module(text), sframe_from_dwarf)
                      for text in args.module]


def _size(text: str) -> int:
    """argparse type of a byte count: 123, 64K, 512M, 2G."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number, unit = text.rstrip("KMGkmg"), text[len(text.rstrip("KMGkmg")):].upper()
    if not number.isdigit() or unit not in units:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (e.g. 300M, 2G)")
    return int(number) * units[unit]


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """``--max-section-size`` and ``--max-section-ratio``: how far a compressed section
    may expand (docs/safety.md)."""
    from ..elf.compressed import Limits

    default = Limits()
    p.add_argument("--max-section-size", type=_size, default=default.max_bytes, metavar="SIZE",
                   help="refuse a compressed section that expands beyond SIZE bytes "
                        "(K, M, G; default: 1G)")
    p.add_argument("--max-section-ratio", type=count, default=default.max_ratio,
                   metavar="N", help="refuse a compressed section that expands beyond N "
                                     f"times its file's size (default: {default.max_ratio})")


def limits_of(args: argparse.Namespace) -> Limits:
    from ..elf.compressed import Limits

    return Limits(args.max_section_size, args.max_section_ratio)


def sframe_or_made(source: Input, as_readelf: bool = False,
                   pcs: Sequence[int] | None = None, raw_address: int = 0) -> LoadedSFrame:
    """The file's ``.sframe``; for an ELF file without one but with DWARF CFI, the
    section cfi2sframe makes of it, in memory (V3, as ``--module`` walks such files),
    with a note saying so on standard error."""
    from ..elf.read import open_elf_file
    from ..sframe.load import LoadedSFrame, load_sframe

    path, data = source.path, source.data
    if source.is_elf:
        view = open_elf_file(path, data)
        names = set(view.section_names)
        cfi = next((n for n in (".eh_frame", ".debug_frame") if n in names), None)
        if not view.holds_sframe and cfi is not None:
            from ..convert import sframe_from_dwarf
            from ..sframe.decode import decode

            raw, address = sframe_from_dwarf(path, data)
            print(f"{path}: note: {no_sframe(view)}; this is the SFrame V3 cfi2sframe "
                  f"makes from its {cfi} (in memory)", file=sys.stderr)
            with decoding(path, ".sframe (made)"):
                section = decode(raw, address)
            return LoadedSFrame(path, ".sframe", section, True, view.elf_type)
    return load_sframe(path, data, as_readelf, raw_address, pcs=pcs)


def no_sframe(view: ElfView) -> str:
    """Why a file's SFrame is made in memory, in words."""
    empty = view.empty_sframe()
    return "no .sframe section" if empty is None else \
        f"its {empty.name} is empty (0 bytes: no SFrame FDEs)"


def function_names_of(source: Input, values: Container[int] | None = None
                      ) -> dict[tuple[str, int], str]:
    """(section or "", start) -> function symbol of an ELF file (``values``: at these
    addresses only); none for a raw section."""
    if not source.is_elf:
        return {}
    from ..elf.read import open_elf_file
    from ..elf.symbols import function_names

    return function_names(open_elf_file(source.path, source.data), values)


def number_or_none(text: str) -> int | None:
    """A PC given as a number (``0x...`` or decimal), else None."""
    try:
        return int(text, 0)
    except ValueError:
        return None


def address_of(text: str, starts: dict[str, int], path: str) -> int:
    """A PC given as a number, a function symbol or SYMBOL+OFFSET (``starts``: each
    symbol's start; in an object the offset in the symbol's section, as every address
    of an object is)."""
    number = number_or_none(text)
    if number is not None:
        return number
    symbol, _, offset = text.partition("+")
    if symbol not in starts:
        raise Cfi2SframeError(path, f"'{text}' is neither an address (0x... or decimal) nor "
                                    "a function symbol of the file")
    return starts[symbol] + (parse_pc(offset) if offset else 0)
