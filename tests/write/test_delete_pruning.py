"""DELETE and UPDATE plan like a read: a selective WHERE opens only the data files that can match.

The table has 20 partitions of 3 data files each. Every data file outside the partition a
statement can touch is moved away before the statement runs, so opening one would fail; the files
handed to DuckDB are counted as well. The rows afterwards are checked against the inputs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceduck.lake import connect
from iceduck.write import matching

PARTITIONS = 20
FILES_PER_PARTITION = 3
ROWS_PER_FILE = 50


def _batch(f: int) -> pa.Table:
    ids = range(f * ROWS_PER_FILE * PARTITIONS, (f + 1) * ROWS_PER_FILE * PARTITIONS)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": pa.array([i % PARTITIONS for i in ids], pa.int64())}
    )


@pytest.fixture
def table(tmp_path: Path) -> Any:
    lake = connect(tmp_path / "wh")
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("p", "BIGINT")], partition_by=["p"], format_version=3)
    for f in range(FILES_PER_PARTITION):
        t.append(_batch(f))
    yield lake, t
    lake.close()


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every data file the writer hands to DuckDB's read_parquet."""
    seen: list[str] = []
    original = matching.read_sql

    def counting(files: Any, schema: Any, **kw: Any) -> str:
        seen.extend(files)
        return original(files, schema, **kw)

    monkeypatch.setattr(matching, "read_sql", counting)
    return seen


def _hide_all_but(folder: Path, keep: str, away: Path) -> list[tuple[Path, Path]]:
    moved = []
    for f in sorted((folder / "data").rglob("*.parquet")):
        if f"/{keep}/" not in str(f):
            target = away / str(len(moved))
            shutil.move(f, target)
            moved.append((f, target))
    return moved


def _ids(lake: Any) -> list[int]:
    return sorted(r[0] for r in lake.sql("SELECT id FROM lake.ns.t").fetchall())


@pytest.mark.parametrize("statement", ["delete", "update"])
def test_a_selective_statement_opens_only_the_files_of_its_partition(
    table: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statement: str
) -> None:
    lake, t = table
    opened = _opened(monkeypatch)
    away = tmp_path / "away"
    away.mkdir()
    moved = _hide_all_but(Path(t.location), "p=7", away)
    assert len(moved) == (PARTITIONS - 1) * FILES_PER_PARTITION
    everything = [i for f in range(FILES_PER_PARTITION) for i in _batch(f).column("id").to_pylist()]
    hit = [i for i in everything if i % PARTITIONS == 7 and i % 3 == 0]
    if statement == "delete":
        result = t.delete("p = 7 AND id % 3 = 0")
        assert result.deleted_rows == len(hit)
    else:
        result = t.update({"id": "-id"}, "p = 7 AND id % 3 = 0")
        assert result.updated_rows == len(hit)
    for original, target in moved:
        shutil.move(target, original)
    assert len(set(opened)) == FILES_PER_PARTITION  # UPDATE reads them twice: match, then rewrite
    assert all("/p=7/" in p for p in opened)
    kept = [i for i in everything if i not in set(hit)]
    assert _ids(lake) == sorted(kept if statement == "delete" else kept + [-i for i in hit])


def test_a_filter_duckdb_cannot_read_alone_still_deletes_exactly(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, t = table
    opened = _opened(monkeypatch)
    lake.con.execute("CREATE TABLE doomed AS SELECT range AS id FROM range(0, 3000, 7)")
    # a subquery on the caller's own table: no pruning predicate can be derived, every file is read
    result = t.delete("id IN (SELECT id FROM doomed)")
    assert len(opened) == PARTITIONS * FILES_PER_PARTITION
    assert result.deleted_rows == len(range(0, 3000, 7))
    assert _ids(lake) == [i for i in range(3000) if i % 7]
