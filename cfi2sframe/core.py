"""Which core runs the hot loops: the compiled one (``csrc/*.c``, the extension
``_core``, built by ``pip install`` where a C compiler and the Python headers are
found) or the pure-Python code it was written from, which stays the reference and the
fallback.

``CFI2SFRAME_CORE=python`` in the environment picks the pure-Python core even where the
compiled one is built (the tests run both and compare them).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def compiled() -> ModuleType | None:
    """The compiled core, or None where it is not built or not wanted."""
    if os.environ.get("CFI2SFRAME_CORE", "") == "python":
        return None
    try:  # an optional extension module, so imported by name
        return importlib.import_module("cfi2sframe._core")
    except ImportError:
        return None


def name() -> str:
    """The core that runs, in words (for ``--version``)."""
    return "compiled C core" if compiled() is not None else "pure-Python core"
