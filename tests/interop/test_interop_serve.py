"""Engines side by side on one `iceduck serve`: each one's writes and maintenance read back by the others.

One Spark child (Java Iceberg 1.10.2 in Spark 3.5.7) runs for the whole module with catalog `rest` on
an `iceduck serve` (its table cache off), and takes batches of statements as the tests go:

* refs: Spark writes a table with a tag, a branch and commits on both; iceduck reads each ref
  (`iceberg_scan(..., ref := ...)`) with the rows and lineage Spark reads for it;
* Spark's procedures on an iceduck table (`rollback_to_snapshot`, `rewrite_data_files`,
  `rewrite_manifests`, `expire_snapshots`, `remove_orphan_files`): iceduck reads the rows and lineage
  Spark reads after each;
* iceduck's maintenance on a Spark table (`iceberg_rewrite_data_files`, `iceberg_rewrite_manifests`,
  `iceberg_expire_snapshots`, `iceberg_remove_orphan_files`): Spark reads every remaining snapshot
  with the rows and lineage iceduck reads;
* Spark and iceduck inserting into one table at once: every commit of both is in the table;
* DuckDB 1.5.5's iceberg extension (the reference peer) and PyIceberg 0.12 write through the server
  (CREATE, CTAS, INSERT, DELETE, UPDATE: what each can do); iceduck and Spark read every snapshot with
  the same rows (and lineage on v3), and the last one holds what plain DuckDB computes.

Orphan removal is checked the hard way: every file of the table is made 3 days old first, so only
reachability (not age) keeps the live files.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.interop.spark_job import SparkChild, rows_key
from tests.support.peer import Peer, PeerUnavailableError
from tests.support.rest_helpers import serving

# one worker runs every interop test (CI: --dist loadgroup): one Spark child per module, one JVM at a time
pytestmark = pytest.mark.xdist_group("java_reference")

LINEAGE = ("_row_id", "_last_updated_sequence_number")
THREE_DAYS = 3 * 24 * 3600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    with serving(tmp_path_factory.mktemp("interop_serve") / "wh") as s:
        yield s


@pytest.fixture(scope="module")
def spark(
    reference: ModuleType, server: RestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkChild]:
    with SparkChild(reference, str(tmp_path_factory.mktemp("interop_spark")), rest_uri=server.url) as child:
        yield child


@pytest.fixture(scope="module")
def lake(server: RestServer) -> Iterator[Any]:
    with iceduck.connect(server.url, authorization_type="none") as handle:
        handle.sql("SET TimeZone = 'UTC'")
        yield handle


def sql(spark: SparkChild, *statements: str) -> list[dict[str, Any]]:
    """Spark runs `statements`; the rows of the last one (an error Spark raised fails the test)."""
    got = spark.run([{"kind": "sql", "id": "q", "statements": list(statements)}])["q"]
    assert "error" not in got, f"Spark refused {statements}: {got['error']}"
    return got["rows"]  # type: ignore[no-any-return]


def ours(lake: Any, query: str) -> list[dict[str, Any]]:
    rel = lake.sql(query)
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


def metadata_of(lake: Any, table: str) -> str:
    return str(lake.table(table).metadata_location)


def snapshots_agree(lake: Any, spark: SparkChild, table: str, lineage: bool) -> int:
    """Spark and iceduck read every snapshot of `table` alike; how many snapshots there are."""
    metadata = metadata_of(lake, table)
    theirs = spark.run([{"kind": "read_all", "id": "all", "path": metadata, "lineage": lineage}])["all"]
    assert "error" not in theirs, theirs.get("error")
    ids = [str(r[0]) for r in lake.sql(f"SELECT snapshot_id FROM iceberg_snapshots('{metadata}')").fetchall()]
    assert sorted(ids) == sorted(theirs["rows"])
    extra = ", row_lineage := true" if lineage else ""
    for sid in ids:
        got = theirs["rows"][sid]
        assert "error" not in got, f"Spark refused snapshot {sid} of {table}: {got['error']}"
        mine = ours(lake, f"SELECT * FROM iceberg_scan('{metadata}', snapshot_id := {sid}{extra})")
        assert rows_key(mine) == rows_key(got["rows"]), f"snapshot {sid} of {table}"
    return len(ids)


def timestamp(offset_seconds: float) -> str:
    """A Spark TIMESTAMP literal `offset_seconds` from now (procedure arguments take literals only)."""
    at = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=offset_seconds)
    return f"TIMESTAMP '{at.isoformat(sep=' ', timespec='milliseconds')}'"


def age_every_file(table_dir: Path, seconds: int = THREE_DAYS) -> None:
    """Set every file under `table_dir` `seconds` into the past."""
    past = time.time() - seconds
    for root, _, files in os.walk(table_dir):
        for name in files:
            os.utime(os.path.join(root, name), (past, past))


def table_dir(lake: Any, table: str) -> Path:
    location = str(lake.table(table).load().metadata.location)
    return Path(location.removeprefix("file://").removeprefix("file:"))


def all_files(folder: Path) -> set[str]:
    """The files under `folder`, less Hadoop checksums (`.<name>.crc`) whose file is gone (an expiry
    deleted it): those are orphans too."""
    found = {os.path.join(root, name) for root, _, files in os.walk(folder) for name in files}

    def lone_checksum(path: str) -> bool:
        folder_, name = os.path.split(path)
        return (
            name.startswith(".") and name.endswith(".crc") and os.path.join(folder_, name[1:-4]) not in found
        )

    return {p for p in found if not lone_checksum(p)}


def plant_orphans(folder: Path) -> list[Path]:
    """Two files no metadata reaches: a Parquet file in data/ and a stray metadata file."""
    con = duckdb.connect()
    (folder / "data").mkdir(exist_ok=True)
    orphans = [folder / "data" / "orphan-00000.parquet", folder / "metadata" / "orphan.metadata.json"]
    con.execute(f"COPY (SELECT 1 AS id) TO '{orphans[0]}' (FORMAT parquet)")
    orphans[1].write_text("{}")
    return orphans


# --- refs --------------------------------------------------------------------------------------


def test_iceduck_reads_spark_branches_and_tags(spark: SparkChild, lake: Any) -> None:
    sql(
        spark,
        "CREATE NAMESPACE IF NOT EXISTS rest.refs",
        "CREATE TABLE rest.refs.t (id bigint, s string) USING iceberg TBLPROPERTIES ('format-version'='3', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
        "INSERT INTO rest.refs.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "ALTER TABLE rest.refs.t CREATE TAG first",
        "ALTER TABLE rest.refs.t CREATE BRANCH audit",
        "INSERT INTO rest.refs.t.branch_audit VALUES (10, 'branch')",
        "DELETE FROM rest.refs.t.branch_audit WHERE id = 1",
        "INSERT INTO rest.refs.t VALUES (4, 'd')",
        "UPDATE rest.refs.t SET s = 'upd' WHERE id = 2",
        "ALTER TABLE rest.refs.t CREATE TAG second",
    )
    lineage = ", _row_id, _last_updated_sequence_number"
    reads = {
        "main": f"SELECT *{lineage} FROM rest.refs.t",
        "audit": f"SELECT *{lineage} FROM rest.refs.t.branch_audit",
        "first": f"SELECT *{lineage} FROM rest.refs.t VERSION AS OF 'first'",
        "second": f"SELECT *{lineage} FROM rest.refs.t VERSION AS OF 'second'",
    }
    theirs = spark.run([{"kind": "sql", "id": ref, "statements": [q]} for ref, q in reads.items()])
    refs = {r[0]: r[1] for r in lake.sql("SELECT name, type FROM iceberg_refs('refs.t')").fetchall()}
    assert {k: v.upper() for k, v in refs.items()} == {
        "main": "BRANCH",
        "audit": "BRANCH",
        "first": "TAG",
        "second": "TAG",
    }
    for ref in reads:
        assert "error" not in theirs[ref], theirs[ref]
        mine = ours(lake, f"SELECT * FROM iceberg_scan('refs.t', ref := '{ref}', row_lineage := true)")
        assert rows_key(mine) == rows_key(theirs[ref]["rows"]), ref
    audit = sorted(r["id"] for r in theirs["audit"]["rows"])
    assert audit == [2, 3, 10]  # the branch's own commits, not main's
    assert sorted(r["id"] for r in theirs["first"]["rows"]) == [1, 2, 3]


def test_java_reads_iceduck_tags_and_branches(spark: SparkChild, lake: Any) -> None:
    lake.sql("CREATE SCHEMA IF NOT EXISTS irefs")
    lake.sql("CREATE TABLE irefs.t (id BIGINT, s VARCHAR) WITH ('format-version' = '3')")
    lake.sql("INSERT INTO irefs.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    table = lake.table("irefs.t")
    table.create_tag("first")
    first = table.load().metadata.current_snapshot_id
    lake.sql("DELETE FROM irefs.t WHERE id = 2")
    table.create_branch("audit", min_snapshots_to_keep=2)
    lake.sql("UPDATE irefs.t SET s = 'upd' WHERE id = 3")
    lake.sql("INSERT INTO irefs.t VALUES (4, 'd')")
    table.create_tag("old", first, max_ref_age_ms=86_400_000)
    lineage = ", _row_id, _last_updated_sequence_number"
    reads = {
        "main": f"SELECT *{lineage} FROM rest.irefs.t",
        "first": f"SELECT *{lineage} FROM rest.irefs.t VERSION AS OF 'first'",
        "audit": f"SELECT *{lineage} FROM rest.irefs.t.branch_audit",
        "old": f"SELECT *{lineage} FROM rest.irefs.t.tag_old",
        "refs": "SELECT name, type, snapshot_id, max_reference_age_in_ms, min_snapshots_to_keep FROM rest.irefs.t.refs",
    }
    theirs = spark.run([{"kind": "sql", "id": ref, "statements": [q]} for ref, q in reads.items()])
    for ref in ("main", "first", "audit", "old"):
        assert "error" not in theirs[ref], theirs[ref]
        mine = ours(lake, f"SELECT * FROM iceberg_scan('irefs.t', ref := '{ref}', row_lineage := true)")
        assert rows_key(mine) == rows_key(theirs[ref]["rows"]), ref
    assert sorted(r["id"] for r in theirs["first"]["rows"]) == [1, 2, 3]
    assert sorted(r["id"] for r in theirs["audit"]["rows"]) == [1, 3]
    refs = {r["name"]: r for r in theirs["refs"]["rows"]}
    assert refs["first"]["type"] == "TAG" and refs["first"]["snapshot_id"] == first
    assert refs["audit"]["type"] == "BRANCH" and refs["audit"]["min_snapshots_to_keep"] == 2
    assert refs["old"]["max_reference_age_in_ms"] == 86_400_000


# --- Spark's procedures on an iceduck table ---------------------------------------------------------


def test_spark_procedures_on_an_iceduck_table(spark: SparkChild, lake: Any) -> None:
    lake.sql("CREATE SCHEMA IF NOT EXISTS proc")
    lake.sql("CREATE TABLE proc.t (id BIGINT, g VARCHAR, n INTEGER) WITH ('format-version' = '3')")
    lake.sql("INSERT INTO proc.t SELECT i, 'g' || (i % 3), i::INTEGER FROM range(12) t(i)")
    lake.sql("INSERT INTO proc.t SELECT i, 'h', NULL FROM range(12, 16) t(i)")
    lake.sql("DELETE FROM proc.t WHERE id % 5 = 0")
    keep = lake.sql(
        "SELECT snapshot_id FROM iceberg_snapshots('proc.t') ORDER BY sequence_number DESC"
    ).fetchall()
    target = keep[0][0]  # the snapshot Spark rolls back to
    lake.sql("UPDATE proc.t SET g = 'upd' WHERE id IN (1, 13)")
    lake.sql("INSERT INTO proc.t VALUES (100, 'late', 1)")
    full = f"SELECT * FROM iceberg_scan('proc.t', snapshot_id := {target}, row_lineage := true)"
    at_target = rows_key(ours(lake, full))
    current = "SELECT * FROM iceberg_scan('proc.t', row_lineage := true)"
    spark_current = "SELECT *, _row_id, _last_updated_sequence_number FROM rest.proc.t"

    steps = {
        "rollback": f"CALL rest.system.rollback_to_snapshot('proc.t', {target})",
        "rewrite_data": "CALL rest.system.rewrite_data_files(table => 'proc.t', options => map('rewrite-all', 'true'))",
        "rewrite_manifests": "CALL rest.system.rewrite_manifests('proc.t')",
        "expire": f"CALL rest.system.expire_snapshots(table => 'proc.t', older_than => {timestamp(3600)}, "
        "retain_last => 1)",
    }
    for step, call in steps.items():
        got = sql(spark, call, spark_current)
        mine = rows_key(ours(lake, current))
        assert mine == rows_key(got), f"after Spark's {step}"
        assert mine == at_target, f"after Spark's {step}: the rows of the snapshot rolled back to"
    snaps = lake.sql("SELECT snapshot_id FROM iceberg_snapshots('proc.t')").fetchall()
    assert [r["snapshot_id"] for r in sql(spark, "SELECT snapshot_id FROM rest.proc.t.snapshots")] == [
        snaps[0][0]
    ]
    assert len(snaps) == 1  # expired
    files = lake.sql("SELECT count(*) FROM iceberg_files('proc.t')").fetchall()[0][0]
    assert files == 1  # one data file after rewrite_data_files, no delete file left

    # Spark's remove_orphan_files: every file 3 days old, two orphans among them
    folder = table_dir(lake, "proc.t")
    live = all_files(folder)
    orphans = plant_orphans(folder)
    age_every_file(folder)
    removed = sql(
        spark,
        f"CALL rest.system.remove_orphan_files(table => 'proc.t', older_than => {timestamp(-24 * 3600)})",
    )
    assert {Path(r["orphan_file_location"].removeprefix("file:")).name for r in removed} == {
        p.name for p in orphans
    }
    assert all_files(folder) == live  # the orphans went, nothing else
    assert rows_key(ours(lake, current)) == at_target
    assert rows_key(sql(spark, spark_current)) == at_target


# --- iceduck's maintenance on a Spark table ----------------------------------------------------------


def test_iceduck_maintenance_on_a_spark_table(spark: SparkChild, lake: Any) -> None:
    sql(
        spark,
        "CREATE NAMESPACE IF NOT EXISTS rest.sm",
        "CREATE TABLE rest.sm.t (id bigint, p string, x double) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')",
        "INSERT INTO rest.sm.t VALUES (1, 'a', 1.0), (2, 'a', double('NaN')), (3, 'b', NULL)",
        "INSERT INTO rest.sm.t VALUES (4, 'b', 4.0), (5, NULL, 5.0)",
        "INSERT INTO rest.sm.t VALUES (6, 'a', 6.0)",
        "DELETE FROM rest.sm.t WHERE id IN (2, 4)",
        "UPDATE rest.sm.t SET x = -1.0 WHERE id = 5",
    )
    before = rows_key(ours(lake, "SELECT * FROM iceberg_scan('sm.t', row_lineage := true)"))
    spark_current = "SELECT *, _row_id, _last_updated_sequence_number FROM rest.sm.t"
    for action in (
        "iceberg_rewrite_data_files('sm.t', rewrite_all := true, dry_run := false)",
        "iceberg_rewrite_manifests('sm.t', dry_run := false)",
        "iceberg_expire_snapshots('sm.t', older_than := now() + INTERVAL 1 DAY, retain_last := 2, dry_run := false)",
    ):
        assert lake.sql(f"SELECT * FROM {action}").fetchall(), action
        assert rows_key(sql(spark, spark_current)) == before, action
    # iceduck's orphan removal: every file 3 days old, two orphans among them
    folder = table_dir(lake, "sm.t")
    live = all_files(folder)
    assert len(plant_orphans(folder)) == 2
    age_every_file(folder)
    removed = lake.sql(
        "SELECT * FROM iceberg_remove_orphan_files('sm.t', older_than := now() - INTERVAL 1 DAY, dry_run := false)"
    ).fetchall()
    assert removed and all_files(folder) == live  # the orphans went, nothing else
    # the two snapshots left (rewrite_data_files' and rewrite_manifests'), each read alike
    assert snapshots_agree(lake, spark, "sm.t", lineage=True) == 2
    assert rows_key(sql(spark, spark_current)) == before


# --- both writing at once ------------------------------------------------------------------------


def test_spark_and_iceduck_writing_at_once_lose_no_commit(
    spark: SparkChild, lake: Any, server: RestServer
) -> None:
    lake.sql("CREATE SCHEMA IF NOT EXISTS conc")
    lake.sql(
        "CREATE TABLE conc.t (writer VARCHAR, i INTEGER) WITH ('format-version' = '3', "
        "'commit.retry.num-retries' = '50', 'commit.retry.min-wait-ms' = '20', 'commit.retry.max-wait-ms' = '200')"
    )
    n = 8
    # Spark's inserts run in its child while iceduck inserts here
    spark.start([{"kind": "sql", "id": f"s{i}", "statements": [f"INSERT INTO rest.conc.t VALUES ('spark', {i})"]}
                 for i in range(n)])  # fmt: skip
    errors: list[str] = []

    def iceduck_writer() -> None:
        with iceduck.connect(server.url, authorization_type="none") as writer:
            for i in range(n):
                try:
                    writer.sql(f"INSERT INTO conc.t VALUES ('iceduck', {i})")
                except Exception as e:  # a refused commit is a failure of this test
                    errors.append(f"{i}: {e}")

    thread = threading.Thread(target=iceduck_writer)
    thread.start()
    thread.join()
    spark_results = spark.wait()
    assert not errors, errors
    assert all("error" not in r for r in spark_results.values()), spark_results
    expected = sorted([("iceduck", i) for i in range(n)] + [("spark", i) for i in range(n)])
    assert sorted(lake.sql("SELECT writer, i FROM lake.conc.t").fetchall()) == expected
    got = sql(spark, "SELECT writer, i FROM rest.conc.t")
    assert sorted((r["writer"], r["i"]) for r in got) == expected
    # one snapshot per commit on both sides, and the same lineage for the rows
    ids = sorted(r[0] for r in lake.sql("SELECT snapshot_id FROM iceberg_snapshots('conc.t')").fetchall())
    assert len(ids) == 2 * n
    assert (
        sorted(r["snapshot_id"] for r in sql(spark, "SELECT snapshot_id FROM rest.conc.t.snapshots")) == ids
    )
    lineage = "SELECT writer, i, _row_id, _last_updated_sequence_number FROM"
    got = sql(spark, f"{lineage} rest.conc.t")
    assert rows_key(got) == rows_key(ours(lake, f"{lineage} iceberg_scan('conc.t', row_lineage := true)"))


# --- the reference peer and PyIceberg writing through the server ------------------------------------


@pytest.fixture(scope="module")
def rest_peer(server: RestServer) -> Iterator[Peer]:
    try:
        handle = Peer.ensure(quiet=True, extensions=("avro", "iceberg", "httpfs"))
    except PeerUnavailableError as exc:
        pytest.skip(f"reference peer not installed and pip cannot reach the package index: {exc}")
    with handle:
        handle.execute(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        yield handle


PEER_WRITES = [
    "CREATE TABLE {t} (id BIGINT, s VARCHAR, n INTEGER){opts}",
    "INSERT INTO {t} SELECT i, 's' || (i % 4), (i % 7)::INTEGER FROM range(40) r(i)",
    "DELETE FROM {t} WHERE n = 3",
    "UPDATE {t} SET s = 'upd' WHERE id % 10 = 1",
    "INSERT INTO {t} VALUES (1000, NULL, NULL)",
]


@pytest.mark.parametrize("version", [2, 3])
def test_peer_writes_read_by_iceduck_and_spark(
    spark: SparkChild, lake: Any, rest_peer: Peer, version: int
) -> None:
    schema = f"peer{version}"
    rest_peer.execute(f"CREATE SCHEMA cat.{schema}")
    truth = duckdb.connect()
    for statement in PEER_WRITES:
        rest_peer.execute(
            statement.format(t=f"cat.{schema}.t", opts=f" WITH ('format-version' = '{version}')")
        )
        truth.execute(statement.format(t="t", opts=""))
    # CTAS: the peer's staged create, committed with its data
    rest_peer.execute(f"CREATE TABLE cat.{schema}.c AS SELECT id, s FROM cat.{schema}.t WHERE id < 20")
    truth.execute("CREATE TABLE c AS SELECT id, s FROM t WHERE id < 20")
    for table in ("t", "c"):
        snapshots_agree(lake, spark, f"{schema}.{table}", lineage=version == 3)
        expected = sorted(truth.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
        assert sorted(lake.sql(f"SELECT * FROM lake.{schema}.{table}").fetchall(), key=repr) == expected
        got = sql(spark, f"SELECT * FROM rest.{schema}.{table}")
        assert sorted((tuple(r.values()) for r in got), key=repr) == expected
    if version == 3:  # the peer's lineage is what iceduck and Spark read (snapshots_agree compared them)
        rows = ours(lake, f"SELECT * FROM iceberg_scan('{schema}.t', row_lineage := true)")
        assert all(r["_row_id"] is not None for r in rows)


def test_pyiceberg_writes_read_by_iceduck_and_spark(spark: SparkChild, lake: Any, server: RestServer) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.expressions import EqualTo, GreaterThanOrEqual

    catalog = RestCatalog("iceduck", uri=server.url)
    catalog.create_namespace("py")
    data = pa.table({"id": pa.array(range(20), pa.int64()), "s": [f"s{i % 3}" for i in range(20)]})
    table = catalog.create_table("py.t", schema=data.schema)  # PyIceberg writes v2
    table.append(data)
    table.delete(GreaterThanOrEqual("id", 15))
    # UPDATE: PyIceberg has none; an overwrite of the matching rows is its way
    table.overwrite(
        pa.table({"id": pa.array([3], pa.int64()), "s": ["upd"]}), overwrite_filter=EqualTo("id", 3)
    )
    table.append(pa.table({"id": pa.array([100], pa.int64()), "s": pa.array([None], pa.string())}))
    # CTAS: create a table from another's rows
    rows = catalog.load_table("py.t").scan(row_filter=GreaterThanOrEqual("id", 10)).to_arrow()
    catalog.create_table("py.c", schema=rows.schema).append(rows)

    truth = duckdb.connect()
    truth.execute("CREATE TABLE t AS SELECT i::BIGINT AS id, 's' || (i % 3) AS s FROM range(20) r(i)")
    truth.execute("DELETE FROM t WHERE id >= 15")
    truth.execute("UPDATE t SET s = 'upd' WHERE id = 3")
    truth.execute("INSERT INTO t VALUES (100, NULL)")
    truth.execute("CREATE TABLE c AS SELECT * FROM t WHERE id >= 10")
    for name in ("t", "c"):
        snapshots_agree(lake, spark, f"py.{name}", lineage=False)
        expected = sorted(truth.execute(f"SELECT id, s FROM {name}").fetchall(), key=repr)
        assert sorted(lake.sql(f"SELECT id, s FROM lake.py.{name}").fetchall(), key=repr) == expected
        got = sql(spark, f"SELECT id, s FROM rest.py.{name}")
        assert sorted(((r["id"], r["s"]) for r in got), key=repr) == expected
