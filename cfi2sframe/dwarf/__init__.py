"""DWARF call-frame information: the general home of its semantics (the fast path of
``sframe/fastpath.py`` replays a subset, held equal to it).

``opcodes`` (the DW_CFA table), ``leb128``, ``ops`` (bytes -> ``Op``),
``interpret`` (``Op``s -> ``Row``s), ``frames`` (the CIE/FDE entry walker) and
``cfi`` (``.eh_frame``/``.debug_frame`` bytes, handed over by a container's reader
such as ``elf.cfi``, -> ``Fde``s and ``Timeline``s).  Nothing here opens a file.
"""
