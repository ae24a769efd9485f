"""The compiled core (cfi2sframe/_core.c) as an optional extension: where no C compiler
or Python headers are found, the build goes on without it and the pure-Python core
runs (``cfi2sframe --version`` says which).  Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cfi2sframe._core",
                             ["cfi2sframe/_core.c", "cfi2sframe/_core_reloc.c",
                              "cfi2sframe/_core_sframe_dump.c",
                              "cfi2sframe/_core_sframe_index.c",
                              "cfi2sframe/_core_unwind_info.c",
                              "cfi2sframe/_core_verify.c", "cfi2sframe/_core_eh.c",
                              "cfi2sframe/_core_scan.c", "cfi2sframe/_core_xray.c"],
                             depends=["cfi2sframe/_core.h", "cfi2sframe/_core_text.h"],
                             optional=True,
                             extra_compile_args=["-O2"])])
