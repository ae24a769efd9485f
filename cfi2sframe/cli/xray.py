"""``dump`` and ``verify`` of an XRay trace, called by those subcommands for one;
``--binary`` names the instrumented program or library that wrote it (its
``xray_instr_map``: function names, IDs it lacks, unwind coverage of its sleds)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from ..errors import DecodeError, decoding
from ..files import read_input, release
from ..xray.check import check_trace
from ..xray.expand import events
from ..xray.instr_map import InstrMap, id_names, open_instr_map
from ..xray.records import Header, read_header
from ..xray.text import dump_lines, header_line, json_records


def dump(path: str, data: bytes, binary: str | None = None, demangle: bool = True,
         as_json: bool = False) -> int:
    """The header, then every record's line as it is read; where the trace cannot be
    read on (cut short), what came before is printed and a located error follows.
    ``binary``: each function's name beside its ID."""
    names = id_names(open_instr_map(binary), demangle) if binary else None
    write = sys.stdout.write
    with decoding(path):
        header = read_header(data)
        if as_json:
            _dump_json(data, header, names)
            return 0
        write(header_line(header) + "\n")
        for line in dump_lines(data, header, names, lambda offset: release(data, 0, offset)):
            write(line)
    return 0


def _dump_json(data: bytes, header: Header, names: dict[int, str] | None) -> None:
    """One JSON object, streamed: the header and every record; where the trace cannot
    be read on, the object still closes, with the error, before the located error."""
    import json  # (JSON output only: its import is a start-up cost)

    write = sys.stdout.write
    write('{"header": ' + json.dumps(header._asdict()) + ', "records": [')
    separator = "\n "
    try:
        for record in json_records(data, header, names):
            write(separator + json.dumps(record))
            separator = ",\n "
    except DecodeError as exc:
        write(f'\n], "error": {json.dumps({"offset": exc.offset, "message": exc.message})}}}\n')
        raise
    write("\n]}\n")


def verify(path: str, data: bytes, binary: str | None = None, demangle: bool = True,
           quiet: bool = False) -> int:
    """Every problem, one line each; exit 1 if there is one.  ``binary``: also the
    function IDs its map lacks, and whether its SFrame or ``.eh_frame`` covers every
    entry and exit sled (a sled neither covers is a problem)."""
    image = read_input(binary) if binary else b""
    instr_map = open_instr_map(binary, image) if binary else None
    with decoding(path):
        header = read_header(data)
        count = 0
        for finding in check_trace(data):
            count += 1
            where = "header" if finding.block == 0 and finding.tid is None else \
                (f"thread {finding.tid}" if finding.block == 0 else
                 f"block {finding.block} (thread {finding.tid})")
            print(f"{path}: at byte {finding.offset:#x}: {where}: {finding.message}")
    if binary and instr_map is not None:
        for offset, tid, func_id in _unknown_ids(data, instr_map):
            count += 1
            print(f"{path}: at byte {offset:#x}: thread {tid}: function ID #{func_id} is not "
                  f"in {binary}'s instrumentation map ({len(instr_map.functions)} functions)")
        count += _coverage(binary, image, instr_map, demangle, quiet)
    words = header_line(header).split(",")[0].removeprefix("XRay ")
    if count:
        print(f"{path}: FAILED: {words}, {count} problem{'s' * (count != 1)}")
        return 1
    print(f"{path}: ok: {words}, version {header.version}, no problems")
    return 0


def _unknown_ids(data: bytes, instr_map: InstrMap) -> Iterator[tuple[int, int, int]]:
    """(byte offset, thread, ID) of the first record of each function ID the map does
    not hold, as far as the trace reads (check_trace has named where it stops)."""
    seen: set[int] = set()
    try:
        for event in events(data):
            if event.kind.startswith("function") and event.func_id not in seen:
                seen.add(event.func_id)
                if instr_map.function(event.func_id) is None:
                    yield event.offset, event.tid, event.func_id
    except DecodeError:
        return


def _coverage(binary: str, data: bytes, instr_map: InstrMap, demangle: bool,
              quiet: bool) -> int:
    """Print each function's entry and exit sleds against the binary's SFrame and
    ``.eh_frame`` FDEs, then the totals; return how many sleds neither covers."""
    from ..elf.cfi import read_elf_cfi
    from ..elf.read import open_elf_file
    from ..sframe.decode import FdeTable
    from ..sframe.load import sframe_bytes
    from ..xray.coverage import sled_coverage

    view = open_elf_file(binary, data)
    sframe = None
    if view.holds_sframe:  # the FDE index alone: no FRE is decoded
        raw = sframe_bytes(binary, data)
        with decoding(binary, raw.section_name):
            sframe = FdeTable(raw.data, raw.address, raw.v1_pcrel).ranges()
    eh = None
    if view.section(".eh_frame") is not None:
        cfi = read_elf_cfi(binary, data)
        eh = [(fde.start, fde.size) for fde in cfi.fdes] \
            if cfi.section_name == ".eh_frame" else None
    names = id_names(instr_map, demangle)
    found = sled_coverage(instr_map, sframe, eh)
    problems = in_sframe = in_eh = total = 0
    for cover in found:
        sleds = cover.sleds
        has_sframe = sum(bool(s.sframe) for s in sleds)
        has_eh = sum(bool(s.eh_frame) for s in sleds)
        total, in_sframe, in_eh = total + len(sleds), in_sframe + has_sframe, in_eh + has_eh
        name = f"#{cover.function.func_id} {names[cover.function.func_id]}"
        if not quiet:
            print(f"{binary}: {name}: {len(sleds)} entry/exit sleds, SFrame covers "
                  f"{_of(has_sframe, len(sleds), sframe, '.sframe')}, .eh_frame "
                  f"{_of(has_eh, len(sleds), eh, '.eh_frame')}")
        for sled in cover.uncovered:
            problems += 1
            print(f"{binary}: {name}: {sled.sled.kind} sled at {sled.sled.address:#x}: "
                  "neither SFrame nor .eh_frame covers it")
    print(f"{binary}: {len(found)} instrumented functions, {total} entry/exit sleds: "
          f"SFrame covers {_of(in_sframe, total, sframe, '.sframe')}, .eh_frame "
          f"{_of(in_eh, total, eh, '.eh_frame')}, neither {problems}")
    return problems


def _of(count: int, total: int, ranges: object, section: str) -> str:
    """``count of total``, or that the file has no such section."""
    return f"{count} of {total}" if ranges is not None else f"none (no {section} section)"
