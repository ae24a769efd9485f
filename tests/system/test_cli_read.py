"""The reading subcommands as a user runs them: output, exit codes, clean errors."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from tests.conftest import require, require_path, small_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str, cwd: Path | None = None):
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], capture_output=True,
                          text=True, cwd=cwd, check=False)


def _obj(tmp_path: Path, example: str = "frame_pointer.s", *extra: str) -> Path:
    out = tmp_path / (Path(example).stem + ".o")
    assert run(str(EXAMPLES / example), *extra, "-o", str(out)).returncode == 0
    return out


def test_dump_raw_and_object_agree(tmp_path):
    require("as")
    obj = _obj(tmp_path, "frame_pointer.s", "--linker-reads", "any")  # V2, as the raw one
    raw = tmp_path / "f.sframe"
    assert run(str(EXAMPLES / "frame_pointer.s"), "-o", str(raw)).returncode == 0
    a, b = run("dump", str(obj)), run("dump", str(raw))
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout
    assert a.stdout.startswith("Contents of the SFrame section .sframe:\n  Header :\n\n"
                               "    Version: SFRAME_VERSION_2\n")
    data = json.loads(run("dump", "--json", str(obj)).stdout)
    assert data["version"] == 2 and data["fdes"][0]["fres"][0]["rules"]["cfa"] == {
        "reg": 7, "offset": 8, "deref": False}


def test_lookup_prints_rules_and_fails_for_uncovered_pcs(tmp_path):
    require("as")
    obj = _obj(tmp_path, "frameless.s")
    proc = run("lookup", str(obj), "0x0", "0x8")  # movq (3 bytes), subq $8 (4 bytes)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("CFA = rsp+8, RA = [CFA-8], FP = rbp (unchanged)")
    assert lines[1].endswith("FRE at 0x7: CFA = rsp+16, RA = [CFA-8], FP = rbp (unchanged)")
    proc = run("lookup", str(obj), "0x10000")
    assert proc.returncode == 1
    assert proc.stderr == "0x10000: error: no SFrame FDE covers this PC\n"


def test_diff_exit_codes(tmp_path):
    require("as")
    a = _obj(tmp_path)
    raw = tmp_path / "a.sframe"
    assert run(str(EXAMPLES / "frame_pointer.s"), "-o", str(raw)).returncode == 0
    proc = run("diff", str(a), str(raw))
    assert proc.returncode == 0 and "1 functions the same, 0 differ" in proc.stdout
    b = _obj(tmp_path, "frameless.s")
    proc = run("diff", str(a), str(b))
    assert proc.returncode == 1
    assert "differs" in proc.stdout


def test_verify_on_our_object(tmp_path):
    require("as")
    obj = _obj(tmp_path)
    proc = run("verify", str(obj))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("1 functions checked at every PC, 0 mismatches, "
                                        "0 without SFrame, 0 only in SFrame")


def test_verify_lists_functions_sframe_lacks_with_reasons(tmp_path):
    require("as")
    both = tmp_path / "both.s"  # one function SFrame describes, one it cannot
    both.write_text((EXAMPLES / "frame_pointer.s").read_text() + (
        EXAMPLES / "realigned.s").read_text().replace(".LFB0", ".LFB9").replace(".LFE0",
                                                                                ".LFE9"))
    obj = tmp_path / "both.o"
    assert run(str(both), "-w", "-o", str(obj)).returncode == 0
    proc = run("verify", str(obj))
    assert proc.returncode == 0
    assert f"{obj}: no SFrame FDE for 'realigned' [cfa-not-sp-fp]" in proc.stdout


def test_corrupt_input_is_one_error_line_with_a_byte_offset(tmp_path):
    bad = tmp_path / "bad.sframe"
    bad.write_bytes(bytes.fromhex("e2de0204030000f8") + b"\x01\x00\x00\x00" * 5)
    for command in (["dump"], ["lookup"], ["diff", str(bad)]):
        args = [*command, str(bad)] + (["0x0"] if command == ["lookup"] else [])
        proc = run(*args)
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "at byte 0x" in proc.stderr
    (tmp_path / "empty").write_bytes(b"")
    proc = run("dump", str(tmp_path / "empty"))
    assert proc.returncode == 1 and proc.stderr == (
        f"{tmp_path / 'empty'}: error: an empty file: this command reads ELF files and raw "
        "SFrame sections\n")
    proc = run("dump", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "cannot read" in proc.stderr


def test_elf_without_sframe_and_not_elf_for_verify(tmp_path):
    require("as")
    src = tmp_path / "x.s"
    src.write_text("\t.text\nf:\n\tret\n")
    obj = tmp_path / "x.o"
    subprocess.run(["as", str(src), "-o", str(obj)], check=True)
    proc = run("dump", str(obj))
    assert proc.returncode == 1 and proc.stderr == f"{obj}: error: no .sframe section\n"
    raw = tmp_path / "r.sframe"
    assert run(str(EXAMPLES / "frameless.s"), "-o", str(raw)).returncode == 0
    proc = run("verify", str(raw))
    assert proc.returncode == 1 and "verify needs an ELF file" in proc.stderr


def test_elf_input_to_raw_and_stats(tmp_path):
    require("as")
    obj = _obj(tmp_path, "frameless.s")
    raw = tmp_path / "from-elf.sframe"
    proc = run(str(obj), "-o", str(raw))
    assert proc.returncode == 0, proc.stderr
    direct = tmp_path / "direct.sframe"
    assert run(str(EXAMPLES / "frameless.s"), "-o", str(direct)).returncode == 0
    assert raw.read_bytes() == direct.read_bytes()
    proc = run("stats", str(obj), "--json")
    data = json.loads(proc.stdout)
    assert data["total"]["fdes"] == 1 and data["total"]["emitted"] == 1
    proc = run("stats", str(obj), str(tmp_path / "missing"))
    assert proc.returncode == 1
    assert "1 FDEs, 1 in SFrame (100.0%)" in proc.stdout
    assert "cannot read" in proc.stderr


def test_linked_elf_raw_output_is_placed_at_an_address(tmp_path):
    require("as", "ld")
    obj = _obj(tmp_path, "frameless.s")
    exe = tmp_path / "exe"
    subprocess.run(["ld", "-e", "frameless", "--unresolved-symbols=ignore-all", str(obj),
                    "-o", str(exe)], check=True, capture_output=True)
    raw = tmp_path / "exe.sframe"
    proc = run(str(exe), "--sframe-address", "0x500000", "-o", str(raw))
    assert proc.returncode == 0, proc.stderr
    from cfi2sframe.sframe.decode import decode

    section = decode(raw.read_bytes(), 0x500000)
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
    address = next(int(line.split()[0], 16) for line in nm.splitlines()
                   if line.endswith(" frameless"))
    assert [f.start_address for f in section.fdes] == [address]
    assert section.flags & 1  # sorted


def test_bad_elf_is_one_error_line(tmp_path):
    require("as")
    obj = _obj(tmp_path, "frameless.s")
    data = obj.read_bytes()
    truncated = tmp_path / "trunc.o"
    truncated.write_bytes(data[:200])
    proc = run(str(truncated), "-o", str(tmp_path / "x"))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"{truncated}: error: ")
    assert not (tmp_path / "x").exists()


def test_debug_frame_input_gives_the_same_section(tmp_path):
    require("as")
    src = tmp_path / "dbg.s"
    src.write_text("\t.cfi_sections .debug_frame\n" + (EXAMPLES / "frame_pointer.s").read_text())
    obj = tmp_path / "dbg.o"
    subprocess.run(["as", str(src), "-o", str(obj)], check=True)
    from_elf, from_asm = tmp_path / "a.sframe", tmp_path / "b.sframe"
    assert run(str(obj), "-o", str(from_elf)).returncode == 0
    assert run(str(src), "-o", str(from_asm)).returncode == 0
    assert from_elf.read_bytes() == from_asm.read_bytes()
    assert decode_first_fde_count(from_elf) == 1


def decode_first_fde_count(path: Path) -> int:
    from cfi2sframe.sframe.decode import decode

    return len(decode(path.read_bytes()).fdes)


# A function described as GNU ld describes .plt (CFA = a DWARF expression), with a
# hand-written SFrame V2 section (bytes from the spec) that says CFA = rsp+8 there.
PLT_LIKE = """\
\t.text
\t.globl f
\t.type f,@function
f:
\t.cfi_startproc
\t# DW_CFA_def_cfa_expression: breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus
\t.cfi_escape 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22
\tnop
\tret
\t.cfi_endproc
.Lend:
\t.section .sframe,"a",@progbits
\t.p2align 3
\t.short 0xdee2
\t.byte 2, 5, 3, 0, -8, 0     # V2, FDE_SORTED|FUNC_START_PCREL, AMD64, fixed RA -8
\t.long 1, 1, 3, 0, 20        # 1 FDE, 1 FRE, 3 FRE bytes, FDEs at 0, FREs at 20
\t.long f - .
\t.long .Lend - f
\t.long 0, 1
\t.byte 0, 0                  # ADDR1 FREs, PC-increment FDE
\t.short 0
\t.byte 0, 0x03, 8            # FRE at 0: SP-based CFA, 1 one-byte offset: CFA = rsp+8
"""


def test_verify_reports_a_dwarf_expression_cfa(tmp_path):
    """Programs linked by GNU ld 2.46 from ``as --gsframe`` objects have SFrame for the
    PLT, whose DWARF CFA is an expression: verify reports the difference (it crashed)."""
    require("as")
    src = tmp_path / "plt.s"
    src.write_text(PLT_LIKE)
    obj = tmp_path / "plt.o"
    subprocess.run(["as", str(src), "-o", str(obj)], check=True)
    proc = run("verify", str(obj))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == [
        f"{obj}: 'f' not checked: the CFA expression reads the PC, which is not known "
        "before linking; SFrame says:",
        "  [0x0, 0x2): CFA = rsp+8, RA = [CFA-8], FP = rbp (unchanged)",
        f"{obj}: 0 functions checked at every PC, 0 mismatches, 0 without SFrame, "
        "0 only in SFrame, 1 with a DWARF CFA expression not evaluated"]


def _v2_plt_got_section(sframe_address: int, plt_got: int, size: int) -> bytes:
    """GNU ld 2.46's SFrame for .plt.got, written from the V2 spec field by field: one
    PC-mask FDE (8-byte blocks) with one FRE saying CFA = SP+16."""
    header = struct.pack("<HBBBbbBIIIII", 0xDEE2, 2, 5, 3, 0, -8, 0, 1, 1, 3, 0, 20)
    start = plt_got - (sframe_address + 28)  # PC-relative to the field itself
    fde = struct.pack("<iIIIBBH", start, size, 0, 1, 0x10, 8, 0)  # ADDR1, PC-mask
    fre = bytes([0, 0x03, 16])  # start 0; SP base, one 1-byte word: CFA = SP+16
    return header + fde + fre


def test_verify_reports_ld_2_46_plt_got_mismatch(tmp_path):
    """GNU ld 2.46 describes .plt.got (8-byte ``jmp *GOT(%rip)`` stubs) as CFA = SP+16,
    where the code and the CFI say SP+8: verify says exactly that."""
    from cfi2sframe.elf.linked import replace_in_place
    from cfi2sframe.elf.read import open_elf
    from cfi2sframe.files import bytes_of
    from tests.conftest import gsframe_program

    program = gsframe_program(tmp_path)
    data = program.read_bytes()
    plt_got = open_elf(data, "program").section(".plt.got")
    assert plt_got is not None and plt_got.size == 8
    patched = replace_in_place(
        data, lambda address: _v2_plt_got_section(address, plt_got.addr, 8), "gs")
    assert patched is not None
    program.write_bytes(bytes_of(patched))
    proc = run("verify", "-q", str(program))
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    name = f"pc+{plt_got.addr:#x}"
    lines = proc.stdout.splitlines()
    assert lines[:2] == [
        f"{program}: mismatch in '{name}':",
        f"  [{plt_got.addr:#x}, {plt_got.addr + 8:#x}): SFrame: CFA = rsp+16, RA = [CFA-8], "
        "FP = rbp (unchanged) | DWARF: CFA = rsp+8, RA = [CFA-8], FP = rbp (unchanged)"]
    # The hand-made section describes .plt.got alone: every other function is a gap.
    assert lines[2].startswith(f"{program}: not covered: ")
    assert lines[3].startswith(f"{program}: 1 functions checked at every PC, 1 mismatches,")


def test_lookup_names_functions_and_takes_their_names(tmp_path):
    """Single-file lookup prints FUNCTION+OFFSET as --module does, takes SYMBOL and
    SYMBOL+OFFSET for a PC (addresses from nm, the oracle), and says both in JSON."""
    require("gcc", "nm")
    program = small_program(tmp_path)
    converted = tmp_path / "prog.sf"
    assert run(str(program), "-w", "--emit", "elf", "-o", str(converted)).returncode == 0
    symbols = {line.split()[2]: int(line.split()[0], 16) for line in subprocess.run(
        ["nm", str(program)], capture_output=True, text=True, check=True).stdout.splitlines()
        if len(line.split()) == 3 and line.split()[1] in "Tt"}
    work = symbols["work"]
    proc = run("lookup", str(converted), "work", "work+0x2", hex(work + 1))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(": func idx")[0] for line in lines] == [
        f"{work:#x}: work+0x0", f"{work + 2:#x}: work+0x2", f"{work + 1:#x}: work+0x1"]
    assert all(f"pc = {work:#x}" in line for line in lines)
    proc = run("lookup", "--json", str(converted), "work+1")
    (record,) = json.loads(proc.stdout)
    assert (record["pc"], record["symbol"], record["offset"], record["function_start"]) == (
        work + 1, "work", 1, work)
    proc = run("lookup", str(converted), "no_such_function")
    assert proc.returncode == 1 and "neither an address" in proc.stderr
    # An object: the symbol's offset in its own section, as every address there is.
    obj = _obj(tmp_path)
    proc = run("lookup", str(obj), "with_frame+1")
    assert proc.returncode == 0 and proc.stdout.startswith("0x1: with_frame+0x1: func idx")


def test_counts_say_dwarf_fdes_described_not_sframe_fdes(tmp_path):
    """A gcc program with a PLT: its one DWARF FDE for .plt is two SFrame FDEs, and
    _start (RA undefined) is left out.  The line and the table count DWARF FDEs
    described against DWARF FDEs (readelf's count), and name the SFrame count apart;
    they had said '4 emitted (100.0%)' for a file where one function is left out."""
    require("gcc", "readelf")
    (tmp_path / "h.c").write_text('#include <stdio.h>\n#include <stdlib.h>\n'
                                  'int main(int c, char **v) { printf("%d\\n", atoi(v[0]) '
                                  '+ c); puts("x"); return 0; }\n')
    subprocess.run(["gcc", "-O1", "h.c", "-o", "h"], cwd=tmp_path, check=True)
    frames = subprocess.run(["readelf", "--debug-dump=frames", "h"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout
    fdes = frames.count(" FDE cie=")
    proc = run("stats", "--json", str(tmp_path / "h"))
    record = json.loads(proc.stdout)["files"][0]
    assert record["fdes"] == fdes
    assert record["described"] == fdes - sum(record["skipped"].values())
    assert record["emitted"] == record["described"] + 1  # the PLT: two SFrame FDEs
    proc = run("stats", str(tmp_path / "h"))
    share = f"{100 * record['described'] / fdes:.1f}%"
    assert (f"{fdes} FDEs, {record['described']} in SFrame ({share}; as "
            f"{record['emitted']} SFrame FDEs)") in proc.stdout
    assert f"{record['emitted']} SFrame FDEs (a PLT's one DWARF FDE is two)" in proc.stdout


def test_files_without_sframe_dump_lookup_and_verify_alike(tmp_path):
    """dump and lookup on an ELF file with DWARF CFI and no .sframe use the section
    cfi2sframe makes of it, in memory, and say so (as --module does): the same text as
    for the file converted to V3. verify says "not checked" and exits 0 for one file as
    for several (a run over many counts it no-sframe, not a failure)."""
    require("gcc")
    program = small_program(tmp_path)
    converted = tmp_path / "prog.v3"
    assert run(str(program), "-w", "--sframe-version", "3", "--emit", "elf", "-o",
               str(converted)).returncode == 0
    for command in (["dump"], ["lookup", "--json"]):
        extra = ["main", "work+1"] if command[0] == "lookup" else []
        made = run(*command, str(program), *extra)
        real = run(*command, str(converted), *extra)
        assert made.returncode == real.returncode == 0, made.stderr
        assert made.stdout == real.stdout
        assert made.stderr == (f"{program}: note: no .sframe section; this is the SFrame V3 "
                               "cfi2sframe makes from its .eh_frame (in memory)\n")
    converted_v2 = tmp_path / "prog.v2"
    assert run(str(program), "-w", "--emit", "elf", "-o", str(converted_v2)).returncode == 0
    one = run("verify", str(program))
    real = run("verify", str(converted_v2))
    twin = tmp_path / "twin"
    shutil.copy(program, twin)
    many = run("verify", str(program), str(twin), "--json")
    assert one.returncode == real.returncode == many.returncode == 0, (one.stdout, many.stdout)
    assert one.stdout.replace(str(program), "F") == real.stdout.replace(str(converted_v2), "F")
    assert " 0 mismatches" in one.stdout and "functions checked at every PC" in one.stdout
    assert one.stderr == (f"{program}: note: no .sframe section; checked the one cfi2sframe "
                          "--in-place would add, made in memory (its place in the file is "
                          "checked when it is written)\n")
    records = json.loads(many.stdout)["files"]
    assert [r["verify"]["made"] and r["verify"]["ok"] for r in records] == [True, True]


def test_address_places_a_raw_section_for_dump_and_lookup(tmp_path):
    """A raw section made for --sframe-address ADDR, read with --address ADDR, names the
    functions at the addresses nm gives (without it, PCs come out relative to 0)."""
    require("gcc", "nm")
    program = small_program(tmp_path)
    raw = tmp_path / "prog.sframe"
    assert run(str(program), "-w", "--sframe-address", "0x5000", "-o",
               str(raw)).returncode == 0
    work = next(int(line.split()[0], 16) for line in subprocess.run(
        ["nm", str(program)], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.endswith(" work"))
    dumped = run("dump", "--address", "0x5000", str(raw)).stdout
    assert f"pc = {work:#x}, size = " in dumped
    assert "pc = -0x" in run("dump", str(raw)).stdout
    proc = run("lookup", "--address", "0x5000", str(raw), hex(work + 1))
    assert proc.returncode == 0 and f"pc = {work:#x}" in proc.stdout
    assert run("lookup", str(raw), hex(work + 1)).returncode == 1


def test_diff_names_functions(tmp_path):
    """V3 describes _start (an outermost frame) and V2 leaves it out: diff names it, at
    the address nm gives."""
    require("gcc", "nm")
    program = small_program(tmp_path)
    for version in ("2", "3"):
        assert run(str(program), "-w", "--sframe-version", version, "--emit", "elf", "-o",
                   str(tmp_path / f"v{version}")).returncode == 0
    start = next(int(line.split()[0], 16) for line in subprocess.run(
        ["nm", str(program)], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.endswith(" _start"))
    proc = run("diff", str(tmp_path / "v3"), str(tmp_path / "v2"))
    assert proc.returncode == 1
    assert f"only in {tmp_path / 'v3'}: '_start' function at {start:#x}" in proc.stdout


def test_lookup_takes_the_names_unwind_prints_and_answers_past_a_bad_one(tmp_path):
    """Issue 40, item 7.  A stripped library's local function, named only by its
    separate debug file (build ID), is taken as unwind prints it, alone and with
    --module as ``function+0xOFF (module)``; an unknown name and an uncovered PC are
    each their own error line while the others are answered, exit 1 at the end (as
    addr2line).  Addresses from nm on the debug file, the oracle."""
    require("nm", "readelf")
    library = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
    notes = subprocess.run(["readelf", "-n", str(library)], capture_output=True, text=True,
                           check=True).stdout
    build_id = notes.split("Build ID: ")[1].split()[0]
    debug = Path(f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug")
    require_path(debug)
    symbols = {line.split()[2]: int(line.split()[0], 16) for line in subprocess.run(
        ["nm", str(debug)], capture_output=True, text=True, check=True).stdout.splitlines()
        if len(line.split()) == 3}
    start = symbols["__libc_start_call_main"]
    pc = start + 0x7A
    proc = run("lookup", str(library), "__libc_start_call_main+0x7a", "no_such_function",
               "0x10", hex(pc))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert [line.split(" func idx")[0] for line in lines] == [
        f"{pc:#x}: __libc_start_call_main+0x7a:"] * 2
    assert all(f"pc = {start:#x}," in line for line in lines)
    assert proc.stderr.splitlines()[1:] == [
        f"{library}: error: 'no_such_function' is neither an address (0x... or decimal) "
        "nor a function symbol of the file",
        "0x10: error: no SFrame FDE covers this PC"]
    bias = 0x7F0000000000
    proc = run("lookup", "--module", f"{library}@{bias:#x}",
               "__libc_start_call_main+0x7a (libc.so.6)", "nope (libc.so.6)",
               "__libc_start_call_main+0x7a")
    assert proc.returncode == 1
    assert [line.split(" func idx")[0] for line in proc.stdout.splitlines()] == [
        f"{bias + pc:#x}: __libc_start_call_main+0x7a (libc.so.6):"] * 2
    assert "libc.so.6: error: 'nope' is neither an address" in proc.stderr
