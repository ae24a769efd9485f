	.file	"frame_pointer.c"
	.text
	.p2align 4
	.globl	with_frame
	.type	with_frame, @function
with_frame:
.LFB0:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset 6, -16
	movd	%edi, %xmm2
	pshufd	$0, %xmm2, %xmm0
	movq	%rsp, %rbp
	.cfi_def_cfa_register 6
	pushq	%rbx
	.cfi_offset 3, -24
	movl	%edi, %ebx
	leaq	-48(%rbp), %rdi
	subq	$40, %rsp
	movdqa	.LC0(%rip), %xmm1
	paddd	%xmm0, %xmm1
	paddd	.LC1(%rip), %xmm0
	movaps	%xmm1, -48(%rbp)
	movaps	%xmm0, -32(%rbp)
	call	work@PLT
	addl	%ebx, %eax
	movq	-8(%rbp), %rbx
	leave
	.cfi_def_cfa 7, 8
	ret
	.cfi_endproc
.LFE0:
	.size	with_frame, .-with_frame
	.section	.rodata.cst16,"aM",@progbits,16
	.align 16
.LC0:
	.long	0
	.long	1
	.long	2
	.long	3
	.align 16
.LC1:
	.long	4
	.long	5
	.long	6
	.long	7
	.ident	"GCC: (Debian 12.2.0-14+deb12u1) 12.2.0"
	.section	.note.GNU-stack,"",@progbits
