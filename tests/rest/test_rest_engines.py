"""Other engines read iceduck tables through `iceduck serve` (PyIceberg's REST catalog underneath).

A v3 table with deletion vectors (DELETE) and rewritten rows (UPDATE), written by iceduck's client
through the server; Ray Data (`ray.data.read_iceberg`) and polars (`scan_iceberg`) must return the
same rows as iceduck, and as plain DuckDB running the same statements.

These engines are heavy (Ray: ~240 MB, ~2 min to install, ~20 s to start), so they are the
`engines` extra, not `dev`: `.ci/run` installs it, and in CI a missing engine fails instead of
skipping.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.support.rest_helpers import serving

pytestmark = pytest.mark.engines

STATEMENTS = [
    "INSERT INTO {t} SELECT i, DATE '2026-10-01' + (i % 5)::INT, 'n' || (i % 7) FROM range(6000) r(i)",
    "DELETE FROM {t} WHERE id % 9 = 0",
    "UPDATE {t} SET name = 'u' WHERE id % 20 = 1",
    "DELETE FROM {t} WHERE d = DATE '2026-10-03' AND id > 3000",
]


def _engine(module: str) -> Any:
    """The engine's module; skipped when not installed, except in CI, where it is a failure."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{module} is not installed: .ci/run installs the 'engines' extra")
        pytest.skip(f"{module} is not installed (pip install -e '.[engines]')")
    return importlib.import_module(module)


@pytest.fixture(scope="module")
def served_table(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RestServer, list[tuple[Any, ...]]]]:
    """The server, with `demo.t` (v3, deletion vectors) written through it; and the expected rows."""
    with serving(tmp_path_factory.mktemp("engines") / "wh") as server:
        lake = iceduck.connect(server.url, authorization_type="none")
        lake.sql("CREATE SCHEMA demo")
        lake.sql(
            "CREATE TABLE demo.t (id BIGINT, d DATE, name VARCHAR) PARTITIONED BY (d) WITH ('format-version' = '3')"
        )
        truth = duckdb.connect()
        truth.sql("CREATE TABLE t (id BIGINT, d DATE, name VARCHAR)")
        for statement in STATEMENTS:
            lake.sql(statement.format(t="demo.t"))
            truth.sql(statement.format(t="t"))
        expected = sorted(truth.sql("SELECT id, d, name FROM t").fetchall())
        ours = lake.sql("SELECT id, d, name FROM lake.demo.t")
        assert ours is not None and sorted(ours.fetchall()) == expected
        formats = lake.sql("SELECT DISTINCT file_format FROM iceberg_files('demo.t', content := 'delete')")
        assert formats is not None and [r[0].upper() for r in formats.fetchall()] == ["PUFFIN"]
        yield server, expected


def test_ray_data_reads_the_rows_iceduck_reads(
    served_table: tuple[RestServer, list[tuple[Any, ...]]],
) -> None:
    ray = _engine("ray")
    server, expected = served_table
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        dataset = ray.data.read_iceberg(
            table_identifier="demo.t", catalog_kwargs={"name": "iceduck", "type": "rest", "uri": server.url}
        )
        rows = dataset.take_all()
    finally:
        ray.shutdown()
    assert sorted((r["id"], r["d"], r["name"]) for r in rows) == expected


def test_polars_reads_the_rows_iceduck_reads(
    served_table: tuple[RestServer, list[tuple[Any, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    polars = _engine("polars")
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # without the polars_iceberg plugin it warns
    from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog

    server, expected = served_table
    table = PyIcebergRestCatalog("iceduck", uri=server.url).load_table("demo.t")
    frame = polars.scan_iceberg(table).select("id", "d", "name").collect()
    assert sorted(frame.iter_rows()) == expected
