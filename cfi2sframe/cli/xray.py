"""``dump`` and ``verify`` of an XRay trace, called by those subcommands for one."""

from __future__ import annotations

import sys

from ..errors import decoding
from ..xray.check import check_trace
from ..xray.records import read_header
from ..xray.text import dump_lines, header_line


def dump(path: str, data: bytes) -> int:
    """The header, then every record's line as it is read; where the trace cannot be
    read on (cut short), what came before is printed and a located error follows."""
    write = sys.stdout.write
    with decoding(path):
        header = read_header(data)
        write(header_line(header) + "\n")
        for line in dump_lines(data, header):
            write(line)
    return 0


def verify(path: str, data: bytes) -> int:
    """Every problem, one line each; exit 1 if there is one."""
    with decoding(path):
        header = read_header(data)
        count = 0
        for finding in check_trace(data):
            count += 1
            where = "header" if finding.block == 0 and finding.tid is None else \
                (f"thread {finding.tid}" if finding.block == 0 else
                 f"block {finding.block} (thread {finding.tid})")
            print(f"{path}: at byte {finding.offset:#x}: {where}: {finding.message}")
    words = header_line(header).split(",")[0].removeprefix("XRay ")
    if count:
        print(f"{path}: FAILED: {words}, {count} problem{'s' * (count != 1)}")
        return 1
    print(f"{path}: ok: {words}, version {header.version}, no problems")
    return 0
