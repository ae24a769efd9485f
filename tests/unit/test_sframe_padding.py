"""The section ``--emit elf`` adds is handed to the writer as ``build`` made it, its
padding to 8 bytes a patch of its own (``elf/linked.add_loadable_sframe``): appending
the zeros copied libLLVM-14's 5.4 MB section.  Expected bytes counted by hand."""

from __future__ import annotations

from pathlib import Path

from cfi2sframe.elf.linked import add_loadable_sframe
from cfi2sframe.elf.read import open_elf
from cfi2sframe.files import bytes_of
from tests.conftest import require_path

# Its program headers follow the added section in memory, so the section is padded to
# a multiple of 8 (the layout BFD gives): 13 bytes -> 16.
LIBRARY = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def test_the_built_section_is_written_as_it_is_and_padded_by_a_patch() -> None:
    require_path(LIBRARY)
    data = Path(LIBRARY).read_bytes()
    built = b"\xaa" * 13
    copy, _ = add_loadable_sframe(data, len(built), lambda address: built, LIBRARY)
    assert any(patch is built for _, patch in copy.patches)  # not copied
    written = bytes(bytes_of(copy))
    section = open_elf(written, "output").section(".sframe")
    assert section is not None and section.size == 16
    assert written[section.offset:section.offset + 16] == built + bytes(3)
