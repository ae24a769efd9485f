"""What a tree run takes (``batch.inputs.walk_tree``): regular files whose first bytes
are an ELF, ar or Mach-O magic, found by their directory entries' types and 8 bytes
each.  The tree is built to fool those shortcuts: links of every kind, a FIFO that
would hang a reader, names that look right on files that are not, magic on files too
short to be what it says.  The expected lists are written by hand from the rule."""

from __future__ import annotations

import os
from pathlib import Path

from cfi2sframe.batch.inputs import gather, walk_tree

ELF = b"\x7fELF\x02\x01\x01" + bytes(57)  # an ELF64 identification, nothing after


def test_the_walk_takes_regular_files_with_a_magic_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "lib" / "deep").mkdir(parents=True)
    (root / "Bin").mkdir()
    (root / "lib" / "libx.so.1").write_bytes(ELF)
    (root / "lib" / "deep" / "liby.so").write_bytes(ELF)
    (root / "Bin" / "tool").write_bytes(ELF)
    (root / "lib" / "libz.a").write_bytes(b"!<arch>\n")
    (root / "lib" / "macho").write_bytes(bytes.fromhex("cffaedfe07000001"))
    (root / "lib" / "cut").write_bytes(ELF[:4])  # the magic alone: taken (its record says)
    (root / "lib" / "short").write_bytes(ELF[:3])  # not even the magic
    (root / "lib" / "empty.so").write_bytes(b"")
    (root / "lib" / "text.so").write_text("INPUT(libx.so.1)\n")  # a linker script
    (root / "lib" / "thin.a").write_bytes(b"!<thin>\n")  # a thin archive: not taken
    os.link(root / "lib" / "libx.so.1", root / "lib" / "hard")  # one inode, two names
    os.symlink("libx.so.1", root / "lib" / "libx.so")  # a link to a file: not followed
    os.symlink("../lib", root / "Bin" / "lib")  # to a folder: not walked
    os.symlink("nowhere", root / "lib" / "broken")
    os.mkfifo(root / "lib" / "pipe.so")  # a reader would wait forever
    assert walk_tree(str(root)) == [
        f"{root}/Bin/tool",  # a folder's files, then its folders, each sorted by name
        f"{root}/lib/cut", f"{root}/lib/hard", f"{root}/lib/libx.so.1", f"{root}/lib/libz.a",
        f"{root}/lib/macho",
        f"{root}/lib/deep/liby.so",
    ]


def test_named_files_and_folders_each_once(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(ELF)
    (tmp_path / "b").write_bytes(b"named: taken as it is, whatever it holds")
    named = [str(tmp_path / "b"), str(tmp_path / "d"), str(tmp_path / "d" / "a")]
    assert gather(named, True) == [str(tmp_path / "b"), str(tmp_path / "d" / "a")]
