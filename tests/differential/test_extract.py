"""A section taken out of a file without LLVM (``extract``), and a bare
``__unwind_info`` read as any input (issue 40, item 8).  Oracles: ``llvm-objcopy-14
--dump-section`` for the bytes, ``llvm-objdump-14 --unwind-info`` of the image for what
a bare table holds, ld64.lld-14 for the images."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

SOURCE = """int g(int);
int leaf(int x) { return x * 3; }
int f(int x) { int a[8]; for (int i = 0; i < 8; i++) a[i] = g(x + i); return a[x & 7] + g(a[1]); }
int main(void) { return f(1) + leaf(2); }
"""
TARGETS = {"x86_64": ("x86_64-apple-macosx10.15", "10.15"),
           "arm64": ("arm64-apple-macosx11", "11.0")}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], capture_output=True,
                          text=True, check=False)


def _images(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    """(object, ld64.lld-14 dylib) per target."""
    require("clang-14", "ld64.lld-14")
    (tmp_path / "a.c").write_text(SOURCE)
    out = {}
    for arch, (triple, version) in TARGETS.items():
        obj, dylib = tmp_path / f"a-{arch}.o", tmp_path / f"a-{arch}.dylib"
        subprocess.run(["clang-14", "-target", triple, "-O2", "-c", str(tmp_path / "a.c"),
                        "-o", str(obj)], check=True)
        subprocess.run(["ld64.lld-14", "-arch", arch, "-platform_version", "macos", version,
                        version, "-dylib", "-undefined", "dynamic_lookup", "-o", str(dylib),
                        str(obj)], check=True)
        out[arch] = (obj, dylib)
    return out


def _objcopy(path: Path, section: str, out: Path) -> bytes:
    subprocess.run(["llvm-objcopy-14", "--dump-section", f"{section}={out}", str(path),
                    "/dev/null"], check=True)
    return out.read_bytes()


def test_extract_writes_what_llvm_objcopy_dumps(tmp_path: Path) -> None:
    require("llvm-objcopy-14", "gcc", "as")
    compared = 0
    for arch, (obj, dylib) in _images(tmp_path).items():
        for path, section, names in ((dylib, "__TEXT,__unwind_info", ("__unwind_info",
                                                                      "__TEXT,__unwind_info")),
                                     (obj, "__LD,__compact_unwind", ("__compact_unwind",))):
            expected = _objcopy(path, section, tmp_path / f"oracle-{arch}.bin")
            assert expected
            for name in names:
                out = tmp_path / f"ours-{arch}-{name}.bin"
                proc = run("extract", str(path), "--section", name, "-o", str(out))
                assert proc.returncode == 0, proc.stderr
                assert out.read_bytes() == expected
                compared += 1
    # ELF: our object's .sframe and GNU as's in a linked program
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-O2", "-Wa,--gsframe", str(tmp_path / "p.c"), "-o",
                    str(tmp_path / "prog")], cwd=tmp_path, check=True)
    obj = tmp_path / "fp.o"
    assert run(str(Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s"),
               "-o", str(obj)).returncode == 0
    for path in (obj, tmp_path / "prog"):
        out = tmp_path / "ours.sframe"
        assert run("extract", str(path), "--section", ".sframe", "-o", str(out)).returncode == 0
        assert out.read_bytes() == _objcopy(path, ".sframe", tmp_path / "oracle.sframe")
        compared += 1
    assert compared == 8
    proc = run("extract", str(obj), "--section", ".nope", "-o", str(tmp_path / "x"))
    assert (proc.returncode, proc.stderr) == (1, f"{obj}: error: no section '.nope'\n")
    assert not (tmp_path / "x").exists()


def test_a_bare_unwind_info_is_read_as_the_image_it_came_from(tmp_path: Path) -> None:
    """dump, compact and verify --binary read the table ``compact --emit unwind-info``
    writes and the one lld wrote, taken out: dump prints what llvm-objdump prints of
    the image (the names and meanings ours), compact lists the image's functions."""
    require("llvm-objdump-14", "llvm-objcopy-14")
    for arch, (_obj, dylib) in _images(tmp_path).items():
        lld = _objcopy(dylib, "__TEXT,__unwind_info", tmp_path / f"lld-{arch}.bin")
        table = tmp_path / f"lld-{arch}.bin"
        ours = tmp_path / f"ours-{arch}.bin"
        assert run("compact", str(dylib), "--emit", "unwind-info", "-o",
                   str(ours)).returncode == 0
        oracle = subprocess.run(["llvm-objdump-14", "--unwind-info", str(dylib)],
                                capture_output=True, text=True, check=True).stdout
        oracle_lines = oracle.split("Unwind info:\n\n", 1)[1].splitlines()
        proc = run("dump", str(table), "--arch", arch)
        assert proc.returncode == 0, proc.stderr
        assert [re.sub(r"(encoding(\[\d+\])?=0x[0-9a-f]+)  .*", r"\1", line)
                for line in proc.stdout.splitlines()] == oracle_lines
        # the rows' functions by name, as the image's own table names them (lld folds
        # arm64's _main into _leaf's row; ours keeps every function)
        for bare in (table, ours):
            proc = run("compact", str(bare), "--binary", str(dylib))
            assert proc.returncode == 0, proc.stderr
            names = [line.split()[0] for line in proc.stdout.splitlines()[1:]]
            assert set(names) <= {"_leaf", "_f", "_main"} and len(names) >= 2
            if bare == table:
                image_rows = run("compact", str(dylib)).stdout.splitlines()[1:]
                assert names == [line.split()[0] for line in image_rows]
            proc = run("dump", str(bare), "--binary", str(dylib))
            assert proc.returncode == 0 and all(f"  {name}: " in proc.stdout
                                                for name in names)
        # verify: lld's own table checks as the image's does; ours too, entry for entry
        image = run("verify", str(dylib)).stdout.splitlines()[-1]
        for bare in (table, ours):
            proc = run("verify", str(bare), "--binary", str(dylib))
            assert proc.stdout.splitlines()[-1] == image.replace(str(dylib), str(bare))
        # a fault planted in the bare table is found: the index's sentinel before the
        # last function (libunwind then misses it)
        bad = bytearray(lld)
        index_at = int.from_bytes(bad[20:24], "little")
        count = int.from_bytes(bad[24:28], "little")
        sentinel_at = index_at + 12 * (count - 1)
        first = int.from_bytes(bad[index_at:index_at + 4], "little")
        bad[sentinel_at:sentinel_at + 4] = (first + 1).to_bytes(4, "little")
        (tmp_path / "bad.bin").write_bytes(bad)
        proc = run("verify", str(tmp_path / "bad.bin"), "--binary", str(dylib))
        assert proc.returncode == 1 and ": problem: " in proc.stdout
    proc = run(str(table), "-o", str(tmp_path / "t.sframe"))
    assert proc.returncode == 1 and proc.stderr.startswith(
        f"{table}: error: an __unwind_info section (Apple compact unwind)")
