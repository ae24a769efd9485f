"""Errors tell bad input from our bugs: a bug is an internal error (exit 70), never
"malformed input"; bad input is one located line and exit 1; usage errors exit 2.

The fault-injection test replaces, one at a time, every function of the package
that a real run of a command calls with one that raises ``AttributeError`` (the
kind of bug a typo makes), and runs the command in-process: each must end as an
internal error, with no output file left behind.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import cfi2sframe
from cfi2sframe.cli import main
from cfi2sframe.errors import EX_SOFTWARE
from tests.conftest import gsframe_program, require, small_program
from tests.support import xray_traces as xray

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], capture_output=True,
                          text=True)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An object, the same object with our .sframe, and a linked program with one."""
    require("as")
    require("gcc")
    folder = tmp_path_factory.mktemp("inputs")
    obj = folder / "f.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(obj)], check=True)
    with_sframe = folder / "f.sframe.o"
    assert main([str(obj), "--emit", "obj", "-o", str(with_sframe)]) == 0
    exe = small_program(folder)
    exe_sframe = folder / "a.sframe.out"
    assert main([str(exe), "--emit", "elf", "-o", str(exe_sframe)]) == 0
    trace = folder / "t.fdr"  # two threads, a tail exit, a call left open
    trace.write_bytes(xray.header() + xray.block(7, xray.func(0, 1, 0) + xray.func(0, 2, 3)
                                                 + xray.func(2, 2, 4) + xray.func(1, 1, 5)
                                                 + xray.func(0, 3, 1))
                      + xray.block(8, xray.func(0, 1, 0) + xray.func(1, 1, 9)))
    return {"obj": obj, "obj+sframe": with_sframe, "exe+sframe": exe_sframe,
            "ld-v1": gsframe_program(folder), "trace": trace}


def _runs(inputs: dict[str, Path], out: Path) -> dict[str, list[str]]:
    """Every command of the tool on real inputs (in-process argument lists)."""
    exe = str(inputs["exe+sframe"])
    symbols = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
    pcs = [f"{int(line.split()[0], 16) + 1:#x}" for line in symbols.splitlines()
           if line.endswith((" main", " work"))]
    return {
        "convert-asm": [str(EXAMPLES / "frame_pointer.s"), "-o", str(out)],
        "convert-elf": [str(inputs["obj"]), "-o", str(out)],
        "convert-obj": [str(inputs["obj"]), "--emit", "obj", "-o", str(out)],
        "dump": ["dump", str(inputs["obj+sframe"])],
        "dump-json": ["dump", "--json", exe],
        "lookup": ["lookup", exe, *pcs],
        "diff": ["diff", str(inputs["obj+sframe"]), str(inputs["obj+sframe"])],
        "verify": ["verify", exe],
        "stats": ["stats", "--sframe-version", "3", exe],
        "compact": ["compact", str(inputs["obj"])],
        "replace-obj": [str(inputs["obj+sframe"]), "--replace", "-o", str(out)],
        "replace-elf": [str(inputs["ld-v1"]), "--replace", "--emit", "elf", "-w", "-o",
                        str(out)],
        "source-sframe": [str(inputs["ld-v1"]), "--source", "sframe", "--sframe-version",
                          "3", "-o", str(out)],
        "verify-consumer": ["verify", "--consumer", "glibc", exe],
        "stacks": ["stacks", str(inputs["trace"]), "--per-thread"],
        "stacks-account": ["stacks", str(inputs["trace"]), "--format", "account"],
        "stacks-chrome": ["stacks", str(inputs["trace"]), "--format", "chrome"],
    }


def _package_functions() -> dict[types.CodeType, types.FunctionType]:
    """Code object -> function, for every plain function and method of the package."""
    found: dict[types.CodeType, types.FunctionType] = {}

    def add(obj: object) -> None:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for part in (obj.fget, obj.fset):
                add(part)
            return
        if isinstance(obj, types.FunctionType) and obj.__module__.startswith("cfi2sframe"):
            if not obj.__code__.co_freevars:  # closures cannot take another code object
                found[obj.__code__] = obj

    for info in pkgutil.walk_packages(cfi2sframe.__path__, "cfi2sframe."):
        if info.name == "cfi2sframe.__main__":  # runs the command when imported
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            add(value)
            if inspect.isclass(value) and value.__module__ == module.__name__:
                for member in vars(value).values():
                    add(member)
    return found


def _called(argv: list[str], functions: dict[types.CodeType, types.FunctionType]) \
        -> list[types.FunctionType]:
    """The package functions one in-process run calls, in first-call order."""
    seen: dict[types.CodeType, None] = {}

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code in functions:
            seen.setdefault(frame.f_code, None)

    sys.setprofile(profile)
    try:
        status = main(argv)
    finally:
        sys.setprofile(None)
    assert status == 0, argv
    return [functions[code] for code in seen]


def _raiser(*args: object, **kwargs: object) -> None:
    """The planted bug, as a typo would raise it (runs with the target's globals, so it
    names builtins only)."""
    raise AttributeError("injected fault")


def _injections(inputs: dict[str, Path], out: Path) -> Iterator[tuple[str, list[str],
                                                                     types.FunctionType]]:
    functions = _package_functions()
    done: set[types.CodeType] = set()
    for name, argv in _runs(inputs, out).items():
        for func in _called(argv, functions):
            if func.__code__ not in done and func.__name__ not in _NOT_INJECTED:
                done.add(func.__code__)
                yield name, argv, func


# The CLI's own top level (the handler under test) and what runs before it; the
# standard output's flush once the command is done (an output file is complete then).
_NOT_INJECTED = {"main", "entry", "_parser", "arch_name", "flush"}


def test_injected_bugs_are_internal_errors(inputs: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    cases = list(_injections(inputs, out))
    assert len(cases) > 150, len(cases)  # the runs reach most of the package
    wrong = []
    for name, argv, func in cases:
        original = func.__code__
        func.__code__ = _raiser.__code__
        try:
            capsys.readouterr()
            out.unlink(missing_ok=True)
            status = main(argv)
        finally:
            func.__code__ = original
        err = capsys.readouterr().err
        reached = "injected fault" in err
        ok = (status == EX_SOFTWARE and err.count("\n") == 1 and "internal error" in err
              and "malformed" not in err and reached and not out.exists())
        # A cached result (lru_cache, a parse cache) may spare a later run the call.
        if not ok and not (status == 0 and not reached):
            wrong.append(f"{name}: {func.__module__}.{func.__qualname__}: "
                         f"exit {status}: {err.strip()}")
    assert not wrong, "\n".join(wrong[:20]) + f"\n({len(wrong)} of {len(cases)})"


def test_cie_parser_bug_fails_the_elf_fuzz_check(inputs: dict[str, Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With a bug in the CIE parser, the ELF fuzz tests' check must fail: it may not
    accept the bug as a located input error."""
    from cfi2sframe.dwarf import cfi
    from tests.fuzz.test_elf_fuzz import _convert

    data = inputs["obj"].read_bytes()
    _convert(data)  # passes without the bug

    def broken(*args: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'augmentation'")

    monkeypatch.setattr(cfi, "_parse_cie", broken)
    with pytest.raises(AttributeError):
        _convert(data)


def test_unknown_arch_is_a_usage_error(tmp_path: Path) -> None:
    for args in (["--arch", "mips", str(EXAMPLES / "frameless.s")],
                 ["compact", "--arch", "mips", str(EXAMPLES / "frameless.s")]):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert "unknown architecture 'mips'" in proc.stderr
        assert "x86_64" in proc.stderr and "aarch64" in proc.stderr
        assert "internal error" not in proc.stderr


def test_arch_aliases_are_accepted() -> None:
    require("as")
    proc = _cli("compact", "--arch", "x86-64", str(EXAMPLES / "frameless.s"))
    assert proc.returncode == 0, proc.stderr


_NEGATIVE_CFA = """\
\t.text
\t.globl f
\t.type f,@function
f:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset -16
\tcall g
\tpopq %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
"""


def test_compact_negative_cfa_offset_is_dwarf_mode(tmp_path: Path) -> None:
    """GNU as accepts ``.cfi_def_cfa_offset -16``; no compact encoding means CFA = rsp-16
    (frameless stack sizes are unsigned), so that range is DWARF mode with a reason."""
    require("as")
    from cfi2sframe.compact.encoding import encode
    from cfi2sframe.compact.rules import CompactRules

    assert encode(CompactRules(7, -16, -8, ()), "x86_64")[:2] == (
        "cfa-offset-negative", "CFA = rsp-16 lies below the stack pointer")
    assert encode(CompactRules(4, -8, -4, ()), "i386")[0] == "cfa-offset-negative"
    source = tmp_path / "neg.s"
    source.write_text(_NEGATIVE_CFA)
    proc = _cli("compact", "--ranges", "--json", str(source))
    assert proc.returncode == 0, proc.stderr
    rows = [(r["start"], r["length"], r["encoding"]) for r in json.loads(proc.stdout)[0]["rows"]]
    # pushq (1 byte), then rsp-16 over call + pop (5 + 1 bytes): DWARF mode (0x04000000
    # with UNWIND_IS_NOT_FUNCTION_START) there, frameless with stack 8 before and after.
    assert rows == [(0, 1, "0x02010000"), (1, 6, "0x84000000"), (7, 1, "0x82010000")]


_TRUNCATED_ESCAPE = """\
\t.text
\t.globl good
\t.type good,@function
good:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\tpopq %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
\t.globl bad
\t.type bad,@function
bad:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_escape 0x0f
\tpopq %rbp
\tret
\t.cfi_endproc
"""


def test_truncated_escape_leaves_out_one_function(tmp_path: Path) -> None:
    """GNU as assembles a truncated ``.cfi_escape 0x0f``; it makes that function's CFI
    meaningless, not the file: the other function is still emitted."""
    require("as")
    source = tmp_path / "esc.s"
    source.write_text(_TRUNCATED_ESCAPE)
    assert subprocess.run(["as", str(source), "-o", str(tmp_path / "esc.o")]).returncode == 0
    out = tmp_path / "esc.sframe"
    proc = _cli(str(source), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"{source}:15: warning: no SFrame FDE for 'bad': line 17: "
                           ".cfi_escape: truncated LEB128 number [invalid-cfi]\n")
    dump = _cli("dump", str(out))
    assert "Num FDEs: 1" in dump.stdout


def test_output_forms_that_do_not_apply_are_located_errors(tmp_path: Path) -> None:
    """--emit elf on assembly wrote the raw section under the name asked for an ELF
    file; --emit asm on an ELF file needs assembly.  Both: one line, no output."""
    require("as")
    out = tmp_path / "x"
    proc = _cli(str(EXAMPLES / "frameless.s"), "--emit", "elf", "-o", str(out))
    assert proc.returncode == 1 and not out.exists()
    assert proc.stderr == (f"{EXAMPLES / 'frameless.s'}: error: --emit elf needs a linked "
                           "file (executable or shared library); use --emit obj for objects "
                           "and assembly\n")
    obj = tmp_path / "f.o"
    subprocess.run(["as", str(EXAMPLES / "frameless.s"), "-o", str(obj)], check=True)
    proc = _cli(str(obj), "--emit", "asm", "-o", str(out))
    assert proc.returncode == 1 and not out.exists()
    assert "--emit asm needs assembly input" in proc.stderr and proc.stderr.count("\n") == 1
