"""Start-up cost: what a command imports before it does any work.

Every command pays its imports once, and a tree run pays them before its first
worker starts, single-threaded.  On Python 3.11 ``dataclasses`` (with ``inspect``,
``ast``, ``dis`` and ``tokenize``, which it imports) costs some 10 ms, and each frozen
dataclass ~0.6 ms more to create: 26 of them made a third of ``stats -r``'s start-up
and of a small file's conversion.  The package's records are named tuples or plain
classes; these tests hold the command's paths free of the module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cfi2sframe
from cfi2sframe.core import compiled
from tests.conftest import require_path
from tests.support.xray_traces import block, func, header

# Imported by dataclasses alone among what the commands need.
HEAVY = ("dataclasses", "inspect")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s"


def _imported_after(code: str, cwd: Path, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``heavy`` that running ``code`` in a fresh interpreter imports.

    The interpreter runs without ``site`` (``-S``), the package found where this one
    was: a site package's ``.pth`` file (an editable install's, this machine's
    system Python's) may import ``typing`` at start-up, and the check could not see
    past that.  Skips if the interpreter holds one even so."""
    probe = (f"import sys\nbefore = set(sys.modules)\n{code}\n"
             f"print('held:', *(m for m in {heavy!r} if m in sys.modules))\n"
             f"print('before:', *(m for m in {heavy!r} if m in before))")
    env = {**os.environ, "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True)
    held, before = (line.split() for line in done.stdout.splitlines()[-2:])
    assert held[0] == "held:" and before[0] == "before:", done.stdout
    if before[1:]:
        pytest.skip(f"this interpreter imports {', '.join(before[1:])} at start-up")
    return held[1:]


def test_a_tree_worker_inherits_no_dataclasses(tmp_path: Path) -> None:
    """What the parent of ``stats -r`` / ``verify -r`` / ``-r --in-place`` imports
    before it forks its workers (``batch.record.warm_up``)."""
    assert _imported_after("import cfi2sframe.cli.stats, cfi2sframe.cli.verify\n"
                           "from cfi2sframe.batch.pool import run_local\n"
                           "from cfi2sframe.batch.record import Task, warm_up\n"
                           "for c in 'stats', 'verify', 'convert': warm_up(Task(c))",
                           tmp_path) == []


@pytest.mark.parametrize("argv", [
    ["small.s", "-o", "small.sframe"],
    ["small.s", "--emit", "obj", "-o", "small.o"],
    ["dump", "small.o"],
    ["lookup", "small.o", "0x1"],
    ["verify", "small.o"],
])
def test_a_command_imports_no_dataclasses(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "small.s").write_bytes(EXAMPLE.read_bytes())
    if argv[0] != "small.s":  # the object the other commands read
        subprocess.run([sys.executable, "-m", "cfi2sframe", "small.s", "--emit", "obj",
                        "-o", "small.o"], cwd=tmp_path, check=True)
    code = f"from cfi2sframe.cli import main\nassert main({argv!r}) == 0, 'the command failed'"
    assert _imported_after(code, tmp_path) == []


def test_the_early_start_imports_no_typing(tmp_path: Path) -> None:
    """What ``cfi2sframe foo.s -o foo.sframe`` imports before it starts the assembler
    (``cli.early``): ``typing`` alone (~5 ms) costs more than that path's own code."""
    assert _imported_after("import cfi2sframe.cli.early", tmp_path,
                           ("typing", "dataclasses")) == []


def test_the_check_sees_dataclasses(tmp_path: Path) -> None:
    """The check itself: a path that imports the module is reported."""
    assert _imported_after("import dataclasses", tmp_path) == list(HEAVY)


@pytest.mark.parametrize("argv", [["dump", "small.o"], ["verify", "small.o"]])
def test_other_inputs_do_not_load_the_xray_reader(tmp_path: Path, argv: list[str]) -> None:
    """The XRay modules load only for a trace (``kinds`` tells one by its header)."""
    (tmp_path / "small.s").write_bytes(EXAMPLE.read_bytes())
    subprocess.run([sys.executable, "-m", "cfi2sframe", "small.s", "--emit", "obj",
                    "-o", "small.o"], cwd=tmp_path, check=True)
    code = f"from cfi2sframe.cli import main\nassert main({argv!r}) == 0, 'the command failed'"
    assert _imported_after(code, tmp_path, ("cfi2sframe.xray", "cfi2sframe.cli.xray")) == []


# What each command must not import on the smallest input of its kind (measured with
# ``benchmarks/startup.py --names``; docs/performance.md, "Start-up").  Not timed: a
# module on this list is one the command's own work never needs.
# (``compact_reasons``: the compact unwind codes' 28 enum members, ~2.5M instructions)
NOT_ELF = ("cfi2sframe.compact", "cfi2sframe.macho", "cfi2sframe.xray", "cfi2sframe.cli.xray",
           "cfi2sframe.cli.compact", "cfi2sframe.compact_reasons", "lark", "tqdm", "typing")
# (``shutil``: argparse's formatter asks the terminal's width only where help is printed)
# (``signal``: its enums cost ~3M instructions; the command's SIGPIPE needs only the
# number and the call, from the C module ``_signal``)
READ_ONLY = ("cfi2sframe.sframe.build", "cfi2sframe.sframe.encode", "cfi2sframe.convert",
             "cfi2sframe.frontend", "cfi2sframe.batch", "subprocess", "json", "shutil",
             "signal")
XRAY_ONLY = ("cfi2sframe.analysis", "cfi2sframe.sframe.build", "cfi2sframe.sframe.encode",
             "cfi2sframe.batch", "cfi2sframe.compact", "cfi2sframe.macho", "cfi2sframe.convert",
             "cfi2sframe.frontend", "subprocess", "lark", "tqdm", "json", "typing", "shutil",
             "signal", "ctypes")
# (``ctypes``: the demangler's, for the names of a --binary's instrumentation map)
# An x86-64 input loads its own target's module, no other (``arch`` loads each by name).
OTHER_TARGETS = ("cfi2sframe.arch.aarch64", "cfi2sframe.arch.s390x", "cfi2sframe.arch.i386")
TARGETS = ("cfi2sframe.arch.x86_64", *OTHER_TARGETS)
DWARF_CFI = ("cfi2sframe.dwarf.cfi", "cfi2sframe.dwarf.interpret", "cfi2sframe.elf.cfi")
NO_SUBPROCESS = ("subprocess", "signal", "threading", "selectors")
NO_TEMPFILE = ("tempfile", "shutil", "random", "weakref")
# What an ELF file's conversion runs only for some inputs (issue 43 items 5 and 6): the
# linker's ``--version`` (``linker``, ``spawn``: for an object only), the archive
# reader (a static library's), the SFrame decoder (the written file's check:
# ``--in-place``'s), the object writer (an object's) and the linked file's writer
# (``--emit elf``'s); ``shutil`` none (a ``.s`` input's look for the assembler is
# ``spawn.on_path``).
LINKER = ("cfi2sframe.linker", "cfi2sframe.spawn")
# An image's ``__unwind_info``, read and written (~5.8M instructions): not for ``.s``.
UNWIND_INFO = ("cfi2sframe.compact.table", "cfi2sframe.compact.table_writer",
               "cfi2sframe.compact.layout")
# (``zlib`` and ``resource``, C extensions, ~2.5M instructions together: zlib inflates
# only a compressed section; ``resource`` is one file's ``stats``' peak memory)
NOT_FOR_ELF = ("shutil", "cfi2sframe.elf.archive", "cfi2sframe.frontend", "cfi2sframe.batch",
               "json", "zlib", "resource", *NOT_ELF, *NO_SUBPROCESS, *OTHER_TARGETS)
LINKED = "/usr/bin/true"  # a small linked program (copied as ``prog``)
NOT_NEEDED: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "--version": (["--version"], ("argparse", "cfi2sframe.cli.convert", "cfi2sframe.elf",
                                  "cfi2sframe.frontend", "subprocess", "json", "lark",
                                  "typing", "signal")),
    # (``shutil``, with ``bz2`` and ``lzma``, ~7M instructions: the width help is
    # formatted to is ``parsers.terminal_columns``)
    "--help": (["--help"], ("subprocess", "json", "cfi2sframe.frontend", "cfi2sframe.convert",
                            "cfi2sframe.sframe", "cfi2sframe.dwarf", "lark", "typing",
                            "signal", "shutil", "bz2", "lzma", *TARGETS)),
    # (``subprocess``, with ``signal``, ``threading`` and ``selectors``, ~15M
    # instructions: the assembler's run and the tools' ``--version`` are ``spawn``'s;
    # ``tempfile`` and ``shutil``, ~15M: its folder is ``launch.PrivateFolder``, the
    # look for it ``spawn.on_path``; ``shlex``, ~1.2M: the default ``as`` is one word)
    "convert .s": (["small.s", "-o", "small2.o"],
                   (*NOT_ELF, "json", "cfi2sframe.batch", "cfi2sframe.analysis", "shlex",
                    *NO_SUBPROCESS, *NO_TEMPFILE, *OTHER_TARGETS)),
    "convert ELF": (["small.o", "-o", "small.sframe"],
                    (*NOT_FOR_ELF, "cfi2sframe.analysis", *LINKER, "cfi2sframe.sframe.decode",
                     "cfi2sframe.elf.linked", "cfi2sframe.elf.obj")),
    "convert ELF object": (["small.o", "--replace", "-o", "small3.o"],
                           (*NOT_FOR_ELF, "cfi2sframe.analysis", "cfi2sframe.sframe.decode",
                            "cfi2sframe.elf.linked")),
    "--emit elf": (["prog", "--emit", "elf", "-o", "prog.elf"],
                   (*NOT_FOR_ELF, "cfi2sframe.analysis", *LINKER, "cfi2sframe.sframe.decode",
                    "cfi2sframe.elf.obj")),
    "--in-place": (["--in-place", "prog"], (*NOT_FOR_ELF, *LINKER, "cfi2sframe.elf.obj")),
    "compact .s": (["compact", "small.s"], ("cfi2sframe.xray", "lark", "tqdm", "typing",
                                            "json", "shlex", *NO_SUBPROCESS, *NO_TEMPFILE,
                                            *UNWIND_INFO)),
    # (the pure-Python core's dump still reads the object's CFI: dwarf and the model
    # allowed there; the compiled one takes ``Name`` and ``in_force`` from ``basics``)
    "dump": (["dump", "small.o"], (*NOT_ELF, *READ_ONLY, "cfi2sframe.analysis",
                                   *(("cfi2sframe.dwarf", "cfi2sframe.model")
                                     if compiled() else ()),
                                   *OTHER_TARGETS)),
    # (the functions' names come from the symbol table, not the CFI reader; the rules'
    # signed numbers from ``leb128``, not the CFI operations' records, ~6M instructions;
    # the runner's options, with ``resource``, only for a usage error)
    "lookup": (["lookup", "small.o", "0x1"], (*NOT_ELF, *READ_ONLY, *DWARF_CFI,
                                              "cfi2sframe.dwarf.ops", "cfi2sframe.cli.batch",
                                              "resource", *OTHER_TARGETS)),
    "verify": (["verify", "small.o"], (*NOT_ELF, "cfi2sframe.batch", "cfi2sframe.convert",
                                       "cfi2sframe.frontend", "subprocess", "json", "shutil",
                                       "signal", *OTHER_TARGETS)),
    # one file's stats: in this process, not through the tree runner (no worker, no JSON)
    "stats": (["stats", "small.o"], (*NOT_ELF, "cfi2sframe.batch.pool",
                                     "cfi2sframe.batch.journal", "json", "shutil",
                                     *OTHER_TARGETS)),
    # (the SFrame walk: no compact unwind module; those load for --compact)
    "unwind": (["unwind", "small.o", "--snapshot", "snap.json"],
               ("cfi2sframe.macho", "cfi2sframe.compact", "cfi2sframe.xray",
                "cfi2sframe.sframe.build", "cfi2sframe.sframe.encode", "cfi2sframe.frontend",
                "cfi2sframe.batch", "lark", "tqdm", "typing", "shutil", *OTHER_TARGETS)),
    "dump trace": (["dump", "trace.xray"], (*XRAY_ONLY, "cfi2sframe.sframe", *DWARF_CFI,
                                            "cfi2sframe.model", *TARGETS)),
    "verify trace": (["verify", "trace.xray"], (*XRAY_ONLY, *DWARF_CFI, *TARGETS)),
    # (``json``: the report module's, whose Chrome trace events are JSON)
    "stacks": (["stacks", "trace.xray"], (*(name for name in XRAY_ONLY if name != "json"),
                                          "cfi2sframe.sframe", *DWARF_CFI, *TARGETS)),
}


def _inputs(tmp_path: Path) -> None:
    """The smallest input of each kind: the example, its object, a one-call XRay trace
    (FDR, version 5: one entry and its exit) and a snapshot of one frame."""
    (tmp_path / "small.s").write_bytes(EXAMPLE.read_bytes())
    subprocess.run([sys.executable, "-m", "cfi2sframe", "small.s", "--emit", "obj",
                    "-o", "small.o"], cwd=tmp_path, check=True)
    (tmp_path / "trace.xray").write_bytes(header() + block(1, func(0, 1, 10) + func(1, 1, 10)))
    (tmp_path / "snap.json").write_text('{"regs": {"rip": 16, "rsp": 4096, "rbp": 4112}, '
                                        '"memory": [{"address": 4096, "hex": "00"}]}')
    if Path(LINKED).exists():
        (tmp_path / "prog").write_bytes(Path(LINKED).read_bytes())


def _names_under(names: tuple[str, ...], code: str, cwd: Path) -> list[str]:
    """Every module imported, of ``names`` or inside a package ``names`` holds."""
    probe = (f"{code}\nimport sys\n"
             f"print('held:', *sorted(m for m in sys.modules if any(m == n or "
             f"m.startswith(n + '.') for n in {names!r})))")
    env = {**os.environ, "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True)
    held = done.stdout.splitlines()[-1].split()
    assert held[0] == "held:", done.stdout
    return held[1:]


@pytest.mark.parametrize("command", sorted(NOT_NEEDED))
def test_a_command_imports_only_what_it_runs(tmp_path: Path, command: str) -> None:
    """Each command on its smallest input, in a fresh interpreter without ``site``:
    none of the modules its work does not need (the Mach-O, compact and XRay
    packages on an ELF path; the SFrame writer, the conversion and ``json`` where a
    file is only read; the DWARF CFI reader for ``lookup``; a target other than the
    input's, and any for a trace; Lark and tqdm nowhere here) is imported."""
    argv, heavy = NOT_NEEDED[command]
    if "prog" in argv:
        require_path(LINKED)
    _inputs(tmp_path)
    code = (f"from cfi2sframe.cli import main\ntry:\n    status = main({argv!r})\n"
            "except SystemExit as done:  # (--help)\n    status = done.code\n"
            "assert status in (0, 1), status")  # (unwind: 1, the walk stops early)
    assert _names_under(heavy, code, tmp_path) == []


def test_the_command_check_sees_an_import(tmp_path: Path) -> None:
    """The check itself: a module imported, or one inside a package listed, is
    reported."""
    assert _names_under(("json", "cfi2sframe.xray"), "import json, cfi2sframe.xray.records",
                        tmp_path) == ["cfi2sframe.xray", "cfi2sframe.xray.records", "json",
                                      "json.decoder", "json.encoder", "json.scanner"]


@pytest.mark.parametrize("columns", ["30", "80", "200"])
def test_help_is_argparse_s_at_any_width(monkeypatch: pytest.MonkeyPatch,
                                         columns: str) -> None:
    """The parsers ask the terminal's width only when they format text
    (``cli/parsers.py``); their help, usage and subcommand help are argparse's own
    formatters' text, at a narrow, the usual and a wide terminal."""
    import argparse

    from cfi2sframe.cli import parsers
    from cfi2sframe.cli.verify import add_parser

    monkeypatch.setenv("COLUMNS", columns)

    def texts(parser_class: type[argparse.ArgumentParser],
              formatter: type[argparse.HelpFormatter]) -> list[str]:
        parser = parser_class(prog="cfi2sframe", formatter_class=formatter,
                              description="a description " * 8)
        sub = parser.add_subparsers(dest="command", required=True)
        add_parser(sub)
        verify = sub.choices["verify"]
        return [parser.format_help(), parser.format_usage(), verify.format_help()]

    ours = texts(parsers.Parser, parsers.HelpFormatter)
    assert ours == texts(argparse.ArgumentParser, argparse.HelpFormatter)
    raw = texts(parsers.Parser, parsers.RawDescriptionHelpFormatter)
    assert raw == texts(argparse.ArgumentParser, argparse.RawDescriptionHelpFormatter)


@pytest.mark.parametrize("columns", [None, "", "wide", "0", "-3", "100", " 120 "])
def test_the_help_width_is_shutil_s_off_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                   columns: str | None) -> None:
    """``parsers.terminal_columns`` (the width argparse's formatter is given, without
    importing ``shutil``) is ``shutil.get_terminal_size().columns``, the oracle: with
    ``COLUMNS`` unset, not a number, not positive or set, standard output not a
    terminal."""
    import shutil

    from cfi2sframe.cli.parsers import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    with open(os.devnull, "w") as null:
        monkeypatch.setattr(sys, "__stdout__", null)
        assert terminal_columns() == shutil.get_terminal_size().columns


@pytest.mark.parametrize("width", [0, 57, 133])
def test_the_help_width_is_shutil_s_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                  width: int) -> None:
    """On a terminal (a pseudo-terminal of ``width`` columns; 0: one that does not
    say), without ``COLUMNS``: the terminal's width as ``shutil`` reads it."""
    import fcntl
    import shutil
    import struct
    import termios

    from cfi2sframe.cli.parsers import terminal_columns

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, width, 0, 0))
    with os.fdopen(master, "rb"), os.fdopen(slave, "w") as terminal:
        monkeypatch.delenv("COLUMNS", raising=False)
        monkeypatch.setattr(sys, "__stdout__", terminal)
        expected = shutil.get_terminal_size().columns
        assert expected == (width or 80)
        assert terminal_columns() == expected


def _printed(code: str, cwd: Path) -> str:
    """What ``code`` prints, run by a fresh interpreter without ``site`` that finds
    this checkout's package."""
    env = {**os.environ, "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True).stdout


def test_a_deferred_pattern_compiles_once_when_first_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``frontend.patterns.deferred``: nothing compiled until the pattern is asked for,
    then ``re.compile(pattern, flags)``'s pattern, once (text and bytes)."""
    import re

    from cfi2sframe.frontend.patterns import deferred

    compiled: list[object] = []
    real = re.compile

    def counted(pattern: str | bytes, flags: int = 0) -> re.Pattern[str] | re.Pattern[bytes]:
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", counted)
    text, data = deferred(r"^a+\d", re.M), deferred(rb"b*", re.S)
    assert compiled == []
    first = text()
    assert compiled == [r"^a+\d"] and text() is first and compiled == [r"^a+\d"]
    assert (first.pattern, first.flags) == (r"^a+\d", re.M | re.U)
    assert data().pattern == rb"b*" and data().flags == re.S
    assert first.findall("x\naa1\na2") == ["aa1", "a2"]


def test_a_small_s_file_compiles_only_the_patterns_its_statements_need(
        tmp_path: Path) -> None:
    """The example's conversion (``.cfi_*`` statements with register numbers and
    decimal operands, no assignment, no label before a statement, no ``.addrsig``,
    not an Apple target's, no assembler error) compiles two of the frontend's
    regular expressions: the statement's head and the decimal operand
    (``frontend/directives.py``); the others wait for a file that needs them
    (``frontend/patterns.py``: 0.3-1.4M instructions each).  With either core."""
    (tmp_path / "small.s").write_bytes(EXAMPLE.read_bytes())
    probe = ("import re, sys\nreal, made = re.compile, []\n"
             "def recorded(pattern, flags=0):\n"
             "    if sys._getframe(1).f_globals.get('__name__', '').startswith('cfi2sframe'):\n"
             "        made.append(pattern)\n"
             "    return real(pattern, flags)\n"
             "re.compile = recorded\n"
             "from cfi2sframe.cli import main\n"
             "assert main(['small.s', '-o', 'small.o']) == 0\n"
             "print(repr(sorted(made)))")
    printed = _printed(probe, tmp_path)
    # (the pure-Python scan, the compiled scanner's reference, reads each statement
    # past its labels: ``frontend/scan._LABELS`` there)
    labels = [] if compiled() else [r"^(?:(?:[A-Za-z_.$][\w.$]*|\d+)\s*:(?!:)\s*)*"]
    assert printed.splitlines()[-1] == repr(sorted(
        [r"\.cfi_([a-z_]+)(?:[ \t]+(.*))?", r"0|[1-9][0-9]*", *labels]))


def test_the_compact_codes_are_reasons_own_when_asked_for() -> None:
    """``reasons.CompactReason`` and ``COMPACT_REASONS`` are ``compact_reasons``' (loaded
    on first use): the same objects from the package, the module and a ``from`` import;
    a name neither holds is still an ``AttributeError``."""
    import cfi2sframe.reasons as reasons
    from cfi2sframe import compact_reasons
    from cfi2sframe.reasons import COMPACT_REASONS, CompactReason

    assert CompactReason is compact_reasons.CompactReason is cfi2sframe.CompactReason
    assert COMPACT_REASONS is compact_reasons.COMPACT_REASONS
    assert repr(CompactReason.no_cfa) == "'no-cfa'" and f"{CompactReason.no_cfa}" == "no-cfa"
    assert set(COMPACT_REASONS) == set(CompactReason)
    with pytest.raises(AttributeError, match="no attribute 'CompactReasons'"):
        reasons.CompactReasons  # noqa: B018


def test_the_dwarf_numbers_make_no_enum(tmp_path: Path) -> None:
    """``dwarf/opcodes.py``'s tables are plain ``int``s (the three ``IntEnum`` classes
    cost ~7M instructions at every start that reads CFI): importing them imports no
    ``enum``."""
    assert _imported_after("from cfi2sframe.dwarf.opcodes import CFA, EH_PE, OP", tmp_path,
                           ("enum",)) == []


def test_records_compile_their_new_once_per_field_count(tmp_path: Path) -> None:
    """``typed.NamedTuple`` compiles ``__new__``'s lambda once per field count
    (``collections.namedtuple`` compiled one a class, ~0.2M instructions each): the
    DWARF operations' 30-odd records take as many ``eval``s as distinct counts."""
    probe = ("import builtins\nreal, calls = builtins.eval, []\n"
             "def counted(*args, **kwargs):\n    calls.append(args[0])\n"
             "    return real(*args, **kwargs)\nbuiltins.eval = counted\n"
             "import cfi2sframe.model, cfi2sframe.dwarf.ops as ops\n"
             "records = [v for v in vars(ops).values() if isinstance(v, type)\n"
             "           and v.__module__ == ops.__name__ and hasattr(v, '_fields')]\n"
             "print(len(calls), len(records), len({len(r._fields) for r in records}))")
    evals, records, counts = map(int, _printed(probe, tmp_path).split())
    assert records >= 20 and counts < records
    assert evals <= counts + 8  # (model's records may add a count or two)
