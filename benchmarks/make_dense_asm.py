"""Write a dense assembly file: N small functions as gcc -O0 writes them (push %rbp,
mov %rsp,%rbp, a body, pop %rbp, ret, with their CFI), for the linear-cost and
dense-input benchmarks.

Usage: python benchmarks/make_dense_asm.py OUT.s [FUNCTIONS]   (default 20000)
"""

from __future__ import annotations

import sys


def dense_asm(functions: int) -> str:
    """The text of ``functions`` frame-pointer functions, 21 lines each."""
    lines = ["\t.file\t\"dense.c\"", "\t.text"]
    for i in range(functions):
        name = f"f{i}"
        lines += [f"\t.globl\t{name}", f"\t.type\t{name}, @function", f"{name}:",
                  f".LFB{i}:", "\t.cfi_startproc", "\tpushq\t%rbp",
                  "\t.cfi_def_cfa_offset 16", "\t.cfi_offset 6, -16", "\tmovq\t%rsp, %rbp",
                  "\t.cfi_def_cfa_register 6", "\tmovl\t%edi, -4(%rbp)",
                  "\tmovl\t-4(%rbp), %eax", f"\taddl\t${i & 0xFFFF}, %eax", "\tpopq\t%rbp",
                  "\t.cfi_def_cfa 7, 8", "\tret", "\t.cfi_endproc", f".LFE{i}:",
                  f"\t.size\t{name}, .-{name}", "", ""]
    lines.append("\t.section\t.note.GNU-stack,\"\",@progbits")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    with open(sys.argv[1], "w") as out:
        out.write(dense_asm(count))


if __name__ == "__main__":
    main()
