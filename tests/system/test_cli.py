"""The command line as a user runs it: outputs, diagnostics, exit codes, no partial files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe import REASONS, decode_sframe
from tests.conftest import meaning, require, require_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None):
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], input=stdin,
                          capture_output=True, cwd=cwd, check=False)


def test_help_and_version():
    out = run("--help").stdout.decode()
    for option in ("--emit", "--assembler", "--arch", "-w", "--fatal-warnings", "-o",
                   "--list-reasons", "--sframe-version"):
        assert option in out
    assert "placed at" in out and "address 0" in out
    # One usage line, today's formats and outputs, and every subcommand on a line.
    assert out.count("usage:") == 1
    for text in ("version 2", "--sframe-version 3", "AArch64", "s390x", "compact unwind",
                 ".eh_frame", "elf  (executables"):
        assert text in out, text
    from cfi2sframe.cli import SUBCOMMANDS

    for name in SUBCOMMANDS:
        assert re.search(rf"^  {name} +\S", out, re.M), name
    assert re.fullmatch(r"cfi2sframe \d+\.\d+\.\d+ \((compiled C|pure-Python) core\)\n",
                        run("--version").stdout.decode())


def test_list_reasons_names_every_code():
    out = run("--list-reasons").stdout.decode()
    for code in REASONS:
        assert code in out


def test_raw_output_decodes(tmp_path):
    require("as")
    out = tmp_path / "f.sframe"
    proc = run(str(EXAMPLES / "frame_pointer.s"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    section = decode_sframe(out.read_bytes())
    assert section.version == 2 and len(section.fdes) == 1


def test_output_to_a_fifo_writes_into_it_and_keeps_it(tmp_path):
    """``-o /dev/null`` once renamed a regular file over the device: a FIFO stands in."""
    require("as")
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run(str(EXAMPLES / "frame_pointer.s"), "-o", str(fifo))
    reader.join(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert decode_sframe(received[0]).version == 2
    assert os.listdir(tmp_path) == ["pipe"]  # no temporary left beside it


def test_stdin_to_stdout():
    require("as")
    proc = run("-", "-o", "-", stdin=(EXAMPLES / "frameless.s").read_bytes())
    assert proc.returncode == 0, proc.stderr
    section = decode_sframe(proc.stdout)
    assert [meaning(section, f)[1] for f in section.fdes[0].fres] == [8, 16, 24, 32, 8]


def _readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True,
                          check=True).stdout


def _sframe_relocations(obj: Path) -> int:
    blocks = _readelf("-rW", str(obj)).split("Relocation section")
    (block,) = [b for b in blocks if "'.rela.sframe'" in b]
    return block.count("R_X86_64_PC32")


def test_obj_has_one_relocation_per_fde_and_links(tmp_path):
    require("as", "readelf", "ld", "nm")
    obj = tmp_path / "both.o"
    src = tmp_path / "both.s"
    second = (EXAMPLES / "frameless.s").read_text().replace(".LFB0", ".LFB1")
    src.write_text((EXAMPLES / "frame_pointer.s").read_text()
                   + second.replace(".LFE0", ".LFE1"))
    proc = run(str(src), "-o", str(obj))
    assert proc.returncode == 0, proc.stderr
    assert _sframe_relocations(obj) == 2
    assert "SHT_GNU_SFRAME" in _readelf("-SW", str(obj)) or "LOOS+0xffffff4" in _readelf(
        "-SW", str(obj))
    exe = tmp_path / "linked"
    link = subprocess.run(["ld", "-e", "with_frame", "--unresolved-symbols=ignore-all",
                           str(obj), "-o", str(exe)], capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    # The linked section's FDE starts are the functions' final addresses.
    sections = _readelf("-SW", str(exe))
    match = re.search(r"\.sframe\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
    address, offset, size = (int(g, 16) for g in match.groups())
    data = exe.read_bytes()[offset : offset + size]
    section = decode_sframe(data, address)
    symbols = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
    want = sorted(int(line.split()[0], 16) for line in symbols.splitlines()
                  if line.endswith((" with_frame", " frameless")))
    assert [f.start_address for f in section.fdes] == want


def test_asm_fragment_assembles_with_the_input(tmp_path):
    require("as", "readelf")
    frag = tmp_path / "fragment.s"
    proc = run(str(EXAMPLES / "frameless.s"), "-o", str(frag))
    assert proc.returncode == 0, proc.stderr
    text = frag.read_text()
    assert '.pushsection .sframe,"a",@0x6ffffff4' in text
    assert ".long (frameless) - ." in text
    obj = tmp_path / "x.o"
    subprocess.run(["as", str(EXAMPLES / "frameless.s"), str(frag), "-o", str(obj)],
                   check=True)
    assert _sframe_relocations(obj) == 1


def test_skipped_function_warning_and_options(tmp_path):
    require("as")
    src = str(EXAMPLES / "realigned.s")
    out = tmp_path / "r.sframe"
    proc = run(src, "-o", str(out))
    assert proc.returncode == 0
    # Located at the directive that set the CFA on r10, not at .cfi_startproc.
    line = (EXAMPLES / "realigned.s").read_text().splitlines().index("\t.cfi_def_cfa 10, 0") + 1
    assert proc.stderr.decode() == (
        f"{src}:{line}: warning: no SFrame FDE for 'realigned': CFA is based on r10 at offset "
        f"0x5 [cfa-not-sp-fp]\n{src}: warning: no function has SFrame (1 left out); the "
        "section holds no FDE\n")
    assert out.read_bytes()[8:12] == b"\0\0\0\0"  # a header, no FDE (sfh_num_fdes 0)
    assert run(src, "-w", "-o", str(out)).stderr == b""
    out.unlink()
    proc = run(src, "--fatal-warnings", "-o", str(out))
    assert proc.returncode == 1 and not out.exists()
    assert b"error: no SFrame FDE for 'realigned'" in proc.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("\t.text\nf:\n\t.cfi_startproc\n\t.cfi_def_cfa_offset\n\t.cfi_endproc\n",
         r"^bad\.s:4: error: missing operand in '\.cfi_def_cfa_offset'$"),
        ("\t.text\nf:\n\t.cfi_startproc\n\tret\n",
         r"^bad\.s:3: error: \.cfi_startproc without \.cfi_endproc$"),
        ("\t.text\nf:\n\t.cfi_startproc\n\tbogus_insn %rax\n\t.cfi_endproc\n",
         r"bad\.s:4: Error: no such instruction.*\nbad\.s: error: assembler 'as' failed"),
    ],
)
def test_bad_input_is_one_error_line_exit_1_and_no_output(tmp_path, source, expected):
    require("as")
    (tmp_path / "bad.s").write_text(source)
    proc = run("bad.s", "-o", "out.sframe", cwd=tmp_path)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert re.search(expected, err.strip(), re.S), err
    assert not (tmp_path / "out.sframe").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.s"]


def test_missing_input_and_missing_assembler(tmp_path):
    proc = run(str(tmp_path / "nope.s"), "-o", str(tmp_path / "x"))
    assert proc.returncode == 1
    assert proc.stderr.decode().strip() == (
        f"{tmp_path / 'nope.s'}: error: cannot read input: No such file or directory")
    proc = run(str(EXAMPLES / "frameless.s"), "--assembler", "no-such-as", "-o",
               str(tmp_path / "x"))
    assert proc.returncode == 1
    assert proc.stderr.decode().count("\n") == 1
    assert "no assembler found: 'no-such-as' is not on PATH" in proc.stderr.decode()


def test_other_assembler_gives_the_same_section(tmp_path):
    require("as", "clang-14")
    a, b = tmp_path / "a.sframe", tmp_path / "b.sframe"
    src = str(EXAMPLES / "frame_pointer.s")
    assert run(src, "-o", str(a)).returncode == 0
    proc = run(src, "--assembler", "clang-14 -c -x assembler", "-o", str(b))
    assert proc.returncode == 0, proc.stderr
    assert a.read_bytes() == b.read_bytes()


def test_unwritable_output_is_one_error_line(tmp_path):
    require("as")
    target = tmp_path / "no" / "such" / "dir" / "x.sframe"
    proc = run(str(EXAMPLES / "frameless.s"), "-o", str(target))
    assert proc.returncode == 1
    assert proc.stderr.decode() == f"{target}: error: cannot write output: No such file or " \
        "directory\n"


def test_cfi_sections_sframe_never_doubles_the_section(tmp_path):
    """An input asking for .sframe itself: the object holds one .sframe, ours (GNU as
    would write its own and the two would be concatenated). Warnings keep their lines."""
    require("as", "readelf")
    from cfi2sframe import convert_asm
    from cfi2sframe.elf.read import open_elf

    body = (EXAMPLES / "frameless.s").read_text()
    for request in (".cfi_sections .eh_frame, .sframe", ".cfi_sections .sframe"):
        src = tmp_path / "dbl.s"
        src.write_text(f"\t{request}\n{body}")
        out = tmp_path / "dbl.o"
        # V2 as the raw section below (the linker on PATH may read another version).
        proc = run(str(src), "-o", str(out), "--linker-reads", "any")
        assert proc.returncode == 0, proc.stderr
        data = out.read_bytes()
        view = open_elf(data, "object")
        assert [s.name for s in view.sections].count(".sframe") == 1
        ours = convert_asm(src.read_text(), str(src)).raw()
        assert view.section(".sframe").size == len(ours)
        verify = run("verify", str(out))
        assert verify.returncode == 0 and b"0 mismatches" in verify.stdout, verify.stdout


def test_an_assembler_that_always_writes_sframe_gets_its_section_replaced(tmp_path):
    """A wrapper that always adds --gsframe (as a distribution's default-SFrame binutils
    does): the object has one .sframe, ours (by size and by meaning against its own
    DWARF), with one relocation per FDE, and it still links."""
    require("as", "gcc")
    from cfi2sframe import convert_asm
    from cfi2sframe.elf.read import SHT_RELA, open_elf

    wrapper = tmp_path / "gas-sframe"
    wrapper.write_text('#!/bin/sh\nexec as --gsframe "$@"\n')
    wrapper.chmod(0o755)
    source = EXAMPLES / "frameless.s"
    for text in (source.read_text(), "\t.cfi_sections .sframe\n" + source.read_text()):
        src = tmp_path / "in.s"
        src.write_text(text)
        out = tmp_path / "gs.o"
        # V1, what GNU ld 2.40 merges (and gas 2.40 writes), whatever ld is on PATH.
        proc = run("--assembler", str(wrapper), str(src), "-o", str(out),
                   "--linker-reads", "v1")
        assert proc.returncode == 0, proc.stderr
        view = open_elf(out.read_bytes(), "object")
        assert [s.name for s in view.sections].count(".sframe") == 1
        ours = convert_asm(text, str(src), version=1)
        assert view.section(".sframe").size == len(ours.raw())
        index = view.section_names.index(".sframe")
        relocs = [s for s in view.sections if s.kind == SHT_RELA and s.info == index]
        assert len(relocs) == 1 and relocs[0].size == 24 * len(ours.functions)
        verify = run("verify", str(out))
        assert verify.returncode == 0 and b" 0 mismatches" in verify.stdout, verify.stdout
        assert b"only in SFrame" in verify.stdout and b" 0 only in SFrame" in verify.stdout


def test_compact_maps_a_large_elf_file_as_verify_does(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]):
    """``compact`` writes no file in an ELF input's place (``-o`` naming it is refused),
    so a large one is mapped (``files.read_input``), not copied into memory first: the
    copy was 110 MB of libLLVM-14's peak and its page faults.  The listing is the same
    either way."""
    from cfi2sframe import files, inputs
    from cfi2sframe.cli import main

    program = "/usr/bin/ls"
    require_path(program)
    args = ["compact", "--check", program]
    assert main(args) == 0  # (read: smaller than MAP_AT_LEAST)
    read_listing = capsys.readouterr().out
    monkeypatch.setattr(files, "MAP_AT_LEAST", 0)  # as a large file is

    def copied(path: str) -> bytes:
        raise AssertionError(f"{path} read into memory, not mapped")

    monkeypatch.setattr(inputs, "read_bytes", copied)
    assert main(args) == 0
    assert capsys.readouterr().out == read_listing != ""
