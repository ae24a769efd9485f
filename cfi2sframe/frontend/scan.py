"""Find the CFI statements of an assembly file without parsing instructions.

Only lines that can matter are looked at: ``str.find`` locates the lines
holding ``.cfi_`` (and comment delimiters, when the file has any) at C
speed; everything else (instructions, data) is skipped unread.  Symbol
assignments are looked for only when a CFI operand names a symbol.

The compiled core's ``scan_cfi`` runs this scan where built, for ASCII text (this loop
its reference). Statements inside ``.macro``/``.rept``/``.irp`` bodies are told apart
(``ScanResult.in_bodies``); ``labels_between`` gives the labels that can name a
function.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from types import ModuleType

from ..core import compiled as compiled_core
from ..typed import NamedTuple
from .patterns import deferred

_COMPILED = compiled_core()
_SLOW_CHARS = '";/*'
_ASSIGN_NEEDLES = ("=", ".set", ".equ", ".eqv")
_ASSIGN = deferred(
    r"^\s*(?:\.(?:set|equ|equiv|eqv)\s+([A-Za-z_.$][\w.$]*)\s*,(.*)"
    r"|([A-Za-z_.$][\w.$]*)\s*==?\s*(.*))$",
    re.S,
)
_LABELS = deferred(r"^(?:(?:[A-Za-z_.$][\w.$]*|\d+)\s*:(?!:)\s*)*")


class Statement(NamedTuple):
    """A CFI statement: its text, 1-based line and offset of its first character."""

    text: str
    line: int
    offset: int


class Assignment(NamedTuple):
    """``name = expression`` (or ``.set``/``.equ``) at an offset of the file."""

    name: str
    expr: str
    line: int
    offset: int


class ScanResult(NamedTuple):
    """The CFI statements of a file, in file order; ``in_bodies``: those inside
    ``.macro``, ``.rept`` or ``.irp``/``.irpc`` bodies, which the assembler repeats or
    places where the body is used (not where it is written)."""

    items: tuple[Statement, ...]
    in_bodies: tuple[Statement, ...] = ()


def _split(
    line: str, comment_chars: str, in_comment: bool
) -> tuple[list[tuple[str, Sequence[int]]], bool]:
    """Split a line into statements, dropping comments.

    Each statement comes with the source column of each of its characters,
    so a label can later be inserted exactly before it.  Strings are
    respected, so ``"#"`` or ``";"`` inside them do not cut the statement.
    Returns whether a ``/*`` comment is still open at the end of the line.
    """
    if not in_comment and not any(c in line for c in _SLOW_CHARS):
        cut = min((i for i in map(line.find, comment_chars) if i >= 0), default=len(line))
        body = line[:cut]
        lead = len(body) - len(body.lstrip())
        body = body.strip()
        return ([(body, range(lead, lead + len(body)))] if body else []), False
    parts: list[tuple[str, Sequence[int]]] = []
    chars: list[str] = []
    cols: list[int] = []
    i, n = 0, len(line)
    in_string = False
    while i < n:
        ch = line[i]
        if in_comment:
            end = line.find("*/", i)
            if end < 0:
                break
            in_comment = False
            i = end + 2
            continue
        if not in_string:
            if ch == "/" and line.startswith("/*", i):
                in_comment = True
                i += 2
                continue
            if ch in comment_chars or (ch == "/" and line.startswith("//", i)):
                break
            if ch == ";":
                _flush(parts, chars, cols)
                chars, cols = [], []
                i += 1
                continue
        if ch == '"':
            in_string = not in_string
        elif in_string and ch == "\\" and i + 1 < n:
            chars.append(ch)
            cols.append(i)
            i += 1
            ch = line[i]
        chars.append(ch)
        cols.append(i)
        i += 1
    _flush(parts, chars, cols)
    return parts, in_comment


def _flush(parts: list[tuple[str, Sequence[int]]], chars: list[str], cols: list[int]) -> None:
    text = "".join(chars)
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    if text:
        parts.append((text, cols[lead : lead + len(text)]))


def _candidate_lines(text: str, needles: Sequence[str]) -> list[int]:
    """Start offsets of the lines holding any needle, in order."""
    starts = set()
    for needle in needles:
        pos = text.find(needle)
        while pos >= 0:
            starts.add(text.rfind("\n", 0, pos) + 1)
            end = text.find("\n", pos)
            if end < 0:
                break
            pos = text.find(needle, end)
    return sorted(starts)


def _statements(text: str, comment_chars: str,
                needles: Sequence[str]) -> Iterator[tuple[int, int, str, Sequence[int]]]:
    """(line start, line number, statement, columns) of every statement on a needle line."""
    if "/*" in text:
        needles = (*needles, "/*", "*/")
    line_no = 1
    counted_to = 0
    in_comment = False
    for line_start in _candidate_lines(text, needles):
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = len(text)
        line_no += text.count("\n", counted_to, line_start)
        counted_to = line_start
        parts, in_comment = _split(text[line_start:line_end], comment_chars, in_comment)
        for stmt, cols in parts:
            yield line_start, line_no, stmt, cols


def _strip_labels(stmt: str) -> int:
    labels = _LABELS().match(stmt)
    return labels.end() if labels else 0


# Directives that open and close a body the assembler expands elsewhere or repeatedly.
_BODY_OPEN = frozenset({".macro", ".rept", ".irp", ".irpc"})
_BODY_CLOSE = frozenset({".endm", ".endr"})


def scan(text: str, filename: str, comment_chars: str,
         compiled: ModuleType | None = _COMPILED) -> ScanResult:
    """Collect the CFI statements of ``text`` with their lines and offsets.

    ``compiled``: the compiled core's scanner (``csrc/frontend_scan.c``; by default where it
    is built), which takes ASCII text; this loop is its reference (None).
    """
    if compiled is not None:
        found = compiled.scan_cfi(text, comment_chars, Statement)
        if found is not None:
            return ScanResult(tuple(found[0]), tuple(found[1]))
    items: list[Statement] = []
    in_bodies: list[Statement] = []
    bodies = any(needle in text for needle in (".macro", ".rept", ".irp"))
    needles = (".cfi_", ".macro", ".endm", ".rept", ".irp", ".endr") if bodies else (".cfi_",)
    depth = 0
    for line_start, line_no, stmt, cols in _statements(text, comment_chars, needles):
        skip = _strip_labels(stmt)
        body = stmt[skip:]
        if body[:5].lower() == ".cfi_":
            found = Statement(body, line_no, line_start + cols[skip])
            (in_bodies if depth else items).append(found)
        elif bodies:
            word = body.split(None, 1)[0].lower() if body else ""
            if word in _BODY_OPEN:
                depth += 1
            elif word in _BODY_CLOSE and depth:
                depth -= 1
    return ScanResult(tuple(items), tuple(in_bodies))


_LABEL_DEFS = deferred(r"^[ \t]*((?:[A-Za-z_.$][\w.$]*[ \t]*:(?!:)[ \t]*)+)", re.M)
_LABEL_NAME = deferred(r"([A-Za-z_.$][\w.$]*)[ \t]*:")


def labels_between(text: str, start: int, end: int) -> list[str]:
    """The labels defined at the start of lines in ``text[start:end]``, in file order
    (what names a function: the labels between the previous function and its
    ``.cfi_startproc``)."""
    names: list[str] = []
    for match in _LABEL_DEFS().finditer(text, start, end):
        names += _LABEL_NAME().findall(match.group(1))
    return names


def find_assignments(text: str, comment_chars: str) -> list[Assignment]:
    """Every symbol assignment of ``text`` in file order (for CFI operands naming symbols)."""
    out = []
    for line_start, line_no, stmt, cols in _statements(text, comment_chars, _ASSIGN_NEEDLES):
        body = stmt[_strip_labels(stmt):]
        match = _ASSIGN().match(body)
        if match and "(" not in (match.group(3) or ""):
            name = match.group(1) or match.group(3)
            expr = match.group(2) if match.group(1) else match.group(4)
            out.append(Assignment(name, expr.strip(), line_no, line_start + cols[0]))
    return out
