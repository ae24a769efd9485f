	.file	"realign.c"
	.text
	.p2align 4
	.globl	realigned
	.type	realigned, @function
realigned:
.LFB0:
	.cfi_startproc
	leaq	8(%rsp), %r10
	.cfi_def_cfa 10, 0
	andq	$-64, %rsp
	movslq	%edi, %rdi
	pushq	-8(%r10)
	addq	$23, %rdi
	pushq	%rbp
	andq	$-16, %rdi
	movq	%rsp, %rbp
	.cfi_escape 0x10,0x6,0x2,0x76,0
	pushq	%r10
	.cfi_escape 0xf,0x3,0x76,0x78,0x6
	pushq	%rbx
	subq	$96, %rsp
	.cfi_escape 0x10,0x3,0x2,0x76,0x70
	subq	%rdi, %rsp
	leaq	-112(%rbp), %rdi
	call	use@PLT
	leaq	15(%rsp), %rbx
	andq	$-16, %rbx
	movq	%rbx, %rdi
	call	use@PLT
	leaq	-16(%rbp), %rsp
	popq	%rbx
	popq	%r10
	.cfi_def_cfa 10, 0
	popq	%rbp
	leaq	-8(%r10), %rsp
	.cfi_def_cfa 7, 8
	ret
	.cfi_endproc
.LFE0:
	.size	realigned, .-realigned
	.ident	"GCC: (Debian 12.2.0-14+deb12u1) 12.2.0"
	.section	.note.GNU-stack,"",@progbits
