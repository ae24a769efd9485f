"""XRay instrumentation maps of real binaries (issue 41): every sled (ID, address,
function, kind, always-instrument, version) and every function's name against
``llvm-xray-14 extract`` (with and without ``--symbolize``, ``--no-demangle``), on
C and C++ programs (templates, namespaces, an anonymous namespace, a lambda) built
here by clang-14 with ``-fxray-instrument -fxray-instruction-threshold=1``: PIE and
not, -O0 and -O2, a shared library, a stripped program, and entry versions 0 and 1
(clang-14's own assembly with the map written absolute, as older compilers did: a
PIE's then come from R_X86_64_RELATIVE relocations).  A typed-event sled (kind 5)
makes llvm-xray 14 fail; its expectation is llvm-xray's reading of the same file
with that byte made a custom event (4).  Sled coverage by unwind information
against ``readelf --debug-dump=frames`` FDE ranges, converted (``--in-place``) and
not; names against ``c++filt``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.xray.instr_map import demangled, id_names, open_instr_map, read_instr_map
from tests.conftest import cfi2sframe, require

CXX = r"""
#include <xray/xray_interface.h>
#include <stdio.h>
#define X [[clang::xray_always_instrument]] __attribute__((noinline))
namespace outer { namespace inner {
template <typename T, int N> struct Box {
  X T get(T x) const { return x + N; }
  X Box &operator+=(const Box &) { return *this; }
};
} }
namespace { X int hidden(int x) { return x ^ 5; } }
X int leaf(int x) { return x * 3; }
X int tailer(int x) { return leaf(x + 2); }
[[clang::xray_always_instrument, clang::xray_log_args(1)]] __attribute__((noinline))
int argf(int x) { return x + 1; }
X void ev(void) { static const char m[] = "hello"; __xray_customevent(m, 5); }
#ifdef TYPED
X void tev(void) { static const char m[] = "typed"; __xray_typedevent(7, m, 5); }
#endif
template <typename F> X int apply(F f) { return f(2); }
int main(void) {
  outer::inner::Box<int, 3> b; outer::inner::Box<long, 4> c; b += b; ev();
#ifdef TYPED
  tev();
#endif
  auto lam = [](int v) { return v * 7; };
  printf("%d\n", leaf(1) + tailer(2) + argf(3) + b.get(1) + (int)c.get(2) + hidden(4)
         + apply(lam));
  return 0;
}
"""

C = r"""
#include <stdio.h>
#define X __attribute__((xray_always_instrument, noinline))
X static int twice(int x) { return 2 * x; }
X int sum(int n) { int s = 0; for (int i = 0; i < n; i++) s += twice(i); return s; }
X int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
int main(void) { printf("%d\n", sum(4) + fact(5)); return 0; }
"""

# name -> (source, language, flags)
BINARIES = {
    "cxx-O0-pie": (CXX, "c++", ["-O0", "-fPIE", "-pie"]),
    "cxx-O2-pie": (CXX, "c++", ["-O2", "-fPIE", "-pie"]),
    "cxx-O0-nopie": (CXX, "c++", ["-O0", "-fno-pie", "-no-pie"]),
    "cxx-O2-nopie": (CXX, "c++", ["-O2", "-fno-pie", "-no-pie"]),
    "c-O2-pie": (C, "c", ["-O2", "-fPIE", "-pie"]),
    "c-O0-nopie": (C, "c", ["-O0", "-fno-pie", "-no-pie"]),
    "c-shared": (C.replace("int main(void)", "int entry(void)"), "c",
                 ["-O2", "-fPIC", "-shared"]),
}
# entry versions 0 and 1: the map written absolute (name -> version, PIE)
ABSOLUTE = {"v0-pie": (0, True), "v1-nopie": (1, False), "v1-pie": (1, True)}


def _compile(folder: Path, name: str, source: str, language: str, flags: list[str],
             suffix: str = ".src") -> Path:
    src, out = folder / (name + suffix), folder / name
    src.write_text(source)
    subprocess.run(["clang-14", "-x", language, *flags, "-fxray-instrument",
                    "-fxray-instruction-threshold=1", str(src), "-o", str(out)], check=True)
    return out


ENTRY = re.compile(r"(\t\.quad\t)(\S+?)-\.Ltmp\d+\n(\t\.quad\t)(\S+?)-\(\.Ltmp\d+\+8\)\n"
                   r"(\t\.byte\t0x[0-9a-f]+\n\t\.byte\t0x[0-9a-f]+\n)\t\.byte\t0x02\n")


def _absolute(folder: Path, name: str, version: int, pie: bool) -> Path:
    """clang-14's assembly with each map entry's two PC-relative words made absolute
    and its version byte ``version`` (the layout the notes give entries before 2)."""
    flags = ["-O2", "-fPIE", "-pie"] if pie else ["-O2", "-fno-pie", "-no-pie"]
    src = folder / f"{name}.cc"
    src.write_text(CXX)
    asm = subprocess.run(["clang-14", "-x", "c++", *flags[:2], "-fxray-instrument",
                          "-fxray-instruction-threshold=1", "-S", str(src), "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    rewritten, count = ENTRY.subn(rf"\1\2\n\3\4\n\5\t.byte\t{version:#04x}\n", asm)
    assert count >= 15, count
    return _compile(folder, name, rewritten, "assembler", [*flags, "-lstdc++"], ".s")


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require("clang-14", "llvm-xray-14")
    folder = tmp_path_factory.mktemp("xmap")
    made = {name: _compile(folder, name, *spec) for name, spec in BINARIES.items()}
    made |= {name: _absolute(folder, name, *spec) for name, spec in ABSOLUTE.items()}
    made["stripped"] = folder / "stripped"
    shutil.copy(made["cxx-O2-pie"], made["stripped"])
    subprocess.run(["strip", str(made["stripped"])], check=True)
    made["typed"] = _compile(folder, "typed", CXX, "c++", ["-O0", "-DTYPED"])
    return made


def llvm_extract(path: Path, *flags: str) -> list[dict[str, object]]:
    import yaml

    out = subprocess.run(["llvm-xray-14", "extract", *flags, str(path)], check=True,
                         capture_output=True, text=True).stdout
    rows = list(yaml.safe_load(out))
    for row in rows:
        row.setdefault("version", 0)  # (extract leaves a version 0 out)
    return rows


def ours(path: Path, demangle: bool = True) -> list[dict[str, object]]:
    found = open_instr_map(str(path))
    names = id_names(found, demangle)
    return [{"id": s.func_id, "address": s.address, "function": s.function,
             "kind": str(s.kind), "always-instrument": s.always_instrument,
             "function-name": names[s.func_id], "version": s.version} for s in found.sleds]


def _unnamed(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in row.items() if k != "function-name"} for row in rows]


NAMES = ["cxx-O0-pie", "cxx-O2-pie", "cxx-O0-nopie", "cxx-O2-nopie", "c-O2-pie",
         "c-O0-nopie", "c-shared", "v0-pie", "v1-nopie", "v1-pie", "stripped"]


@pytest.mark.parametrize("name", NAMES)
def test_every_sled_and_name_as_llvm_xray_extract(binaries: dict[str, Path], name: str) -> None:
    path = binaries[name]
    want = llvm_extract(path, "--symbolize")
    assert ours(path) == want
    assert _unnamed(ours(path)) == _unnamed(llvm_extract(path))
    assert ours(path, demangle=False) == llvm_extract(path, "--symbolize", "--no-demangle")
    functions = {row["id"] for row in want}
    assert len(functions) >= (4 if name.startswith("c-") else 8), functions
    if name.startswith("v"):
        assert {row["version"] for row in want} == {int(name[1])}
    kinds = {row["kind"] for row in want}
    if name.startswith(("cxx", "v")):  # -O0 makes no tail call
        assert kinds == {"function-enter", "function-exit", "log-args-enter", "custom-event"
                         } | ({"tail-exit"} if "-O0" not in name else set()), kinds


def test_names_are_c_plus_plus_filt_s(binaries: dict[str, Path]) -> None:
    """The demangled names are those c++filt prints for the symbols."""
    found = open_instr_map(str(binaries["cxx-O2-pie"]))
    symbols = sorted({f.symbol for f in found.functions if f.symbol})
    filt = subprocess.run(["c++filt"], input="\n".join(symbols) + "\n", check=True,
                          capture_output=True, text=True).stdout.splitlines()
    assert demangled(symbols) == dict(zip(symbols, filt, strict=True))
    assert sum(name != plain for name, plain in zip(symbols, filt, strict=True)) >= 6


def test_a_typed_event_sled_is_read(binaries: dict[str, Path], tmp_path: Path) -> None:
    """llvm-xray 14 knows sled kinds 0 to 4 and refuses the file ("Exec format
    error"); with the typed-event byte made a custom event (4) it reads it, and that
    reading, with the sled named a typed event, is what ours must be."""
    path = binaries["typed"]
    refused = subprocess.run(["llvm-xray-14", "extract", str(path)], capture_output=True,
                             text=True)
    assert refused.returncode != 0 and "Exec format error" in refused.stderr
    found = open_instr_map(str(path))
    typed = [s for s in found.sleds if str(s.kind) == "typed-event"]
    assert len(typed) == 1
    patched = bytearray(path.read_bytes())
    patched[typed[0].offset + 16] = 4
    (tmp_path / "patched").write_bytes(patched)
    want = llvm_extract(tmp_path / "patched", "--symbolize")
    at = found.sleds.index(typed[0])
    want[at]["kind"] = "typed-event"
    assert ours(path) == want
    assert want[at]["function-name"] == "tev()"
    assert read_instr_map(bytes(patched)).sleds[at].kind == "custom-event"


def readelf_fde_ranges(path: Path) -> list[tuple[int, int]]:
    """``readelf --debug-dump=frames``: every FDE's pc=start..end, as (start, size)."""
    out = subprocess.run(["readelf", "--debug-dump=frames", str(path)], check=True,
                         capture_output=True, text=True).stdout
    return [(int(a, 16), int(b, 16) - int(a, 16))
            for a, b in re.findall(r" FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out)]


NO_CFI = r"""
#define X __attribute__((xray_always_instrument, noinline))
X int bare(int x) { return x + 9; }
"""


@pytest.fixture(scope="module")
def coverage_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A C program with one function compiled without unwind tables (no FDE), as it
    is and converted by cfi2sframe --in-place."""
    require("clang-14", "readelf")
    folder = tmp_path_factory.mktemp("xcover")
    main = folder / "main.c"
    main.write_text(C.replace("int main(void) {", "int bare(int);\nint main(void) {")
                    .replace("fact(5)", "fact(5) + bare(1)"))
    bare = folder / "bare.c"
    bare.write_text(NO_CFI)
    subprocess.run(["clang-14", "-O2", "-fxray-instrument", "-fxray-instruction-threshold=1",
                    "-fno-asynchronous-unwind-tables", "-fno-exceptions", "-c", str(bare),
                    "-o", str(folder / "bare.o")], check=True)
    plain = folder / "plain"
    subprocess.run(["clang-14", "-O2", "-fxray-instrument", "-fxray-instruction-threshold=1",
                    str(main), str(folder / "bare.o"), "-o", str(plain)], check=True)
    converted = folder / "converted"
    shutil.copy(plain, converted)
    proc = cfi2sframe(str(converted), "--in-place", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return {"plain": plain, "converted": converted}


def _trace(path: Path) -> Path:
    """A basic-mode trace header with no records: what verify reads beside --binary."""
    import struct

    trace = path.parent / (path.name + ".xray")
    trace.write_bytes(struct.pack("<HHIQQ8x", 3, 0, 3, 10**9, 0))
    return trace


@pytest.mark.parametrize("name", ["plain", "converted"])
def test_sled_coverage_as_readelf_s_fde_ranges(coverage_binaries: dict[str, Path],
                                               name: str) -> None:
    """Each entry/exit sled is covered where readelf puts an FDE over it; the converted
    file's SFrame covers what its .eh_frame covers (every FDE of this program is one
    SFrame can describe), the plain one has none; 'bare' has neither: a problem."""
    path = coverage_binaries[name]
    ranges = readelf_fde_ranges(path)
    found = open_instr_map(str(path))
    names = id_names(found)
    proc = cfi2sframe("verify", str(_trace(path)), "--binary", str(path), cwd=path.parent)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    neither = 0
    for function in found.functions:
        sleds = [s for s in function.sleds if s.kind.startswith(("function", "tail",
                                                                  "log-args"))]
        covered = sum(any(a <= s.address < a + n for a, n in ranges) for s in sleds)
        sframe = f"{covered} of {len(sleds)}" if name == "converted" else \
            "none (no .sframe section)"
        want = (f"{path}: #{function.func_id} {names[function.func_id]}: {len(sleds)} "
                f"entry/exit sleds, SFrame covers {sframe}, .eh_frame {covered} of "
                f"{len(sleds)}")
        assert want in lines
        neither += len(sleds) - covered
        assert (covered == 0) == (names[function.func_id] == "bare")
    assert neither == 2
    assert sum("neither SFrame nor .eh_frame covers it" in line for line in lines) == 2
    assert lines[-1].endswith("FAILED: basic mode trace, 2 problems")


def test_a_pie_s_absolute_map_is_read_through_its_relocations(binaries: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """GNU ld writes a RELATIVE relocation's addend in place too; with the map's words
    zeroed in the file, llvm-xray still reads the addends, and so must we."""
    path = binaries["v1-pie"]
    data = bytearray(path.read_bytes())
    for sled in open_instr_map(str(path)).sleds:
        data[sled.offset:sled.offset + 16] = bytes(16)
    zeroed = tmp_path / "zeroed"
    zeroed.write_bytes(data)
    assert ours(zeroed) == llvm_extract(zeroed, "--symbolize") == llvm_extract(path,
                                                                              "--symbolize")


@pytest.fixture(scope="module")
def traced(binaries: dict[str, Path]) -> tuple[Path, Path]:
    """A basic-mode trace the C++ program writes (every call: threshold 0)."""
    import os

    path = binaries["cxx-O2-pie"]
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=true xray_mode=xray-basic "
                                         f"xray_logfile_base={path.parent}/trace-",
           "XRAY_BASIC_OPTIONS": "func_duration_threshold_us=0"}
    subprocess.run([str(path)], env=env, check=True, capture_output=True)
    (trace,) = path.parent.glob(f"trace-{path.name}.*")
    return trace, path


def _convert_names(trace: Path, binary: Path) -> list[tuple[int, str]]:
    import yaml

    out = subprocess.run(["llvm-xray-14", "convert", "-f", "yaml", "--symbolize", "-m",
                          str(binary), str(trace)], check=True, capture_output=True,
                         text=True).stdout
    return sorted((r["func-id"], r["function"]) for r in yaml.safe_load(out)["records"])


def test_dump_names_the_ids_as_llvm_xray_convert(traced: tuple[Path, Path]) -> None:
    """Each record's name beside its ID, text and JSON, against ``convert -f yaml
    --symbolize`` (compared sorted: its order is not the file's)."""
    import json

    trace, binary = traced
    want = _convert_names(trace, binary)
    assert len({name for _, name in want}) >= 6
    proc = cfi2sframe("dump", str(trace), "--binary", str(binary), cwd=trace.parent)
    assert proc.returncode == 0, proc.stderr
    got = sorted((int(m[1]), m[2]) for m in re.finditer(
        r"^0x\w+  Function (?:Enter|Exit|Tail Exit|Enter With Arg): #(\d+) (.*?) tsc = ",
        proc.stdout, re.M))
    assert got == want
    proc = cfi2sframe("dump", str(trace), "--binary", str(binary), "--json", cwd=trace.parent)
    records = json.loads(proc.stdout)["records"]
    assert sorted((r["func_id"], r["name"]) for r in records if r["kind"] == "function") \
        == want


def test_verify_flags_an_id_the_map_lacks(traced: tuple[Path, Path], tmp_path: Path) -> None:
    """A trace (built from the format document) calling #1 and #99: the map holds
    IDs 1 to N only (N from llvm-xray extract)."""
    from tests.support.xray_traces import block, func, header

    _, binary = traced
    count = len({row["id"] for row in llvm_extract(binary)})
    trace = tmp_path / "trace"
    body = func(0, 1, 0) + func(1, 1, 1) + func(0, 99, 1) + func(1, 99, 1)
    trace.write_bytes(header() + block(7, body))
    where = 32 + 16 + 4 * 16 + 16  # header, extents, preamble, the first two records
    proc = cfi2sframe("verify", str(trace), "--binary", str(binary), "-q", cwd=tmp_path)
    assert proc.returncode == 1
    assert f"{trace}: at byte {where:#x}: thread 7: function ID #99 is not in {binary}'s " \
           f"instrumentation map ({count} functions)" in proc.stdout.splitlines()
    assert proc.stdout.splitlines()[-1] == f"{trace}: FAILED: FDR trace, 1 problem"
    refused = cfi2sframe("verify", str(trace), "--json", cwd=tmp_path)
    assert refused.returncode == 2 and "no --json" in refused.stderr
