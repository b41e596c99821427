"""Without the Java reference the interop tests skip saying how to install it, except in CI, where
they fail: CI installs it (.ci/run) and a silent skip would hide every interop break."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "ICEDUCK_REQUIRE_CORPUS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs",
         "tests/interop/test_java_reads_iceduck.py::test_lineage_is_compared"],
        cwd=ROOT,
        env={**base, "ICEDUCK_JAVA_REFERENCE": str(tmp_path / "no-reference-here"), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


def test_missing_reference_skips_outside_ci_and_fails_in_ci(tmp_path: Path) -> None:
    local = _run(tmp_path)
    assert local.returncode == 0 and "1 skipped" in local.stdout
    assert "Java Iceberg reference not installed" in local.stdout
    ci = _run(tmp_path, CI="true")
    assert ci.returncode != 0 and "CI requires it" in ci.stdout
