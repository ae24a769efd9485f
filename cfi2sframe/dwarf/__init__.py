"""DWARF call-frame information: the one home of its semantics.

``opcodes`` (the DW_CFA table), ``leb128``, ``ops`` (bytes -> ``Op``),
``interpret`` (``Op``s -> ``Row``s), ``frames`` (the CIE/FDE entry walker) and
``ehframe`` (``.eh_frame``/``.debug_frame`` of ELF files -> ``Fde``s and
``Timeline``s).
"""

from __future__ import annotations

from .ops import Op, OpName, decode_ops, read_sleb, read_uleb, sleb, uleb

__all__ = ["Op", "OpName", "decode_ops", "read_sleb", "read_uleb", "sleb", "uleb"]
