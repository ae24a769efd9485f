"""The compiled directive scanner (``csrc/frontend_scan.c``, ``scan_cfi``) against the Python
scanner it was written from (``frontend/scan.scan``), which stays the reference and
the fallback; and the probe labels' insertion (``with_labels`` against
``frontend/probe.with_probes``'s loop).

Both must find the same statements (text, line, offset), inside bodies and out: on
hand-written assembly nobody here wrote (zig's copies of glibc, musl, mingw and the
sanitizers: macros, block comments, strings, ``;``), on gcc's and clang's csmith output, on this
repository's own files, and on random text made of the characters and words the
scanner treats specially.  Text that is not ASCII is the reference's alone.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe.frontend.probe import with_probes
from cfi2sframe.frontend.scan import scan
from tests.conftest import compiled_core, require_module
from tests.corpus import csmith_asm

ROOT = Path(__file__).resolve().parents[2]


def _same(text: str, comment_chars: str) -> None:
    core = compiled_core()
    reference = scan(text, "t.s", comment_chars, compiled=None)
    fast = scan(text, "t.s", comment_chars, compiled=core)
    assert fast == reference
    assert all(type(item).__name__ == "Statement" for item in fast.items + fast.in_bodies)
    # The probe labels go in at the same places (``with_labels``).
    assert with_probes(text, fast.items, compiled=core) == \
        with_probes(text, fast.items, compiled=None)


def _zig_sources() -> list[Path]:
    zig = Path(require_module("ziglang").__file__).parent / "lib"
    return sorted(p for p in zig.rglob("*") if p.suffix in (".s", ".S") and p.is_file())


def test_hand_written_assembly_scans_the_same() -> None:
    sources = _zig_sources()
    assert len(sources) > 250, len(sources)
    seen = 0
    for path in sources:
        text = path.read_text("utf-8", "surrogateescape")
        for comment_chars in ("#", ""):
            _same(text, comment_chars)
        found = scan(text, str(path), "#")
        seen += len(found.items) + len(found.in_bodies)
    assert seen > 10, seen  # (few CFI directives: the rest of the scanner is what they test)


def test_compiler_output_and_our_files_scan_the_same() -> None:
    files = csmith_asm(range(1, 5)) + csmith_asm(range(1, 3), compiler="clang-14",
                                                 tag="x86_64-clang") \
        + sorted(ROOT.glob("examples/*.s")) \
        + sorted(ROOT.glob("tests/**/*.s"))
    assert len(files) > 8
    for path in files:
        _same(path.read_text("utf-8", "surrogateescape"), "#")


_SPACE = st.sampled_from([" ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x00", ""])
_LABEL = st.sampled_from(["x:", "1:", ".L0 :", "$a.b_1:", "a::", "b :", "9x:", ":"])
_HEAD = st.sampled_from([".cfi_startproc", ".cfi_offset", ".CFI_Offset", ".cfi_", ".cfi",
                         ".macro", ".MACRO", ".endm", ".endr", ".rept", ".irp", ".irpc",
                         ".irpx", "nop", ".byte", ""])
_TAIL = st.sampled_from(["", " 6, -16", ' "a;b#c"', ' "x\\"#"', " /* c */ 8", " 1 // c",
                         " # c", " a;", " ;", " /* open", " */ 4", "*/", "'#'", " \\"])
_END = st.sampled_from(["\n", ";", " ; ", "\n\n", "\r\n", " # c\n", "/* c */", "/*\n",
                        "*/\n", ""])
_STATEMENT = st.tuples(_SPACE, st.lists(st.tuples(_LABEL, _SPACE), max_size=3), _SPACE,
                       _HEAD, _TAIL, _SPACE, _END).map(
    lambda p: p[0] + "".join(a + b for a, b in p[1]) + p[2] + p[3] + p[4] + p[5] + p[6])


@settings(max_examples=500, deadline=None)
@given(st.lists(_STATEMENT, max_size=25), st.sampled_from(["#", "", "#;", "#!"]))
def test_random_text_scans_the_same(statements: list[str], comment_chars: str) -> None:
    """Statements built of the pieces the scanner treats specially: whitespace of every
    kind Python strips, labels good and bad, directive words in any case, strings with
    escapes, block and line comments open across lines, separators."""
    _same("".join(statements), comment_chars)


def test_text_beyond_ascii_is_left_to_the_reference() -> None:
    text = "f:\t.cfi_startproc # é\n\t.cfi_endproc\n"
    assert compiled_core().scan_cfi(text, "#", tuple) is None
    found = scan(text, "t.s", "#")
    assert [(item.text, item.line, item.offset) for item in found.items] == [
        (".cfi_startproc", 1, 3), (".cfi_endproc", 2, 23)]
