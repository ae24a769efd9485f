	.file	"frameless.c"
	.text
	.p2align 4
	.globl	frameless
	.type	frameless, @function
frameless:
.LFB0:
	.cfi_startproc
	movq	%rdi, %rax
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	movq	%rdi, %r8
	movq	%rdi, %rcx
	andq	%rsi, %rax
	imulq	%rsi, %r8
	movq	%rdi, %r9
	subq	%rsi, %rcx
	pushq	%rax
	.cfi_def_cfa_offset 24
	movq	%rdi, %rax
	leaq	(%rdi,%rsi), %rdx
	xorq	%rsi, %r9
	orq	%rsi, %rax
	pushq	%rax
	.cfi_def_cfa_offset 32
	call	consume@PLT
	addq	$24, %rsp
	.cfi_def_cfa_offset 8
	addq	$1, %rax
	ret
	.cfi_endproc
.LFE0:
	.size	frameless, .-frameless
	.ident	"GCC: (Debian 12.2.0-14+deb12u1) 12.2.0"
	.section	.note.GNU-stack,"",@progbits
