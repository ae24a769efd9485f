"""The README's and examples' recipes run as written (library example, Makefile, strip first)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent


def test_library_example_runs(tmp_path: Path) -> None:
    require("as")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README has a Python example"
    shutil.copy(ROOT / "examples" / "frame_pointer.s", tmp_path / "foo.s")
    for block in blocks:
        proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        assert "CFA = rbp+16, RA = [CFA-8], FP = [CFA-16]" in proc.stdout


def test_examples_makefile_recipe_builds_a_program_that_runs_and_verifies(tmp_path: Path) -> None:
    """The objects-then-program recipe of examples/README.md, as written, with this
    machine's GNU ld 2.40 (which discards our V2 objects' sections and writes its own
    PLT-only V1 section): the program ends with one V2 section from its DWARF."""
    require("gcc", "make")
    blocks = re.findall(r"```make\n(.*?)```", (ROOT / "examples" / "README.md").read_text(),
                        re.S)
    recipe = blocks[-1]
    assert "--replace" in recipe
    makefile = tmp_path / "Makefile"
    makefile.write_text("OBJS = work.o main.o\nCFLAGS = -O2\n" + recipe)
    (tmp_path / "work.c").write_text("int work(int *p) { return p[0] + p[7]; }\n")
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\nint work(int *);\n"
        "int main(void) { int v[8] = {1, 0, 0, 0, 0, 0, 0, 2}; "
        "printf(\"made %d\\n\", work(v)); return 0; }\n")
    env_path = Path(sys.executable).parent
    proc = subprocess.run(["make", "prog"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": f"{env_path}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert subprocess.run([str(tmp_path / "prog")], capture_output=True,
                          text=True).stdout == "made 3\n"
    from cfi2sframe.analysis.compare import verify_elf
    from cfi2sframe.sframe.load import load_sframe

    assert load_sframe(str(tmp_path / "prog")).section.version == 2
    result, _ = verify_elf(str(tmp_path / "prog"))
    assert result.ok and not result.extra and result.checked >= 2


def test_strip_first_recipe_runs_as_written(tmp_path: Path) -> None:
    """The README's "strip first" shell recipe, as written, on a small C program: it
    exits 0, and the stripped, converted program runs and verifies clean."""
    require("gcc", "objcopy", "strip")
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Where the step goes: strip first"):]
    recipe = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    assert "strip" in recipe and "cfi2sframe --in-place" in recipe
    (tmp_path / "foo.c").write_text('#include <stdio.h>\nint main(void) { puts("foo"); }\n')
    env_path = Path(sys.executable).parent
    proc = subprocess.run(["sh", "-e", "-c", recipe], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": f"{env_path}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 mismatches" in proc.stdout and "bad layout" not in proc.stdout
    assert subprocess.run([str(tmp_path / "foo")], capture_output=True,
                          text=True).stdout == "foo\n"
