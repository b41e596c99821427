"""The relation `Lake.sql` makes for a query: its first bind, which only learns the relation's
columns, sees the scans' and catalog views' columns (`duckdb.scan.describing`) and binds no
read_parquet call; reading the relation binds and runs the real SQL (the latest commit). Checked
here: the columns and types are exactly those of the real scan (every conformance table, nested
and evolved schemas, metadata and lineage columns), each reference is described when the relation
is made and planned for real when it is read, and its reads return the scan's rows."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import iceduck
from iceduck.duckdb import capture, catalog_views, hooks, scan
from iceduck.lake import Lake
from iceduck.sql import read_plan
from tests.conftest import conformance_dir
from tests.support.peer import sql_string
from tests.support.write_helpers import new_lake

_CORPUS = conformance_dir()
_TABLES: list[dict[str, Any]] = (
    [
        t
        for t in json.loads((_CORPUS / "TABLE_INVENTORY.json").read_text())
        if not t.get("missing_manifest_refs")
    ]
    if _CORPUS is not None
    else []
)
_OPTIONS = ("", ", metadata_columns := true", ", row_lineage := true")


@pytest.fixture(scope="module")
def plain() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    iceduck.register(con)
    yield con
    con.close()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lake = new_lake(Path(tmp_path_factory.mktemp("described")) / "wh")
    lake.sql(
        "CREATE TABLE ns.shapes (id BIGINT, d DECIMAL(12, 3), t_at TIMESTAMPTZ, u UUID, "
        "s STRUCT(a INTEGER, b VARCHAR[]), m MAP(VARCHAR, DOUBLE), l STRUCT(x DATE, y BLOB)[]) PARTITIONED BY (id)"
    )
    lake.sql(
        "INSERT INTO ns.shapes SELECT i, i / 7, TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_hours(i), uuid(), "
        "{'a': i, 'b': ['x', 'y']}, MAP {'k': i / 2}, [{'x': DATE '2024-01-01', 'y': 'b'::BLOB}] FROM range(4) t(i)"
    )
    lake.sql("ALTER TABLE ns.shapes ADD COLUMN late VARCHAR")
    lake.sql("INSERT INTO ns.shapes (id, late) VALUES (9, 'after')")
    yield lake
    lake.close()


def _shape(relation: duckdb.DuckDBPyRelation) -> tuple[list[str], list[str]]:
    return relation.columns, [str(t) for t in relation.types]


@pytest.mark.parametrize("options", _OPTIONS)
@pytest.mark.parametrize("table", _TABLES, ids=lambda t: t["path"].split("data/persistent/", 1)[-1])
def test_the_relation_has_the_real_scans_columns_and_types(
    conformance: Path, plain: duckdb.DuckDBPyConnection, lake: Lake, table: dict[str, Any], options: str
) -> None:
    metadata = conformance / table["path"] / table["current_metadata"]
    query = f"SELECT * FROM iceberg_scan({sql_string(str(metadata))}{options})"
    try:
        real = _shape(plain.sql(query))  # a plain connection binds the real SQL
    except duckdb.Error as e:
        with pytest.raises(duckdb.Error):  # what cannot be planned fails when the relation is made
            lake.sql(query)
        pytest.skip(f"not readable: {str(e)[:80]}")
    relation = lake.sql(query)
    assert relation is not None
    assert _shape(relation) == real


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM lake.ns.shapes",
        "SELECT * FROM lake.ns.shapes WHERE id = 2",
        "SELECT s.b, m, l[1].x, late FROM lake.ns.shapes WHERE id >= 1",
        "SELECT * FROM iceberg_scan('ns.shapes', metadata_columns := true, row_lineage := true) WHERE id = 3",
        "WITH t AS (SELECT * FROM lake.ns.shapes) SELECT count(*), max(d) FROM t WHERE late IS NULL",
    ],
)
def test_a_lake_tables_relation_has_the_real_columns_and_rows(lake: Lake, query: str) -> None:
    relation = lake.sql(query)
    assert relation is not None
    real = lake.con.sql(query)  # the connection itself: no front door, the real SQL bound
    assert _shape(relation) == _shape(real)
    assert sorted(map(repr, relation.fetchall())) == sorted(map(repr, real.fetchall()))


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*), sum(id) FROM lake.ns.shapes",
        "SELECT count(*) FROM lake.ns.shapes WHERE id = 2",
        "SELECT count(*) FROM iceberg_scan('ns.shapes') WHERE id > 1",
        "SELECT count(*) FROM (SELECT * FROM lake.ns.shapes) AS x JOIN iceberg_scan('ns.shapes') AS y USING (id)",
    ],
)
def test_the_relation_is_made_with_described_scans_and_read_with_real_ones(
    lake: Lake, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reference plans once when the relation is made (for its columns only) and once per
    read (the SQL DuckDB runs); made a third time while DuckDB's catalog version stands, the
    relation of the same text plans nothing until it is read."""
    lake.sql(query).fetchall()  # the front door plans the statement the first time
    lake.sql(query)  # the second time the relation's columns are kept
    asked: list[bool] = []
    real = scan.scan_sql_for

    def spy(*args: Any, **kwargs: Any) -> str:
        asked.append(bool(kwargs.get("describe")))
        return real(*args, **kwargs)

    for module in (capture, catalog_views):  # the scans' and the catalog views' UDFs
        monkeypatch.setattr(module, "scan_sql_for", spy)
    again = lake.sql(query)
    assert again is not None and asked == []  # the text bound before: nothing bound at the call
    lake.con.execute("SET enable_progress_bar = false")  # moves the catalog version: bound anew
    relation = lake.sql(query)
    assert relation is not None
    references = len(asked)
    assert references >= 1 and all(asked)
    del asked[:]
    rows = relation.fetchall()
    assert len(asked) == references and not any(asked)
    del asked[:]
    assert again.fetchall() == rows
    assert len(asked) == references and not any(asked)
    monkeypatch.undo()
    assert rows == lake.con.sql(query).fetchall()


def test_a_relation_made_again_asks_its_columns_anew(lake: Lake, tmp_path: Path) -> None:
    """The relation of a text made before (no bind at the call) takes nothing from that bind: a
    column added since by a commit this connection's catalog version does not see is in its
    columns and rows, and a table dropped since fails its read with the table's own one line."""
    source = new_lake(tmp_path / "source")  # another lake: its commits move nothing here
    try:
        source.sql("CREATE TABLE ns.grows (id BIGINT)")
        source.sql("INSERT INTO ns.grows VALUES (1), (2)")
        query = f"SELECT * FROM iceberg_scan({sql_string(source.table('ns.grows').location)}) WHERE id > 1"
        first = lake.sql(query)
        assert first is not None and first.columns == ["id"] and first.fetchall() == [(2,)]
        lake.sql(query)  # the second time the relation's columns are kept
        made: list[str] = []
        real = hooks.relation_for

        def spy(*args: Any) -> duckdb.DuckDBPyRelation:
            made.append(args[1])
            return real(*args)

        with pytest.MonkeyPatch.context() as m:
            m.setattr(read_plan, "relation_for", spy)
            # through the Python API: no statement here, so no DDL moves anything of `lake`
            with source.table("ns.grows").update_schema() as update:
                update.add_column("note", "VARCHAR")
            source.table("ns.grows").append(pa.table({"id": pa.array([3], pa.int64()), "note": ["later"]}))
            again = lake.sql(query)
            assert again is not None and len(made) == 1  # made without a bind
            assert (again.columns, [str(t) for t in again.types]) == (["id", "note"], ["BIGINT", "VARCHAR"])
            assert sorted(again.fetchall()) == [(2, None), (3, "later")]
            read = lake.sql(query)
            assert read is not None and sorted(read.fetchall()) == [(2, None), (3, "later")]
            source.drop_table("ns.grows", purge=True)
            gone = lake.sql(query)
            assert gone is not None and len(made) == 3
            with pytest.raises(duckdb.Error) as raised:
                gone.fetchall()
        message = str(raised.value)
        assert "no Iceberg table found" in message and "__iceduck" not in message
        assert "LINE 1" not in message and "^" not in message
    finally:
        source.close()


def test_a_process_reads_duckdbs_own_function_names_only_for_a_text_that_came_twice(tmp_path: Path) -> None:
    # Reading them takes a fresh DuckDB connection and ~40 ms: the first statements of a shell
    # (`select 1`) or a script must not pay it; a text made a third time skips its bind.
    code = f"""
import iceduck
lake = iceduck.connect({str(tmp_path / "wh")!r})
seen = []
for _ in range(3):
    assert lake.sql("SELECT count(*) FROM range(3)").fetchall() == [(3,)]
    assert lake.sql("SELECT 1").fetchall() == [(1,)]
    seen.append(lake._router.reads._built_in is not None)
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "[False, True, True]"


def test_a_commit_after_the_relation_was_made_is_read(lake: Lake) -> None:
    """Every read binds the real SQL of the latest commit (as before: a relation re-binds its text)."""
    relation = lake.sql("SELECT count(*) FROM lake.ns.shapes WHERE id >= 0")
    assert relation is not None
    (before,) = relation.fetchall()[0]
    lake.sql("INSERT INTO ns.shapes (id) VALUES (20), (21)")
    assert relation.fetchall() == [(before + 2,)]
