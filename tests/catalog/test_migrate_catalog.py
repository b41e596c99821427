"""`iceduck migrate-catalog WAREHOUSE`: an object-store warehouse whose catalog is this machine's
SQLite file (the local cache folder) moves to the catalog on the bucket with one command; running
it again changes nothing; what cannot move is reported and left in place.

Truth: the rows written before the move, read back by a lake with another (empty) cache folder,
as another machine would; the objects on the store (moto for S3, fake-gcs-server, Azurite).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

import iceduck
from iceduck.catalog.bucket import BucketCatalog
from iceduck.catalog.migrate import local_catalog_file
from iceduck.catalog.sql import SqlCatalog
from iceduck.cli import main
from tests.support.s3_fixture import BUCKET, S3Server
from tests.support.store_fixture import StoreServer


@pytest.fixture(params=["s3", "gcs", "azure"])
def root(request: pytest.FixtureRequest) -> str:
    """`scheme://bucket` of a store that honours exclusive creates, one test per store."""
    if request.param == "s3":
        request.getfixturevalue("moto_s3")
        return f"s3://{BUCKET}"
    server: StoreServer = request.getfixturevalue(f"{request.param}_store")
    return server.root()


def _old_warehouse(root: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A warehouse made the old way: its catalog a SQLite file in `cache`, two commits to s.t."""
    warehouse = f"{root}/{uuid.uuid4().hex}/wh"
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(cache))
    with iceduck.connect(warehouse, catalog="sql") as lake:
        lake.create_namespace("s", {"owner": "ops"})
        lake.sql("CREATE TABLE s.t (id INTEGER, v VARCHAR)")
        lake.sql("INSERT INTO lake.s.t VALUES (1, 'a'), (2, 'b')")
        lake.sql("DELETE FROM lake.s.t WHERE id = 2")
        lake.sql("INSERT INTO lake.s.t VALUES (3, 'c')")
    return warehouse


def test_one_command_moves_the_tables_and_a_second_changes_nothing(
    root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = _old_warehouse(root, tmp_path / "cache-a", monkeypatch)
    database = local_catalog_file(warehouse)
    assert os.path.exists(database)
    # before: the default opens this machine's SQLite catalog, which keeps working
    with iceduck.connect(warehouse) as lake:
        assert isinstance(lake.catalog, SqlCatalog)
        old_metadata = lake.catalog.load_table("s", "t")
        assert sorted(lake.sql("SELECT * FROM lake.s.t").fetchall()) == [(1, "a"), (3, "c")]

    assert main(["migrate-catalog", warehouse]) == 0
    out = capsys.readouterr().out
    assert "namespace s: registered (properties not carried: owner)" in out
    assert f"table s.t: registered ({old_metadata} -> {warehouse}/s/t/metadata/v1.metadata.json)" in out
    assert "1 tables: 1 registered in the bucket catalog, 0 already there, 0 skipped, 0 conflicts" in out
    assert not os.path.exists(database) and os.path.exists(database + ".migrated")

    # idempotent: again, from the kept file, nothing changes
    assert main(["migrate-catalog", warehouse]) == 0
    out = capsys.readouterr().out
    assert "table s.t: already" in out and "0 registered" in out

    # another machine (an empty cache folder) opens the catalog on the bucket and sees the rows
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))
    with iceduck.connect(warehouse, catalog="folder") as other:
        assert isinstance(other.catalog, BucketCatalog)
        assert sorted(other.sql("SELECT * FROM lake.s.t").fetchall()) == [(1, "a"), (3, "c")]
        assert other.sql("SELECT count(*) FROM iceberg_snapshots('s.t')").fetchall() == [(3,)]
        other.sql("INSERT INTO lake.s.t VALUES (4, 'd')")
    # ... and this machine's default is the bucket catalog now, with the other's commit; the shell too
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-a"))
    with iceduck.connect(warehouse) as first:
        assert isinstance(first.catalog, BucketCatalog)
        assert sorted(first.sql("SELECT id FROM lake.s.t").fetchall()) == [(1,), (3,), (4,)]
    assert main(["--warehouse", warehouse, "--mode", "csv", "-c", "SELECT count(*) AS n FROM lake.s.t"]) == 0
    assert capsys.readouterr().out.split() == ["n", "3"]
    # the move after commits on the bucket: still `already` (the log names the old metadata)
    assert main(["migrate-catalog", warehouse]) == 0
    assert "table s.t: already (" in capsys.readouterr().out


def test_what_cannot_move_is_reported_and_the_local_catalog_stays(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table another machine's SQLite catalog already moved with other contents is a conflict; a
    nested namespace's table (SQLite default folder `<wh>/a.b/u`) is skipped: exit code 1, and this
    machine's SQLite file stays where `connect` finds it."""
    warehouse = _old_warehouse(f"s3://{BUCKET}", tmp_path / "cache-a", monkeypatch)
    assert main(["migrate-catalog", warehouse]) == 0
    capsys.readouterr()
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))
    with iceduck.connect(warehouse, catalog="sql") as lake:  # machine B's own catalog, its own s.t
        lake.create_namespace("s")
        lake.create_namespace("a")
        lake.create_namespace("a.b")
        lake.sql("CREATE TABLE a.b.u (i INTEGER)")
        lake.create_table("s.t", [("id", "int")], location=f"{warehouse}/s/t2")
    assert main(["migrate-catalog", "--keep-local", warehouse]) == 1
    captured = capsys.readouterr()
    assert (
        f"table a.b.u: skipped (its folder {warehouse}/a.b/u is not where the bucket catalog" in captured.out
    )
    assert "table s.t: skipped (its folder" in captured.out
    assert "0 registered in the bucket catalog, 0 already there, 2 skipped" in captured.out
    assert "stays in place" in captured.err
    assert os.path.exists(local_catalog_file(warehouse))


def test_a_conflicting_table_is_left_as_it_is(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = _old_warehouse(f"s3://{BUCKET}", tmp_path / "cache-a", monkeypatch)
    # machine B made its own s.t in the same folder before anything moved
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))
    with iceduck.connect(warehouse, catalog="sql") as lake:
        lake.create_namespace("s")
        lake.sql("CREATE TABLE s.t (id INTEGER, v VARCHAR)")
        lake.sql("INSERT INTO lake.s.t VALUES (9, 'b')")
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-a"))
    assert main(["migrate-catalog", warehouse]) == 0
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))
    capsys.readouterr()
    assert main(["migrate-catalog", warehouse]) == 1
    out = capsys.readouterr().out
    assert "table s.t: conflict (the bucket catalog has other metadata for it" in out
    with iceduck.connect(warehouse, catalog="folder") as lake:  # machine A's rows, untouched
        assert sorted(lake.sql("SELECT id FROM lake.s.t").fetchall()) == [(1,), (3,)]


def test_the_shell_opens_the_catalog_on_the_bucket_when_asked(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    warehouse = f"s3://{BUCKET}/{uuid.uuid4().hex}/wh"
    sql = "CREATE SCHEMA s; CREATE TABLE s.t AS SELECT 7 AS i"
    assert main(["--warehouse", warehouse, "--catalog", "folder", "-c", sql]) == 0
    assert not os.path.exists(local_catalog_file(warehouse))  # nothing on this machine
    with iceduck.connect(warehouse, catalog="folder") as lake:
        assert lake.sql("SELECT i FROM lake.s.t").fetchall() == [(7,)]
    capsys.readouterr()
    assert main(["--warehouse", warehouse, "-c", "SELECT 1"]) == 1  # the default: no SQLite catalog here
    assert "--catalog folder opens the catalog on the bucket" in capsys.readouterr().err


def test_nothing_to_migrate_and_local_warehouses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["migrate-catalog", "s3://lake/none/wh"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out
    assert main(["migrate-catalog", str(tmp_path / "wh")]) == 1
    assert "object-store warehouse" in capsys.readouterr().err
