"""Shared fixtures: the conformance corpus, a fresh lake, the table builder and the reference peer.

- `conformance`: path to the corpus (../shared/conformance or $ICEDUCK_CONFORMANCE); skips when absent.
- `lake`: an `iceduck.connect` lake on a fresh warehouse under tmp_path, with the namespaces the test
  module lists in `LAKE_NAMESPACES` (default `("ns",)`; `()` for none); closed after the test.
- `table_builder`: `table_builder(format_version=3)` makes a `TableBuilder` in a fresh folder.
- `peer`: the reference peer (DuckDB 1.5.5 + iceberg extension, tests/support/peer.py), one per
  session (per xdist worker).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from iceduck.lake import Lake, connect
from tests.support.peer import Peer, PeerUnavailableError
from tests.tablebuilder import TableBuilder

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


@pytest.fixture
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lake]:
    """A lake on a fresh warehouse (tmp_path/wh) with the module's `LAKE_NAMESPACES` (default: ns)."""
    with connect(tmp_path / "wh") as lk:
        for namespace in getattr(request.module, "LAKE_NAMESPACES", ("ns",)):
            lk.create_namespace(namespace)
        yield lk


@pytest.fixture
def table_builder(tmp_path: Path) -> Callable[..., TableBuilder]:
    """A factory of `TableBuilder`s, each in its own folder under tmp_path."""
    made = 0

    def make(**options: Any) -> TableBuilder:
        nonlocal made
        made += 1
        return TableBuilder(tmp_path / f"table{made}", **options)

    return make


@pytest.fixture(scope="session")
def peer() -> Iterator[Peer]:
    """One reference peer per test session (per xdist worker), installing its venv when missing.

    Skips only when the venv is missing and pip cannot reach the package index; any other install
    failure fails the test. The DuckDB connection is shared by the session: a test that changes
    settings or creates objects calls ``peer.reset()`` first or last.
    """
    try:
        handle = Peer.ensure(quiet=True)
    except PeerUnavailableError as exc:
        pytest.skip(f"reference peer not installed and pip cannot reach the package index: {exc}")
    with handle:
        yield handle
