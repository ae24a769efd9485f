"""Statements read at a glance (``directives.parse_plain``) against the Lark grammar
(``grammar_parser.parse_with_grammar``), which stays the reference for every
statement and reads all the others.

Where the glance reads a statement, the grammar must read it too, to the same
``Directive``: on every CFI statement of gcc's and clang's csmith output for three
targets, of zig's hand-written assembly and of this repository's examples, and on
random statements made of the names, operands and separators where the two could
part (octal and hex numbers, keywords, ``%``, spaces inside operands, missing and
extra operands).  And compiler output must be read at a glance: else the grammar
is loaded after all.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe.frontend.directives import parse_plain
from cfi2sframe.frontend.grammar_parser import parse_with_grammar
from cfi2sframe.frontend.scan import scan
from cfi2sframe.frontend.syntax import SyntaxProblem
from tests.conftest import require, require_module
from tests.corpus import csmith_asm

ROOT = Path(__file__).resolve().parents[2]


def _agree(text: str) -> bool:
    """Whether the glance reads ``text``; if it does, it reads what the grammar does."""
    plain = parse_plain(text)
    if plain is None:
        return False
    assert parse_with_grammar(text) == plain, text
    return True


def _statements(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        scanned = scan(path.read_text("utf-8", "surrogateescape"), str(path), "#")
        found.update(stmt.text for stmt in scanned.items + scanned.in_bodies)
    return found


def test_compiler_output_is_read_at_a_glance_as_the_grammar_reads_it() -> None:
    require("gcc", "clang-14", "aarch64-linux-gnu-gcc", "s390x-linux-gnu-gcc")
    files = csmith_asm(range(1, 9)) \
        + csmith_asm(range(1, 5), compiler="clang-14", tag="x86_64-clang") \
        + csmith_asm(range(1, 5), ["O0", "O2"], compiler="aarch64-linux-gnu-gcc",
                     tag="aarch64") \
        + csmith_asm(range(1, 5), ["O0", "O2"], compiler="s390x-linux-gnu-gcc", tag="s390x")
    texts = _statements(files)
    assert len(texts) > 100
    glanced = [text for text in texts if _agree(text)]
    assert len(glanced) == len(texts), sorted(texts - set(glanced))


def test_hand_written_assembly_reads_the_same() -> None:
    zig = Path(require_module("ziglang").__file__).parent / "lib"
    paths = sorted(p for p in zig.rglob("*") if p.suffix in (".s", ".S") and p.is_file())
    texts = _statements(paths + sorted(ROOT.glob("examples/*.s")))
    glanced = sum(_agree(text) for text in texts)
    assert glanced > 20, glanced


NAMES = ["startproc", "endproc", "def_cfa", "def_cfa_register", "def_cfa_offset",
         "adjust_cfa_offset", "offset", "val_offset", "rel_offset", "register", "restore",
         "undefined", "same_value", "remember_state", "restore_state", "return_column",
         "signal_frame", "window_save", "negate_ra_state", "negate_ra_state_with_pc",
         "b_key_frame", "mte_tagged_frame", "escape", "personality", "sections", "label",
         "OFFSET", "def_cfa_offset16", "offsets"]
OPERANDS = ["0", "6", "16", "-16", "- 16", "-0", "010", "08", "0x10", "0b1", "+5", "%rbp",
            "% rbp", "%1", "%", "rbp", "x29", "r15", ".", "a.b", "$x", "foo@PLT", "@x",
            "1a", "", "simple", "sleb128", "data4", "(3)", "3+4", "-x", "~1", "'a'", "é"]
SPACES = ["", " ", "\t", "  ", " \t"]


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(NAMES), st.lists(st.sampled_from(OPERANDS), max_size=4),
       st.lists(st.sampled_from(SPACES), min_size=12, max_size=12))
def test_random_statements_read_at_a_glance_as_the_grammar_reads_them(
        name: str, operands: list[str], spaces: list[str]) -> None:
    text = f".cfi_{name}"
    for index, operand in enumerate(operands):
        text += ("," if index else spaces[0] or " ") + spaces[index + 1] + operand \
            + spaces[index + 6]
    text += spaces[11]
    plain = parse_plain(text)
    if plain is None:
        return
    try:
        assert parse_with_grammar(text) == plain, text
    except SyntaxProblem as exc:
        raise AssertionError(f"the glance reads '{text}', the grammar rejects it: "
                             f"{exc.message}") from None
