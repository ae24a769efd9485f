"""An assembler process started on a source written to a temporary folder.

The part of running the assembler that needs nothing of the conversion: the command
line starts it before the conversion's modules are imported (``cli.early``: the
imports are a large part of a small file's conversion), and ``probe.AssemblerJob``
adopts it where it is the run the conversion would start, or starts its own.  Kept to
the standard library and ``spawn`` (not ``subprocess``: ~15M instructions to import),
so that starting it costs little more than the process.

``Launch`` is started, taken over (``take_over``, where it is a given run: its copy of
the source is then let go) or stopped (``stop``). For GNU as, clang's
``.addrsig``/``.addrsig_sym`` lines are left empty (``without_addrsig``: a linker's
table GNU as does not know; ``is_gnu_as``, asked once per command).
"""

from __future__ import annotations

import atexit
import errno
import os
import re

from ..errors import Cfi2SframeError
from ..spawn import Child, TimedOut, run
from .patterns import deferred


class Launch:
    """``command -I include_dir -o OUT IN`` running on ``source`` written to IN."""

    def __init__(self, command: tuple[str, ...], source: str | bytes, display_name: str,
                 include_dir: str) -> None:
        self.command, self.source = command, source
        self.display_name, self.include_dir = display_name, include_dir
        self.tmp = PrivateFolder("cfi2sframe-")
        self.src = os.path.join(self.tmp.name, "input.s")
        self.obj = os.path.join(self.tmp.name, "input.o")
        written = without_addrsig(source) if _asks_addrsig(source) and is_gnu_as(command) \
            else source
        try:
            if isinstance(written, bytes):
                with open(self.src, "wb") as raw:
                    raw.write(written)
            else:
                with open(self.src, "w", encoding="utf-8", errors="surrogateescape") as handle:
                    handle.write(written)
        except OSError as exc:
            self.tmp.cleanup()
            raise Cfi2SframeError(display_name, "cannot write the assembler's input: "
                                                f"{exc.strerror or exc}") from None
        cmd = [*command, "-I", include_dir, "-o", self.obj, self.src]
        try:
            self.proc = Child(cmd, no_input=True)
        except OSError as exc:
            self.tmp.cleanup()
            raise Cfi2SframeError("", f"cannot run assembler '{command[0]}': {exc}") from None

    def take_over(self, command: tuple[str, ...], source: str | bytes, display_name: str,
                  include_dir: str) -> bool:
        """Whether this is the run of ``command`` on ``source`` (the same bytes or text)
        these arguments would start; if it is, its copy of the source is let go (the
        caller holds one: a large source is not held twice through the conversion)."""
        same = (self.command, self.display_name, self.include_dir) == (
            command, display_name, include_dir) and self.source == source
        if same:
            self.source = b""
        return same

    def stop(self) -> None:
        """Kill the assembler if it still runs and remove its files (again: nothing)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        self.tmp.cleanup()


class PrivateFolder:
    """A new folder only this user may enter (0700), under the first usable one of
    ``TMPDIR``, ``TEMP``, ``TMP``, ``/tmp``, ``/var/tmp``, ``/usr/tmp`` and the current
    folder, removed with what it holds by ``cleanup`` or, where nothing called it, at
    the interpreter's exit.  What ``tempfile.TemporaryDirectory`` gives the assembler's
    files, without importing ``tempfile`` (with ``shutil``, ``random`` and
    ``weakref``, ~15M instructions, a tenth of a small file's conversion); its error
    where no folder is usable is the same."""

    def __init__(self, prefix: str) -> None:
        self.name = _new_folder(prefix)
        atexit.register(self.cleanup)

    def cleanup(self) -> None:
        """Remove the folder and its files (again: nothing)."""
        atexit.unregister(self.cleanup)
        if os.path.lexists(self.name):
            _remove(self.name)


def _new_folder(prefix: str) -> str:
    """The path of a folder made (exclusively, mode 0700) under a name no other has."""
    bases = [os.environ[name] for name in ("TMPDIR", "TEMP", "TMP") if os.environ.get(name)]
    bases += ["/tmp", "/var/tmp", "/usr/tmp"]
    try:
        bases.append(os.getcwd())
    except OSError:
        bases.append(os.curdir)
    for base in bases:
        for _ in range(100):  # (a name taken: another; 32 random bits each)
            path = os.path.abspath(os.path.join(base, prefix + os.urandom(4).hex()))
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue
            except OSError:
                break  # (not usable: the next)
            return path
    raise FileNotFoundError(errno.ENOENT, f"No usable temporary directory found in {bases}")


def _remove(path: str) -> None:
    """``path``, a folder, with everything under it (symbolic links not followed);
    what is gone already is no error."""
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            _remove(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass


# LLVM's address-significance table: ``.addrsig`` asks for it, each ``.addrsig_sym``
# names a symbol whose address is taken; only a linker's identical-code folding reads
# it.  GNU as knows neither directive (one error per line: some 430 for a csmith program).
_ADDRSIG_TEXT = r"^[ \t]*\.addrsig(?:_sym[ \t][^\n]*)?[ \t]*$"
_ADDRSIG_LINE = deferred(_ADDRSIG_TEXT, re.M)
_ADDRSIG_LINE_BYTES = deferred(_ADDRSIG_TEXT.encode(), re.M)
_GNU_AS: dict[tuple[str, ...], bool] = {}


def _asks_addrsig(source: str | bytes) -> bool:
    if isinstance(source, bytes):
        return b".addrsig" in source
    return ".addrsig" in source


def without_addrsig(source: str | bytes) -> str | bytes:
    """``source`` with its ``.addrsig`` and ``.addrsig_sym`` lines left empty (line
    numbers kept): what clang's ELF assembly asks of a linker only, not of the
    object's code, data or CFI."""
    if isinstance(source, bytes):
        return _ADDRSIG_LINE_BYTES().sub(b"", source)
    return _ADDRSIG_LINE().sub("", source)


def is_gnu_as(command: tuple[str, ...]) -> bool:
    """Whether ``command`` is GNU as (it says so in ``--version``; asked once)."""
    if command not in _GNU_AS:
        try:
            _, out = run([*command, "--version"], 30, no_input=True)
            _GNU_AS[command] = out.startswith(b"GNU assembler")
        except (OSError, TimedOut):
            _GNU_AS[command] = False
    return _GNU_AS[command]
