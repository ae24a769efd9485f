"""What the linker that will take an object in reads of ``.sframe``, so that an object
(or an archive member) never gets a section every later link prints an error for.

GNU ld merges the ``.sframe`` of its inputs and refuses, per input, the versions its
libsframe does not read (``error in foo.o(.sframe); no .sframe will be created``,
fatal under ``--fatal-warnings``): 2.40 reads V1 only; 2.41-2.44 V2 without the
PC-relative flag (errata 1 added it, and their reader refuses flags it does not know);
2.45 V2 with it; 2.46 V3 only (gas-sframe-notes.md, sections 6 and 10).  Linkers that
merge nothing (lld, gold, GNU ld before 2.40) leave any version alone.
"""

from __future__ import annotations

import io
import re
from functools import lru_cache

from .arch.base import Arch
from .errors import Cfi2SframeError
from .spawn import TimedOut, run
from .typed import NamedTuple

# --linker-reads: what each choice writes into objects (None: --sframe-version, else 2).
CHOICES = ("auto", "v1", "v2-noflag", "v2", "v3", "any")


class ObjectForm(NamedTuple):
    """The SFrame an object gets: its version and (V2) whether the PC-relative flag is
    set (errata 1)."""

    version: int
    pcrel: bool = True


FORMS = {"v1": ObjectForm(1, False), "v2-noflag": ObjectForm(2, False),
         "v2": ObjectForm(2, True), "v3": ObjectForm(3, True)}

# What each choice is, in messages.
WORDS = {"v1": "SFrame V1 only", "v2-noflag": "SFrame V2 without the PC-relative flag only",
         "v2": "SFrame V2 (errata 1) only", "v3": "SFrame V3 only",
         "any": "no .sframe (it merges none)"}


class Linker(NamedTuple):
    """A linker as its ``--version`` names it, and what it reads (a ``CHOICES`` entry
    other than auto)."""

    name: str
    reads: str


def classify(version_text: str | None) -> Linker:
    """The linker a ``--version`` first line names (None: no linker ran)."""
    if version_text is None:
        return Linker("no ld on PATH", "any")
    first = version_text.strip().splitlines()[0] if version_text.strip() else ""
    if "LLD" in first:
        return Linker("LLD", "any")  # concatenates .sframe, merges none
    if first.startswith("mold "):
        return Linker(first.split(" (")[0], "v3")  # parses V3 (rui314/mold#1511)
    gnu = re.match(r"GNU (ld|gold)\b.*?(\d+)\.(\d+)", first)
    if gnu is None:
        return Linker(first or "an unknown ld", "any")
    tool, major, minor = gnu.group(1), int(gnu.group(2)), int(gnu.group(3))
    name = f"GNU {tool} {major}.{minor}"
    if tool == "gold" or (major, minor) < (2, 40):
        return Linker(name, "any")  # no SFrame support: the sections are copied as they are
    if (major, minor) == (2, 40):
        return Linker(name, "v1")
    if (major, minor) < (2, 45):
        return Linker(name, "v2-noflag")
    if (major, minor) == (2, 45):
        return Linker(name, "v2")
    return Linker(name, "v3")


@lru_cache(maxsize=8)
def ask(command: str) -> Linker:
    """``command --version`` run once per process, classified (its output read as
    ``subprocess``' text mode reads it: the locale's encoding, universal newlines)."""
    try:
        status, out = run([command, "--version"], 30)
    except (OSError, TimedOut):
        return classify(None)
    if status != 0:
        return classify(None)
    return classify(io.TextIOWrapper(io.BytesIO(out)).read())


def linker_command(default_assembler: str) -> str:
    """The linker of a target's toolchain: ``aarch64-linux-gnu-ld`` beside
    ``aarch64-linux-gnu-as``, ``ld`` beside ``as``."""
    prefix = default_assembler[:-2] if default_assembler.endswith("as") else ""
    return prefix + "ld"


def object_form(choice: str, requested: int | None, arch: Arch,
                where: str = "") -> ObjectForm:
    """The SFrame an ``arch`` object gets: what the linker merges (``choice`` auto: the
    one on PATH of the target's toolchain), or the version asked for (``requested``)
    where it merges that or nothing.  A version it cannot merge is refused in one line,
    as is a linker whose SFrame has no ABI for the target (s390x came with errata 1);
    ``where`` names the input in that line."""
    if choice == "auto":
        linker = ask(linker_command(arch.default_assembler))
        origin = f"{linker.name} (the linker on PATH)"
        reads = linker.reads
    else:
        reads = choice
        origin = f"--linker-reads {choice}"
    if reads == "any":
        return ObjectForm(requested or 2)
    form = FORMS[reads]
    if not form.pcrel and arch.sframe_abi_errata1:
        raise Cfi2SframeError(where, f"{origin} reads {WORDS[reads]}, which has no ABI for this "
                                  "target (it came with SFrame V2 errata 1); pass "
                                  "--linker-reads v2 or v3 for a newer linker, or any")
    if requested is not None and requested != form.version:
        raise Cfi2SframeError(where, f"--sframe-version {requested}: {origin} merges "
                                  f"{WORDS[reads]}: every link with this object would "
                                  f"print an error and make no .sframe; drop "
                                  f"--sframe-version, or pass --linker-reads any to write "
                                  f"V{requested} anyway")
    return form
