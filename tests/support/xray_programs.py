"""Real XRay traces for the tests: a C++ program built by clang-14 with XRay
instrumentation and run under its runtime (FDR single- and multi-threaded, with
arguments, tail calls, recursion, typed and custom events; basic mode).  The callers
``require`` clang-14 first."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

PROGRAM = r"""
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>
#include <pthread.h>
#include <stdio.h>
[[clang::xray_always_instrument, clang::xray_log_args(1)]] __attribute__((noinline))
int argf(int x) { return x + 1; }
[[clang::xray_always_instrument]] __attribute__((noinline)) int leaf(int x) { return x * 3; }
[[clang::xray_always_instrument]] __attribute__((noinline))
int tailer(int x) { return leaf(x + 2); }
[[clang::xray_always_instrument]] __attribute__((noinline))
int rec(int n) { return n <= 0 ? 0 : 1 + rec(n - 1); }
#ifdef TYPED
[[clang::xray_always_instrument]] __attribute__((noinline)) void tev(void) {
  static const char m[] = "typed"; __xray_typedevent(7, m, 5); }
#endif
#ifdef EVENTS
[[clang::xray_always_instrument]] __attribute__((noinline)) void ev(void) {
  static const char m[] = "hello"; __xray_customevent(m, 5); }
#endif
[[clang::xray_always_instrument]] __attribute__((noinline)) void *worker(void *p) {
  long s = 0; for (int i = 0; i < 3; i++) s += argf(i) + rec(2); return (void *)s; }
int main(void) {
#ifdef FDR
  __xray_log_init_mode("xray-fdr", "buffer_size=16384:buffer_max=10:func_duration_threshold_us=0");
  __xray_patch();
#endif
  int t = argf(41) + tailer(5) + rec(3);
#ifdef TYPED
  tev();
#endif
#ifdef EVENTS
  ev();
#endif
#ifdef THREADS
  pthread_t th[2]; for (int i = 0; i < 2; i++) pthread_create(&th[i], 0, worker, 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], 0);
#endif
#ifdef FDR
  __xray_log_finalize(); __xray_unpatch(); __xray_log_flushLog();
#endif
  printf("%d\n", t);
  return 0;
}
"""

# name -> (compiler flags, XRAY_OPTIONS mode)
TRACES = {
    "fdr": (["-O2", "-DFDR"], "xray-fdr"),  # a tail call, recursion, arguments
    "fdr-threads": (["-O0", "-DFDR", "-DEVENTS", "-DTHREADS", "-pthread"], "xray-fdr"),
    "basic": (["-O2", "-DTHREADS", "-pthread"], "xray-basic"),
    # a typed event, then a custom event last: LLVM 14's extents, 16 bytes short,
    # cut the buffer inside the custom event
    "fdr-typed": (["-O0", "-DFDR", "-DTYPED", "-DEVENTS"], "xray-fdr"),
}


def make_trace(folder: Path, name: str) -> Path:
    """The program of ``TRACES[name]`` built in ``folder`` (as ``folder / name``) and run:
    the trace its runtime wrote."""
    flags, mode = TRACES[name]
    source, binary = folder / "prog.cc", folder / name
    source.write_text(PROGRAM)
    subprocess.run(["clang-14", "-x", "c++", *flags, "-fxray-instrument",
                    "-fxray-instruction-threshold=1", str(source), "-o", str(binary)],
                   check=True)
    premain = "true" if mode == "xray-basic" else "false"
    env = {**os.environ, "XRAY_OPTIONS": f"patch_premain={premain} xray_mode={mode} "
                                         f"xray_logfile_base={folder}/trace-",
           "XRAY_FDR_OPTIONS": "func_duration_threshold_us=0",
           "XRAY_BASIC_OPTIONS": "func_duration_threshold_us=0"}
    subprocess.run([str(binary)], env=env, check=True, capture_output=True)
    (made,) = folder.glob(f"trace-{name}.*")
    return made


def make_traces(folder: Path, names: Iterable[str] = TRACES) -> dict[str, Path]:
    """name -> its trace, each made in a folder of its own (``folder / name``, where
    the program stays as ``folder / name / name``)."""
    made = {}
    for name in names:
        sub = folder / name
        sub.mkdir()
        made[name] = make_trace(sub, name)
    return made
