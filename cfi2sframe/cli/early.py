"""The assembler started before the conversion's modules are imported.

``cfi2sframe foo.s -o foo.sframe``, the build step, spends some 50 ms importing what
the conversion needs before it can start the assembler, whose run is most of the
conversion of a small file.  For the plainest form of that command (one ``.s`` file,
the default target and assembler, options that do not change the assembler's run),
this starts the run the conversion would start, from the arguments alone; the
conversion takes it over where it is that run (``probe.AssemblerJob``: the same
command, input bytes, name and include folder) and stops it otherwise.  Any other
command line starts nothing here.

``launch`` starts it before ``cli.convert`` and the conversion's modules load;
``cli.main`` stops it once the command ends (nothing where the conversion took it over).
"""

from __future__ import annotations

import os
import stat

from ..errors import Cfi2SframeError

TYPE_CHECKING = False  # (as type checkers read it: ``typing`` costs this path ~5 ms)
if TYPE_CHECKING:  # (the launcher, with subprocess, loads for a run it starts only)
    from ..frontend.launch import Launch

# Options of the conversion that leave the assembler's run as it is: those that take
# a value, and switches.  Any other option starts nothing early.
_WITH_VALUE = ("-o", "--output", "--emit", "--sframe-version")
_SWITCHES = ("-w", "--no-warnings", "--no-flex", "--strict-assembler", "--fatal-warnings")
# The default target's assembler (``arch`` x86_64's ``default_assembler``, read there
# at the cost of the imports this module saves): a command line naming another target
# or assembler starts nothing early.  Were the two ever to differ, the conversion
# would not take this run over (``Launch.take_over``): time lost, never a wrong run.
_ASSEMBLER = ("as",)


def launch(argv: list[str]) -> Launch | None:
    """The assembler started on the one ``.s`` input of a plain conversion command
    line, as the conversion would start it; None for any other command line, or where
    starting it fails (the conversion then says why)."""
    inputs = []
    position = 0
    while position < len(argv):
        word = argv[position]
        name = word.split("=", 1)[0]
        if name in _WITH_VALUE and "=" not in word:
            position += 2
            continue
        if name not in _WITH_VALUE and name not in _SWITCHES:
            if word.startswith("-"):
                return None
            inputs.append(word)
        position += 1
    if len(inputs) != 1 or not inputs[0].endswith(".s") or position > len(argv):
        return None
    path = inputs[0]
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # (a pipe is read once, by the conversion)
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    from ..spawn import on_path

    if b".sframe" in data or not on_path(_ASSEMBLER[0]):
        return None  # (a probe run, or no assembler: the conversion decides)
    from ..frontend.launch import Launch

    try:
        return Launch(_ASSEMBLER, data, path, os.path.dirname(os.path.abspath(path)))
    except Cfi2SframeError:
        return None  # (the conversion starts its own run, and says what fails)
