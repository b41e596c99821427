"""Shared fixtures: where the conformance corpus lives, and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def conformance_dir() -> Path | None:
    """The conformance corpus (../shared/conformance), or None where it is absent."""
    env = os.environ.get("ICEDUCK_CONFORMANCE")
    path = Path(env) if env else ROOT.parent / "shared" / "conformance"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def conformance() -> Path:
    """Path to the conformance corpus; skips the test with a message where it is absent."""
    path = conformance_dir()
    if path is None:
        pytest.skip("conformance corpus not found (expected ../shared/conformance or $ICEDUCK_CONFORMANCE)")
    return path


from tests.peer_fixture import peer  # noqa: E402,F401  (the reference peer fixture, shared by all tests)
