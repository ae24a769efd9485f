"""Make (once, cached) a large XRay FDR trace: a 4-thread program compiled by clang-14
with -fxray-instrument, run with FDR buffers big enough to keep every record (no
duration threshold), about 10.8 million function records.  Prints the trace's path.

Usage: python benchmarks/make_xray_trace.py [CACHE_DIR]   (default /tmp/cfi2sframe-xray)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

THREADS, ITERATIONS = 4, 450_000  # 6 function records an iteration

PROGRAM = r"""
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>
#include <pthread.h>
#define XI [[clang::xray_always_instrument]] __attribute__((noinline))
XI int leaf(int x) { return x * 3; }
XI int other(int x) { return x ^ 5; }
XI int mid(int x) { return leaf(x) + other(x); }
XI void *worker(void *p) {
  long s = 0;
  for (int i = 0; i < ITERATIONS; i++) s += mid(i);
  return (void *)s;
}
int main(void) {
  __xray_log_init_mode("xray-fdr", "buffer_size=8388608:buffer_max=16:"
                                   "func_duration_threshold_us=0");
  __xray_patch();
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], 0, worker, 0);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], 0);
  __xray_log_finalize(); __xray_unpatch(); __xray_log_flushLog();
  return 0;
}
"""


def make(folder: Path) -> Path:
    """The cached trace, made where it is missing."""
    trace = folder / "trace.fdr"
    if trace.exists():
        return trace
    folder.mkdir(parents=True, exist_ok=True)
    source, binary = folder / "prog.cc", folder / "prog"
    source.write_text(PROGRAM)
    subprocess.run(["clang-14", "-x", "c++", "-O2", "-pthread", "-fxray-instrument",
                    "-fxray-instruction-threshold=1", f"-DTHREADS={THREADS}",
                    f"-DITERATIONS={ITERATIONS}", str(source), "-o", str(binary)],
                   check=True)
    for old in folder.glob("trace-prog.*"):
        old.unlink()
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false xray_mode=xray-fdr "
                                         f"xray_logfile_base={folder}/trace-"}
    subprocess.run([str(binary)], env=env, check=True, capture_output=True)
    (made,) = folder.glob("trace-prog.*")
    made.rename(trace)
    return trace


def main() -> None:
    print(make(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cfi2sframe-xray")))


if __name__ == "__main__":
    main()
