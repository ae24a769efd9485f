"""DWARF call-frame information: the one home of its semantics.

``opcodes`` (the DW_CFA table), ``leb128``, ``ops`` (bytes -> ``Op``),
``interpret`` (``Op``s -> ``Row``s), ``frames`` (the CIE/FDE entry walker) and
``ehframe`` (``.eh_frame``/``.debug_frame`` of ELF files -> ``Fde``s and
``Timeline``s).
"""
