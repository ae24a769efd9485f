"""cfi2sframe: lower DWARF call-frame information into SFrame stack-trace sections.

The public API, for test harnesses and tools::

    from cfi2sframe import convert_asm, timelines_from_asm, decode_sframe
    result = convert_asm(open("foo.s").read(), "foo.s")
    section = result.raw()            # SFrame V2 bytes
    for skip in result.skips:         # functions left out, and why
        print(skip.reason, skip.detail)

Functions take an architecture as an ``Arch`` or its name ("x86_64", "aarch64",
"s390x", "i386"); docs/library.md lists the calls.

Names are imported on first use, so that the command line can start the
assembler before the heavier modules (Lark) are loaded.
"""

from __future__ import annotations

import importlib

# Not ``typing`` itself: this module is on the way to the assembler's early start
# (``cli.early``), and importing ``typing`` costs more than that path's own code.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Conversion": "convert", "convert_asm": "convert", "convert_archive": "convert",
    "sframe_from_eh_frame": "convert",
    "encode_sframe": "sframe.build",
    "lower_all": "sframe.build", "order_functions": "sframe.build",
    "timelines_from_asm": "convert",
    "Cfi2SframeError": "errors", "CfiError": "errors", "DecodeError": "errors",
    "AssemblerFailed": "errors",
    "CfaExpr": "model", "CfaReg": "model", "Location": "model", "Row": "model",
    "Rule": "model", "RuleKind": "model", "Timeline": "model", "FunctionSpan": "model",
    "SframeReason": "reasons", "CompactReason": "reasons", "Unrepresentable": "reasons",
    "DecodedSection": "sframe.decode", "decode_sframe": "sframe.decode:decode",
    "Fre": "sframe.format", "SFrameFunction": "sframe.format",
    "REASONS": "sframe.lower", "Skip": "sframe.lower", "lower": "sframe.lower",
    "FrameRules": "sframe.rules", "RuleFre": "sframe.rules", "describe": "sframe.text",
    "Loc": "sframe.recovery", "SectionImage": "sframe.encode",
    "fre_rules": "sframe.rules",
    "Arch": "arch.base", "get_arch": "arch",
    "CompactFunction": "compact.lower", "lower_compact": "compact.lower",
    "compact_asm": "compact.inputs", "compact_elf": "compact.inputs",
    "build_unwind_info": "compact.table_writer", "TableFunction": "compact.table_writer",
    "read_unwind_info": "compact.table", "lookup_unwind_info": "compact.table:lookup",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'cfi2sframe' has no attribute '{name}'")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(f".{module_name}", __name__), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
