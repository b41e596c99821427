"""CREATE OR REPLACE TABLE on lake tables: the rows as DuckDB's CREATE OR REPLACE makes them on a plain
table, and Iceberg's atomic replace underneath (same UUID, history kept, one commit, field ids reused
by name as Java Iceberg's replace-table transaction does; Java's own reading is in test_dml_java.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import ValidationError
from iceduck.spec.metadata_rules import metadata_json_problems
from tests.support.rest_helpers import serving


def _json(lake: iceduck.Lake, table: str) -> dict[str, Any]:
    location = lake.table(table).metadata_location
    obj: dict[str, Any] = json.loads(Path(location.removeprefix("file://")).read_text())
    assert metadata_json_problems(obj) == []
    return obj


def _ids(obj: dict[str, Any]) -> dict[str, int]:
    schema = next(s for s in obj["schemas"] if s["schema-id"] == obj["current-schema-id"])
    return {f["name"]: f["id"] for f in schema["fields"]}


@pytest.mark.parametrize("version", [2, 3])
def test_replace_as_select_keeps_history_and_matches_duckdb(tmp_path: Path, version: int) -> None:
    truth = duckdb.connect()
    statements = [
        "CREATE TABLE {t} (id INTEGER, v VARCHAR, gone DOUBLE)",
        "INSERT INTO {t} VALUES (1, 'a', 0.5), (2, 'b', 1.5), (3, 'c', 2.5)",
    ]
    replace = "CREATE OR REPLACE TABLE {t} AS SELECT id * 10 AS id, v || '!' AS v, id > 1 AS big FROM {t} WHERE id <> 2"
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        for s in statements:
            truth.execute(s.format(t="t"))
            lake.sql(
                s.format(t="ns.t").replace(")", f") WITH ('format-version' = '{version}')", 1)
                if "CREATE" in s
                else s.format(t="ns.t")
            )
        before = _json(lake, "ns.t")
        old_rows = sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall())
        expected = truth.execute(replace.format(t="t")).fetchall()
        got = lake.sql(replace.format(t="lake.ns.t"))
        assert got is not None and got.fetchall() == expected
        assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == sorted(
            truth.sql("FROM t").fetchall()
        )
        after = _json(lake, "ns.t")
        assert after["table-uuid"] == before["table-uuid"] and after["location"] == before["location"]
        # one commit: one more metadata file, one more snapshot, history kept
        assert len(after["metadata-log"]) == len(before["metadata-log"]) + 1
        assert [s["snapshot-id"] for s in after["snapshots"]][:-1] == [
            s["snapshot-id"] for s in before["snapshots"]
        ]
        new = after["snapshots"][-1]
        assert new["snapshot-id"] == after["current-snapshot-id"] and "parent-snapshot-id" not in new
        assert [e["snapshot-id"] for e in after["snapshot-log"]] == [
            *(e["snapshot-id"] for e in before["snapshot-log"]),
            new["snapshot-id"],
        ]
        # ids reused by name, new columns after last-column-id
        assert _ids(after) == {"id": 1, "v": 2, "big": 4}
        assert after["last-column-id"] == 4
        old = before["current-snapshot-id"]
        assert sorted(lake.sql(f"SELECT * FROM lake.ns.t AT (VERSION => {old})").fetchall()) == old_rows


def test_replace_with_columns_partitioning_and_key(tmp_path: Path) -> None:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id INTEGER, v VARCHAR) PARTITIONED BY (v) WITH ('comment' = 'keep')")
        lake.sql("INSERT INTO ns.t VALUES (1, 'a')")
        result = lake.sql(
            "CREATE OR REPLACE TABLE ns.t (id BIGINT PRIMARY KEY, d DATE) PARTITIONED BY (month(d))"
        )
        assert result is not None and result.fetchall() == []
        assert lake.sql("SELECT * FROM lake.ns.t").fetchall() == []
        obj = _json(lake, "ns.t")
        assert "current-snapshot-id" not in obj or obj["current-snapshot-id"] in (None, -1)
        assert "main" not in obj.get("refs", {})
        schema = next(s for s in obj["schemas"] if s["schema-id"] == obj["current-schema-id"])
        assert [(f["name"], f["id"], f["required"], f["type"]) for f in schema["fields"]] == [
            ("id", 1, True, "long"),
            ("d", 3, False, "date"),
        ]
        assert schema["identifier-field-ids"] == [1]
        spec = next(s for s in obj["partition-specs"] if s["spec-id"] == obj["default-spec-id"])
        assert [(f["source-id"], f["transform"]) for f in spec["fields"]] == [(3, "month")]
        assert obj["properties"]["comment"] == "keep"
        lake.sql("INSERT INTO ns.t VALUES (5, DATE '2024-05-01')")
        assert lake.sql("SELECT * FROM lake.ns.t").fetchall() == [
            (5, __import__("datetime").date(2024, 5, 1))
        ]
        # a name that does not exist yet is simply created
        lake.sql("CREATE OR REPLACE TABLE ns.fresh AS SELECT 1 AS a")
        assert lake.sql("SELECT * FROM lake.ns.fresh").fetchall() == [(1,)]


def test_replace_refuses_v1_and_moves(tmp_path: Path) -> None:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id INTEGER) WITH ('format-version' = '1')")
        location = lake.table("ns.t").metadata_location
        with pytest.raises(ValidationError, match="needs format version 2 or 3"):
            lake.sql("CREATE OR REPLACE TABLE ns.t AS SELECT 1 AS id")
        lake.sql("CREATE TABLE ns.u (id INTEGER)")
        with pytest.raises(ValidationError, match="cannot move"):
            lake.sql(
                f"CREATE OR REPLACE TABLE ns.u (id INTEGER) WITH ('location' = '{tmp_path / 'elsewhere'}')"
            )
        assert lake.table("ns.t").metadata_location == location


def test_replace_through_attach_to_iceduck_serve(tmp_path: Path) -> None:
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        lake.sql("CREATE TABLE cat.ns.t AS SELECT range AS id FROM range(5)")
        got = lake.sql(
            "CREATE OR REPLACE TABLE cat.ns.t AS SELECT id, id * 2 AS twice FROM cat.ns.t WHERE id < 3"
        )
        assert got is not None and got.fetchall() == [(3,)]
        assert sorted(lake.sql("SELECT * FROM cat.ns.t").fetchall()) == [(0, 0), (1, 2), (2, 4)]
        with iceduck.connect(server.url, authorization_type="none") as remote:
            assert sorted(remote.sql("SELECT * FROM lake.ns.t").fetchall()) == [(0, 0), (1, 2), (2, 4)]
            assert len(remote.table("ns.t").load().metadata.snapshots) == 2
