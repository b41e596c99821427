"""What the write statements of this session commit, read by Java Iceberg (Spark 3.5 + Iceberg 1.10)
through `iceduck serve`, in one JVM: upserts (rows and row lineage), CREATE OR REPLACE TABLE (the
current rows and an older snapshot), write-defaults and identifier fields (the metadata parses and
reads). Spark's own REPLACE TABLE AS on the same server is the truth for what a replace keeps.
Truth for rows: DuckDB running the same statements on plain tables.
"""

from __future__ import annotations

import pathlib
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from tests.support.rest_helpers import serving

_REFERENCE = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "java-iceberg"


def _spark() -> Any:
    if not _REFERENCE.exists():
        pytest.skip("the Java Iceberg reference (../shared/reference/java-iceberg) is not here")
    sys.path.insert(0, str(_REFERENCE))
    import spark_ref  # type: ignore[import-not-found]

    if not spark_ref.available():
        pytest.skip("Java Iceberg reference not installed: bash ../shared/reference/java-iceberg/setup.sh")
    return spark_ref


UPSERTS = [
    "INSERT INTO {t} SELECT i, 'v' || i FROM range(6) r(i)",
    "INSERT OR REPLACE INTO {t} VALUES (1, 'one'), (7, 'seven')",
    "INSERT INTO {t} AS t VALUES (2, 'two'), (8, 'eight') ON CONFLICT DO UPDATE SET v = t.v || excluded.v",
    "INSERT INTO {t} VALUES (3, 'x'), (9, 'nine') ON CONFLICT (id) DO NOTHING",
]
DEFAULTS = [
    "INSERT INTO {t} VALUES (1, 'a')",
    "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 'dflt'",
    "INSERT INTO {t} (id) VALUES (2)",
]


def _truth(statements: list[str], columns: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({columns})")
    for s in statements:
        con.execute(s.format(t="t"))
    return sorted(con.execute("SELECT * FROM t").fetchall())


def test_java_reads_upserts_replaces_and_defaults(tmp_path: Path) -> None:
    spark_ref = _spark()
    up_truth = [(str(a), b) for a, b in _truth(UPSERTS, "id BIGINT PRIMARY KEY, v VARCHAR")]
    def_truth = [(str(a), b) for a, b in _truth(DEFAULTS, "id BIGINT, v VARCHAR")]
    with (
        serving(tmp_path / "served") as server,
        iceduck.connect(server.url, authorization_type="none") as lake,
    ):
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.up (id BIGINT PRIMARY KEY, v VARCHAR)")
        for s in UPSERTS:
            lake.sql(s.format(t="lake.ns.up"))
        lineage = {
            str(r[0]): (str(r[1]), str(r[2]))
            for r in lake.sql(
                "SELECT id, _row_id, _last_updated_sequence_number FROM iceberg_scan('ns.up', row_lineage := true)"
            ).fetchall()
        }
        lake.sql(
            "CREATE TABLE ns.rep (id BIGINT, v VARCHAR) PARTITIONED BY (id) WITH ('format-version' = '2')"
        )
        lake.sql("INSERT INTO ns.rep VALUES (1, 'a'), (2, 'b')")
        old = lake.table("ns.rep").load().metadata.current_snapshot_id
        lake.sql(
            "CREATE OR REPLACE TABLE lake.ns.rep AS SELECT id + 10 AS id, v, v || '!' AS w FROM lake.ns.rep"
        )
        lake.sql("CREATE TABLE ns.def (id BIGINT, v VARCHAR)")
        for s in DEFAULTS:
            lake.sql(s.format(t="ns.def"))
        lake.sql("CREATE TABLE ns.keyed (id BIGINT NOT NULL, k DATE NOT NULL, v VARCHAR)")
        lake.sql("ALTER TABLE ns.keyed SET IDENTIFIER FIELDS id, k")
        lake.sql("INSERT INTO ns.keyed VALUES (1, DATE '2024-01-01', 'a')")
        rows = spark_ref.spark_sql(
            [
                "CREATE TABLE rest.ns.spark_rep (id BIGINT, v STRING) USING iceberg PARTITIONED BY (id) "
                "TBLPROPERTIES ('format-version' = '2')",
                "INSERT INTO rest.ns.spark_rep VALUES (1, 'a'), (2, 'b')",
                "CREATE OR REPLACE TABLE rest.ns.spark_rep USING iceberg "
                "AS SELECT id + 10 AS id, v, concat(v, '!') AS w FROM rest.ns.spark_rep",
                "SELECT 'up', CAST(id AS STRING), v, CAST(_row_id AS STRING), "
                "CAST(_last_updated_sequence_number AS STRING) FROM rest.ns.up "
                "UNION ALL SELECT 'rep', CAST(id AS STRING), v, w, NULL FROM rest.ns.rep "
                f"UNION ALL SELECT 'old', CAST(id AS STRING), v, NULL, NULL FROM rest.ns.rep VERSION AS OF {old} "
                "UNION ALL SELECT 'def', CAST(id AS STRING), v, NULL, NULL FROM rest.ns.def "
                "UNION ALL SELECT 'keyed', CAST(id AS STRING), v, CAST(k AS STRING), NULL FROM rest.ns.keyed",
            ],
            rest_uri=server.url,
        )
        ours = lake.table("ns.rep").load().metadata
        spark = lake.table("ns.spark_rep").load().metadata
    by = {
        tag: sorted(tuple(r[1:]) for r in rows if r[0] == tag) for tag in ("up", "rep", "old", "def", "keyed")
    }
    assert [(a, b) for a, b, _, _ in by["up"]] == up_truth
    assert {a: (c, d) for a, _, c, d in by["up"]} == lineage
    assert by["rep"] == [("11", "a", "a!", None), ("12", "b", "b!", None)]
    assert by["old"] == [("1", "a", None, None), ("2", "b", None, None)]
    assert [(a, b) for a, b, _, _ in by["def"]] == def_truth
    assert by["keyed"] == [("1", "a", "2024-01-01", None)]
    # the replace keeps what Java's keeps: uuid, every snapshot, the log; a new snapshot without
    # parent; field ids reused by name; the old spec beside the new one
    for md in (ours, spark):
        assert len(md.snapshots) == 2 and len(md.snapshot_log) == 2
        current = md.current_snapshot()
        assert current is not None and current.parent_snapshot_id is None
        assert len(md.schemas) == 2
        before = {f.name: f.id for f in md.schemas[0].fields}
        after = {f.name: f.id for f in md.schema.fields}
        assert after == {"id": before["id"], "v": before["v"], "w": max(before.values()) + 1}
    assert [len(s.fields) for s in ours.partition_specs] == [len(s.fields) for s in spark.partition_specs]
