"""V3 for readers without FLEX (``--no-flex``): a real DRAP function gcc writes (CFA on
r10, then an expression) is a FLEX FDE in plain V3, left out as ``flex-needed`` with
``--no-flex``; the kernel consumer check names FLEX use.  Expectations from the V3
spec (only FLEX FDEs hold a CFA on a register other than SP/FP) and the DWARF gcc
wrote, read in the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cfi2sframe.sframe.load import load_sframe
from tests.conftest import cfi2sframe, require

DRAP_C = r"""
#include <string.h>
#include <alloca.h>
__attribute__((noinline)) void use(char *p) { __asm__ volatile("" :: "r"(p) : "memory"); }
__attribute__((noinline)) int realign(int n) {
    char buf[64] __attribute__((aligned(64)));
    char *dyn = alloca(n);
    memset(buf, n, sizeof buf);
    use(buf); use(dyn);
    return buf[3];
}
int main(int argc, char **argv) { (void)argv; return realign(argc) & 1; }
"""


def _program(tmp_path: Path) -> Path:
    require("gcc")
    source = tmp_path / "drap.c"
    source.write_text(DRAP_C)
    asm = subprocess.run(["gcc", "-O2", "-S", "-o", "-", str(source)], capture_output=True,
                         text=True, check=True).stdout
    body = asm[asm.index("realign:"):]
    body = body[:body.index(".cfi_endproc")]
    assert ".cfi_def_cfa 10, 0" in body  # gcc's DRAP: the premise of this test
    program = tmp_path / "drap"
    subprocess.run(["gcc", "-O2", "-o", str(program), str(source)], check=True)
    return program


def run(path: Path, *args: str, verify: bool = False) -> subprocess.CompletedProcess:
    command = ("verify", *args, str(path)) if verify else (str(path), *args)
    return cfi2sframe(*command, cwd=path.parent)


def _flex_functions(path: Path) -> list[int]:
    section = load_sframe(str(path), path.read_bytes()).section
    return [fde.start_address for fde in section.fdes if fde.flex]


def test_no_flex_leaves_the_drap_function_out(tmp_path: Path) -> None:
    program = _program(tmp_path)
    realign = int(next(line.split()[0] for line in subprocess.run(
        ["nm", str(program)], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.endswith(" realign")), 16)
    v3, no_flex = tmp_path / "v3", tmp_path / "noflex"
    assert run(program, "--sframe-version", "3", "--emit", "elf", "-o", str(v3)).returncode == 0
    assert _flex_functions(v3) == [realign]
    proc = run(program, "--sframe-version", "3", "--no-flex", "--emit", "elf", "-o",
               str(no_flex))
    assert proc.returncode == 0, proc.stderr
    assert "no SFrame FDE for 'realign'" in proc.stderr and "[flex-needed]" in proc.stderr
    assert _flex_functions(no_flex) == []
    for path in (v3, no_flex):
        assert subprocess.run([str(path)]).returncode == 1  # argc 1: buf[3] is 1
        assert run(path, "--no-flex", verify=True).returncode == 0
    assert run(v3, verify=True).returncode == 0
    # V3 holds realign (a FLEX FDE): without --no-flex its absence is a gap, named.
    gap = run(no_flex, verify=True)
    assert gap.returncode == 1 and " 0 mismatches" in gap.stdout, gap.stdout
    assert (f"{no_flex}: not covered: 1 function has no SFrame FDE though SFrame can "
            f"describe it; the first: 'realign' at {realign:#x}") in gap.stdout.splitlines()
    kernel = run(v3, "--consumer", "kernel", verify=True)
    assert kernel.returncode == 1
    assert "FAIL default FDEs only: no FLEX FDE" in kernel.stdout
    assert "1 FLEX FDE (first: func idx" in kernel.stdout and f"{realign:#x}" in kernel.stdout
    assert run(no_flex, "--consumer", "kernel", verify=True).returncode == 0


def test_no_flex_needs_version_3(tmp_path: Path) -> None:
    program = _program(tmp_path)
    proc = run(program, "--no-flex", "-o", str(tmp_path / "x.sframe"))
    assert proc.returncode == 2
    assert "--no-flex applies to --sframe-version 3" in proc.stderr
    assert not (tmp_path / "x.sframe").exists()
