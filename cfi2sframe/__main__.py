"""``python -m cfi2sframe``."""

import sys

from .cli import main

sys.exit(main())
