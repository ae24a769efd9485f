"""Assembly for an Apple target names its target by its registers: clang-14's and
zig's (clang 22) ``-S`` output for x86-64 and arm64 macOS converts with ``compact``
and no ``--arch``; ``--arch`` overrides.  The oracle is llvm-mc's own
``__compact_unwind`` row for the same text."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cfi2sframe, require, require_module

C = """int g(int);
int f(int x) { return g(x) + 1; }
int big(int a, int b) { int v[64]; for (int i = 0; i < 64; i++) v[i] = g(i + a);
  return v[b & 63]; }
"""
COMPILERS = {
    "clang": (["clang-14", "-target"], {"x86_64": "x86_64-apple-macosx10.15",
                                        "arm64": "arm64-apple-macosx11"}),
    # zig's clang 22 writes epilogue CFI by default on arm64 (asynchronous tables),
    # which LLVM 14's encoder turns into DWARF mode: the synchronous form compares
    "zig": ([sys.executable, "-m", "ziglang", "cc", "-fno-asynchronous-unwind-tables",
             "-target"], {"x86_64": "x86_64-macos", "arm64": "aarch64-macos"}),
}


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_darwin_assembly_names_its_target(compiler: str, arch: str, tmp_path: Path) -> None:
    require("llvm-mc", "clang-14")
    if compiler == "zig":
        require_module("ziglang")
    command, targets = COMPILERS[compiler]
    source, asm = tmp_path / "m.c", tmp_path / "m.s"
    source.write_text(C)
    subprocess.run([*command, targets[arch], "-O2", "-S", str(source), "-o", str(asm)],
                   check=True, capture_output=True)
    proc = cfi2sframe("compact", str(asm), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"(\d+) rows as computed here, (\d+) differ, (\d+) not", proc.stdout)
    assert found and found.groups() == ("2", "0", "0"), proc.stdout
    other = {"x86_64": "aarch64", "arm64": "x86_64"}[arch]
    proc = cfi2sframe("compact", str(asm), "--arch", other, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
