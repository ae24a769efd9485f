"""The post-link step on this machine's own files: every regular 64-bit ELF program and
shared library under the roots is copied to WORK/orig and WORK/conv, WORK/conv is
converted with the default options (``cfi2sframe --in-place -r WORK/conv --jsonl
WORK/convert.jsonl -j N``), and the two copies are compared.

Reports: files, refused/errors (with the messages), bytes before and after, the
``.sframe`` bytes added, the growth beyond ``.sframe`` per file (median, p90, max and
the largest files) and the tree's growth as a multiple of ``.sframe``'s bytes; the exit
status of ``PROG --version`` and ``PROG --help`` for each program and of a dlopen probe
(``dlopen(path, RTLD_NOW | RTLD_LOCAL)``, built once with gcc or the target's cross gcc)
for each shared library, both copies, natively and under qemu-user (qemu-x86_64;
qemu-aarch64 -L /usr/aarch64-linux-gnu for AArch64 files); then ``verify -r WORK/conv``.

Programs run with standard input /dev/null, a scratch working folder, ``env -i
PATH=/usr/bin:/bin``, a 5 s timeout after which their process group is killed; a
timeout on both copies counts as the same; a pair that differs is run once more before
it counts.  Programs that could change this machine (the script runs as whoever starts
it) are never run: the deny-list (``DENY`` and ``DENY_PREFIXES`` in
tests/support/post_link_tree.py: shutdown, reboot, halt, poweroff, init, telinit,
systemctl, kill*, mount, mkfs*, fsck*, ...) is printed with the figures; under an sbin
folder only ``--version`` is run.

The command is whichever ``python3 -m cfi2sframe`` finds from WORK: set PYTHONPATH to a
checkout to measure that one (the line ``cfi2sframe:`` says which it was).

Usage:
  python3 benchmarks/post_link_tree.py --work /tmp/plt [--roots DIR...] [--max-size 1M]
                                       [-j 2] [--no-run] [--json]
  python3 benchmarks/post_link_tree.py --work /tmp/plt-a64 --roots /usr/aarch64-linux-gnu/lib
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# The shared machinery is the tests' (tests/system/test_post_link_tree.py asserts
# these figures); this checkout's, ahead of a PYTHONPATH naming another one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.post_link_tree import as_json, measure, render  # noqa: E402

ROOTS = ["/usr/bin", "/usr/lib/x86_64-linux-gnu"]


def size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1:].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--roots", nargs="+", default=ROOTS, metavar="DIR",
                        help=f"the folders to copy from (default: {' '.join(ROOTS)})")
    parser.add_argument("--work", required=True, type=Path,
                        help="the work folder (WORK/orig and WORK/conv are made again)")
    parser.add_argument("--max-size", type=size, default=None, metavar="BYTES",
                        help="leave out files larger than this (K, M, G)")
    parser.add_argument("-j", "--jobs", type=int, default=2,
                        help="conversions and runs at once (default 2)")
    parser.add_argument("--no-run", action="store_true",
                        help="convert and verify only: no programs run, nothing dlopened")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--save", type=Path, metavar="FILE",
                        help="also write the figures as JSON to FILE")
    args = parser.parse_args()
    start = time.monotonic()
    report = measure(args.roots, args.work.resolve(), args.max_size, args.jobs,
                     run=not args.no_run)
    if args.save:
        args.save.write_text(as_json(report))
    print(as_json(report) if args.json else render(report))
    if not args.json:
        print(f"\n{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
