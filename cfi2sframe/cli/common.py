"""What several subcommands share: argument types and writing the output."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..arch import get_arch
from ..errors import Cfi2SframeError
from ..files import write_output

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time before Python 3.12
    Subparsers = argparse._SubParsersAction


def arch_name(text: str) -> str:
    """argparse type of ``--arch``: a known architecture or alias, as its canonical name."""
    try:
        return get_arch(text).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def address(text: str) -> int:
    """argparse type of an address option (``0x...`` or decimal)."""
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an address") from None


def parse_pc(text: str) -> int:
    """An address given as a positional argument (a located error, not a usage one)."""
    try:
        return int(text, 0)
    except ValueError:
        raise Cfi2SframeError("", f"'{text}' is not an address (use 0x... or decimal)") from None


def write(output: str, payload: bytes | str, mode_of: str | None = None) -> None:
    """``files.write_output`` with a one-line error naming the output."""
    try:
        write_output(output, payload, mode_of)
    except OSError as exc:
        raise Cfi2SframeError(output, f"cannot write output: {exc.strerror or exc}") from None
