"""``python -m cfi2sframe``."""

from .cli import entry

entry()
