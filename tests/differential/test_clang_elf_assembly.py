"""clang's ELF assembly converted by default (GNU as), against clang's own object.

clang writes ``.addrsig`` and one ``.addrsig_sym`` per address-taken symbol, which
GNU as 2.40 does not know; they feed only a linker's identical-code folding.  The
oracle for what the result means is ``clang-14 -c`` of the same program: its
``.eh_frame``, read by our DWARF reader, against the ``.sframe`` of our object at
every PC (``verify``'s comparison), the code laid out alike in both objects.  At -O0
clang's direct object is not the code of its own -S output (it keeps ``shr $1, %eax``
in 3 bytes and some jumps long where its assembler, and GNU as, pick the short
forms), so there the object is ``clang-14 -c`` of the assembly itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cfi2sframe.analysis.compare import verify_elf
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.elf.read import open_elf
from tests.conftest import at_least, cfi2sframe, require
from tests.corpus import CSMITH_INCLUDE, FLAG_SETS, csmith_asm


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, value, size) of every function symbol."""
    view = open_elf(path.read_bytes(), str(path))
    return sorted((s.name, s.value, s.size) for s in view.symbols() if s.kind == 2)


def test_clang_assembly_converts_by_default_and_means_clangs_object(tmp_path: Path,
                                                                     report) -> None:
    require("as", "csmith", "clang-14")
    files = csmith_asm(range(1, 7), ["O2", "O0"], compiler="clang-14", tag="clang14")
    functions = from_c = 0
    for path in files:
        assert ".addrsig" in path.read_text(), path  # what GNU as refused
        ours, theirs = tmp_path / "ours.o", tmp_path / "theirs.o"
        proc = cfi2sframe(str(path), "-o", str(ours), cwd=tmp_path)
        assert proc.returncode == 0 and "Error" not in proc.stderr, (path, proc.stderr)
        seed, flags = path.stem.split("-")
        subprocess.run(["clang-14", "-c", "-w", f"-I{CSMITH_INCLUDE}", *FLAG_SETS[flags],
                        str(path.with_name(f"{seed}.c")), "-o", str(theirs)], check=True)
        if _functions(ours) != _functions(theirs):
            assert flags == "O0", path  # optimised code is laid out alike
            subprocess.run(["clang-14", "-c", str(path), "-o", str(theirs)], check=True)
        else:
            from_c += 1
        assert _functions(ours) == _functions(theirs), path  # the same code layout
        result, _ = verify_elf(str(ours), cfi=read_elf_cfi(str(theirs)))
        assert not result.mismatches and not result.missing and not result.extra, path
        functions += result.checked
    report(f"clang-14 -S (csmith 1-6, -O2 and -O0) through GNU as by default: "
           f"{len(files)} files ({from_c} against clang-14 -c of the C, the rest of the .s), "
           f"{functions} functions equal to clang's .eh_frame at every PC")
    at_least("files", len(files), 10)
    at_least("files against clang-14 -c of the C", from_c, 5)
    at_least("functions", functions, 129)  # 12 files, 6 of the C, 144 here


def test_addrsig_lines_left_empty_and_messages_keep_their_lines(tmp_path: Path) -> None:
    """Only ``.addrsig`` and ``.addrsig_sym`` lines go (an ``.addrsigx`` stays, for the
    assembler to refuse), and GNU as's messages keep the input's line numbers."""
    require("as")
    source = tmp_path / "f.s"
    source.write_text("\t.text\nf:\n\t.cfi_startproc\n\tret\n\t.cfi_endproc\n\t.addrsig\n"
                      "  .addrsig_sym f\n\t.addrsigx\n")
    proc = cfi2sframe(str(source), "-o", str(tmp_path / "f.o"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "f.s:8: Error: unknown pseudo-op: `.addrsigx'" in proc.stderr, proc.stderr
    assert "f.s:6" not in proc.stderr and "f.s:7" not in proc.stderr, proc.stderr
