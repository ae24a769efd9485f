"""Find the CFI statements of an assembly file without parsing instructions.

Only lines that can matter are looked at: a regular expression finds lines
holding ``.cfi_``, a comment delimiter, a symbol assignment or a block
directive; everything else (instructions, data) is skipped unread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Cfi2SframeError

_CANDIDATE = re.compile(
    r"\.cfi_|/\*|\*/|=|\.(?:set|equ|equiv|eqv|macro|endm|rept|irp|irpc|endr|if\w*|endif)\b"
)
_BLOCK_OPEN = re.compile(r"\.(?:macro|rept|irp|irpc|if\w*)\b", re.I)
_BLOCK_CLOSE = re.compile(r"\.(?:endm|endr|endif)\b", re.I)
_ASSIGN = re.compile(
    r"^\s*(?:\.(?:set|equ|equiv|eqv)\s+([A-Za-z_.$][\w.$]*)\s*,(.*)"
    r"|([A-Za-z_.$][\w.$]*)\s*==?\s*(.*))$",
    re.S,
)
_LABELS = re.compile(r"^(?:(?:[A-Za-z_.$][\w.$]*|\d+)\s*:(?!:)\s*)*")


@dataclass(frozen=True)
class Statement:
    """A CFI statement: its text, 1-based line and offset of its first character."""

    text: str
    line: int
    offset: int


@dataclass(frozen=True)
class Assignment:
    """``name = expression`` (or ``.set``/``.equ``) at a line, in file order."""

    name: str
    expr: str
    line: int


@dataclass(frozen=True)
class ScanResult:
    """CFI statements and symbol assignments, interleaved in file order."""

    items: tuple[Statement | Assignment, ...]


def _split(
    line: str, comment_chars: str, in_comment: bool
) -> tuple[list[tuple[str, list[int]]], bool]:
    """Split a line into statements, dropping comments.

    Each statement comes with the source column of each of its characters,
    so a label can later be inserted exactly before it.  Strings are
    respected, so ``"#"`` or ``";"`` inside them do not cut the statement.
    Returns whether a ``/*`` comment is still open at the end of the line.
    """
    parts: list[tuple[str, list[int]]] = []
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


def _flush(parts: list[tuple[str, list[int]]], chars: list[str], cols: list[int]) -> None:
    text = "".join(chars)
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    if text:
        parts.append((text, cols[lead : lead + len(text)]))


def scan(text: str, filename: str, comment_chars: str) -> ScanResult:
    """Collect CFI statements and assignments; reject CFI inside macros or ``.if``."""
    items: list[Statement | Assignment] = []
    line_no = 1
    counted_to = 0
    depth = 0
    in_comment = False
    pos = 0
    length = len(text)
    while pos < length:
        match = _CANDIDATE.search(text, pos)
        if match is None:
            break
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.start())
        if line_end < 0:
            line_end = length
        line_no += text.count("\n", counted_to, line_start)
        counted_to = line_start
        parts, in_comment = _split(text[line_start:line_end], comment_chars, in_comment)
        for stmt, cols in parts:
            depth = _classify(stmt, cols, line_start, line_no, depth, items, filename)
        pos = line_end + 1
    return ScanResult(tuple(items))


def _classify(stmt: str, cols: list[int], line_start: int, line_no: int, depth: int,
              items: list[Statement | Assignment], filename: str) -> int:
    """Record one statement; return the new macro/conditional nesting depth."""
    labels = _LABELS.match(stmt)
    skip = labels.end() if labels else 0
    body = stmt[skip:]
    if not body:
        return depth
    lowered = body.lower()
    if lowered.startswith(".cfi_"):
        if depth:
            raise Cfi2SframeError(
                f"{filename}:{line_no}",
                "CFI directive inside .macro, .rept, .irp or .if is not supported "
                "(expand it first, e.g. with 'as -a' or the C preprocessor)",
            )
        # The offset of the directive itself (after any labels on the line).
        items.append(Statement(body, line_no, line_start + cols[skip]))
        return depth
    if _BLOCK_OPEN.match(lowered):
        return depth + 1
    if _BLOCK_CLOSE.match(lowered):
        return max(depth - 1, 0)
    assign = _ASSIGN.match(stmt)
    if assign and "(" not in (assign.group(3) or ""):
        name = assign.group(1) or assign.group(3)
        expr = assign.group(2) if assign.group(1) else assign.group(4)
        items.append(Assignment(name, expr.strip(), line_no))
    return depth
