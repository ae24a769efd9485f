#!/usr/bin/env bash
# The compiled core under AddressSanitizer and UndefinedBehaviorSanitizer (issue 42).
#
#   bash tests/support/sanitize.sh [pytest arguments]
#
# Copies the checkout's tracked files to a scratch folder, builds the core there with
# -fsanitize=address,undefined (every finding fatal: -fno-sanitize-recover=all) and
# runs, there, the compiled core's differential tests (tests/differential/test_core*.py,
# but libLLVM's and s390x V2's cases, the slowest) and the fuzz tier (hypothesis's
# mutated ELF files, and every atheris target that calls the core, at a tenth of its
# budget: CFI2SFRAME_FUZZ_SCALE) with the ASan runtime preloaded into the
# interpreter (CPython is not built with it).  The checkout's own build is never
# touched.  Leak detection is off: CPython keeps its objects to the end by design.
# Arguments replace the default selection (pytest's, paths relative to the root);
# SANITIZE_FLAGS replaces the compiler flags (e.g. without -fno-sanitize-recover=all
# and with UBSAN_OPTIONS=halt_on_error=0, to see every finding of a run at once).
# CC=clang-14 builds with clang (its runtime is then preloaded instead).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cc="${CC:-gcc}"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/cfi2sframe-sanitize.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cd "$root"
git ls-files -z --cached --others --exclude-standard | grep -zv '_core.*\.so$' |
    xargs -0 cp --parents -t "$scratch"
cd "$scratch"
flags="${SANITIZE_FLAGS:--fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g}"
CC="$cc" CFLAGS="$flags" LDSHARED="$cc -shared" LDFLAGS="-fsanitize=address,undefined" \
    python3 setup.py -q build_ext --inplace >/dev/null
if [ "$cc" = "${cc#clang}" ]; then
    runtime="$("$cc" -print-file-name=libasan.so)"
else
    runtime="$("$cc" -print-file-name=libclang_rt.asan-x86_64.so)"
fi
[ -f "$runtime" ] || { echo "sanitize.sh: no ASan runtime for $cc ($runtime)" >&2; exit 1; }
if [ "$#" -eq 0 ]; then  # CI's selection: 250 CPU-seconds (docs/hacking.md)
    budget=tests/fuzz/test_fuzz_budget.py::test_fuzz_target_within_budget
    set -- -n 2 tests/differential/test_core*.py tests/fuzz/test_elf_fuzz.py \
        tests/fuzz/test_fuzz_budget.py -k "not LLVM and not s390x-v2" \
        --deselect "$budget[compact]" --deselect "$budget[compressed]" \
        --deselect "$budget[macho]"
    export CFI2SFRAME_FUZZ_SCALE="${CFI2SFRAME_FUZZ_SCALE:-0.1}"
fi
export CFI2SFRAME_CORPUS="${CFI2SFRAME_CORPUS:-$root/.corpus}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# The sanitized core must be the one imported: nothing falls back to Python silently.
LD_PRELOAD="$runtime" python3 -c 'import sys, cfi2sframe._core as c
assert c.__file__.startswith(sys.argv[1]), c.__file__' "$scratch"
LD_PRELOAD="$runtime" PYTHONPATH="$scratch" python3 -m pytest -q -p no:cacheprovider --capture=sys "$@"
