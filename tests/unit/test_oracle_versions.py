"""The oracle tools are checked for the version the tests assume (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import require, version_problem


def _fake(folder: Path, name: str, first_line: str) -> None:
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho '{first_line}'\n")
    tool.chmod(0o755)


def test_a_tool_of_another_version_is_not_taken_for_the_oracle(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    _fake(tmp_path, "readelf", "GNU readelf (GNU Binutils) 2.41")
    _fake(tmp_path, "aarch64-linux-gnu-as", "GNU assembler (GNU Binutils) 2.40")
    _fake(tmp_path, "llvm-xray-14", "Ubuntu LLVM version 15.0.7")
    _fake(tmp_path, "clang-14", "Debian clang version 14.0.6")
    _fake(tmp_path, "csmith", "csmith 2.3.0")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    version_problem.cache_clear()
    try:
        assert version_problem("readelf") == \
            "readelf is not GNU binutils 2.40 (GNU readelf (GNU Binutils) 2.41)"
        assert version_problem("llvm-xray-14") is not None
        assert version_problem("aarch64-linux-gnu-as") is None
        assert version_problem("clang-14") is None
        assert version_problem("csmith") is None  # no version assumed
        with pytest.raises((pytest.skip.Exception, pytest.fail.Exception),
                           match="not GNU binutils 2.40"):
            require("clang-14", "readelf")
    finally:
        version_problem.cache_clear()
