"""A user's script that uses every name ``cfi2sframe`` exports, each as docs/library.md
says: ``tests/system/test_library_types.py`` runs ``mypy --strict`` on it (no error)
and runs it (``python3 library_use.py FILE.s``, FILE.s: examples/frame_pointer.s).
Not a test module itself: its checks are what a user would write."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import cfi2sframe
from cfi2sframe import (
    PC,
    REASONS,
    Arch,
    ArchiveConversion,
    AsmConversion,
    AssemblerFailed,
    CfaExpr,
    CfaReg,
    Cfi2SframeError,
    CfiError,
    CompactCode,
    CompactFunction,
    CompactReason,
    CompactRules,
    Conversion,
    DecodedFde,
    DecodedFre,
    DecodedSection,
    DecodeError,
    ElfConversion,
    FrameRules,
    Fre,
    FunctionSpan,
    Input,
    InputKind,
    Limits,
    Loc,
    Location,
    Module,
    Row,
    Rule,
    RuleFre,
    RuleKind,
    SectionImage,
    SFrameFunction,
    SframeReason,
    Skip,
    TableFunction,
    Timeline,
    Unrepresentable,
    XrayEvent,
    XrayFinding,
    XrayFunction,
    XrayHeader,
    XrayInstrMap,
    XrayNote,
    XraySled,
    XrayStacks,
    XrayStackTotals,
    build_unwind_info,
    check_xray,
    compact_asm,
    compact_elf,
    compact_walk,
    convert_archive,
    convert_asm,
    convert_elf,
    convert_sframe,
    decode_compact,
    decode_sframe,
    describe,
    describe_compact,
    encode_compact,
    encode_sframe,
    extract_section,
    fre_rules,
    get_arch,
    input_of,
    load_module,
    lookup_unwind_info,
    lower,
    lower_all,
    lower_compact,
    modules_from_maps,
    modules_walk,
    open_input,
    open_xray_instr_map,
    order_functions,
    placed_functions,
    read_unwind_info,
    sframe_from_dwarf,
    sframe_from_eh_frame,
    sframe_walk,
    step_compact,
    timelines_from_asm,
    xray_events,
    xray_function_names,
    xray_header,
    xray_instr_map,
    xray_stacks,
)


def sframe(text: str) -> None:
    """Convert, lower, encode and read back: the SFrame side."""
    arch: Arch = get_arch("x86_64")
    conversion: Conversion = convert_asm(text, "foo.s")
    assert isinstance(conversion, AsmConversion)
    raw: bytes = conversion.raw()
    skips: tuple[Skip, ...] = conversion.skips
    reasons: list[SframeReason] = [skip.reason for skip in skips]
    assert all(str(reason) in REASONS for reason in reasons)
    timelines: tuple[Timeline, ...] = timelines_from_asm(text, "foo.s", arch)
    span: FunctionSpan = FunctionSpan(timelines[0].name, timelines[0].section,
                                      timelines[0].start, timelines[0].size)
    assert span.name == timelines[0].name
    lowered: SFrameFunction | Skip = lower(timelines[0], arch, version=3)
    if isinstance(lowered, SFrameFunction):
        for fre in lowered.fres:
            assert isinstance(fre, (Fre, RuleFre))
            rules: FrameRules = fre.frame_rules(arch)
            words: str = describe(rules, arch.sframe_abi)
            assert words
    functions, left_out = lower_all(timelines, "x86_64")
    ordered, _sorted = order_functions(functions)
    image: SectionImage = encode_sframe(ordered, arch)
    assert not left_out and bytes(image) == raw
    section: DecodedSection = decode_sframe(raw)
    fde: DecodedFde = section.fdes[0]
    first: DecodedFre = fde.fres[0]
    cfa = fre_rules(section, fde, first).cfa
    assert isinstance(cfa, Loc) and cfa.reg == arch.sp
    regs = {arch.sp: 0x1000, PC: fde.start_address}
    frames, why = sframe_walk(section, regs, {0x1000: 0x4000}.__getitem__)
    assert len(frames) == 2 and frames[1][PC] == 0x4000, why


def by_hand() -> None:
    """A timeline written by hand, as a JIT would."""
    ra = (16, Rule(RuleKind.offset, -8))
    rows = (Row(0, CfaReg(7, 8), (ra,)), Row(1, CfaExpr(b"\x77\x08"), (ra,)))
    jitted = Timeline("jitted", "", 0x1000, 8, rows, 16, Location("<jit>"))
    result = lower(jitted, "x86_64")
    assert isinstance(result, Skip) and result.reason == SframeReason.cfa_expression


def compact(text: str) -> None:
    """The compact unwind side: encodings, their rules, libunwind's step, the table."""
    functions: list[CompactFunction] = compact_asm(text, "foo.s", "x86_64")
    timelines = timelines_from_asm(text, "foo.s")
    assert lower_compact(timelines[0], "x86_64") == functions[0]
    encoding = functions[0].rows[0].encoding
    rules: CompactRules | Unrepresentable[CompactReason] = decode_compact(encoding, "x86_64")
    assert isinstance(rules, CompactRules)
    assert encode_compact(rules, get_arch("x86_64")) == encoding
    assert describe_compact(encoding, "x86_64", CompactCode(b"")).startswith("RBP frame")
    caller = step_compact(rules, {6: 0x2000, 7: 0x1f00}, {0x2000: 0x3000, 0x2008: 0x4000,
                                                          0x1ff8: 7}.__getitem__, 7, 16)
    assert caller[16] == 0x4000
    dwarf = decode_compact(0x03000000, "aarch64")  # arm64 DWARF mode
    assert isinstance(dwarf, Unrepresentable) and dwarf.reason == CompactReason.dwarf_mode
    table = build_unwind_info([TableFunction(0x1000, 0x20, encoding, None, None, None)],
                              "x86_64")
    assert read_unwind_info(table.data).entries[0].encoding == encoding
    found = lookup_unwind_info(table.data, 0x1010)
    assert found is not None and found.encoding == encoding
    frames, _why = compact_walk(functions, lambda address, size: b"", "x86_64",
                                {PC: functions[0].start + 8, 6: 0x2000, 7: 0x1f00},
                                {0x2000: 0x3000, 0x2008: 0x4000, 0x1ff8: 7}.__getitem__,
                                7, 6, 16,
                                max_frames=2)
    assert frames[1][PC] == 0x4000


def signatures() -> None:
    """The calls that need files a script of this size does not make, by their types."""
    trace_events: Callable[[bytes], Iterator[XrayEvent]] = xray_events
    trace_header: Callable[[bytes], XrayHeader] = xray_header
    trace_check: Callable[[bytes], Iterator[XrayFinding]] = check_xray
    trace = b""  # an empty file is no trace: each call says so
    instr_map: Callable[[bytes, str], XrayInstrMap] = xray_instr_map
    open_map: Callable[[str], XrayInstrMap] = open_xray_instr_map
    names: Callable[[XrayInstrMap, bool], dict[int, str]] = xray_function_names
    empty = XrayInstrMap((), (), 0, "none")
    assert names(empty, True) == {} and empty.function(1) is None
    sled_fields, function_fields = XraySled._fields, XrayFunction._fields
    assert "func_id" in sled_fields and "symbol" in function_fields
    try:
        instr_map(b"", "nothing")  # not ELF: a DecodeError
    except DecodeError:
        pass
    try:
        open_map("/nonexistent")  # a located error
    except Cfi2SframeError:
        pass
    no_calls: XrayStacks = xray_stacks(iter(()), per_thread=True)
    totals: list[XrayStackTotals] = no_calls.stacks
    assert not totals and not no_calls.notes[(XrayNote.tail_exit, 1)]
    for call in (trace_events, trace_header, trace_check):
        try:
            list(call(trace)) if call is not trace_header else call(trace)
        except DecodeError:
            pass
    elf: Callable[..., ElfConversion] = convert_elf
    elf_sframe: Callable[..., ElfConversion] = convert_sframe
    archive: Callable[..., ArchiveConversion] = convert_archive
    made: Callable[[str, bytes], tuple[bytes, int]] = sframe_from_dwarf
    from_eh: Callable[..., tuple[bytes, tuple[Skip, ...]]] = sframe_from_eh_frame
    module: Callable[..., Module] = load_module
    maps: Callable[..., list[Module]] = modules_from_maps
    walk: Callable[..., tuple[list[dict[int, int]], str]] = modules_walk
    placed: Callable[..., tuple[list[TableFunction], list[str]]] = placed_functions
    elf_compact: Callable[[str, bytes], list[CompactFunction]] = compact_elf
    limits = Limits(max_bytes=1 << 20, max_ratio=10)
    section: Callable[..., bytes] = extract_section
    errors: tuple[type[Exception], ...] = (Cfi2SframeError, AssemblerFailed, CfiError,
                                           DecodeError)
    assert all((section, elf, elf_sframe, archive, made, from_eh, module, maps, walk, placed,
                elf_compact, limits, errors))
    assert cfi2sframe.__version__


def one_way_in(path: str) -> None:
    """Any input opened once and told what it is; what reads it follows from its kind."""
    opened: Input = open_input(path)
    assert opened.kind == InputKind.text and not opened.is_elf and opened.elf_arch is None
    again = input_of(path, opened.data)
    assert again == opened and not (again.is_archive or again.is_compact_unwind
                                    or again.is_xray)


if __name__ == "__main__":
    source = open(sys.argv[1]).read()
    one_way_in(sys.argv[1])
    sframe(source)
    by_hand()
    compact(source)
    signatures()
    print("ok")
