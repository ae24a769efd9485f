"""Functions are named by the symbol that starts their region (issue 14): a function
symbol first, then the label nearest the .cfi_startproc, never another label that
happens to share the address (an empty function's, say)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import require

SHARED = """\
\t.text
\t.globl\tempty
\t.type\tempty, @function
empty:
\t.cfi_startproc
\t.cfi_endproc
\t.size\tempty, .-empty
\t.globl\tnext
\t.type\tnext, @function
next:
\t.cfi_startproc
\tpushq\t%rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\tmovq\t%rsp, %rbp
\t.cfi_def_cfa_register 6
\tpopq\t%rbp
\t.cfi_def_cfa 7, 8
\tret
\t.cfi_endproc
\t.size\tnext, .-next
outer:
inner:
\t.cfi_startproc
\tret
\t.cfi_endproc
\t.globl\tglobal_alias
global_alias:
\t.type\ttyped, @function
typed:
local_after:
\t.cfi_startproc
\tret
\t.cfi_endproc
"""


def test_names_follow_the_labels_of_each_function(asm_timelines) -> None:
    names = [t.name for t in asm_timelines(SHARED)]
    # empty and next share address 0; outer and inner share the next one; at the last,
    # the @function symbol wins over a global and a later local label.
    assert names == ["empty", "next", "inner", "typed"]


def test_warnings_and_compact_name_the_right_function(tmp_path: Path) -> None:
    require("as")
    source = tmp_path / "shared.s"
    source.write_text(SHARED)
    run = [sys.executable, "-m", "cfi2sframe"]
    proc = subprocess.run([*run, str(source), "-o", str(tmp_path / "out.sframe")],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert "shared.s:5: warning: no SFrame FDE for 'empty': the function is empty" \
        in proc.stderr
    lines = subprocess.run([*run, "compact", str(source)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines[0].split()[:5] == ["empty", "0x0", "0x0", "no", "row:"]
    assert lines[1].split()[:4] == ["next", "0x0", "0x6", "0x01000000"]
    assert [line.split()[0] for line in lines[2:4]] == ["inner", "typed"]
