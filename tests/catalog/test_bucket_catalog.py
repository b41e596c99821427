"""The catalog on the bucket itself (`iceduck.connect("s3://bucket/wh", catalog="folder")`):
processes that share nothing but the bucket share its tables, and concurrent commits all land.

Truth: the rows each writer process inserted (it says which, and numbers them); moto 5, which
honours `If-None-Match: *` on PUT (checked here first); each process with its own empty cache
folder, so nothing local is shared.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import iceduck
from iceduck.catalog.bucket import BucketCatalog, UnsafeStoreError, check_exclusive_creates
from iceduck.errors import AlreadyExistsError, NamespaceNotFoundError, ValidationError
from tests.support.peer import Peer
from tests.support.s3_fixture import BUCKET, ROOT, S3Server, child_env, peer_reads_s3

WORKER = """
import sys
from tests.support.s3_fixture import settings_from_env
settings_from_env()
import iceduck
warehouse, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with iceduck.connect(warehouse, catalog="folder") as lake:
    for i in range(count):
        lake.sql(f"INSERT INTO lake.s.t VALUES ('{who}', {i})")
"""


def _warehouse() -> str:
    return f"s3://{BUCKET}/{uuid.uuid4().hex}/wh"


def test_the_store_refuses_a_second_create(moto_s3: S3Server) -> None:
    """The premise: moto honours If-None-Match: * (s3rver 3.7.1 does not)."""
    from botocore.exceptions import ClientError

    client = moto_s3.client()
    key = f"{uuid.uuid4().hex}/v1.metadata.json"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"1", IfNoneMatch="*")  # type: ignore[attr-defined]
    with pytest.raises(ClientError, match="PreconditionFailed"):
        client.put_object(Bucket=BUCKET, Key=key, Body=b"2", IfNoneMatch="*")  # type: ignore[attr-defined]


def test_a_table_made_in_one_lake_is_in_every_other(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = _warehouse()
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-a"))
    with iceduck.connect(warehouse, catalog="folder") as a:
        a.sql("CREATE SCHEMA s")
        a.sql("CREATE TABLE s.t (who VARCHAR, i INTEGER)")
        a.sql("INSERT INTO lake.s.t VALUES ('a', 1)")
        with pytest.raises(AlreadyExistsError):
            a.create_namespace("s")
        with pytest.raises(NamespaceNotFoundError):
            a.list_tables("nope")
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))  # nothing local in common
    with iceduck.connect(warehouse, catalog="folder") as b:
        assert b.list_namespaces() == ("s",)
        assert b.list_tables("s") == ("t",)
        assert b.sql("SELECT * FROM lake.s.t").fetchall() == [("a", 1)]
        b.sql("INSERT INTO lake.s.t VALUES ('b', 2)")
        assert isinstance(b.catalog, BucketCatalog)
        # the Hadoop layout: v<N>.metadata.json and the hint, as DuckDB's extension reads a folder
        names = {f.path.rsplit("/", 1)[1] for f in b.io.list_prefix(f"{warehouse}/s/t/metadata")}
        assert {"v1.metadata.json", "v2.metadata.json", "v3.metadata.json", "version-hint.text"} <= names
        assert b.io.read(f"{warehouse}/s/t/metadata/version-hint.text") == b"3"
        with pytest.raises(ValidationError, match="not empty"):
            b.drop_namespace("s")
        b.drop_table("s.t")
        assert b.list_tables("s") == ()
        assert list(b.io.list_prefix(f"{warehouse}/s/t")) == []
        b.drop_namespace("s")
        assert b.list_namespaces() == ()


def test_writers_in_several_processes_lose_no_commit(moto_s3: S3Server, tmp_path: Path) -> None:
    warehouse = _warehouse()
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        # every writer keeps losing races to the others here: a retry budget for all of them
        lake.sql(
            "CREATE TABLE s.t (who VARCHAR, i INTEGER) WITH ('commit.retry.num-retries' = '100', "
            "'commit.retry.min-wait-ms' = '10', 'commit.retry.max-wait-ms' = '200')"
        )
    writers, count = 3, 6
    procs = []
    started = time.monotonic()
    for w in range(writers):
        env = {
            **os.environ,
            **child_env(),
            "PYTHONPATH": str(ROOT),
            "ICEDUCK_CACHE_DIR": str(tmp_path / f"cache-{w}"),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, warehouse, f"w{w}", str(count)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    elapsed = time.monotonic() - started
    with iceduck.connect(warehouse, catalog="folder") as lake:
        rows = sorted(lake.sql("SELECT who, i FROM lake.s.t").fetchall())
        assert rows == sorted((f"w{w}", i) for w in range(writers) for i in range(count))
        snapshots = lake.sql("SELECT count(*) FROM iceberg_snapshots('s.t')").fetchall()
        assert snapshots == [(writers * count,)]
        current = lake.catalog.load_table("s", "t")
        assert current.endswith(f"/v{writers * count + 1}.metadata.json")
    print(f"{writers} processes x {count} inserts: {elapsed:.1f} s")


@pytest.mark.peer
def test_the_reference_peer_reads_a_bucket_catalog_table_from_its_folder(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, peer: Peer
) -> None:
    """DuckDB's extension reads the table folder on S3 through its version hint, after two
    commits and a delete, as iceduck does."""
    warehouse = _warehouse()
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t AS SELECT range AS id, range % 7 AS k FROM range(1000)")
        lake.sql("DELETE FROM lake.s.t WHERE k = 3")
        lake.sql("INSERT INTO lake.s.t VALUES (5000, 1)")
        ours = sorted(lake.sql("SELECT id, k FROM lake.s.t").fetchall())
    assert len(ours) == 1000 - len([i for i in range(1000) if i % 7 == 3]) + 1
    peer_reads_s3(peer, warehouse)
    theirs = sorted(peer.query(f"SELECT id, k FROM iceberg_scan('{warehouse}/s/t')"))
    assert theirs == ours


KILLED = """
import sys
from tests.support.s3_fixture import settings_from_env
settings_from_env()
import iceduck
with iceduck.connect(sys.argv[1], catalog="folder") as lake:
    lake.sql("DELETE FROM lake.s.t WHERE i = " + sys.argv[2])
print("survived")
"""


@pytest.mark.parametrize(("stage", "lands"), [("metadata-written", False), ("committed", True)])
def test_a_writer_killed_mid_commit_leaves_the_old_or_the_new_version(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str, lands: bool
) -> None:
    """Killed (os._exit, no cleanup) before the conditional PUT of v{N+1}, or after it and before
    the hint moves: the table reads the old rows or the new ones, and takes the next commit."""
    warehouse = _warehouse()
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t AS SELECT range AS i FROM range(10)")
        hint_before = lake.io.read(f"{warehouse}/s/t/metadata/version-hint.text")
        version = int(hint_before)
    env = {**os.environ, **child_env(), "PYTHONPATH": str(ROOT), "ICEDUCK_TEST_CRASH_AT": stage,
           "ICEDUCK_CACHE_DIR": str(tmp_path / "cache-killed")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, warehouse, "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 77, proc.stderr[-2000:]
    with iceduck.connect(warehouse, catalog="folder") as lake:
        expected = [i for i in range(10) if not (lands and i == 1)]
        assert sorted(r[0] for r in lake.sql("SELECT i FROM lake.s.t").fetchall()) == expected
        # the hint never moved; a landed v{N+1} is found by rolling forward
        assert lake.io.read(f"{warehouse}/s/t/metadata/version-hint.text") == hint_before
        current = lake.catalog.load_table("s", "t")
        assert current.endswith(f"/v{version + 1 if lands else version}.metadata.json")
        lake.sql("DELETE FROM lake.s.t WHERE i = 2")
        assert sorted(r[0] for r in lake.sql("SELECT i FROM lake.s.t").fetchall()) == [
            i for i in expected if i != 2
        ]


def test_a_store_that_ignores_create_only_writes_is_refused_before_any_commit(
    s3rver: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """s3rver 3.7.1 accepts a second PUT with If-None-Match: * (checked here first): the catalog on
    such a bucket refuses to commit, in one line, and writes nothing of the table; moto passes."""
    from tests.support.s3_fixture import registered

    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    client = s3rver.client()
    key = f"{uuid.uuid4().hex}/x"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"1", IfNoneMatch="*")  # type: ignore[attr-defined]
    client.put_object(Bucket=BUCKET, Key=key, Body=b"2", IfNoneMatch="*")  # type: ignore[attr-defined]
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"2"  # type: ignore[attr-defined]

    warehouse = _warehouse()
    with registered(s3rver), iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")  # a marker: no commit, nothing to lose
        with pytest.raises(UnsafeStoreError, match=r"does not honour create-only writes .* lose commits"):
            lake.sql("CREATE TABLE s.t (i INTEGER)")
        with pytest.raises(UnsafeStoreError):  # the verdict holds for the process
            lake.sql("CREATE TABLE s.u (i INTEGER)")
        assert lake.list_tables("s") == ()
        names = [f.path for f in lake.io.list_prefix(warehouse)]
        assert names == [f"{warehouse}/s/.namespace"]  # the check's object deleted, no table files


def test_the_check_passes_on_a_store_that_honours_create_only_writes(moto_s3: S3Server) -> None:
    from iceduck.io.storage import connection_io

    warehouse = _warehouse()
    check_exclusive_creates(connection_io(), warehouse)
    check_exclusive_creates(connection_io(), warehouse)  # once per process: no second probe
    assert list(connection_io().list_prefix(warehouse)) == []
