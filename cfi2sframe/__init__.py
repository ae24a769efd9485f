"""cfi2sframe: lower DWARF call-frame information into SFrame stack-trace sections.

The public API, for test harnesses and tools::

    from cfi2sframe import convert_asm, timelines_from_asm, decode_sframe
    result = convert_asm(open("foo.s").read(), "foo.s")
    section = result.raw()            # SFrame V2 bytes
    for skip in result.skips:         # functions left out, and why
        print(skip.reason, skip.detail)
"""

__version__ = "0.1.0"

from .convert import (  # noqa: E402
    Conversion,
    convert_asm,
    encode_sframe,
    lower_all,
    order_functions,
    timelines_from_asm,
)
from .errors import Cfi2SframeError, CfiError, DecodeError  # noqa: E402
from .model import CfaExpr, CfaReg, Location, Row, Rule, Timeline  # noqa: E402
from .sframe.decode import DecodedSection  # noqa: E402
from .sframe.decode import decode as decode_sframe  # noqa: E402
from .sframe.format import Fre, SFrameFunction  # noqa: E402
from .sframe.lower import REASONS, Skip, lower  # noqa: E402

__all__ = [
    "REASONS", "CfaExpr", "CfaReg", "Cfi2SframeError", "CfiError", "Conversion",
    "DecodeError", "DecodedSection", "Fre", "Location", "Row", "Rule", "SFrameFunction",
    "Skip", "Timeline", "convert_asm", "decode_sframe", "encode_sframe", "lower",
    "lower_all", "order_functions", "timelines_from_asm",
]
