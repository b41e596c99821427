"""Shared fixtures: the conformance corpus, a fresh lake, the table builder and the reference peer.

- `conformance`: path to the corpus (../shared/conformance or $ICEDUCK_CONFORMANCE); skips when absent.
- `lake`: an `iceduck.connect` lake on a fresh warehouse under tmp_path, with the namespaces the test
  module lists in `LAKE_NAMESPACES` (default `("ns",)`; `()` for none); closed after the test.
- `table_builder`: `table_builder(format_version=3)` makes a `TableBuilder` in a fresh folder.
- `con`: a plain DuckDB connection with iceduck's functions registered (`iceduck.register`).
- `peer`: the reference peer (DuckDB 1.5.5 + iceberg extension, tests/support/peer.py), one per
  session (per xdist worker).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import settings

from iceduck.duckdb.binding import register
from iceduck.lake import Lake, connect
from tests.support.peer import Peer, PeerUnavailableError
from tests.support.tablebuilder import TableBuilder

ROOT = Path(__file__).resolve().parent.parent

# Property tests run on 2 shared cores in CI: a per-example time limit measures the machine's load,
# not the code, so none applies (a test's own @settings still sets its example count).
settings.register_profile("iceduck", deadline=None)
settings.load_profile("iceduck")


def conformance_dir() -> Path | None:
    """The conformance corpus (../shared/conformance), or None where it is absent."""
    env = os.environ.get("ICEDUCK_CONFORMANCE")
    path = Path(env) if env else ROOT.parent / "shared" / "conformance"
    return path if path.is_dir() else None


def pyiceberg_cwd(metadata: Path, default: Path) -> Path:
    """The folder PyIceberg must run in to find a corpus table whose metadata records relative
    paths (DuckDB's test tables record `lineitem_iceberg/metadata/...`, relative to
    `data/persistent/iceberg`, others `data/persistent/...`, relative to `duckdb-iceberg`): the
    nearest folder above the metadata file where the first manifest list it names exists."""
    data = metadata.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lists = [s.get("manifest-list") for s in json.loads(data).get("snapshots", [])]
    first = next((p for p in lists if isinstance(p, str)), None)
    if first is None or first.startswith("/") or ":" in first.split("/", 1)[0]:
        return default
    for folder in metadata.parents:
        if (folder / first).exists():
            return folder
    return default


def pytest_configure(config: pytest.Config) -> None:
    """In CI (`CI=true`, or `ICEDUCK_REQUIRE_CORPUS=1`) a missing corpus fails the run: without it a
    quarter of the suite would skip or vanish from the parametrisations and CI would stay green."""
    required = (
        os.environ.get("CI", "").lower() in ("true", "1") or os.environ.get("ICEDUCK_REQUIRE_CORPUS") == "1"
    )
    if required and conformance_dir() is None:
        raise pytest.UsageError(
            "conformance corpus not found (expected ../shared/conformance or $ICEDUCK_CONFORMANCE), and CI "
            "requires it: without it the corpus tests would silently skip"
        )


@pytest.fixture(scope="session")
def conformance() -> Path:
    """Path to the conformance corpus; skips the test with a message where it is absent."""
    path = conformance_dir()
    if path is None:
        pytest.skip("conformance corpus not found (expected ../shared/conformance or $ICEDUCK_CONFORMANCE)")
    return path


# Folders whose tests run on local storage and again on S3 (moto) whenever they use a warehouse
# (the `lake`, `warehouse` or `lake_storage` fixtures): the scans, reads, writes, deletes, updates,
# time travel, metadata and maintenance of a table must not depend on where its files are.
TWIN_FOLDERS = frozenset({"scan", "read", "write", "transaction", "maintenance", "inspect", "sql", "duckdb"})


def _folder(definition: pytest.Item | pytest.Function) -> str:
    parts = Path(str(definition.path)).relative_to(ROOT / "tests").parts
    return parts[0] if len(parts) > 1 else ""


def twinned(definition: pytest.Function, fixturenames: list[str]) -> bool:
    """Whether a test runs on S3 too: it asks for a warehouse (`warehouse` always twins; `lake` and
    `lake_storage` in TWIN_FOLDERS or with `s3_twin`), and carries no `local_only` marker."""
    if "lake_storage" not in fixturenames or definition.get_closest_marker("local_only") is not None:
        return False
    return (
        "warehouse" in fixturenames
        or definition.get_closest_marker("s3_twin") is not None
        or _folder(definition) in TWIN_FOLDERS
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that use a warehouse (see `twinned`) run twice: on a local warehouse and on S3 (moto)."""
    if twinned(metafunc.definition, metafunc.fixturenames):
        metafunc.parametrize("lake_storage", ["local", "s3"], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`@pytest.mark.s3_twin(variant=("v3",))` keeps only those parameter values for the S3 twin
    (moto is slow per request: the twins of a long parametrised test cover its main cases).
    `@pytest.mark.local_only(reason)` must say why the test has no S3 twin."""
    keep, drop = [], []
    for item in items:
        local = item.get_closest_marker("local_only")
        if local is not None and not (local.args or local.kwargs.get("reason")):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.local_only needs a reason")
        marker = item.get_closest_marker("s3_twin")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if marker is not None and params.get("lake_storage") == "s3" and any(
            params.get(name) not in allowed for name, allowed in marker.kwargs.items()
        ):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def lake_storage(request: pytest.FixtureRequest) -> str:
    """Where the test's warehouse is: "local", or "s3" for the S3 twin (see `twinned`)."""
    return str(getattr(request, "param", "local"))


@pytest.fixture
def warehouse(request: pytest.FixtureRequest, tmp_path: Path, lake_storage: str) -> str:
    """A fresh warehouse location: a local folder (tmp_path/wh), or a fresh prefix on S3 (moto)
    for the test's S3 twin; a test that uses the reference peer too gets it reading that S3
    server (httpfs and a secret)."""
    if lake_storage == "s3":
        where = s3_warehouse(request, tmp_path)
        if "peer" in request.fixturenames:
            peer_reads_s3(request.getfixturevalue("peer"), where)
        return where
    return str(tmp_path / "wh")


@pytest.fixture
def lake(request: pytest.FixtureRequest, warehouse: str) -> Iterator[Lake]:
    """A lake on a fresh `warehouse` (local, or S3 for the test's S3 twin) with the module's
    `LAKE_NAMESPACES` (default: ns)."""
    with connect(warehouse) as lk:
        for namespace in getattr(request.module, "LAKE_NAMESPACES", ("ns",)):
            lk.create_namespace(namespace)
        yield lk


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection with iceduck's functions registered."""
    c = duckdb.connect()
    register(c)
    yield c
    c.close()


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
from tests.support.s3_fixture import moto_s3, peer_reads_s3, s3_prefix, s3_warehouse, s3rver  # noqa: E402,F401
from tests.support.store_fixture import azure_store, gcs_store, store  # noqa: E402,F401
