"""CI's own guards: a missing conformance corpus fails the run instead of skipping a quarter of the
suite (issue 15, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _collect(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "ICEDUCK_REQUIRE_CORPUS")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/spec/test_values.py",
        ],
        cwd=ROOT,
        env={**base, "ICEDUCK_CONFORMANCE": str(tmp_path / "no-corpus-here"), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ci_fails_loudly_without_the_corpus(tmp_path: Path) -> None:
    run = _collect(tmp_path, CI="true")
    assert run.returncode != 0
    assert "conformance corpus not found" in run.stdout + run.stderr
    # outside CI the same checkout only skips the corpus tests
    assert _collect(tmp_path).returncode == 0
    assert _collect(tmp_path, ICEDUCK_REQUIRE_CORPUS="1").returncode != 0
