"""iceberg_scan on every table of the conformance corpus, against PyIceberg 0.12's scan of the same
files (an independent reader), where PyIceberg can read the table; the reason is given where not."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from tests.conftest import conformance_dir, pyiceberg_cwd

_CORPUS = conformance_dir()
_INVENTORY: list[dict[str, Any]] = (
    json.loads((_CORPUS / "TABLE_INVENTORY.json").read_text()) if _CORPUS is not None else []
)
_TABLES = [t for t in _INVENTORY if not t.get("missing_manifest_refs")]


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _norm(value: Any) -> Any:
    """One comparable form for values PyIceberg and DuckDB hand back differently."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):  # a map as pairs
            return tuple(sorted((k, _norm(v)) for k, v in value))
        return tuple(_norm(v) for v in value)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    iceduck.register(c)
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


@pytest.mark.parametrize("table", _TABLES, ids=lambda t: t["path"].split("data/persistent/", 1)[-1])
def test_rows_equal_pyiceberg(
    conformance: Path, con: duckdb.DuckDBPyConnection, table: dict[str, Any]
) -> None:
    from pyiceberg.table import StaticTable

    metadata = conformance / table["path"] / table["current_metadata"]
    if table.get("equality_deletes"):
        pytest.skip("PyIceberg 0.12 cannot read equality deletes (checked against DuckDB's expected results)")
    remote = con.execute(
        f"SELECT count(*) FROM iceberg_files('{metadata}') WHERE file_path LIKE 's3://%'"
    ).fetchall()[0][0]
    if remote:
        pytest.skip(
            "data files in a fake S3 bucket (only pruning can answer: tests/duckdb/test_duckdb_expected_results.py)"
        )
    with _cwd(pyiceberg_cwd(metadata, conformance / "duckdb-iceberg")):
        try:
            theirs = StaticTable.from_metadata(str(metadata)).scan().to_arrow()
        except Exception as e:
            pytest.skip(f"PyIceberg 0.12 cannot scan this table: {type(e).__name__}: {str(e)[:120]}")
    rel = con.sql(f"SELECT * FROM iceberg_scan('{metadata}')")
    # DuckDB names are case-insensitive: it renames the second of `user_id` / `uSeR_Id` (so does the peer)
    assert [c.lower() for c in rel.columns] == [
        c.lower() + ("_1" if [x.lower() for x in theirs.column_names].count(c.lower()) > 1 and i > 0 else "")
        for i, c in enumerate(theirs.column_names)
    ]
    ours = sorted((tuple(_norm(v) for v in r) for r in rel.fetchall()), key=repr)
    expected = sorted((tuple(_norm(v) for v in r.values()) for r in theirs.to_pylist()), key=repr)
    assert ours == expected
