"""Table statistics against Java Iceberg 1.10.2 / Spark 3.5.7 (one Spark child for the module):

* Spark's `compute_table_stats` output decodes in iceduck: `iceberg_column_stats.distinct_count`
  equals Spark's `ndv`, and iceduck's own sketch of the same values (hashing each value's Iceberg
  bytes) gives the bytes Spark wrote, so the NDVs are equal by construction, not by copying;
* iceduck's partition statistics file reads in Java and equals the one Java computes itself for the
  same snapshot (`PartitionStatsHandler.computeAndWriteStatsFile`), row for row;
* iceduck's statistics file reads in Java: `TableMetadataParser` lists it on the snapshot, Java's
  Puffin reader reads every blob, Java DataSketches wraps each sketch and estimates the `ndv`
  iceduck wrote; Spark plans and runs a query over the table with the cost-based optimizer on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iceduck.puffin import read_blob, read_footer
from iceduck.puffin.theta import bounds, estimate, sketch_of, union
from tests.support.write_helpers import new_lake

REF_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "java-iceberg"
sys.path.insert(0, str(REF_DIR))
import spark_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not spark_ref.available(), reason="Java Iceberg reference not installed")

ROWS = 20_000
SPARK_STATEMENTS = [
    "CREATE TABLE local.db.t (k bigint, i int, s string, d date) USING iceberg TBLPROPERTIES ('format-version'='2')",
    f"INSERT INTO local.db.t SELECT id, CAST(id % 1000 AS INT), concat('s', CAST(id % 5000 AS STRING)), "
    f"date_add(DATE '2020-01-01', CAST(id % 300 AS INT)) FROM range({ROWS})",
    "CALL local.system.compute_table_stats(table => 'db.t')",
    "CREATE TABLE local.db.p (k bigint, d date, c string) USING iceberg PARTITIONED BY (c, days(d)) "
    "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')",
    "INSERT INTO local.db.p SELECT id, date_add(DATE '2024-01-01', CAST(id % 3 AS INT)), "
    "CASE WHEN id % 5 = 0 THEN NULL ELSE concat('c', CAST(id % 2 AS STRING)) END FROM range(100)",
    "INSERT INTO local.db.p VALUES (1000, DATE '2024-02-01', 'c9')",
    "DELETE FROM local.db.p WHERE k < 10",
    "CALL local.system.compute_partition_stats(table => 'db.p')",
    "SELECT count(DISTINCT k), count(DISTINCT i), count(DISTINCT s), count(DISTINCT d) FROM local.db.t",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("java_stats")
    lake = new_lake(root / "wh")
    lake.sql("CREATE SCHEMA lake.s")
    lake.sql("CREATE TABLE lake.s.t (k BIGINT, i INTEGER, s VARCHAR, x DOUBLE)")
    rng = np.random.default_rng(11)
    data = pa.table(
        {
            "k": pa.array(np.arange(3000), pa.int64()),
            "i": pa.array(rng.integers(0, 700, 3000).astype(np.int32), pa.int32()),
            "s": pa.array([f"v{v}" for v in rng.integers(0, 20_000, 3000)], pa.string()),
            "x": pa.array(rng.random(3000), pa.float64()),
        }
    )
    lake.table("s.t").append(data)
    ours = {name: n for name, n, *_ in lake.sql("ANALYZE lake.s.t").fetchall()}
    meta = lake.table("s.t").metadata_location
    lake.create_table("s.p", [("k", "BIGINT"), ("d", "DATE"), ("c", "VARCHAR")], partition_by=["c", "day(d)"],
                      format_version=3)  # fmt: skip
    lake.sql(
        "INSERT INTO lake.s.p SELECT range, DATE '2024-01-01' + (range % 3)::INT, "
        "CASE WHEN range % 5 = 0 THEN NULL ELSE 'c' || (range % 2) END FROM range(100)"
    )
    lake.sql("INSERT INTO lake.s.p VALUES (1000, DATE '2024-02-01', 'c9')")
    lake.sql("DELETE FROM lake.s.p WHERE k < 10")
    before = lake.table("s.p").metadata_location
    lake.sql("ANALYZE lake.s.p (k)")
    after = lake.table("s.p").metadata_location
    lake.close()
    args = {
        "warehouse": str(root / "spark"),
        "statements": SPARK_STATEMENTS,
        "iceduck_metadata": meta,
        "partitioned": {"before": before, "after": after},
        "query": "SELECT a.i, count(*) FROM iceduck_t a JOIN iceduck_t b ON a.k = b.k GROUP BY a.i ORDER BY 1 LIMIT 3",
    }
    p = subprocess.run(
        [spark_ref.REF_PYTHON, str(Path(__file__).with_name("statistics_child.py")), json.dumps(args), str(REF_DIR)],
        capture_output=True, text=True, timeout=900, env={**__import__("os").environ, "TZ": "UTC"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return {
        "out": out, "ours": ours, "data": data, "meta": meta, "spark_table": root / "spark" / "db" / "t",
        "partitioned_after": after,
    }  # fmt: skip


def _hashed_part(sketch: bytes) -> bytes:
    return sketch[:12] + sketch[16:]


def _spark_metadata(table_dir: Path) -> Path:
    md = table_dir / "metadata"
    return md / f"v{(md / 'version-hint.text').read_text().strip()}.metadata.json"


def test_iceduck_reads_spark_compute_table_stats(run: dict[str, Any]) -> None:
    meta = _spark_metadata(run["spark_table"])
    md = json.loads(meta.read_text())
    (stats,) = md["statistics"]
    assert stats["snapshot-id"] == md["current-snapshot-id"]
    spark_ndv = {b["fields"][0]: int(b["properties"]["ndv"]) for b in stats["blob-metadata"]}
    exact = dict(zip((1, 2, 3, 4), run["out"]["last_rows"][0], strict=True))
    assert exact == {1: ROWS, 2: 1000, 3: 5000, 4: 300}
    import iceduck

    con = iceduck.connect(str(Path(str(run["spark_table"])).parent.parent / "unused_wh"))
    rows = con.sql(
        f"SELECT DISTINCT field_id, distinct_count, distinct_count_snapshot_id FROM iceberg_column_stats('{meta}')"
    ).fetchall()
    con.close()
    assert {fid: (n, sid) for fid, n, sid in rows} == {
        fid: (spark_ndv[fid], md["current-snapshot-id"]) for fid in (1, 2, 3, 4)
    }
    # the sketches decode, and iceduck's sketch of the same values is the one Spark wrote
    raw = Path(stats["statistics-path"].removeprefix("file:")).read_bytes()
    blobs = {b.fields[0]: read_blob(raw, b) for b in read_footer(raw).blobs}
    for fid, n in spark_ndv.items():
        assert int(estimate(blobs[fid])) == n
    assert spark_ndv[2] == 1000 and spark_ndv[4] == 300  # exact below the nominal 4096
    ints = sketch_of(v.to_bytes(4, "little", signed=True) for v in range(1000))
    days_2020 = 18262  # 2020-01-01 in days since 1970-01-01
    dates = sketch_of((days_2020 + v).to_bytes(4, "little", signed=True) for v in range(300))
    # equal but for bytes 12-15, a field compact sketches leave unused (the sampling probability p:
    # Java writes 1.0 there, the C++ library behind DataSketches' Python package 0)
    assert [_hashed_part(b) for b in (blobs[2], blobs[4])] == [_hashed_part(ints), _hashed_part(dates)]
    # Spark unions its tasks' sketches, and a union keeps at most 4096 hashes: 5000 strings are an
    # estimate there, the library's union of iceduck's exact sketch is the same sketch
    strings = sketch_of(f"s{v}".encode() for v in range(5000))
    assert _hashed_part(union([strings])) == _hashed_part(blobs[3])
    longs = sketch_of(v.to_bytes(8, "little", signed=True) for v in range(ROWS))
    for fid, mine, exact_n in ((3, strings, 5000), (1, longs, ROWS)):
        lo, hi = bounds(blobs[fid], 3)
        assert lo <= exact_n <= hi and abs(estimate(mine) - spark_ndv[fid]) / exact_n < 0.05


def test_java_reads_iceduck_statistics(run: dict[str, Any]) -> None:
    out, ours, data = run["out"], run["ours"], run["data"]
    md = json.loads(Path(run["meta"]).read_text())
    fields = {f["name"]: f["id"] for f in md["schemas"][-1]["fields"]}
    blobs = {b["field"]: b for b in out["java_blobs"]}
    assert set(blobs) == {fields[c] for c in ("k", "i", "s", "x")}
    for name, n in ours.items():
        b = blobs[fields[name]]
        assert b["type"] == "apache-datasketches-theta-v1"
        assert b["snapshot_id"] == out["current_snapshot_id"] == md["current-snapshot-id"]
        assert b["ndv"] == str(n) and int(b["java_estimate"]) == n  # Java DataSketches' estimate
        exact = len(set(data.column(name).to_pylist()))
        assert n == exact  # 3000 rows: below the nominal size, exact
    # Spark plans (CBO on) and runs a self-join over the table
    assert [r[0] for r in out["query_rows"]] == sorted({*data.column("i").to_pylist()})[:3]


def test_partition_statistics_against_java(run: dict[str, Any]) -> None:
    out = run["out"]
    md = json.loads(Path(run["partitioned_after"]).read_text())
    ((sid, path, size),) = out["iceduck_partition_files"]
    assert [sid, path, size] == [
        md["partition-statistics"][0][k] for k in ("snapshot-id", "statistics-path", "file-size-in-bytes")
    ]
    # Java's reader reads iceduck's file: 3 days x (c0, c1, NULL) + the February row
    ours = out["iceduck_partition_rows"]
    assert len(ours) == 10
    assert (
        sum(r["total_record_count"] for r in ours) == 91 and sum(r["data_record_count"] for r in ours) == 101
    )
    assert sum(r["dv_count"] for r in ours) == sum(1 for r in ours if r["position_delete_record_count"]) == 7
    # iceduck computes, for the table Spark wrote, the rows of the file Spark's compute_partition_stats wrote
    import pyarrow.parquet as pq

    from iceduck.maintenance.partition_stats import partition_stats_table
    from iceduck.table import Table

    spark_meta = _spark_metadata(run["spark_table"].parent / "p")
    smd = json.loads(spark_meta.read_text())
    (entry,) = smd["partition-statistics"]
    assert entry["snapshot-id"] == smd["current-snapshot-id"]
    java_rows = pq.read_table(entry["statistics-path"].removeprefix("file:")).to_pylist()
    table = Table.load(str(spark_meta))
    mine = partition_stats_table(table, table.metadata.current_snapshot()).to_pylist()
    assert len(java_rows) == 10
    # Java 1.10 leaves total_record_count NULL; the spec encourages it when only DVs delete (iceduck
    # writes data rows minus DV cardinalities there): every other column equals, row for row
    assert [r["total_record_count"] for r in java_rows] == [None] * 10
    assert [{**r, "total_record_count": None} for r in mine] == java_rows
    assert [r["total_record_count"] for r in mine] == [
        r["data_record_count"] - r["position_delete_record_count"] for r in java_rows
    ]


def test_iceberg_partition_statistics_reads_the_file_spark_wrote(run: dict[str, Any]) -> None:
    # The rows come from Spark's file, not computed again: Java 1.10 leaves total_record_count NULL
    # where iceduck's own computation fills it, and statistics_file names Spark's file.
    import duckdb
    import pyarrow.parquet as pq

    import iceduck

    spark_meta = _spark_metadata(run["spark_table"].parent / "p")
    (entry,) = json.loads(spark_meta.read_text())["partition-statistics"]
    java_rows = pq.read_table(entry["statistics-path"].removeprefix("file:")).to_pylist()
    con = duckdb.connect()
    iceduck.register(con)
    got = con.execute(
        "SELECT partition, data_record_count, data_file_count, position_delete_record_count, dv_count, "
        "total_record_count, statistics_file FROM iceberg_partition_statistics(?)",
        [str(spark_meta)],
    ).fetchall()
    assert {r[6] for r in got} == {entry["statistics-path"]}
    assert [r[1:6] for r in got] == [
        (j["data_record_count"], j["data_file_count"], j["position_delete_record_count"], j["dv_count"], None)
        for j in java_rows
    ]
    # partitions print as iceberg_partitions prints them (the same text, the same counts)
    partitions = con.execute(
        "SELECT partition, record_count, file_count FROM iceberg_partitions(?)", [str(spark_meta)]
    ).fetchall()
    def key(m: dict[str, str | None]) -> str:
        return json.dumps(sorted(m.items()))

    assert sorted((key(r[0]), r[1], r[2]) for r in got) == sorted((key(p[0]), p[1], p[2]) for p in partitions)
