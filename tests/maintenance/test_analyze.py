"""ANALYZE: theta sketches in a Puffin statistics file, checked against independent truth:

* exact distinct counts of seeded generated data (numpy sets), the estimate within the library's
  3-sigma bounds and exact below the sketch's nominal size;
* the blob bytes of string and long columns equal Apache DataSketches' own compact sketch of the
  same values (its Python API takes str and int: their bytes are Iceberg's single-value form);
* the metadata's `statistics` entry and the Puffin footer read with fastavro-free JSON parsing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasketches
import numpy as np
import pyarrow as pa
import pytest

from iceduck.maintenance import Maintainer
from iceduck.maintenance.store import now_ms
from iceduck.puffin import read_blob, read_footer
from iceduck.puffin.theta import THETA_BLOB, bounds, estimate, sketch_of
from tests.support.write_helpers import new_lake


def _lake(folder: Path) -> Any:
    lake = new_lake(folder)
    lake.sql("CREATE SCHEMA lake.s")
    lake.sql("CREATE TABLE lake.s.t (k BIGINT, i INTEGER, s VARCHAR, d DATE, x DOUBLE, n BIGINT)")
    return lake


def _data(rng: np.random.Generator, rows: int, start: int = 0) -> pa.Table:
    i = rng.integers(0, 1500, rows).astype(np.int32)
    s = rng.integers(0, 9000, rows)
    return pa.table(
        {
            "k": pa.array(np.arange(start, start + rows), pa.int64()),
            "i": pa.array(i, pa.int32()),
            "s": pa.array([f"s{v}" for v in s], pa.string()),
            "d": pa.array(rng.integers(0, 400, rows).astype(np.int32), pa.int32()).cast(pa.date32()),
            "x": pa.array(np.round(rng.random(rows) * 100, 1), pa.float64()),
            "n": pa.array([None] * rows, pa.int64()),
        }
    )


def _blobs(path: str) -> dict[int, bytes]:
    raw = Path(path).read_bytes()
    return {b.fields[0]: read_blob(raw, b, path=path) for b in read_footer(raw, path=path).blobs}


@pytest.mark.parametrize("rows", [300, 20_000])
def test_ndv_within_the_sketch_bounds_of_exact_counts(tmp_path: Path, rows: int) -> None:
    lake = _lake(tmp_path / "wh")
    data = _data(np.random.default_rng(rows), rows)
    lake.table("s.t").append(data)
    out = lake.sql("ANALYZE lake.s.t").fetchall()
    ndv = {name: n for name, n, *_ in out}
    exact = {c: len({v for v in data.column(c).to_pylist() if v is not None}) for c in data.column_names}
    assert set(ndv) == set(exact)
    md = json.loads(Path(lake.table("s.t").metadata_location).read_text())
    (stats,) = md["statistics"]
    assert stats["snapshot-id"] == md["current-snapshot-id"] == out[0][2]
    assert Path(stats["statistics-path"]).stat().st_size == stats["file-size-in-bytes"]
    blobs = _blobs(stats["statistics-path"])
    names = {f["id"]: f["name"] for f in md["schemas"][-1]["fields"]}
    for b in stats["blob-metadata"]:
        (fid,) = b["fields"]
        name = names[fid]
        assert b["type"] == THETA_BLOB and b["snapshot-id"] == stats["snapshot-id"]
        assert b["properties"]["ndv"] == str(ndv[name]) == str(int(estimate(blobs[fid])))
        lo, hi = bounds(blobs[fid], 3)
        assert lo <= exact[name] <= hi, (name, exact[name], lo, hi)
        if exact[name] <= 7680:  # below the sketch's nominal size it counts exactly
            assert ndv[name] == exact[name]
    assert ndv["n"] == 0  # nulls are not values
    lake.close()


def test_bytes_equal_datasketches_own_sketch(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    data = _data(np.random.default_rng(7), 5000)
    lake.table("s.t").append(data)
    lake.sql("ANALYZE lake.s.t (s, k)")
    md = json.loads(Path(lake.table("s.t").metadata_location).read_text())
    blobs = _blobs(md["statistics"][0]["statistics-path"])
    assert sorted(blobs) == [1, 3]  # k and s only
    for fid, column in ((1, "k"), (3, "s")):
        lib = datasketches.update_theta_sketch()
        for v in data.column(column).to_pylist():
            lib.update(v)
        assert blobs[fid] == lib.compact().serialize()
    lake.close()


def test_incremental_merges_the_new_files(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    rng = np.random.default_rng(3)
    first, second = (
        _data(rng, 2500),
        _data(rng, 1500, start=2500),
    )  # 4000 distinct: a union of exact sketches stays exact below 4096
    lake.table("s.t").append(first)
    m = Maintainer.for_lake(lake, "s.t")
    assert m.analyze(dry_run=False).summary["incremental"] is False
    lake.table("s.t").append(second)
    plan = m.analyze().plan
    assert plan.base is not None and len(plan.files) == 1  # only the appended file is read
    r = m.analyze(dry_run=False)
    assert r.summary["incremental"] is True
    both = pa.concat_tables([first, second])
    md = json.loads(Path(lake.table("s.t").metadata_location).read_text())
    current = next(x for x in md["statistics"] if x["snapshot-id"] == md["current-snapshot-id"])
    blobs = _blobs(current["statistics-path"])
    for fid, column in ((1, "k"), (2, "i"), (3, "s")):
        values = [v for v in both.column(column).to_pylist() if v is not None]
        if column == "i":
            full = sketch_of(int(v).to_bytes(4, "little", signed=True) for v in values)
        elif column == "k":
            full = sketch_of(int(v).to_bytes(8, "little", signed=True) for v in values)
        else:
            full = sketch_of(v.encode() for v in values)
        assert blobs[fid] == full  # the union of exact sketches is the sketch of the union
    # a delete makes the next run scan everything again
    lake.sql("DELETE FROM lake.s.t WHERE k < 100")
    assert m.analyze().plan.base is None
    lake.close()


def test_distinct_count_in_column_stats(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    lake.table("s.t").append(_data(np.random.default_rng(1), 500))
    q = "SELECT DISTINCT column_name, distinct_count, distinct_count_snapshot_id FROM iceberg_column_stats('s.t') ORDER BY 1"
    assert {r[1] for r in lake.sql(q).fetchall()} == {None}
    analyzed = lake.table("s.t").current_snapshot().snapshot_id
    lake.sql("ANALYZE lake.s.t (i, k)")
    rows = {r[0]: r[1:] for r in lake.sql(q).fetchall()}
    assert rows["k"] == (500, analyzed) and rows["i"][1] == analyzed
    assert rows["s"] == (None, None)
    # a later snapshot shows the newest statistics of its history, naming the snapshot they describe
    lake.table("s.t").append(_data(np.random.default_rng(2), 10, start=500))
    rows = {r[0]: r[1:] for r in lake.sql(q).fetchall()}
    assert rows["k"] == (500, analyzed)
    lake.close()


def test_analyze_refuses_what_it_cannot_sketch(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    lake.table("s.t").append(_data(np.random.default_rng(1), 10))
    with pytest.raises(Exception, match=r"s\.t: ANALYZE: no column 'nope'"):
        lake.sql("ANALYZE lake.s.t (nope)")
    lake.sql("CREATE TABLE lake.s.e (k BIGINT)")
    with pytest.raises(Exception, match=r"s\.e: ANALYZE needs a snapshot"):
        lake.sql("ANALYZE lake.s.e")
    lake.sql("CREATE TABLE local_t AS SELECT 1 AS a")
    lake.sql("ANALYZE local_t")  # a DuckDB table: DuckDB's own ANALYZE
    lake.close()


def test_stale_statistics_are_debt_and_analyze_pays_it(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    lake.table("s.t").append(_data(np.random.default_rng(1), 1000))
    m = Maintainer.for_lake(lake, "s.t")
    h = m.health()
    assert h.metrics["statistics_stale_share"] is None  # never analyzed: no statistics debt
    m.analyze(dry_run=False)
    analyzed = lake.table("s.t").current_snapshot().snapshot_id
    lake.table("s.t").append(_data(np.random.default_rng(2), 150, start=1000))
    h = m.health()
    assert h.metrics["statistics_snapshot_id"] == analyzed
    assert h.metrics["statistics_stale_share"] == 150 / 1000  # below the 0.2 default
    assert not [r for r in h.reasons if r.check == "statistics"]
    lake.sql("DELETE FROM lake.s.t WHERE k < 100")
    h = m.health()
    assert h.metrics["statistics_stale_share"] == (150 + 100) / 1000
    (reason,) = [r for r in h.reasons if r.check == "statistics"]
    assert reason.state == "MAINTENANCE_DUE" and reason.threshold == 0.2
    (action,) = [a for a in h.actions if a.action == "analyze"]
    assert action.sql("s.t") == "SELECT * FROM iceberg_analyze('s.t', dry_run := false)"
    assert lake.sql(action.sql("s.t")).fetchall()[0][4] == "succeeded"
    after = m.health()
    assert after.metrics["statistics_stale_share"] == 0.0
    assert lake.sql(
        "SELECT DISTINCT distinct_count FROM iceberg_column_stats('s.t') WHERE column_name = 'k'"
    ).fetchall() == [(1050,)]
    lake.close()


def test_expiry_and_orphans_keep_live_statistics_and_remove_the_rest(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "wh")
    t = lake.table("s.t")
    t.append(_data(np.random.default_rng(1), 100))
    m = Maintainer.for_lake(lake, "s.t")
    old = m.analyze(dry_run=False).summary["statistics_path"]
    replaced = m.analyze(["k"], dry_run=False).summary["statistics_path"]  # replaces `old` on the snapshot
    t.append(_data(np.random.default_rng(2), 100, start=100))
    live = m.analyze(dry_run=False).summary["statistics_path"]
    assert len({old, replaced, live}) == 3 and all(Path(p).exists() for p in (old, replaced, live))
    m.expire_snapshots(older_than=now_ms() + 1000, retain_last=1, dry_run=False)
    md = json.loads(Path(lake.table("s.t").metadata_location).read_text())
    assert [s["statistics-path"] for s in md["statistics"]] == [live]
    assert not Path(replaced).exists() and Path(live).exists()  # the expired snapshot's file went with it
    # `old` was replaced on a snapshot: the metadata files of the metadata log still name it, and
    # orphan removal counts what they reach as reachable; the live file stays either way
    r = m.remove_orphan_files(older_than=now_ms() + 1000, allow_recent=True, dry_run=False)
    assert r.status in ("succeeded", "nothing_to_do"), r.error
    assert Path(live).exists()
    assert lake.sql(
        "SELECT DISTINCT distinct_count FROM iceberg_column_stats('s.t') WHERE column_name = 'k'"
    ).fetchall() == [(200,)]
    lake.close()


def test_partition_statistics_file(tmp_path: Path) -> None:
    lake = new_lake(tmp_path / "wh")
    lake.sql("CREATE SCHEMA lake.s")
    lake.create_table("s.p", [("k", "BIGINT"), ("d", "DATE"), ("c", "VARCHAR")], partition_by=["c", "day(d)"],
                      format_version=3)  # fmt: skip
    lake.sql(
        "INSERT INTO lake.s.p SELECT range, DATE '2024-01-01' + (range % 3)::INT, "
        "CASE WHEN range % 5 = 0 THEN NULL ELSE 'c' || (range % 2) END FROM range(100)"
    )
    lake.sql("DELETE FROM lake.s.p WHERE k < 10")
    lake.sql("ANALYZE lake.s.p (k)")
    table = lake.table("s.p")
    md = json.loads(Path(table.metadata_location).read_text())
    (entry,) = md["partition-statistics"]
    assert entry["snapshot-id"] == md["current-snapshot-id"]
    path = Path(entry["statistics-path"])
    assert path.stat().st_size == entry["file-size-in-bytes"]
    import pyarrow.parquet as pq

    got = pq.read_table(path)
    assert [f.metadata[b"PARQUET:field_id"] for f in got.schema] == [
        str(i).encode() for i in (*range(1, 13), 13)
    ]
    rows = got.to_pylist()
    # independent truth: rows after deletes per partition through DuckDB, stored rows per file with pyarrow
    live = dict(
        ((c, d), n) for c, d, n in lake.sql("SELECT c, d, count(*) FROM lake.s.p GROUP BY ALL").fetchall()
    )
    stored: dict[tuple[Any, Any], int] = {}
    for f in (Path(table.location) / "data").rglob("*.parquet"):
        t = pq.read_table(f)
        key = (t.column("c")[0].as_py(), t.column("d")[0].as_py())
        stored[key] = stored.get(key, 0) + t.num_rows
    assert {(r["partition"]["c"], r["partition"]["d_day"]): r["total_record_count"] for r in rows} == live
    assert {(r["partition"]["c"], r["partition"]["d_day"]): r["data_record_count"] for r in rows} == stored
    assert all(
        r["data_record_count"] - r["position_delete_record_count"] == r["total_record_count"] for r in rows
    )
    assert sum(r["dv_count"] for r in rows) == sum(1 for r in rows if r["position_delete_record_count"])
    keys = [
        ((r["partition"]["c"] is not None, r["partition"]["c"] or ""), r["partition"]["d_day"]) for r in rows
    ]
    assert keys == sorted(keys)  # sorted by partition, NULLs first
    lake.close()
