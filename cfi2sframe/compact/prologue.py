"""What a prologue builds, read from the code: the check ``verify`` makes of a
compact encoding where the image keeps no FDE for its function (linkers drop the
FDEs of compact functions), and the encoding ``compact`` gives a function of an
object without one (clang's arm64 objects keep FDEs only for DWARF-mode functions).
x86 here; arm64 in ``_arm64_rules``; a leaf that builds nothing in ``built_rules``.

From the function's first byte: an optional ``endbr64``/``endbr32``, then pushes
(of callee-saved registers, saved; of others, stack only; ``arch.push_registers``),
``mov %sp, %fp`` (the CFA moves to the frame pointer), more pushes, and
``sub $imm, %sp`` while the CFA is on the stack pointer; reading stops at the first
other instruction.  The rules in force there are the body state an encoding must
describe, as ``CompactRules`` (the encodings' own terms, ``encoding.decode``).  None
where the code starts with none of these (nothing was read, so nothing is shown).

arm64: ``stp`` pairs, ``sub sp``, ``add x29, sp``; an arm64 leaf none of whose words
moves sp or calls (``Arch.frame_changes``) is frameless with stack 0. The result is
given in compact terms (``built_rules``) and as an encoding (``prologue_encoding``);
``compact.inputs.from_prologues`` computes an object's rows without an FDE from it.
"""

from __future__ import annotations

from ..arch.base import Arch
from ..reasons import CompactReason, Unrepresentable
from .encoding import encode
from .rules import Code, CompactRules

ENDBR = (b"\xf3\x0f\x1e\xfa", b"\xf3\x0f\x1e\xfb")  # endbr64, endbr32
REX_B = 0x41
MAX_PROLOGUE = 64  # bytes read at most
# x86: the bytes an answer depends on, the last instruction started before MAX_PROLOGUE
# included (``sub $imm32``: 7 bytes); a check may key on them (``check``).
PROLOGUE_REACH = MAX_PROLOGUE + 8


def prologue_rules(code: bytes, arch: Arch) -> CompactRules | None:
    """The rules after the prologue at the start of ``code`` (see the module
    docstring); None when the code starts with no prologue instruction."""
    if arch.prologue_words:
        return _arm64_rules(code, arch)
    ptr = arch.address_size
    callee_saved = set(arch.compact_regs)
    cfa_reg, cfa_offset = arch.sp, ptr
    saved: list[tuple[int, int]] = []
    depth = ptr  # bytes below the CFA the stack pointer is
    pos, read = 0, False
    for endbr in ENDBR:
        if code.startswith(endbr):
            pos = len(endbr)
    while pos < min(len(code), MAX_PROLOGUE):
        byte = code[pos]
        rex = ptr == 8 and byte == REX_B and pos + 1 < len(code) and \
            0x50 <= code[pos + 1] <= 0x57
        if 0x50 <= byte <= 0x57 or rex:
            number = code[pos + 1] if rex else byte
            # r8-r15 (REX.B) have DWARF numbers 8-15, in hardware order
            reg = number - 0x50 + 8 if rex else arch.push_registers[number - 0x50]
            depth += ptr
            if cfa_reg == arch.sp:
                cfa_offset += ptr
            if reg in callee_saved:
                saved.append((reg, -depth))
            pos += 2 if rex else 1
        elif any(code.startswith(move, pos) for move in arch.frame_moves) and \
                cfa_reg == arch.sp:
            cfa_reg, cfa_offset = arch.fp, depth
            pos += len(arch.frame_moves[0])
        elif code.startswith(arch.sub_imm8_opcode, pos) and cfa_reg == arch.sp:
            at = pos + len(arch.sub_imm8_opcode)
            if at >= len(code):
                break
            depth += code[at]
            cfa_offset += code[at]
            pos = at + 1
        elif code.startswith(arch.compact_sub_opcode, pos) and cfa_reg == arch.sp:
            at = pos + len(arch.compact_sub_opcode)
            if at + 4 > len(code):
                break
            amount = int.from_bytes(code[at:at + 4], "little")
            depth += amount
            cfa_offset += amount
            pos = at + 4
        else:
            break
        read = True
    if not read:
        return None
    return CompactRules(cfa_reg, cfa_offset, -ptr, tuple(sorted(saved)))


def built_rules(code: bytes, arch: Arch) -> CompactRules | None:
    """What a function's code builds: its prologue's rules; on arm64 also a leaf that
    builds nothing (no word of it moves the stack pointer or calls:
    ``arch.frame_changes``), whose CFA stays at sp and return address in the link
    register.  None where neither is known (x86 code is not read past the prologue)."""
    rules = prologue_rules(code, arch)
    if rules is not None or not arch.frame_changes or len(code) < 4:
        return rules
    for pos in range(0, len(code) - 3, 4):
        word = int.from_bytes(code[pos:pos + 4], "little")
        if any(word & mask == value for mask, value in arch.frame_changes):
            return None
    return CompactRules(arch.sp, 0, None, ())


def prologue_encoding(code: bytes, arch: Arch) -> int | Unrepresentable[CompactReason] | None:
    """The encoding of what the code builds (``built_rules``), for a function that has
    no CFI; why it has none; None where nothing could be read."""
    rules = built_rules(code, arch)
    return None if rules is None else encode(rules, arch, Code(code))


def _arm64_rules(code: bytes, arch: Arch) -> CompactRules | None:
    """arm64: pairs stored below the stack pointer (``stp``, pre-indexed or at an
    offset; x and d registers), ``sub sp, sp, #imm``, and ``add x29, sp, #imm`` (``mov
    x29, sp``), which puts the CFA on the frame pointer; reading stops at the first
    other instruction, or at a ``sub`` once the CFA is on x29."""
    kinds = {name: (mask, value) for name, mask, value in arch.prologue_words}
    sp_at = 0  # the stack pointer, relative to the CFA (the SP at entry)
    stored: dict[int, int] = {}  # DWARF register -> its slot, relative to the CFA
    fp_at: int | None = None
    read = False
    for pos in range(0, min(len(code), MAX_PROLOGUE) - 3, 4):
        word = int.from_bytes(code[pos:pos + 4], "little")
        kind = next((name for name, (mask, value) in kinds.items()
                     if word & mask == value), None)
        rt, rn, rt2 = word & 31, word >> 5 & 31, word >> 10 & 31
        if kind in ("stp_x_pre", "stp_x", "stp_d_pre", "stp_d") and rn == arch.sp:
            offset = ((word >> 15 & 0x7F) ^ 0x40) - 0x40  # signed, in 8-byte units
            base = 64 if kind.startswith("stp_d") else 0  # d8 is DWARF 72
            if kind.endswith("_pre"):
                sp_at += 8 * offset
                at = sp_at
            else:
                at = sp_at + 8 * offset
            stored[base + rt] = at
            stored[base + rt2] = at + 8
        elif kind == "sub_imm" and rt == rn == arch.sp and fp_at is None:
            sp_at -= (word >> 10 & 0xFFF) << (12 if word >> 22 & 1 else 0)
        elif kind == "add_imm" and rt == arch.fp and rn == arch.sp and fp_at is None:
            fp_at = sp_at + ((word >> 10 & 0xFFF) << (12 if word >> 22 & 1 else 0))
        else:
            break
        read = True
    if not read:
        return None
    ra = stored.pop(arch.ra, None)
    saved = tuple(sorted(stored.items()))
    if fp_at is None:
        return CompactRules(arch.sp, -sp_at, ra, saved)
    return CompactRules(arch.fp, -fp_at, ra, saved)
