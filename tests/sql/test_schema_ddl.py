"""ALTER TABLE ... SET / DROP IDENTIFIER FIELDS and ALTER COLUMN ... SET / DROP DEFAULT on lake tables.

Truth: the spec's rules for identifier fields (required primitives, not float/double), read back from
the metadata JSON file (checked by `iceduck.spec.metadata_rules`); for defaults, DuckDB's own ALTER
... SET DEFAULT on a plain table with the same rows (the rows an INSERT omitting the column writes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import ValidationError
from iceduck.spec.metadata_rules import metadata_json_problems


@pytest.fixture
def lake(tmp_path: Any) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    yield lake
    lake.close()


def _metadata(lake: iceduck.Lake, table: str) -> dict[str, Any]:
    location = lake.table(table).metadata_location
    obj = json.loads(Path(location.removeprefix("file://")).read_text())
    assert metadata_json_problems(obj) == []
    return obj


def _current(obj: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in obj["schemas"] if s["schema-id"] == obj["current-schema-id"])


def _key_names(obj: dict[str, Any]) -> list[str]:
    schema = _current(obj)
    by_id = {f["id"]: f["name"] for f in schema["fields"]}
    return [by_id[i] for i in schema.get("identifier-field-ids", [])]


def test_primary_key_and_identifier_fields(lake: iceduck.Lake) -> None:
    lake.sql("CREATE TABLE ns.t (a INTEGER, b VARCHAR, c DOUBLE NOT NULL, d DATE, PRIMARY KEY (b, a))")
    obj = _metadata(lake, "ns.t")
    assert sorted(_key_names(obj)) == ["a", "b"]
    assert {f["name"]: f["required"] for f in _current(obj)["fields"]} == {
        "a": True,
        "b": True,
        "c": True,
        "d": False,
    }
    with pytest.raises(ValidationError, match="d an identifier field: the column is optional"):
        lake.sql("ALTER TABLE ns.t SET IDENTIFIER FIELDS a, d")
    with pytest.raises(ValidationError, match="c an identifier field: double"):
        lake.sql("ALTER TABLE ns.t SET IDENTIFIER FIELDS c")
    with pytest.raises(ValidationError, match="no column zz"):
        lake.sql("ALTER TABLE ns.t SET IDENTIFIER FIELDS zz")
    assert sorted(_key_names(_metadata(lake, "ns.t"))) == ["a", "b"]
    lake.sql("ALTER TABLE ns.t DROP IDENTIFIER FIELDS B")
    assert _key_names(_metadata(lake, "ns.t")) == ["a"]
    with pytest.raises(ValidationError, match="b is not an identifier field"):
        lake.sql("ALTER TABLE ns.t DROP IDENTIFIER FIELDS b")
    lake.sql("ALTER TABLE lake.ns.t SET IDENTIFIER FIELDS (a, b)")
    assert _key_names(_metadata(lake, "ns.t")) == ["a", "b"]
    # the key drives ON CONFLICT
    lake.sql("INSERT INTO ns.t VALUES (1, 'x', 1.5, NULL)")
    lake.sql("INSERT INTO ns.t VALUES (1, 'x', 2.5, NULL) ON CONFLICT DO UPDATE SET c = excluded.c")
    assert lake.sql("SELECT a, b, c FROM lake.ns.t").fetchall() == [(1, "x", 2.5)]
    lake.sql("ALTER TABLE ns.t DROP IDENTIFIER FIELDS")
    assert _key_names(_metadata(lake, "ns.t")) == []
    with pytest.raises(ValidationError, match="no identifier fields"):
        lake.sql("INSERT INTO ns.t VALUES (1, 'x', 2.5, NULL) ON CONFLICT DO NOTHING")


def test_set_and_drop_default_as_duckdb_does(lake: iceduck.Lake) -> None:
    truth = duckdb.connect()
    columns = "id INTEGER, v VARCHAR, n DECIMAL(9, 2), d DATE"
    truth.execute(f"CREATE TABLE t ({columns})")
    lake.sql(f"CREATE TABLE ns.t ({columns})")
    statements = [
        "INSERT INTO {t} VALUES (1, 'a', 1.5, DATE '2024-01-01')",
        "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 'dflt'",
        "ALTER TABLE {t} ALTER n SET DEFAULT 12.25",
        "ALTER TABLE {t} ALTER COLUMN d SET DEFAULT DATE '2020-02-29'",
        "INSERT INTO {t} (id) VALUES (2)",
        "INSERT INTO {t} (id, v) VALUES (3, 'given')",
        "INSERT INTO {t} VALUES (4, DEFAULT, DEFAULT, NULL)",
        "ALTER TABLE {t} ALTER COLUMN v DROP DEFAULT",
        "INSERT INTO {t} (id) VALUES (5)",
        "ALTER TABLE {t} ALTER COLUMN n SET DEFAULT NULL",
        "INSERT INTO {t} (id) VALUES (6)",
        "INSERT INTO {t} BY NAME SELECT 7 AS id",
    ]
    for statement in statements:
        truth.execute(statement.format(t="t"))
        lake.sql(statement.format(t="ns.t"))
    assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == sorted(truth.sql("FROM t").fetchall())
    fields = {f["name"]: f for f in _current(_metadata(lake, "ns.t"))["fields"]}
    # the write-default only; never a JSON null; no initial-default appears for existing columns
    assert "write-default" not in fields["v"] and "write-default" not in fields["n"]
    assert fields["d"]["write-default"] == "2020-02-29"
    assert all("initial-default" not in f for f in fields.values())


def test_a_default_keeps_the_initial_default(lake: iceduck.Lake) -> None:
    lake.sql("CREATE TABLE ns.t (id INTEGER)")
    lake.sql("INSERT INTO ns.t VALUES (1)")
    lake.sql("ALTER TABLE ns.t ADD COLUMN v VARCHAR DEFAULT 'old'")
    lake.sql("ALTER TABLE ns.t ALTER COLUMN v SET DEFAULT 'new'")
    lake.sql("INSERT INTO ns.t (id) VALUES (2)")
    assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == [(1, "old"), (2, "new")]
    v = next(f for f in _current(_metadata(lake, "ns.t"))["fields"] if f["name"] == "v")
    assert (v["initial-default"], v["write-default"]) == ("old", "new")


def test_defaults_are_refused_before_v3_and_when_not_constant(lake: iceduck.Lake) -> None:
    lake.sql("CREATE TABLE ns.v2 (id INTEGER, v VARCHAR) WITH ('format-version' = '2')")
    location = lake.table("ns.v2").metadata_location
    with pytest.raises(ValidationError, match=r"default values need format version 3 \(table is v2\)"):
        lake.sql("ALTER TABLE ns.v2 ALTER COLUMN v SET DEFAULT 'x'")
    lake.sql("CREATE TABLE ns.v3 (id INTEGER, v VARCHAR)")
    with pytest.raises(ValidationError, match="not a constant"):
        lake.sql("ALTER TABLE ns.v3 ALTER COLUMN v SET DEFAULT random()::VARCHAR")
    with pytest.raises(ValidationError, match="Could not convert"):
        lake.sql("ALTER TABLE ns.v3 ALTER COLUMN id SET DEFAULT 'abc'")
    assert lake.table("ns.v2").metadata_location == location
