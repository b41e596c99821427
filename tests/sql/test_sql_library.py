"""The top-level `sql/` library, run as users run it (`.read sql/<file>.sql` in the shell, after
`SET VARIABLE tbl = ...`), on the demo table; every printed figure checked against the table's
metadata read with the Python API, the Avro manifests and the rows DuckDB reads."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

import iceduck
from iceduck import demo
from iceduck.lake import Lake
from iceduck.maintenance.health import compute_health
from iceduck.shell import Shell
from iceduck.table import Table

SQL = Path(__file__).resolve().parents[2] / "sql"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lk = iceduck.connect(tmp_path_factory.mktemp("sqllib") / "wh")
    demo.build(lk, io.StringIO())
    lk.sql("CREATE SCHEMA other")
    lk.sql("CREATE TABLE other.small (a INTEGER)")
    lk.sql("INSERT INTO other.small VALUES (1), (2)")
    yield lk
    lk.close()


def _results(lake: Lake, name: str, **variables: str) -> list[list[dict[str, str]]]:
    """Each result the file prints, as rows of column -> text (csv mode)."""
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(lake, out, err, mode="csv", bail=True)
    for key, value in variables.items():
        shell.run_text(f"SET VARIABLE {key} = '{value}';")
    shell.run_text(f".read {SQL / name}")
    assert (err.getvalue(), shell.exit_code) == ("", 0)
    return _split(out.getvalue())


def _split(text: str) -> list[list[dict[str, str]]]:
    """The printed results: each starts with its header line (the files' first column names)."""
    results: list[list[dict[str, str]]] = []
    headers = {
        "timestamp,",
        "sequence_number,",
        "content,",
        "manifest_path,",
        "kept,",
        "file_path,",
        "ok,",
        "delete_file_path,",
        "table_name,",
    }
    current: list[str] = []
    for line in text.splitlines():
        if any(line.startswith(h) for h in headers) and current:
            results.append(list(csv.DictReader(io.StringIO("\n".join(current)))))
            current = []
        current.append(line)
    if current:
        results.append(list(csv.DictReader(io.StringIO("\n".join(current)))))
    return results


def test_tree(lake: Lake) -> None:
    log, snapshots, manifests, files = _results(lake, "tree.sql", tbl=demo.TABLE)
    table = Table.load(demo.TABLE, catalog=lake.catalog)
    md = table.metadata
    assert [r["file"] for r in log if r["is_current"] == "true"] == [table.metadata_location]
    assert [int(r["snapshot_id"]) for r in snapshots] == [s.snapshot_id for s in md.snapshots]
    current = md.current_snapshot()
    assert current is not None
    listed = table.manifests(current)
    assert sorted(r["path"] for r in manifests) == sorted(m.manifest_path for m in listed)
    by_manifest = {m.manifest_path: [e for e in table.manifest(m).entries if e.status != 2] for m in listed}
    assert {r["manifest_path"]: int(r["files"]) for r in files} == {
        p: len(es) for p, es in by_manifest.items() if es
    }


def test_too_many_files(lake: Lake) -> None:
    condition = "service_date = DATE ''2026-10-01''"
    levels, read, _bounds = _results(lake, "too_many_files.sql", tbl=demo.TABLE, filter=condition)
    table = Table.load(demo.TABLE, catalog=lake.catalog)
    data = [e for e in table.entries(table.metadata.current_snapshot()) if e.data_file.content == 0]
    assert sum(int(r["files"]) for r in levels) == len(data)
    # the demo writes one file per service day: only the 1st's is read, the other days are pruned
    kept = [r for r in levels if r["kept"] == "true"]
    assert [int(r["files"]) for r in kept] == [1]
    assert [r["partition"] for r in read] == ["service_date_day=2026-10-01"]


def test_deletes(lake: Lake) -> None:
    kinds, checks, unmatched, shares = _results(lake, "deletes.sql", tbl=demo.TABLE)
    assert [r["content"] for r in kinds] == ["POSITION_DELETES"]
    assert [r["ok"] for r in checks] == ["true"]
    assert unmatched == []  # every referenced path names a live data file
    # deleted positions per file against the rows DuckDB reads with the deletes applied
    live = lake.con.sql(
        f"SELECT _file, count(*) FROM iceberg_scan('{demo.TABLE}', metadata_columns := true) GROUP BY ALL"
    ).fetchall()
    alive = dict(live)
    for r in shares:
        assert int(r["record_count"]) - int(r["deleted"]) == alive.get(r["file_path"], 0)
    assert sum(int(r["deleted"]) for r in shares) == int(kinds[0]["deleted_rows"])


def test_health_dashboard_and_recording(lake: Lake) -> None:
    (dashboard,) = _results(lake, "health_dashboard.sql")
    names = sorted(r["table_name"] for r in dashboard)
    assert names == ["demo.services", "other.small"]
    for r in dashboard:
        assert r["state"] == compute_health(Table.load(r["table_name"], catalog=lake.catalog)).state

    def recorded() -> int:
        rel = lake.con.sql(f"SELECT count(*) FROM iceberg_health_history('{demo.TABLE}')")
        return int(rel.fetchall()[0][0])

    before = recorded()
    (rows,) = _results(lake, "record_health.sql")
    assert sorted(r["table_name"] for r in rows) == names
    assert recorded() == before + 1
