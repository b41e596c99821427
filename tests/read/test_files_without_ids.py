"""Data files without Iceberg field ids (Hive migration, `add_files`), with and without
`schema.name-mapping.default` (issue 13, class 2).

The files are plain Parquet written by pyarrow (no `PARQUET:field_id` metadata), registered with
PyIceberg's `add_files` the way Spark's `add_files` does; for "without a mapping" the property is
then removed, as tables converted by tools that never set it have none. The truth is the rows
written; PyIceberg's own scan is a second reader where it can read the table (it needs a mapping).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.table import Table as PyTable
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, StructType

from iceduck.errors import InvalidMetadataError
from iceduck.read.columns import columns_without_ids
from iceduck.spec.types import DOUBLE, LONG, STRING
from iceduck.spec.types import NestedField as NField

MAPPING = "schema.name-mapping.default"


def _schema() -> PySchema:
    # Top-level ids 1..4 in column order, nested ids after them: how Spark/Hive number a migrated schema.
    return PySchema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "score", DoubleType(), required=False),
        NestedField(
            4,
            "loc",
            StructType(
                NestedField(5, "city", StringType(), required=False),
                NestedField(6, "zip", LongType(), required=False),
            ),
            required=False,
        ),
    )


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": None if i % 7 == 0 else f"n{i}",
            "score": i / 4,
            "loc": {"city": f"c{i % 3}", "zip": 1000 + i},
        }
        for i in range(start, start + n)
    ]


_ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("loc", pa.struct([("city", pa.string()), ("zip", pa.int64())])),
    ]
)


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema = _ARROW) -> str:
    table = pa.Table.from_pylist(rows, schema=schema)
    assert not any(b"PARQUET:field_id" in (f.metadata or {}) for f in table.schema)
    pq.write_table(table, path)
    assert not any(b"PARQUET:field_id" in (f.metadata or {}) for f in pq.read_schema(path))
    return str(path)


def _table(tmp_path: Path) -> tuple[PyTable, list[dict[str, Any]]]:
    catalog = PySqlCatalog("hive", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    table = catalog.create_table("db.migrated", _schema(), properties={"format-version": "2"})
    files = tmp_path / "hive" / "db.db" / "migrated"
    files.mkdir(parents=True)
    rows = _rows(0, 40) + _rows(40, 25)
    table.add_files(
        [_write(files / "part-0.parquet", rows[:40]), _write(files / "part-1.parquet", rows[40:])]
    )
    return table, rows


def _key(row: tuple[Any, ...] | dict[str, Any]) -> str:
    return repr(tuple(row.values()) if isinstance(row, dict) else row)


def _scan(con: duckdb.DuckDBPyConnection, location: str) -> list[tuple[Any, ...]]:
    return sorted(con.execute(f"SELECT * FROM iceberg_scan('{location}')").fetchall(), key=_key)


def _expected(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in rows), key=_key)


def test_with_a_name_mapping_rows_equal_the_files_and_pyiceberg(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table, rows = _table(tmp_path)
    assert MAPPING in table.metadata.properties  # add_files sets one, as Spark's does
    ours = _scan(con, table.metadata_location)
    assert ours == _expected(rows)
    theirs = sorted((tuple(r.values()) for r in table.scan().to_arrow().to_pylist()), key=_key)
    assert ours == theirs


def test_without_a_name_mapping_columns_are_found_as_java_finds_them(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table, rows = _table(tmp_path)
    table = table.transaction().remove_properties(MAPPING).commit_transaction()
    assert MAPPING not in table.metadata.properties
    with pytest.raises(ValueError, match="does not have field-ids"):
        table.scan().to_arrow()  # PyIceberg refuses; Java uses fallback ids by position
    ours = _scan(con, table.metadata_location)
    assert ours == _expected(rows)
    # No column of NULLs for a column the file has.
    counts = con.execute(
        f"SELECT count(id), count(name), count(score), count(loc.city) FROM iceberg_scan('{table.metadata_location}')"
    ).fetchall()
    assert counts == [(65, sum(r["name"] is not None for r in rows), 65, 65)]


def test_without_a_mapping_a_renamed_column_is_read_by_position(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # Renamed in Iceberg after migration: the file still says `score`; its position (id 3) is right.
    table, rows = _table(tmp_path)
    table = table.transaction().remove_properties(MAPPING).commit_transaction()
    with table.update_schema() as update:
        update.rename_column("score", "points")
    with table.update_schema() as update:
        update.add_column("added_later", LongType())
    got = con.execute(
        f"SELECT id, points, added_later FROM iceberg_scan('{table.metadata_location}') ORDER BY id"
    ).fetchall()
    assert got == [(r["id"], r["score"], None) for r in rows]


def test_without_a_mapping_a_file_in_another_column_order_is_refused(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table, _ = _table(tmp_path)
    swapped = pa.schema([_ARROW.field(i) for i in (1, 0, 2, 3)])
    extra = tmp_path / "hive" / "swapped.parquet"
    _write(extra, _rows(100, 3), swapped)
    table.add_files([str(extra)])
    # With the mapping names decide: the swapped file reads right.
    assert len(_scan(con, table.metadata_location)) == 68
    table = table.transaction().remove_properties(MAPPING).commit_transaction()
    # Without it, position (Java) and names disagree: an error, never swapped values.
    with pytest.raises(
        duckdb.Error, match=r"swapped\.parquet: the file has no field ids .* column 1 is 'name'"
    ):
        _scan(con, table.metadata_location)


_FIELDS = [NField(1, "id", LONG), NField(2, "name", STRING), NField(3, "score", DOUBLE)]


def test_a_mapping_decides_even_where_names_differ() -> None:
    # Hive column names as the mapping records them (`score` was `points_v1` in old files).
    names = ["id", "name", "points_v1"]
    mapping = {1: ("id",), 2: ("name",), 3: ("score", "points_v1")}
    assert columns_without_ids(_FIELDS, names, mapping=mapping, by_position=True, path="f") == {
        1: "id",
        2: "name",
        3: "points_v1",
    }
    # A field the mapping does not name stays absent, as Java's applyNameMapping leaves it.
    assert columns_without_ids(_FIELDS, names, mapping={1: ("id",)}, by_position=True, path="f") == {1: "id"}


def test_fallback_rules_without_a_mapping() -> None:
    def resolve(names: list[str], by_position: bool = True) -> dict[int, str]:
        return columns_without_ids(_FIELDS, names, mapping=None, by_position=by_position, path="f.parquet")

    assert resolve(["id", "name", "score"]) == {1: "id", 2: "name", 3: "score"}
    assert resolve(["ID", "Name", "x"]) == {1: "ID", 2: "Name", 3: "x"}  # position; names fold case
    assert resolve(["name", "score"], by_position=False) == {2: "name", 3: "score"}  # ORC: names only
    with pytest.raises(InvalidMetadataError, match=r"column 1 is 'name' but field 'id' .* is column 2"):
        resolve(["name", "id", "score"])
    # A column dropped from the files: `score` would serve two fields.
    with pytest.raises(InvalidMetadataError, match=r"column 'score' .* both field 2 and field 3"):
        columns_without_ids(
            [NField(1, "id", LONG), NField(2, "other", STRING), NField(3, "score", DOUBLE)],
            ["id", "score"],
            mapping=None,
            by_position=True,
            path="f.parquet",
        )
