"""The compiled core (cfi2sframe/csrc/*.c, the extension cfi2sframe._core) as an
optional extension: where no C compiler or Python headers are found, the build goes on
without it and the pure-Python core runs (``cfi2sframe --version`` says which).
Everything else is in pyproject.toml.

GCC and Clang (any compiler setuptools drives as a Unix one) build it with the
warnings below, always; ``CFI2SFRAME_STRICT_BUILD=1`` (CI and development) makes
each an error and the extension required, so a warning fails the build there
instead of leaving the pure-Python core.  A user's build never fails on a warning
that a newer compiler adds."""

import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

STRICT = os.environ.get("CFI2SFRAME_STRICT_BUILD", "") == "1"
# Each found real problems or guards against them (docs/hacking.md, "The compiled core").
WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wconversion", "-Wcast-align",
            "-Wpointer-arith", "-Wvla", "-Wstrict-prototypes", "-Wformat=2", "-Wundef"]


class BuildCore(build_ext):
    """build_ext with the warnings, where the compiler takes GCC's options."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args += WARNINGS + (["-Werror"] if STRICT else [])
        super().build_extensions()


setup(cmdclass={"build_ext": BuildCore},
      ext_modules=[Extension("cfi2sframe._core", sorted(glob.glob("cfi2sframe/csrc/*.c")),
                             depends=sorted(glob.glob("cfi2sframe/csrc/*.h")),
                             optional=not STRICT,
                             extra_compile_args=["-O2"])])
