"""verify's check in the compiled core (``csrc/analysis_compare.c``: ``agree`` per function,
``verify_scan`` over a whole linked file; objects: test_core_verify_objects.py) against
the full check it shortens
(``analysis/compare.py``), which stays the reference and the fallback.

The core may only ever say "these agree" where the full check finds nothing, and
leave the rest to it: so ``verify_elf`` must give the same result, field for field
(every mismatch with its ranges and rules, every function without SFrame, every FDE
only in SFrame), with the core and without it.  Inputs: installed libraries of three
targets (AArch64 and big-endian s390x from the cross toolchains) made V2 and V3 here,
a gcc program whose ld 2.40 wrote V1 with a PC-mask PLT (left to the full check), and
the same files with bytes of either section changed at random, where the full check
finds mismatches or raises: the core must agree with it on each.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.analysis import compare
from cfi2sframe.analysis.compare import verify_elf
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.elf.compressed import DEFAULT_LIMITS
from cfi2sframe.elf.read import open_elf
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.sframe.decode import FdeTable, decode
from cfi2sframe.sframe.load import sframe_bytes
from tests.conftest import (
    cfi2sframe,
    compiled_core,
    converted_libraries,
    readelf_section,
    require,
)
from tests.support.full_checks import full_checks_counted

LIBRARIES = {"x86_64": "/usr/lib/x86_64-linux-gnu/libz.so.1",
             "x86_64-libc": "/usr/lib/x86_64-linux-gnu/libc.so.6",
             "aarch64": "/usr/aarch64-linux-gnu/lib/libc.so.6",
             "s390x": "/usr/s390x-linux-gnu/lib/libc.so.6"}


def _outcome(path: str, data: bytes, compiled: object) -> object:
    """verify_elf's result, or the one-line error it raises."""
    try:
        return verify_elf(path, data, compiled=compiled)  # type: ignore[arg-type]
    except Cfi2SframeError as exc:
        return f"error: {exc}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """name -> a linked file with .sframe (V2 and V3 made here, V1 from ld 2.40)."""
    require("gcc", "as")
    folder = tmp_path_factory.mktemp("verify")
    out = {name: made.read_bytes()
           for name, made in converted_libraries(folder, LIBRARIES, "elf").items()}
    source = folder / "p.c"
    source.write_text("#include <stdio.h>\nint f(int x) { if (x > 3) puts(\"big\"); "
                      "return x + 1; }\nint main(int c, char **v) { printf(\"%d\\n\", f(c)); "
                      "return 0; }\n")
    program = folder / "p"
    subprocess.run(["gcc", "-O1", "-Wa,--gsframe", str(source), "-o", str(program)],
                   check=True, capture_output=True)
    out["gcc-v1"] = program.read_bytes()
    return out


def test_the_core_gives_the_full_checks_result_on_real_files(files: dict[str, bytes],
                                                              tmp_path: Path, report) -> None:
    core = compiled_core()
    scanned = []
    for name, data in files.items():
        full = _outcome(name, data, None)
        assert not isinstance(full, str), full
        assert _outcome(name, data, core) == full, name
        result = full[0]
        assert result.agrees and not result.extra, name
        # ld 2.40 gives its .plt.got no SFrame FDE: the one gap, and only there.
        gaps = []
        if name == "gcc-v1":
            (tmp_path / name).write_bytes(data)
            gaps = [readelf_section(tmp_path / name, ".plt.got")[0]]
        assert [t.start for t in result.uncovered] == gaps, name
        scanned.append(f"{name} {result.checked}")
    report("verify, compiled core = full check: " + ", ".join(scanned) + " functions")


def test_the_scan_confirms_most_functions_itself(files: dict[str, bytes]) -> None:
    """The scan runs on linked files (V1, V2 and V3) and leaves few functions to the full
    check (PLTs, functions beyond the replay)."""
    core = compiled_core()
    for name, data in files.items():
        raw = sframe_bytes(name, data)
        view = open_elf(data, name)
        table = FdeTable(raw.data, raw.address, raw.v1_pcrel)
        with full_checks_counted() as calls:
            arch = arch_for_machine(view.machine, name, not view.little_endian)
            result = compare._scan(name, view, raw, table, table.section([]), arch,
                                   DEFAULT_LIMITS, core)
        assert result is not None, name
        if name.startswith("s390x"):  # its CFI saves the caller's SP (r15): beyond the
            continue  # replay's subset, so the full check takes those functions
        assert len(calls) <= max(8, result.checked // 100), (name, calls[:10])


def _section(data: bytes, name: str) -> tuple[int, int]:
    found = open_elf(data, "f").section(name)
    assert found is not None
    return found.offset, found.size


# Trials per file: libz's 123 functions are checked fast; a libc takes 0.3 s a trial.
TRIALS = {"x86_64-v2": 160, "x86_64-v3": 160, "aarch64-v3": 24, "s390x-v2": 24}


@pytest.mark.parametrize("target", sorted(TRIALS))
def test_changed_bytes_give_the_full_checks_result(files: dict[str, bytes], target: str,
                                                   report) -> None:
    """Random bytes changed in the FRE sub-section, the FDE index and .eh_frame: the
    core's answer is the full check's, mismatches and errors alike."""
    core = compiled_core()
    data = files[target]
    rng = random.Random(target)
    sframe_at, sframe_size = _section(data, ".sframe")
    eh_at, eh_size = _section(data, ".eh_frame")
    differing = errors = 0
    trials = TRIALS[target]
    for trial in range(trials):
        mutated = bytearray(data)
        if trial % 4 == 3:  # .eh_frame: instructions, pointers, lengths, CIEs
            where = eh_at + rng.randrange(eh_size)
        elif trial % 4 == 2:  # anywhere in .sframe, the header and index included
            where = sframe_at + rng.randrange(sframe_size)
        else:  # the FRE sub-section's second half: FRE starts, info bytes, words
            where = sframe_at + sframe_size // 2 + rng.randrange(sframe_size // 2)
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutated[where] = rng.randrange(256)
            where += rng.randrange(1, 6)
        full = _outcome(target, bytes(mutated), None)
        assert _outcome(target, bytes(mutated), core) == full, (trial, hex(where))
        if isinstance(full, str):
            errors += 1
        elif not full[0].ok or full[0].extra or full[0].missing:
            differing += 1
    assert differing >= trials // 4, differing  # the changes reached what is compared
    report(f"verify, compiled core = full check on {trials} damaged copies of {target}: "
           f"{differing} with problems found, {errors} errors")


def test_agree_per_function_gives_the_full_checks_result(files: dict[str, bytes]) -> None:
    """``verify_cfi``'s per-function check (relocatable objects, a caller's CFI) on the
    same files: the same result as without the core."""
    core = compiled_core()
    for name in ("x86_64-v2", "aarch64-v3", "s390x-v3"):
        data = files[name]
        raw = sframe_bytes(name, data)
        section = decode(raw.data, raw.address)
        cfi = read_elf_cfi(name, data)
        arch = arch_for_machine(cfi.machine, name, cfi.big_endian)
        assert compare.verify_cfi(section, cfi, arch, compiled=core) == \
            compare.verify_cfi(section, cfi, arch, compiled=None), name


def test_an_object_is_scanned_as_if_linked(tmp_path: Path) -> None:
    """An object (functions placed per section) is scanned too, each section at a base
    of its own; its result is the same with and without the core."""
    require("gcc", "as")
    source = tmp_path / "o.c"
    source.write_text("int a(int x) { return x * 2; }\nint b(int x) { return a(x) + 1; }\n")
    obj = tmp_path / "o.o"
    subprocess.run(["gcc", "-O0", "-c", str(source), "-o", str(obj)], check=True)
    assert cfi2sframe(str(obj), "--in-place", "-q", cwd=tmp_path).returncode == 0
    data = obj.read_bytes()
    full = _outcome(str(obj), data, None)
    assert _outcome(str(obj), data, compiled_core()) == full
    assert not isinstance(full, str) and full[0].ok and full[0].checked == 2
    raw = sframe_bytes(str(obj), data)
    view = open_elf(data, str(obj))
    table = FdeTable(raw.data, raw.address, raw.v1_pcrel)
    arch = arch_for_machine(view.machine, str(obj), not view.little_endian)
    assert compare._scan(str(obj), view, raw, table, table.section([]), arch,
                         DEFAULT_LIMITS, compiled_core()) == full[0]._replace(layout=())
