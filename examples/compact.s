# Two functions in the shape LLVM writes for Darwin (no epilogue CFI), for
# `cfi2sframe compact examples/compact.s` (docs/compact.md).
	.text
	.globl	rbpframe
	.type	rbpframe, @function
rbpframe:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset 6, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register 6
	pushq	%r15
	pushq	%r14
	pushq	%rbx
	.cfi_offset 15, -24
	.cfi_offset 14, -32
	.cfi_offset 3, -40
	movl	$1, %eax
	nop
	popq	%rbx
	popq	%r14
	popq	%r15
	popq	%rbp
	ret
	.cfi_endproc
	.size	rbpframe, .-rbpframe

	.globl	bigframe
	.type	bigframe, @function
bigframe:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset 3, -16
	subq	$4096, %rsp
	.cfi_def_cfa_offset 4112
	nop
	addq	$4096, %rsp
	popq	%rbx
	ret
	.cfi_endproc
	.size	bigframe, .-bigframe
