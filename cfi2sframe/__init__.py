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
assembler before the heavier modules (Lark) are loaded.  Type checkers read the
imports under ``TYPE_CHECKING`` and ``__all__`` instead, and never see the module
``__getattr__``: to them each name has its own type, and a name not exported is an
error (``tests/system/test_library_types.py``).
"""

from __future__ import annotations

import importlib

# Not ``typing`` itself: this module is on the way to the assembler's early start
# (``cli.early``), and importing ``typing`` costs more than that path's own code.
# Type checkers take any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .analysis.compact_unwind import compact_walk
    from .analysis.process import Module, load_module, modules_from_maps
    from .analysis.unwind import PC, modules_walk, sframe_walk
    from .arch import get_arch
    from .arch.base import Arch
    from .compact.encoding import decode as decode_compact
    from .compact.encoding import describe as describe_compact
    from .compact.encoding import encode as encode_compact
    from .compact.inputs import compact_asm, compact_elf, placed_functions
    from .compact.lower import CompactFunction, lower_compact
    from .compact.rules import Code as CompactCode
    from .compact.rules import CompactRules
    from .compact.step import step as step_compact
    from .compact.table import lookup as lookup_unwind_info
    from .compact.table import read_unwind_info
    from .compact.table_writer import TableFunction, build_unwind_info
    from .convert import (
        ArchiveConversion,
        AsmConversion,
        Conversion,
        ElfConversion,
        convert_archive,
        convert_asm,
        convert_elf,
        convert_sframe,
        sframe_from_dwarf,
        sframe_from_eh_frame,
        timelines_from_asm,
    )
    from .elf.compressed import Limits
    from .errors import AssemblerFailed, Cfi2SframeError, CfiError, DecodeError
    from .inputs import Input, input_of, open_input
    from .kinds import Kind as InputKind
    from .model import CfaExpr, CfaReg, FunctionSpan, Location, Row, Rule, RuleKind, Timeline
    from .reasons import CompactReason, SframeReason, Unrepresentable
    from .sections import extract_section
    from .sframe.build import encode_sframe, lower_all, order_functions
    from .sframe.decode import DecodedFde, DecodedFre, DecodedSection
    from .sframe.decode import decode as decode_sframe
    from .sframe.encode import SectionImage
    from .sframe.format import Fre, SFrameFunction
    from .sframe.lower import REASONS, Skip, lower
    from .sframe.recovery import Loc
    from .sframe.rules import FrameRules, RuleFre, fre_rules
    from .sframe.text import describe
    from .xray.check import Finding as XrayFinding
    from .xray.check import check_trace as check_xray
    from .xray.expand import Event as XrayEvent
    from .xray.expand import events as xray_events
    from .xray.instr_map import InstrMap as XrayInstrMap
    from .xray.instr_map import Sled as XraySled
    from .xray.instr_map import XrayFunction
    from .xray.instr_map import id_names as xray_function_names
    from .xray.instr_map import open_instr_map as open_xray_instr_map
    from .xray.instr_map import read_instr_map as xray_instr_map
    from .xray.records import Header as XrayHeader
    from .xray.records import read_header as xray_header
    from .xray.stacks import Note as XrayNote
    from .xray.stacks import Stacks as XrayStacks
    from .xray.stacks import StackTotals as XrayStackTotals
    from .xray.stacks import build_stacks as xray_stacks

__version__ = "0.1.0"

# Each exported name -> "module" (the same name there) or "module:name"; the same
# names as the imports above (tests/unit/test_public_api.py holds them equal).
_EXPORTS = {
    "extract_section": "sections",
    "Module": "analysis.process", "load_module": "analysis.process",
    "modules_from_maps": "analysis.process",
    "sframe_walk": "analysis.unwind", "modules_walk": "analysis.unwind",
    "compact_walk": "analysis.compact_unwind", "PC": "analysis.unwind",
    "get_arch": "arch",
    "Arch": "arch.base",
    "decode_compact": "compact.encoding:decode", "encode_compact": "compact.encoding:encode",
    "describe_compact": "compact.encoding:describe",
    "compact_asm": "compact.inputs", "compact_elf": "compact.inputs",
    "placed_functions": "compact.inputs",
    "CompactFunction": "compact.lower", "lower_compact": "compact.lower",
    "CompactRules": "compact.rules", "CompactCode": "compact.rules:Code",
    "step_compact": "compact.step:step",
    "read_unwind_info": "compact.table", "lookup_unwind_info": "compact.table:lookup",
    "build_unwind_info": "compact.table_writer", "TableFunction": "compact.table_writer",
    "Conversion": "convert", "AsmConversion": "convert", "ElfConversion": "convert",
    "ArchiveConversion": "convert", "convert_asm": "convert", "convert_elf": "convert",
    "convert_sframe": "convert", "convert_archive": "convert", "timelines_from_asm": "convert",
    "sframe_from_eh_frame": "convert", "sframe_from_dwarf": "convert",
    "Limits": "elf.compressed",
    "Cfi2SframeError": "errors", "CfiError": "errors", "DecodeError": "errors",
    "AssemblerFailed": "errors",
    "Input": "inputs", "input_of": "inputs", "open_input": "inputs", "InputKind": "kinds:Kind",
    "CfaExpr": "model", "CfaReg": "model", "Location": "model", "Row": "model",
    "Rule": "model", "RuleKind": "model", "Timeline": "model", "FunctionSpan": "model",
    "SframeReason": "reasons", "CompactReason": "reasons", "Unrepresentable": "reasons",
    "encode_sframe": "sframe.build", "lower_all": "sframe.build",
    "order_functions": "sframe.build",
    "DecodedSection": "sframe.decode", "DecodedFde": "sframe.decode",
    "DecodedFre": "sframe.decode", "decode_sframe": "sframe.decode:decode",
    "SectionImage": "sframe.encode",
    "Fre": "sframe.format", "SFrameFunction": "sframe.format",
    "REASONS": "sframe.lower", "Skip": "sframe.lower", "lower": "sframe.lower",
    "Loc": "sframe.recovery",
    "FrameRules": "sframe.rules", "RuleFre": "sframe.rules", "fre_rules": "sframe.rules",
    "describe": "sframe.text",
    "XrayFinding": "xray.check:Finding", "check_xray": "xray.check:check_trace",
    "XrayEvent": "xray.expand:Event", "xray_events": "xray.expand:events",
    "XrayHeader": "xray.records:Header", "xray_header": "xray.records:read_header",
    "XrayInstrMap": "xray.instr_map:InstrMap", "XraySled": "xray.instr_map:Sled",
    "XrayFunction": "xray.instr_map", "xray_function_names": "xray.instr_map:id_names",
    "open_xray_instr_map": "xray.instr_map:open_instr_map",
    "xray_instr_map": "xray.instr_map:read_instr_map",
    "XrayNote": "xray.stacks:Note", "XrayStacks": "xray.stacks:Stacks",
    "XrayStackTotals": "xray.stacks:StackTotals", "xray_stacks": "xray.stacks:build_stacks",
}

__all__ = [
    "Arch", "ArchiveConversion", "AsmConversion", "AssemblerFailed", "CfaExpr", "CfaReg",
    "Cfi2SframeError", "CfiError", "CompactCode", "CompactFunction", "CompactReason",
    "CompactRules", "Conversion", "DecodeError", "DecodedFde", "DecodedFre", "DecodedSection",
    "ElfConversion", "FrameRules", "Fre", "FunctionSpan", "Limits", "Loc", "Location",
    "Module", "PC", "REASONS", "Row", "Rule", "RuleFre", "RuleKind", "SFrameFunction",
    "SectionImage", "SframeReason", "Skip", "TableFunction", "Timeline", "Unrepresentable",
    "build_unwind_info", "compact_asm", "compact_elf", "compact_walk", "convert_archive",
    "convert_asm", "convert_elf", "convert_sframe", "decode_compact", "decode_sframe",
    "describe", "describe_compact", "encode_compact", "encode_sframe", "extract_section",
    "fre_rules", "get_arch",
    "load_module", "lookup_unwind_info", "lower", "lower_all", "lower_compact",
    "modules_from_maps", "modules_walk", "order_functions", "placed_functions",
    "read_unwind_info", "sframe_from_dwarf", "sframe_from_eh_frame", "sframe_walk",
    "step_compact", "timelines_from_asm",
    "XrayEvent", "XrayFinding", "XrayHeader", "XrayNote", "XrayStackTotals", "XrayStacks",
    "check_xray", "xray_events", "xray_header", "xray_stacks",
    "XrayFunction", "XrayInstrMap", "XraySled", "open_xray_instr_map", "xray_function_names",
    "xray_instr_map",
    "Input", "InputKind", "input_of", "open_input",
]

if not TYPE_CHECKING:  # hidden from type checkers: an unknown name must be an error
    def __getattr__(name: str) -> object:
        target = _EXPORTS.get(name)
        if target is None:
            raise AttributeError(f"module 'cfi2sframe' has no attribute '{name}'")
        module_name, _, attr = target.partition(":")
        value = getattr(importlib.import_module(f".{module_name}", __name__),
                        attr or name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
