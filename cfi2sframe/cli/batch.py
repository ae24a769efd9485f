"""Many files in one command (``stats``, ``verify``, ``--in-place`` conversion): the
options, and the run that ties inputs, workers, journal, progress and summary."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator

from ..errors import EX_SOFTWARE, Cfi2SframeError
from ..files import refuse_output_naming_input
from ..typed import TYPE_CHECKING

if TYPE_CHECKING:  # (batch.record loads the ELF reader: only a batch run needs it)
    from typing import Any, NoReturn

    from ..batch.progress import Progress
    from ..batch.record import Task


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# select() watches descriptors below 1024, two per worker: past this, workers are no
# faster and the run could not watch them.
MAX_JOBS = 256
MAX_TIMEOUT = 365 * 24 * 3600  # a year: a longer limit is none, and overflows the clock


def _jobs(text: str) -> int:
    value = int(text) if text.isdecimal() else 0
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of jobs (1 to "
                                         f"{MAX_JOBS})")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_TIMEOUT:  # (NaN compares false, inf is above)
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds above 0 and "
                                         f"at most {MAX_TIMEOUT} (a year)")
    return value


def add_batch_options(p: argparse.ArgumentParser, quiet: bool = True) -> None:
    """``-r``, ``--files-from``, ``-j``, ``--timeout``, ``--jsonl``, ``--resume``,
    ``--dask`` and (unless the command has its own) ``-q``."""
    group = p.add_argument_group(
        "many files", "several inputs, folders (-r) or lists run on every core; one "
        "file's failure is recorded and the run goes on (docs/trees.md)")
    group.add_argument("-r", "--recursive", action="store_true",
                       help="folders among the inputs: every ELF file under them (symbolic "
                            "links are not followed; other files are skipped silently)")
    group.add_argument("--files-from", metavar="FILE",
                       help="more inputs, one name per line, from FILE (- for standard "
                            "input)")
    group.add_argument("-0", "--null", action="store_true",
                       help="--files-from names are separated by NUL bytes (find -print0)")
    cores = min(usable_cores(), MAX_JOBS)
    group.add_argument("-j", "--jobs", type=_jobs, default=cores, metavar="N",
                       help=f"files worked on at once, at most {MAX_JOBS} (default: the "
                            f"usable cores, {cores} here)")
    group.add_argument("--timeout", type=_seconds, metavar="S",
                       help="stop the work on a file after S seconds and record a timeout")
    group.add_argument("--jsonl", metavar="FILE",
                       help="write one JSON record per file to FILE as soon as it is done")
    group.add_argument("--resume", action="store_true",
                       help="with --jsonl: keep its records of files done with the same "
                            "options and unchanged since, redo the others (failures too) "
                            "and append their records")
    group.add_argument("--dask", metavar="ADDRESS",
                       help="run on a dask.distributed scheduler (tcp://HOST:8786) instead "
                            "of local processes; workers read the files by absolute path "
                            "(pip install 'cfi2sframe[dask]')")
    if quiet:
        group.add_argument("-q", "--quiet", action="store_true",
                           help="no progress bar and no line per file: the summary only")


def usage_error(command: str, message: str) -> NoReturn:
    """A usage error (exit 2), as argparse reports its own."""
    print(f"cfi2sframe{' ' + command if command else ''}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def many_files(args: argparse.Namespace, inputs: list[str]) -> bool:
    """True when the command line asks for a run over many files."""
    return bool(len(inputs) > 1 or args.recursive or args.files_from or args.jsonl
                or args.dask)

if TYPE_CHECKING:
    Describe = Callable[[dict[str, Any]], str]


def run_batch(args: argparse.Namespace, inputs: list[str], task: Task,
              describe: Describe) -> tuple[list[dict[str, Any]], int]:
    """Every input's record, in input order, and the exit status: 0, 1 when a file
    failed (bad input, mismatch, timeout, crash), 70 when one met a bug of ours.

    Lines go out in input order as soon as the files before them are done; the
    journal gets each record the moment its file is done.
    """
    from ..batch.inputs import gather
    from ..batch.progress import Progress
    from ..batch.record import GOOD_STATUSES, per_member

    if args.resume and not args.jsonl:
        usage_error(getattr(args, "command", None) or "",
                    "--resume needs --jsonl FILE (the records to resume)")
    paths = gather(inputs, args.recursive, args.files_from, args.null)
    if not paths:
        raise Cfi2SframeError("", "no input files (folders need -r; non-ELF files under "
                                  "them are skipped)")
    for option, name in (("--jsonl", args.jsonl), ("--plot", getattr(args, "plot", None))):
        if name:
            refuse_output_naming_input(name, paths, f"{option} {name}")
    if args.jsonl:  # (json and the journal load for a journal only)
        from ..batch.journal import Journal, done, read_journal
    previous = read_journal(args.jsonl) if args.resume else {}
    if args.resume:  # a file converted by a run killed before its record: ok
        task = task._replace(recognise=True)
    results: dict[int, dict[str, Any]] = {}
    todo: list[tuple[int, str]] = []
    for index, path in enumerate(paths):
        record = previous.get(path)
        if record is not None and done(record, path, task):
            results[index] = record
        else:
            todo.append((index, path))
    found = {index: _status(path) for index, path in todo}
    sizes = {index: info.st_size if info else 0 for index, info in found.items()}
    # Largest first: the long files start early and the short ones fill the gaps.
    todo.sort(key=lambda item: -sizes[item[0]])
    progress = Progress(len(todo), sum(sizes.values()), not args.quiet)
    quiet = args.quiet or args.json  # --json: the one object is all of standard output
    journal = Journal(args.jsonl, append=args.resume) if args.jsonl else None
    printed = 0
    try:
        for index, record in _runner(args, todo, task, sizes, _same_files(found)):
            results[index] = record
            if journal is not None:
                journal.add(record)
            progress.advance(record["path"], sizes[index])
            while printed in results:
                for shown in per_member(results[printed]):
                    _show(shown, describe, progress, quiet)
                printed += 1
    finally:
        progress.close()
        if journal is not None:
            journal.close()
    while printed in results:  # all resumed, or the tail after the last new record
        for shown in per_member(results[printed]):
            _show(shown, describe, progress, quiet)
        printed += 1
    records = [member for index in range(len(paths)) for member in per_member(results[index])]
    statuses = {record["status"] for record in records}
    status = EX_SOFTWARE if "internal-error" in statuses else \
        1 if statuses - set(GOOD_STATUSES) else 0
    return records, status


def _status(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same_files(status: dict[int, os.stat_result | None]) -> dict[int, list[int]]:
    """The inputs that name one file (hard links, or a name given twice through a
    link), each index to all of them in input order: a worker does them one after
    another, so a conversion rewrites the first name and finds the next converted,
    never two workers the one file at once."""
    names: dict[tuple[int, int], list[int]] = {}
    for index in sorted(status):
        info = status[index]
        if info is not None and info.st_nlink > 1:
            names.setdefault((info.st_dev, info.st_ino), []).append(index)
    return {index: group for group in names.values() if len(group) > 1 for index in group}


def _runner(args: argparse.Namespace, todo: list[tuple[int, str]], task: Task,
            sizes: dict[int, int],
            together: dict[int, list[int]]) -> Iterator[tuple[int, dict[str, Any]]]:
    if task.command == "stats" and len(todo) == 1 and not args.timeout and not args.dask:
        return _here(todo, task)
    if args.dask:
        from ..batch.cluster import run_dask

        return run_dask(args.dask, todo, task, args.timeout)
    from ..batch.pool import run_local

    return run_local(todo, task, args.jobs, args.timeout, sizes, together)


def _here(todo: list[tuple[int, str]], task: Task) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a run's files worked on in this process, its peak memory each
    one's: one file's ``stats`` loads no pool, forks no worker and sends no record
    through a pipe as JSON.  (A ``--timeout`` needs a worker to stop.)"""
    import resource  # (a C extension: the conversion's parser takes this module's options)

    from ..batch.record import file_record

    for index, path in todo:
        record = file_record(path, task)
        record["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        yield index, record


def _show(record: dict[str, Any], describe: Describe, progress: Progress,
          quiet: bool) -> None:
    """A failed file's error on standard error; a line for every file unless ``-q``."""
    if record["error"]:
        error = record["error"]
        if record["status"] == "internal-error":
            error = f"{record['path']}: internal error: {error} (please report it)"
        progress.write(error, error=True)
    elif not quiet:
        progress.write(describe(record))


def print_summary(records: list[dict[str, Any]], as_json: bool,
                  extra: dict[str, Any] | None = None) -> None:
    """The table at the end of a run, or the records and totals as one JSON object."""
    from ..batch.summary import summarize, summary_table

    summary = summarize(records)
    if as_json:
        import json  # (JSON output only: its import is a start-up cost)

        print(json.dumps({"files": records, "total": summary, "failed": summary["failed"],
                          **(extra or {})}, indent=1))
    else:
        print(summary_table(summary))
    sys.stdout.flush()
