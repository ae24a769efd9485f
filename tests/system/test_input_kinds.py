"""Every input kind is told from its bytes before anything runs on it.

Binary input that is not ELF or a raw SFrame section gets one located line and exit 1,
and never reaches the assembler (which printed an error per "line" of it: 24,704 for
libexpat.a).  The assembler given here leaves a mark when it runs, so a test fails if
any of these inputs reaches it.  A raw SFrame section converts without
``--source sframe``.  And no output ever holds an SFrame section with no FDE: GNU ld
refuses to merge ``.sframe`` in every later link against such an object.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cfi2sframe, gsframe_program, require

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")




def _marking_assembler(folder: Path) -> tuple[Path, Path]:
    """An assembler that records that it ran, then runs GNU as."""
    mark = folder / "assembler-ran"
    script = folder / "as-marking"
    script.write_text(f"#!/bin/sh\ntouch {mark}\nexec as \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, mark


def _inputs(folder: Path) -> dict[str, tuple[Path, str]]:
    """(file, the start of the one line it must get) for each kind we refuse."""
    require("ar", "clang-14")
    out: dict[str, tuple[Path, str]] = {}
    random = folder / "random.bin"
    random.write_bytes(bytes((i * 7919 + 13) % 251 for i in range(4096)))
    out["random bytes"] = (random, "not assembly, ELF, an archive or SFrame (starts with "
                                   + random.read_bytes()[:8].hex(" "))
    # A Java class file starts with 0xcafebabe, as a universal Mach-O file does.
    java = folder / "Hello.class"
    java.write_bytes(b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + bytes(64))
    out["Java class"] = (java, "not assembly, ELF, an archive or SFrame (starts with "
                               "ca fe ba be 00 00 00 34)")
    obj = folder / "fp.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(obj)], check=True)
    archive = folder / "libfp.a"
    subprocess.run(["ar", "rcs", str(archive), str(obj)], check=True)
    out["ar archive"] = (archive, "a static library (ar archive)")
    thin = folder / "libthin.a"
    subprocess.run(["ar", "rcsT", str(thin), str(obj)], check=True)
    out["thin archive"] = (thin, "a static library (thin ar archive)")
    source = folder / "f.c"
    source.write_text("int f(int x) { return x + 1; }\n")
    macho = folder / "macho.o"
    subprocess.run(["clang-14", "-target", "x86_64-apple-macosx10.15", "-O2", "-c",
                    str(source), "-o", str(macho)], check=True)
    out["Mach-O object"] = (macho, "a Mach-O x86-64 object")
    arm = folder / "macho-arm64.o"
    subprocess.run(["clang-14", "-target", "arm64-apple-macosx11", "-O2", "-c",
                    str(source), "-o", str(arm)], check=True)
    out["Mach-O arm64 object"] = (arm, "a Mach-O arm64 object")
    fat = folder / "fat.o"  # the universal header, as lipo writes it (2 slices)
    fat.write_bytes(b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + bytes(40))
    out["universal Mach-O"] = (fat, "a universal (fat) Mach-O file")
    return out


def test_binary_inputs_get_one_line_and_never_reach_the_assembler(tmp_path):
    assembler, mark = _marking_assembler(tmp_path)
    inputs = _inputs(tmp_path)
    for kind, (path, says) in inputs.items():
        before = path.read_bytes()
        # compact reads Mach-O (tests/differential/test_macho.py)
        compact = [] if "Mach-O" in kind else [["compact"]]
        for command in (["-o", str(tmp_path / "out.sframe")], ["--emit", "obj", "-o",
                                                               str(tmp_path / "out.o")],
                        *compact):
            args = ([command[0], "--assembler", str(assembler), str(path)] if command ==
                    ["compact"] else [str(path), "--assembler", str(assembler), *command])
            proc = cfi2sframe(*args, cwd=tmp_path)
            lines = proc.stderr.splitlines()
            assert proc.returncode == 1, (kind, command, proc.stderr)
            assert lines == [f"{path}: error: {lines[0].split(': error: ', 1)[1]}"], (kind,
                                                                                    lines)
            assert says in lines[0], (kind, lines[0])
            assert not mark.exists(), (kind, command, "the assembler ran")
            assert not (tmp_path / "out.sframe").exists() and not (tmp_path / "out.o").exists()
        assert path.read_bytes() == before
    # The same assembler does run for assembly (the mark works).
    proc = cfi2sframe(str(EXAMPLES / "frame_pointer.s"), "--assembler", str(assembler),
                      "-o", str(tmp_path / "fp.sframe"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert mark.exists()


def test_a_raw_sframe_section_converts_without_being_named(tmp_path):
    """A raw section (GNU ld's V1, from a gcc -Wa,--gsframe program) is read as one by its
    magic: the same bytes as with --source sframe, in V2 and V3."""
    require("objcopy")
    program = gsframe_program(tmp_path)
    raw = tmp_path / "gs.sframe"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.sframe", str(program),
                    str(raw)], check=True)
    for version in ("2", "3"):
        named = cfi2sframe(str(raw), "--source", "sframe", "--sframe-version", version,
                           "-o", str(tmp_path / "named"), cwd=tmp_path)
        sniffed = cfi2sframe(str(raw), "--sframe-version", version, "-o",
                             str(tmp_path / "sniffed"), cwd=tmp_path)
        assert named.returncode == sniffed.returncode == 0, (named.stderr, sniffed.stderr)
        assert (tmp_path / "sniffed").read_bytes() == (tmp_path / "named").read_bytes()
        assert (tmp_path / "sniffed").read_bytes()[2] == int(version)


def _sections(path: Path) -> str:
    return subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                          check=True).stdout


def _no_fde_header(abi: int, ra_offset: int) -> bytes:
    """An SFrame V2 header with no FDE, from the spec (errata 1): magic 0xdee2, version 2,
    flags FDE_SORTED | FDE_FUNC_START_PCREL, the ABI, fixed FP and RA offsets, no
    auxiliary header, then five zero counts and offsets (28 bytes)."""
    return struct.pack("<HBBBbbB5I", 0xDEE2, 2, 0x1 | 0x4, abi, 0, ra_offset, 0,
                       0, 0, 0, 0, 0)


@pytest.mark.parametrize("source", ["", "\t.data\nvalue:\n\t.long 1\n",
                                    "\t.text\nf:\n\t.cfi_startproc\n\t.cfi_undefined rip\n"
                                    "\tret\n\t.cfi_endproc\n"])
def test_no_functions_is_one_answer(tmp_path, source):
    """An empty input, one without CFI, and one whose every function is left out: the
    library's raw() and the command's raw output are the same header-only section (a
    section that says "no functions"); the forms a linker takes in hold none."""
    require("as")
    from cfi2sframe import convert_asm

    empty = tmp_path / "in.s"
    empty.write_text(source)
    out = tmp_path / "in.sframe"
    proc = cfi2sframe(str(empty), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("warning: no function has SFrame"
                                + (" (1 left out)" if "cfi" in source else "")
                                + "; the section holds no FDE\n")
    header = _no_fde_header(3, -8)  # SFRAME_ABI_AMD64_ENDIAN_LITTLE, RA at CFA-8
    assert out.read_bytes() == header
    conversion = convert_asm(source, str(empty))
    assert conversion.raw() == header and conversion.output("raw") == header
    assert conversion.asm() == conversion.output("asm") == \
        "# cfi2sframe: no function has SFrame; no section\n"
    dump = cfi2sframe("dump", str(out), cwd=tmp_path)
    assert dump.returncode == 0 and "Num FDEs: 0" in dump.stdout


def test_nothing_to_describe_writes_no_section(tmp_path):
    """Assembly without CFI, and an object whose only function SFrame V2 cannot hold
    (Scrt1.o: _start, RA undefined): a warning, and no output a linker takes in holds
    an SFrame section."""
    require("readelf", "as")
    empty = tmp_path / "data.s"
    empty.write_text("\t.data\nvalue:\n\t.long 1\n")
    proc = cfi2sframe(str(empty), "--emit", "obj", "-o", str(tmp_path / "data.o"),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ".data" in _sections(tmp_path / "data.o")
    assert "sframe" not in _sections(tmp_path / "data.o")
    proc = cfi2sframe(str(empty), "--emit", "asm", "-o", str(tmp_path / "data.frag.s"),
                      cwd=tmp_path)
    assert ".section" not in (tmp_path / "data.frag.s").read_text()
    scrt = LIBDIR / "Scrt1.o"
    require(str(scrt)) if not scrt.exists() else None
    copy = tmp_path / "Scrt1.o"
    shutil.copy(scrt, copy)
    proc = cfi2sframe(str(copy), "--in-place", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no .sframe section written" in proc.stderr
    assert copy.read_bytes() == scrt.read_bytes()
    proc = cfi2sframe(str(copy), "--emit", "obj", "-o", str(tmp_path / "S.o"), cwd=tmp_path)
    assert (tmp_path / "S.o").read_bytes() == scrt.read_bytes()


def test_tree_runs_keep_objects_unless_asked(tmp_path):
    """--in-place -r converts programs and leaves relocatable objects as they were;
    --objects converts them too.  A program linked against the untouched Scrt1.o copy
    links without ld's '.sframe' error."""
    require("as", "gcc", "readelf")
    tree = tmp_path / "tree"
    tree.mkdir()
    obj = tree / "fp.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(obj)], check=True)
    program = tree / "prog"
    shutil.copy(gsframe_program(tmp_path), program)
    subprocess.run(["objcopy", "--remove-section=.sframe", str(program)], check=True)
    before = obj.read_bytes()
    proc = cfi2sframe("--in-place", "-r", str(tree), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{obj}: kept: a relocatable object (--objects converts objects too)" in \
        proc.stdout + proc.stderr
    assert obj.read_bytes() == before
    assert ".sframe" in _sections(program)
    proc = cfi2sframe("--in-place", "-r", "--objects", str(tree), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ".sframe" in _sections(obj)
    assert os.access(program, os.X_OK)


def test_every_command_names_every_kind_in_one_line(tmp_path):
    """The read commands on the binary kinds we refuse: one located error line (for a
    run over files, the file's line before the summary), exit 1, nothing assembled.
    A static library is read by dump, stats and verify; lookup and diff say they read
    one file."""
    assembler, mark = _marking_assembler(tmp_path)
    inputs = _inputs(tmp_path)
    commands = {"dump": ["dump", "{}"], "lookup": ["lookup", "{}", "0x10"],
                "diff": ["diff", "{}", "{}"], "verify": ["verify", "{}"],
                "stats": ["stats", "{}"],
                "unwind": ["unwind", "{}", "--snapshot", str(tmp_path / "snap.json")]}
    (tmp_path / "snap.json").write_text('{"regs": {"rip": 16, "rsp": 4096, "rbp": 0}, '
                                        '"memory": []}')
    for kind, (path, says) in inputs.items():
        for name, template in commands.items():
            if kind == "ar archive" and name in ("dump", "verify", "stats"):
                continue  # they read archives (tests/differential/test_archives.py)
            if "Mach-O" in kind and name in ("dump", "lookup", "verify", "stats"):
                continue  # they read Mach-O (tests/differential/test_macho_checks.py)
            proc = cfi2sframe(*(str(path) if arg == "{}" else arg for arg in template),
                              cwd=tmp_path)
            assert proc.returncode == 1, (kind, name, proc.stdout, proc.stderr)
            errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
            assert len(errors) == 1 and errors[0].startswith(f"{path}: error: "), (
                kind, name, proc.stderr)
            expected = ("a static library (ar archive): this command reads one file"
                        if kind == "ar archive" else says)
            assert expected in errors[0], (kind, name, errors[0])
            if name not in ("verify", "stats"):  # a run over files adds its summary
                assert proc.stderr.count("\n") == 1, (kind, name, proc.stderr)
            assert not mark.exists()


def test_an_empty_file_is_named_by_every_read_command(tmp_path):
    """An empty file is empty assembly to conversion (no section, a warning) and "an
    empty file" to every command that reads ELF files (stats called it text)."""
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for args in (["dump", "{}"], ["lookup", "{}", "0x10"], ["verify", "{}"], ["stats", "{}"],
                 ["diff", "{}", "{}"]):
        proc = cfi2sframe(*(str(empty) if arg == "{}" else arg for arg in args), cwd=tmp_path)
        assert proc.returncode == 1, (args, proc.stderr)
        errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
        assert len(errors) == 1 and errors[0].startswith(f"{empty}: error: an empty file"), (
            args, proc.stderr)
