"""XRay traces (issue 41): our reader, dump and verify against ``llvm-xray-14`` on
real traces made here by clang-14's runtime (FDR single- and multi-threaded, with
arguments, tail calls, recursion and a custom event; basic mode), in both byte
orders.  Expected values come from ``llvm-xray-14 fdr-dump`` (records and deltas) and
``convert -f yaml`` (every expanded record, compared as multisets: its order is a
hash map's), or are derived by hand from the format document and the notes
(/work/shared/reference/xray-notes.md) where llvm-xray does not check or is wrong.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cfi2sframe.xray.expand import Event, events
from tests.conftest import cfi2sframe, require
from tests.support.xray_programs import make_traces
from tests.support.xray_traces import block, custom, func, header, meta


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require("clang-14", "llvm-xray-14")
    folder = tmp_path_factory.mktemp("xray")
    made = make_traces(folder)
    made["fdr-be"] = folder / "fdr-threads.be"
    made["fdr-be"].write_bytes(big_endian(made["fdr-threads"].read_bytes()))
    return made


def big_endian(data: bytes) -> bytes:
    """A little-endian FDR version-5 trace with every field byte-swapped, laid out from
    the format document and the notes (not by our reader): what a big-endian producer
    writes.  llvm-xray reads it as big-endian when little-endian fails."""
    out = bytearray(struct.pack(">HHIQQ8s", *struct.unpack("<HHIQQ8s", data[:32])))
    at = 32
    fields = {0: "i", 2: "HQ", 3: "Q", 4: "qi", 5: "ii", 6: "Q", 7: "Q", 8: "iiH", 9: "i"}
    while at < len(data):
        if data[at] & 1:
            kind, layout = data[at] >> 1, fields[data[at] >> 1]
            size = struct.calcsize("<" + layout)
            values = struct.unpack_from("<" + layout, data, at + 1)
            body = struct.pack(">" + layout, *values) + data[at + 1 + size:at + 16]
            out += data[at:at + 1] + body
            at += 16
            if kind in (5, 8):  # the payload, as it is
                out += data[at:at + values[0]]
                at += values[0]
        else:
            out += struct.pack(">II", *struct.unpack_from("<II", data, at))
            at += 8
    return bytes(out)


def _escaped(raw: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b not in (39, 92) else f"\\x{b:02x}"
                   for b in raw)


def llvm_fdr_dump(path: Path) -> list[str]:
    """``llvm-xray-14 fdr-dump``'s records, one per line, without the angle brackets
    (a custom event's raw payload escaped as our dump escapes it)."""
    out = subprocess.run(["llvm-xray-14", "fdr-dump", str(path)], capture_output=True,
                         check=True).stdout
    lines = []
    # (fdr-dump leaves the ">" off a typed event's line)
    for line in re.findall(rb"^<(.*?)>?\n", out, re.M):
        payload = re.match(rb"(.*data = ')(.*)'$", line, re.S)
        lines.append(payload[1].decode() + _escaped(payload[2]) + "'" if payload
                     else line.decode())
    return lines


def our_dump(path: Path) -> list[str]:
    proc = cfi2sframe("dump", str(path), cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    header, *records = proc.stdout.splitlines()
    assert header.startswith("XRay "), header
    return [line.split("  ", 1)[1] for line in records]


@pytest.mark.parametrize("name", ["fdr", "fdr-threads", "fdr-be"])
def test_dump_matches_llvm_fdr_dump(traces: dict[str, Path], name: str) -> None:
    """fdr-dump reads a big-endian trace's records little-endian (its extents become
    4611967493404098560 bytes and it fails): the big-endian trace must give the lines
    fdr-dump gives for the little-endian original it was made from."""
    ours = our_dump(traces[name])
    theirs = llvm_fdr_dump(traces["fdr-threads" if name == "fdr-be" else name])
    assert ours == theirs
    assert len(ours) >= 12
    if name != "fdr-threads":
        assert any(line.startswith("Function Tail Exit") for line in ours) == (name == "fdr")
    else:
        assert any(line.startswith("Custom Event") for line in ours)
        assert len({line for line in ours if line.startswith("Thread ID")}) == 3


def _yaml_records(path: Path) -> Counter[tuple[object, ...]]:
    import yaml

    # A big-endian trace: llvm-xray reads it after its little-endian reading fails
    # (and says so on stderr); its YAML on stdout is complete.
    out = subprocess.run(["llvm-xray-14", "convert", "-f", "yaml", str(path)],
                         capture_output=True).stdout.decode("utf-8", "replace")
    doc = yaml.safe_load(out)
    return Counter(_key(r["kind"], 0 if r["kind"].endswith("event") else r["func-id"],
                        r["tsc"], r["cpu"], r["thread"], r.get("process", 0), r.get("args", []),
                        str(r["data"]).encode("latin-1"), r["type"])
                   for r in doc["records"])


def _key(kind: str, func_id: int, tsc: int, cpu: int, tid: int, pid: int,
         args: list[int], data: bytes, event_type: int) -> tuple[object, ...]:
    return (kind, func_id, tsc, cpu, tid, pid, tuple(args), data, event_type)


def _ours(event: Event) -> tuple[object, ...]:
    return _key(str(event.kind), event.func_id, event.tsc, event.cpu, event.tid, event.pid,
                list(event.args), event.data, event.event_type)


@pytest.mark.parametrize("name", ["fdr", "fdr-threads", "fdr-be", "basic"])
def test_expanded_records_match_llvm_convert(traces: dict[str, Path], name: str) -> None:
    """Every expanded record (TSC base plus deltas, CPU, thread, process, arguments,
    payloads) as ``convert -f yaml``, as multisets.  llvm-xray gives an event the
    previous function's ID; ours is 0 (an event belongs to no function), so events are
    compared without it."""
    ours = Counter(_ours(e) for e in events(traces[name].read_bytes()))
    assert ours == _yaml_records(traces[name])
    assert sum(ours.values()) >= 8
    assert any(key[6] for key in ours), "no record with arguments"


@pytest.mark.parametrize("name", ["fdr", "fdr-threads", "fdr-be", "basic"])
def test_real_traces_verify_clean(traces: dict[str, Path], name: str) -> None:
    proc = cfi2sframe("verify", str(traces[name]), cwd=traces[name].parent)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("no problems")
    if name not in ("basic", "fdr-be"):  # fdr-dump cannot read big-endian records
        check = subprocess.run(["llvm-xray-14", "fdr-dump", "--verify", str(traces[name])],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_the_typed_event_shortfall_is_named(traces: dict[str, Path]) -> None:
    """LLVM 14's runtime adds only a typed event's payload to the buffer extents (the
    notes): the flushed buffer lacks its last 16 bytes and here ends inside the custom
    event.  fdr-dump fails there ("Invalid offset for a custom event record") and its
    verifier says nothing of the cause; verify names it."""
    path = traces["fdr-typed"]
    llvm = subprocess.run(["llvm-xray-14", "fdr-dump", "--verify", str(path)],
                          capture_output=True, text=True, errors="replace")
    assert llvm.returncode != 0 and "Invalid offset for a custom event record" in llvm.stderr
    proc = cfi2sframe("verify", str(path), cwd=path.parent)
    assert proc.returncode == 1
    (problem,) = [line for line in proc.stdout.splitlines() if "typed event" in line]
    assert "LLVM 14's runtime adds only the payload" in problem
    assert "the last 16 bytes of this buffer were never written" in problem


def test_every_command_names_a_trace(traces: dict[str, Path]) -> None:
    """A trace is told by its header: the commands that do not read one say what it
    is instead of "not assembly, ELF, an archive or SFrame"."""
    for argv in (["stats"], ["lookup"], []):
        extra = ["0x1"] if argv == ["lookup"] else ["-o", "out.sframe"] if not argv else []
        proc = cfi2sframe(*argv, str(traces["fdr"]), *extra, cwd=traces["fdr"].parent)
        assert proc.returncode != 0
        assert "an XRay trace (FDR version 5)" in proc.stdout + proc.stderr, argv


def _hand_made(version: int, buffer_size: int = 0, payload: bytes = b"ab\0c") -> bytes:
    """Two buffers in the version's layout (format document and notes): arguments, a
    custom event, a TSCWrap, a tail exit; from version 5 a typed event."""
    body1 = (func(3, 1, 0) + meta(6, struct.pack("<Q", 41)) + meta(6, struct.pack("<Q", 7))
             + func(0, 2, 10) + custom(version, payload, tsc=1020, delta=4, cpu=3)
             + func(1, 2, 5) + meta(3, struct.pack("<Q", 5000)) + func(1, 1, 6))
    body2 = func(0, 3, 1) + func(2, 3, 2) + func(0, 4, 1) + func(1, 4, 1)
    if version >= 5:
        body2 += meta(8, struct.pack("<iiH", 3, 2, 9)) + b"xyz"
    return (header(version=version, size=buffer_size)
            + block(7, body1, version=version, buffer_size=buffer_size)
            + block(8, body2, version=version, buffer_size=buffer_size, tsc=2000))


VERSIONS = [(1, 0), (1, 256), (2, 0), (3, 0), (4, 0), (5, 0)]


@pytest.mark.parametrize(("version", "buffer_size"), VERSIONS)
def test_every_version_expands_as_llvm_convert(tmp_path: Path, version: int,
                                               buffer_size: int) -> None:
    """convert -f yaml as the oracle, with one correction: a version 1-3 custom event
    has no CPU field, and llvm-xray gives it CPU 0; it ran on the CPU the last
    NewCPUId named (1 here), which is what we give."""
    require("llvm-xray-14")
    path = tmp_path / f"v{version}.fdr"
    # llvm-xray reads a version-1 buffer's padding as 8-byte records and drops them:
    # a padding of a length not a multiple of 8 (a 4-byte payload's) fails it
    # ("Invalid offset for a function record"), see the test below.
    path.write_bytes(_hand_made(version, buffer_size, b"ab\0cdefg" if buffer_size else b"ab\0c"))
    want = _cpu_corrected(_yaml_records(path), version)
    assert Counter(_ours(e) for e in events(path.read_bytes())) == want
    assert sum(want.values()) == 9 + (version >= 5)
    assert cfi2sframe("verify", str(path), cwd=tmp_path).returncode == 0


def _cpu_corrected(records: Counter[tuple[object, ...]], version: int
                   ) -> Counter[tuple[object, ...]]:
    """llvm-xray's records with a version 1-3 custom event's CPU (0: a field the
    record lacks) the CPU the last NewCPUId named, 1 in ``_hand_made``."""
    want: Counter[tuple[object, ...]] = Counter()
    for key, count in records.items():
        if key[0] == "custom-event" and version <= 3:
            assert key[3] == 0
            key = key[:3] + (1,) + key[4:]
        want[key] += count
    return want


def test_version_1_padding_of_any_length_is_skipped(tmp_path: Path) -> None:
    """The format document: after EndOfBuffer, "seek past the remaining buffer_size".
    llvm-xray fails where the padding is not a multiple of 8 bytes; the records are
    those of the same trace without padding (which llvm-xray reads)."""
    require("llvm-xray-14")
    padded, plain = tmp_path / "padded", tmp_path / "plain"
    padded.write_bytes(_hand_made(1, 256))
    plain.write_bytes(_hand_made(1))
    assert subprocess.run(["llvm-xray-14", "convert", "-f", "yaml", str(padded)],
                          capture_output=True).returncode != 0
    assert Counter(_ours(e) for e in events(padded.read_bytes())) == \
        _cpu_corrected(_yaml_records(plain), 1)
    assert cfi2sframe("verify", str(padded), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(("version", "buffer_size"), VERSIONS)
def test_every_version_dumps_as_llvm_fdr_dump(tmp_path: Path, version: int,
                                              buffer_size: int) -> None:
    """fdr-dump's lines, but where fdr-dump is wrong: it reads a version-1 buffer's
    padding after EndOfBuffer as function records (``Function Enter: #0 delta = +0``,
    and misaligned ones after), where the format document says to skip it (and
    llvm-xray convert does); and it prints ``cpu = 0`` for custom events of versions
    1 to 3, which have no CPU field."""
    require("llvm-xray-14")
    path = tmp_path / f"v{version}.fdr"
    path.write_bytes(_hand_made(version, buffer_size))
    ours = our_dump(path)
    if buffer_size:  # fdr-dump of the same records without the padding
        (tmp_path / "unpadded").write_bytes(_hand_made(version))
        path = tmp_path / "unpadded"
    theirs = [line.replace(", cpu = 0,", ",") if version <= 3 else line
              for line in llvm_fdr_dump(path)]
    assert ours == theirs
    assert any(line.startswith("Custom Event") for line in ours)
