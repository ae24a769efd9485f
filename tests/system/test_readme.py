"""The README's, docs/' and examples' recipes run as written (library example, Makefile,
strip first), and their relative links resolve."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]


DOCS = sorted((ROOT / "docs").glob("*.md"))
# Every Markdown file whose relative links must resolve.
MARKDOWN = [ROOT / "README.md", ROOT / "CHANGES.md", ROOT / "ARCHITECTURE.md",
            ROOT / "examples" / "README.md", *DOCS]


def _blocks(readme: Path = ROOT / "README.md") -> list[tuple[int, str, str]]:
    """(line, language, text) of every fenced code block of a README."""
    text = readme.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
            for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S)]


def _section(marker: str) -> str:
    """The text of the README or docs/ page from ``marker`` on (it is in exactly one)."""
    found = [path.read_text() for path in (ROOT / "README.md", *DOCS)
             if marker in path.read_text()]
    assert len(found) == 1, f"{marker!r} is in {len(found)} files"
    return found[0][found[0].index(marker):]


def _workspace(tmp: Path, with_sframe: bool) -> dict[str, str]:
    """The files the README's commands name, made here as a user would have them:
    foo.s and foo.c (examples/frame_pointer, the C with a main), prog and libfoo.so
    (built by gcc, with GNU as's SFrame, V1 here, when the block works on files that
    have SFrame), examples/; and an environment with cfi2sframe on PATH."""
    gsframe = ["-Wa,--gsframe"] if with_sframe else []
    shutil.copy(ROOT / "examples" / "frame_pointer.s", tmp / "foo.s")
    _write_foo_c(tmp)
    shutil.copytree(ROOT / "examples", tmp / "examples")
    (tmp / "prog.c").write_text('#include <stdio.h>\nint main(void) { puts("p"); }\n')
    (tmp / "lib.c").write_text("int twice(int x) { return 2 * x; }\n")
    subprocess.run(["gcc", "-O2", *gsframe, "prog.c", "-o", "prog"], cwd=tmp, check=True)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *gsframe, "lib.c", "-o", "libfoo.so"],
                   cwd=tmp, check=True)
    return _env(tmp)


def _write_foo_c(folder: Path) -> None:
    (folder / "foo.c").write_text((ROOT / "examples" / "frame_pointer.c").read_text()
                                  + "int work(int *p) { return p[7]; }\n"
                                  "int main(void) { return with_frame(1) != 17; }\n")


def _env(home: Path) -> dict[str, str]:
    """cfi2sframe (installed beside this Python) and the system tools on PATH."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home)}


# Commands that are CI itself (.ci/run runs them on a bare machine): not run again here.
CI_ONLY = ("pip install . && ", "sh tests/support/install-test-tools.sh")


def _run_blocks(tmp_path: Path, pages: list[Path]) -> int:
    """Each ``sh`` block runs with ``sh -e`` (each its own folder, so the files it makes
    are its own), the ``python`` block runs, and the ``text`` blocks are usage
    synopses, message formats or output, which the last one is checked against.
    Returns the number of blocks run."""
    require("gcc", "as", "objcopy", "strip")
    ran = 0
    for page in pages:
        name = page.relative_to(ROOT)
        for line, language, body in _blocks(page):
            if language == "text":
                continue
            assert language in ("sh", "python"), f"{name}:{line}: untyped code block"
            work = tmp_path / f"{page.stem}{line}"
            work.mkdir()
            env = _workspace(work, "--source sframe" in body)
            if language == "python":
                proc = subprocess.run([sys.executable, "-c", body], cwd=work,
                                      capture_output=True, text=True, env=env)
                assert proc.returncode == 0, f"{name}:{line}: {proc.stderr}"
                if "describe(" in body:  # the example that prints rules and encodings
                    assert "CFA = rbp+16, RA = [CFA-8], FP = [CFA-16]" in proc.stdout
                    assert "with_frame 0x1010001 None" in proc.stdout
            else:
                _run_sh(work, env, f"{name}:{line}", body)
            ran += 1
    return ran


def _run_sh(work: Path, env: dict[str, str], where: str, body: str) -> None:
    script = "\n".join(
        cmd.replace(CI_ONLY[0], "") for cmd in body.splitlines()
        if not cmd.strip().startswith(CI_ONLY[1]))
    if re.search(r"cfi2sframe (--in-place )?foo\.o\b", script):
        # an object as a compiler made it, no .sframe
        subprocess.run(["as", "foo.s", "-o", "foo.o"], cwd=work, check=True)
    elif re.search(r"cfi2sframe (dump|lookup|verify) foo\.o\b", script):
        # the object the README's first task makes, with .sframe
        subprocess.run(["cfi2sframe", "foo.s", "-o", "foo.o"], cwd=work, env=env,
                       check=True)
    sleeper = None
    if " -p PID " in script:  # a live process to attach to: sleep(1) waiting
        require("gdb")
        sleeper = subprocess.Popen(["sleep", "60"])
        script = script.replace(" -p PID ", f" -p {sleeper.pid} ")
    try:
        proc = subprocess.run(["sh", "-e", "-c", script], cwd=work,
                              capture_output=True, text=True, env=env, timeout=300)
    finally:
        if sleeper is not None:
            sleeper.kill()
    assert proc.returncode == 0, f"{where}: {proc.stdout}{proc.stderr}"


def test_every_readme_code_block_runs(tmp_path: Path) -> None:
    """The README's blocks: the two commands (less what CI itself runs) and one
    block per task."""
    assert _run_blocks(tmp_path, [ROOT / "README.md"]) >= 9


def test_every_docs_code_block_runs(tmp_path: Path) -> None:
    """The blocks of every page of docs/, the library example among them."""
    assert len(DOCS) >= 13
    assert _run_blocks(tmp_path, DOCS) >= 7


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def _anchors(page: Path) -> set[str]:
    return {_slug(m.group(1)) for m in
            re.finditer(r"^#+ (.*)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S),
                        re.M)}


def test_every_relative_link_resolves() -> None:
    """Each relative link of the README, CHANGES, ARCHITECTURE, examples/README and
    docs/ names a file that exists, and a heading of it when it has an anchor."""
    checked = 0
    for page in MARKDOWN:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            assert linked.exists(), f"{where}: no such file"
            if anchor:
                assert anchor in _anchors(linked), f"{where}: no such heading"
            checked += 1
    assert checked >= 50


def test_every_examples_readme_command_block_runs(tmp_path: Path) -> None:
    """examples/README.md's ``sh`` blocks, each in a copy of examples/ with foo.c (the C
    example with a main); its ``make`` blocks run in the Makefile test below."""
    require("gcc", "as", "clang-14", "readelf")
    ran = 0
    for line, language, body in _blocks(ROOT / "examples" / "README.md"):
        if language != "sh":
            assert language == "make", f"examples/README.md:{line}: untyped code block"
            continue
        work = tmp_path / f"block{line}"
        shutil.copytree(ROOT / "examples", work)
        _write_foo_c(work)
        proc = subprocess.run(["sh", "-e", "-c", body], cwd=work, capture_output=True,
                              text=True, env=_env(work))
        assert proc.returncode == 0, f"examples/README.md:{line}: {proc.stdout}{proc.stderr}"
        ran += 1
    assert ran == 3


def test_readme_compact_output_is_what_the_command_prints() -> None:
    require("as")
    shown = _section("`cfi2sframe compact examples/compact.s` prints:")
    shown = re.search(r"```text\n(.*?)```", shown, re.S).group(1)
    printed = subprocess.run([sys.executable, "-m", "cfi2sframe", "compact",
                              "examples/compact.s"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    assert [line.split() for line in shown.splitlines()] == \
        [line.split() for line in printed.splitlines()[:2]]


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
    """The "strip first" shell recipe (docs/post-link.md), as written, on a small C program: it
    exits 0, and the stripped, converted program runs and verifies clean."""
    require("gcc", "objcopy", "strip")
    section = _section("# Where the step goes: strip first")
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
