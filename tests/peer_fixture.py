"""The ``peer`` fixture: the reference peer (DuckDB 1.5.5 + iceberg extension) for comparison tests.

``tests/conftest.py`` imports it (``from tests.peer_fixture import peer``), so every test can use it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from iceduck.testing.peer import Peer, PeerUnavailableError


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
