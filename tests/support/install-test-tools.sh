#!/bin/sh
# Install the real tools the tests use as oracles (Debian/Ubuntu): GNU binutils
# (as, readelf, ld), gcc, csmith and its headers, clang-14 (another assembler) and
# llvm-14 (llvm-mc, llc, llvm-objdump: the compact unwind oracle),
# the AArch64 and s390x cross binutils and gcc, and gdb, gdb-multiarch and
# qemu-user (the real-unwinding checks), make (the examples' Makefile recipe),
# and g++, elfutils (eu-strip), dwz and debugedit (the tools a post-link step must survive),
# libc6-dbg (libc's local function names, as gdb shows them, for unwind's names),
# strace (kills a conversion at an exact write, for the nothing-lost tests),
# util-linux and mount (unshare and a read-only bind mount, for the read-only target test),
# debhelper, dpkg-dev, fakeroot, rpm and rpm2cpio (the packaging recipes, built for real),
# lld-14 (ld64.lld-14 links Mach-O images with __unwind_info, without an SDK),
# libclang-rt-14-dev (the XRay runtime clang-14 only recommends: the trace tests make real traces).
set -eu
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq binutils gcc csmith libcsmith-dev clang-14 llvm-14 \
    binutils-aarch64-linux-gnu gcc-aarch64-linux-gnu \
    binutils-s390x-linux-gnu gcc-s390x-linux-gnu gdb gdb-multiarch qemu-user make \
    g++ elfutils dwz debugedit libc6-dbg strace util-linux mount \
    debhelper dpkg-dev fakeroot rpm rpm2cpio lld-14 libclang-rt-14-dev procps >/dev/null
