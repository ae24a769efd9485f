"""Coverage-guided fuzzing (tests/support/fuzz.py, atheris) within a CI budget.

Each target runs from seeds made of real inputs (our sections, GNU as objects,
csmith assembly, a real shared library's CFI) for a bounded number of
executions, with libFuzzer's memory limit; any uncaught exception or input
slower than the bound fails the test.  Longer runs: python tests/support/fuzz.py TARGET
-max_total_time=3600 DIR.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.core import compiled
from tests.conftest import at_least, require, require_module
from tests.corpus import csmith_asm

ROOT = Path(__file__).resolve().parents[2]
# Executions per target in CI (the cheap decoders get more); scale with the variable.
RUNS = {"sframe": 200000, "compact": 200000, "elf": 20000, "cfi": 20000, "asm": 5000,
        "rewrite": 30000, "compressed": 50000, "macho": 12000, "unwind_info": 20000,
        "xray": 20000}
SCALE = float(os.environ.get("CFI2SFRAME_FUZZ_SCALE", "1"))
# The compiled core's entry points (cfi2sframe/_core.pyi) each target must call, with
# mutated real inputs, where the core is built (measured: what each reaches from its
# seeds); together every entry point (test_every_entry_point_has_a_target).
ENTRY_POINTS = {"sframe": {"decode_fres", "fde_index", "sframe_dump", "sframe_check"},
                "elf": {"eh_fdes", "relocate", "lower_fdes", "fdes_v2", "fres_bytes",
                        "sframe_check"},
                "cfi": {"eh_fdes", "fast_fres", "probe_symbols", "cfi_rows", "replay_params",
                        "row_state_ids", "placed_spans", "compact_rows_text",
                        "function_names"},
                "asm": {"scan_cfi", "with_labels"},
                "rewrite": {"eh_fdes", "agree", "verify_scan", "stats_scan", "rela_within",
                            "eh_functions", "start_writeback", "close_later", "copy_later",
                            "eh_table_v2", "place_fdes"},
                "compressed": {"lower_fdes"},
                "macho": {"eh_fdes", "fde_extents", "image_entries", "unwind_info_entries"},
                "unwind_info": {"unwind_info_text", "unwind_info_entries", "unwind_info_rows",
                                "unwind_info_build", "unwind_info_misses"},
                "compact": set(),
                "xray": {"xray_labels", "xray_dump", "xray_stacks"}}
SEED_FLOORS = {"sframe": 8, "elf": 4, "cfi": 8, "compact": 6, "asm": 9, "rewrite": 12,
               "compressed": 5, "macho": 6, "unwind_info": 3, "xray": 4}


def _seeds(target: str, folder: Path) -> None:
    folder.mkdir()
    examples = sorted((ROOT / "examples").glob("*.s"))
    corpus = csmith_asm(range(1, 2)) if target == "asm" else []  # 5 files (every flag set)
    if target == "asm":
        for path in examples + corpus:
            shutil.copy(path, folder / path.name)
        return
    if target in ("macho", "unwind_info"):
        _macho_seeds(target, folder)
        return
    if target == "xray":  # clang-14's runtime's traces: FDR (threads, events) and basic
        require("clang-14")
        from tests.support.xray_programs import make_traces

        for name, trace in make_traces(folder.parent).items():
            shutil.copy(trace, folder / name)
        return
    objects = []
    for path in examples:
        obj = folder.parent / (path.stem + ".o")
        subprocess.run(["as", str(path), "-o", str(obj)], check=True)
        objects.append(obj)
    if target == "elf":
        for obj in objects:
            shutil.copy(obj, folder / obj.name)
    elif target == "cfi":  # the assembler's objects with probe labels, and libraries
        from cfi2sframe.frontend.probe import with_probes
        from cfi2sframe.frontend.scan import scan

        for path, obj in zip(examples, objects, strict=True):
            text = path.read_text()
            probed = folder.parent / f"{path.stem}.probed.s"
            probed.write_text(with_probes(text, scan(text, path.name, "#").items, None))
            subprocess.run(["as", str(probed), "-o", str(folder / f"{path.stem}.probed.o")],
                           check=True)
            subprocess.run(["ld", "-shared", "--unresolved-symbols=ignore-all", str(obj),
                            "-o", str(folder / f"{obj.stem}.so")], check=True,
                           capture_output=True)
    elif target == "rewrite":  # objects, and programs and libraries ld links from them
        for path in examples[:2]:  # .debug_frame: verify's per-function check (agree)
            source = folder.parent / f"{path.stem}.debug.s"
            source.write_text("\t.cfi_sections .debug_frame\n" + path.read_text())
            subprocess.run(["as", str(source), "-o", str(folder / f"{path.stem}.debug.o")],
                           check=True)
        # a program gcc links with libc: dynamic relocations, which a grown program
        # header table's check reads (rela_within)
        (folder.parent / "main.c").write_text("int puts(const char *);\n"
                                              "int main(void) { return puts(\"\"); }\n")
        subprocess.run(["gcc", "-O2", str(folder.parent / "main.c"), "-o",
                        str(folder / "main.exe")], check=True)
        for obj in objects:
            shutil.copy(obj, folder / obj.name)
            for kind, flags in (("exe", ["-e", "0"]), ("so", ["-shared"])):
                subprocess.run(["ld", *flags, "--unresolved-symbols=ignore-all", str(obj),
                                "-o", str(folder / f"{obj.stem}.{kind}")], check=True,
                               capture_output=True)
    elif target == "compressed":  # .debug_frame compressed by objcopy, and the bomb
        for path in examples[:4]:
            source = folder.parent / f"{path.stem}.debug.s"
            source.write_text("\t.cfi_sections .debug_frame\n" + path.read_text())
            compress(source, folder / f"{path.stem}.zlib.o")
        compress(make_bomb(folder.parent, 300_000_000), folder / "bomb.o")
    elif target == "sframe":
        for obj in objects:
            subprocess.run([sys.executable, "-m", "cfi2sframe", str(obj), "-o",
                            str(folder / (obj.stem + ".sframe"))], check=True)
            subprocess.run([sys.executable, "-m", "cfi2sframe", str(obj), "--sframe-version",
                            "3", "-o", str(folder / (obj.stem + ".v3.sframe"))], check=True)
    else:  # compact: (arch byte, encoding, code bytes) from real encodings
        for i, encoding in enumerate([0x01030161, 0x02060C0A, 0x03044400, 0x04000101,
                                      0x02003000, 0x01030129]):
            code = b"\x53\x48\x81\xec\x88\x13\x00\x00"
            (folder / f"s{i}").write_bytes(bytes([i % 3]) + encoding.to_bytes(4, "little")
                                           + code)


def _macho_seeds(target: str, folder: Path) -> None:
    """Mach-O files clang-14, llvm-lipo and ld64.lld-14 write (test_macho's C++ with a
    personality and an LSDA, and an executable of 1200 functions in regular and
    compressed pages): the files themselves, or their __unwind_info sections."""
    require("clang-14", "llvm-mc", "llvm-lipo-14", "ld64.lld-14")
    from cfi2sframe.macho.read import open_macho
    from tests.differential.test_macho import _dylib, _many_functions, _objects

    work = folder.parent / "macho"
    work.mkdir()
    objects = _objects(work)
    images = [_dylib(objects, "x86_64"), _dylib(objects, "arm64"),
              _many_functions(work, 1200, True), _many_functions(work, 300, False)]
    if target == "macho":
        for path in [*objects.values(), *images]:
            shutil.copy(path, folder / path.name)
        return
    for image in images:
        view = open_macho(image.read_bytes())
        section = view.section("__TEXT", "__unwind_info")
        assert section is not None
        (folder / image.name).write_bytes(view.section_data(section))


def compress(source: Path, out: Path) -> None:
    """Assemble ``source`` and compress its debug sections with objcopy (zlib)."""
    plain = out.with_suffix(".plain.o")
    subprocess.run(["as", str(source), "-o", str(plain)], check=True)
    subprocess.run(["objcopy", "--compress-debug-sections=zlib", str(plain), str(out)],
                   check=True)
    plain.unlink()


def make_bomb(folder: Path, zeros: int) -> Path:
    """Issue 16's decompression bomb: one function whose .debug_frame holds ``zeros``
    zero bytes before its CIE and FDE (300 MB give a 292 KB object once compressed)."""
    source = folder / f"bomb{zeros}.s"
    source.write_text("\t.cfi_sections .debug_frame\n\t.text\n\t.globl f\n"
                      "\t.type f, @function\nf:\n\t.cfi_startproc\n\tret\n"
                      f"\t.cfi_endproc\n\t.section .debug_frame,\"\",@progbits\n"
                      f"\t.skip {zeros}\n")
    return source


@pytest.mark.parametrize("target", ["sframe", "elf", "cfi", "compact", "asm", "rewrite",
                                    "compressed", "macho", "unwind_info", "xray"])
def test_fuzz_target_within_budget(target: str, tmp_path: Path, report) -> None:
    require("as", "ld", "objcopy", "gcc", "csmith")
    require_module("atheris")
    seeds = tmp_path / "seeds"
    _seeds(target, seeds)
    seed_count = len(list(seeds.iterdir()))
    # Seeds per target, counted from the inputs above (4 examples/*.s):
    # a target fuzzed from fewer seeds than these lost its real inputs.
    at_least(f"{target} seeds", seed_count, SEED_FLOORS[target])
    called = tmp_path / "entry-points"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "fuzz.py"), target,
                           f"-runs={int(RUNS[target] * SCALE)}", "-max_total_time=120",
                           "-rss_limit_mb=2048", "-timeout=10", str(seeds)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                                   CFI2SFRAME_FUZZ_ENTRY_POINTS=str(called)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    if compiled() is not None:  # (CFI2SFRAME_CORE=python: no entry point is called)
        reached = set(called.read_text().split()) if called.exists() else set()
        assert ENTRY_POINTS[target] <= reached, f"not reached: {ENTRY_POINTS[target] - reached}"
    done = re.search(r"Done (\d+) runs in (\d+) second", proc.stderr)
    assert done, proc.stderr[-2000:]
    report(f"fuzz {target}: {done.group(1)} executions in {done.group(2)} s, no finding "
           f"(seeds: {seed_count} real inputs; compiled entry points: "
           f"{', '.join(sorted(ENTRY_POINTS[target])) or 'none'})")


def _declared_entry_points() -> set[str]:
    """The functions cfi2sframe/_core.pyi declares: the compiled core's entry points."""
    tree = ast.parse((ROOT / "cfi2sframe" / "_core.pyi").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_entry_point_has_a_target() -> None:
    """Every function of the compiled core is fuzzed by some target (which asserts it
    calls it above), and _core.pyi lists every function the built module has."""
    declared = _declared_entry_points()
    assert set().union(*ENTRY_POINTS.values()) == declared
    core = compiled()
    if core is not None:
        assert {name for name in dir(core) if callable(getattr(core, name))
                and not name.startswith("_")} == declared
