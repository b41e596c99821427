"""EXPLAIN DELETE / UPDATE / MERGE on a lake table lists the files the write then really reads and
drops: truth is the write itself, run right after (the files its reader opened, counted at the
Parquet reading layer, and the data files gone from the table after it), and the rows unchanged by
the EXPLAIN."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.write import matching


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.t (id BIGINT, p INTEGER, v VARCHAR) PARTITIONED BY (p)")
    for f in range(2):
        lake.sql(f"INSERT INTO ns.t SELECT i, (i % 3)::INT, 'v' FROM range({f * 30}, {(f + 1) * 30}) r(i)")
    yield lake
    lake.close()


def _explained(lake: iceduck.Lake, statement: str) -> dict[str, set[str]]:
    rel = lake.sql("EXPLAIN " + statement)
    assert rel is not None and rel.columns == ["file_path", "partition", "record_count", "action", "reason"]
    out: dict[str, set[str]] = {"read": set(), "remove": set(), "skip": set()}
    for path, _, _, action, reason in rel.fetchall():
        assert reason
        out[action].add(path)
    return out


def _live(lake: iceduck.Lake) -> set[str]:
    return {
        r[0]
        for r in lake.sql("SELECT file_path FROM iceberg_files('ns.t') WHERE content = 'DATA'").fetchall()
    }


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    original = matching.read_sql

    def counting(files: Any, schema: Any, **kw: Any) -> str:
        seen.extend(files)
        return original(files, schema, **kw)

    monkeypatch.setattr(matching, "read_sql", counting)
    return seen


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM lake.ns.t WHERE p = 1",
        "DELETE FROM ns.t WHERE id = 5",
        "UPDATE ns.t SET v = 'x' WHERE id BETWEEN 31 AND 33",
        "MERGE INTO lake.ns.t AS t USING (SELECT 4 AS id, 1 AS p) s ON t.id = s.id AND t.p = s.p "
        "WHEN MATCHED THEN DELETE",
        "MERGE INTO lake.ns.t AS t USING (SELECT 4 AS id) s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE",
    ],
)
def test_explain_lists_what_the_write_reads_and_drops(
    lake: iceduck.Lake, monkeypatch: pytest.MonkeyPatch, statement: str
) -> None:
    before_rows = sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall())
    live = _live(lake)
    plan = _explained(lake, statement)
    assert plan["read"] | plan["remove"] | plan["skip"] == live
    assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == before_rows  # EXPLAIN wrote nothing
    seen = _opened(monkeypatch)
    lake.sql(statement)
    monkeypatch.undo()
    assert set(seen) == plan["read"]
    assert plan["remove"] == live - _live(lake) - plan["read"]
