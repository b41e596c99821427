"""The Java Iceberg reference (1.10.2 in Spark 3.5.7, ../shared/reference/java-iceberg) for the interop
tests: the `reference` fixture is its `spark_ref` module. Where it is not installed the tests skip
saying how to install it, except in CI (`CI=true`), where a missing reference fails them: CI installs
it (.ci/run) and a silent skip would hide every interop break."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_DIR = Path(os.environ.get("ICEDUCK_JAVA_REFERENCE", ROOT.parent / "shared" / "reference" / "java-iceberg"))
INSTALL = "bash ../shared/reference/java-iceberg/setup.sh"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def load_reference() -> ModuleType | None:
    """The reference's `spark_ref` module when it is installed, else None."""
    if not (REFERENCE_DIR / "spark_ref.py").is_file():
        return None
    if str(REFERENCE_DIR) not in sys.path:
        sys.path.insert(0, str(REFERENCE_DIR))
    module = importlib.import_module("spark_ref")
    return module if module.available() else None


@pytest.fixture(scope="session")
def reference() -> ModuleType:
    module = load_reference()
    if module is None:
        message = f"Java Iceberg reference not installed (expected {REFERENCE_DIR}): run {INSTALL}"
        if _in_ci():
            pytest.fail(f"{message}; CI requires it", pytrace=False)
        pytest.skip(message)
    return module
