"""``verify --consumer``: what glibc 2.42 and the kernel's unwinder require, per file.

Expected outcomes follow from the readers' stated requirements (see
analysis/consumers.py) applied by hand to files made by the real toolchain
(GNU as + ld 2.40 write V1) and to our rewrites of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cfi2sframe.analysis.consumers import Facts, check_consumer
from cfi2sframe.arch import get_arch
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.encode import build_v2
from cfi2sframe.sframe.format import Fre, SFrameFunction
from tests.conftest import gsframe_program


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], capture_output=True,
                          text=True)


def _failed(path: Path, consumer: str) -> list[str]:
    proc = cli("verify", "--consumer", consumer, str(path))
    fails = [line.split("FAIL ", 1)[1] for line in proc.stdout.splitlines() if " FAIL " in line]
    assert proc.returncode == (1 if fails else 0), proc.stdout + proc.stderr
    return fails


def test_consumers_on_ld_output_and_our_rewrites(tmp_path: Path) -> None:
    program = gsframe_program(tmp_path)
    source = tmp_path / "hello.c"
    assert [f.split(":")[0] for f in _failed(program, "glibc")] == [
        "SFrame version 2 (glibc 2.42 reads no other)"]
    assert [f.split(":")[0] for f in _failed(program, "kernel")] == [
        "SFrame version 3 (the series reads no other)", "SFRAME_F_FDE_FUNC_START_PCREL set"]
    v2, v3 = tmp_path / "v2", tmp_path / "v3"
    assert cli(str(program), "--replace", "--emit", "elf", "-w", "-o", str(v2)).returncode == 0
    assert cli(str(program), "--replace", "--sframe-version", "3", "--emit", "elf", "-w",
               "-o", str(v3)).returncode == 0
    assert _failed(v2, "glibc") == []
    assert _failed(v3, "kernel") == []
    assert len(_failed(v3, "glibc")) == 1
    obj = tmp_path / "o.o"
    subprocess.run(["gcc", "-c", "-Wa,--gsframe", str(source), "-o", str(obj)], check=True)
    assert any("not a linked file" in f for f in _failed(obj, "glibc"))


def test_unsorted_fdes_with_the_sorted_flag_fail_both() -> None:
    arch = get_arch("x86_64")
    functions = [SFrameFunction("b", "", 0x2000, 16, (Fre(0, False, 8),)),
                 SFrameFunction("a", "", 0x1000, 16, (Fre(0, False, 8),))]
    section = decode(build_v2(functions, arch, sort_flag=True).to_bytes(
        0, lambda f: f.start, "t"))
    facts = Facts(section, True, (0, 100), (0, 100))
    for consumer in ("glibc", "kernel"):
        found = [why for req, why in check_consumer(consumer, facts) if "sorted" in req.text]
        assert found == ["the flag is set but the FDEs are not in address order"]
