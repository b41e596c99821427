"""GCS and Azure storage: settings (CREATE SECRET, PyIceberg / REST property names, the
environment), and tables on local emulators (gcp-storage-emulator, Azurite) started by the tests:
create, insert, delete with deletion vectors, select, time travel, maintenance, `iceberg_scan` by
metadata path, and one-line errors for missing credentials and missing buckets.

Every table test runs on both stores (the `store` fixture). Truth comes from outside iceduck's
scan: rows computed in Python, the metadata, manifests and Puffin files read by the test helpers
(json, fastavro, pyarrow), and object listings taken with the backend itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.errors import (
    AlreadyExistsError,
    FileNotFoundInTableError,
    IcebergError,
    StorageAccessDeniedError,
    ValidationError,
)
from iceduck.io import fsspec_store as fst
from iceduck.io.s3_settings import Source
from iceduck.io.storage import default_io, duckdb_path, store_registry
from iceduck.maintenance import Maintainer
from tests.support import maintenance_helpers as mh
from tests.support.s3_fixture import _wait_listening, die_with_parent, free_port
from tests.support.store_fixture import AZURITE_ACCOUNT, BUCKET, StoreServer

IO = default_io()


# -- settings ------------------------------------------------------------------------------------


def test_gcs_secret_options_use_duckdbs_names() -> None:
    settings, scope = fst.settings_from_secret(
        {
            "TYPE": "gcs",
            "BEARER_TOKEN": "tok",
            "ENDPOINT": "127.0.0.1:4443",
            "USE_SSL": "false",
            "SCOPE": "gs://b/x",
        }
    )
    assert settings.kind == "gcs" and scope == "gs://b/x"
    assert settings.get("token") == "tok" and settings.get("endpoint") == "http://127.0.0.1:4443"
    with pytest.raises(ValidationError, match=r"^CREATE SECRET \(TYPE gcs\): HMAC keys"):
        fst.settings_from_secret({"TYPE": "gcs", "KEY_ID": "k", "SECRET": "s"})


def test_azure_secret_options_use_duckdbs_names() -> None:
    settings, scope = fst.settings_from_secret(
        {"type": "azure", "provider": "service_principal", "account_name": "acct", "tenant_id": "t",
         "client_id": "c", "client_secret": "s"}
    )  # fmt: skip
    assert scope is None
    assert dict(settings.options) == {
        "account_name": "acct",
        "tenant_id": "t",
        "client_id": "c",
        "client_secret": "s",
    }
    with pytest.raises(ValidationError, match="unknown option BOGUS"):
        fst.settings_from_secret({"TYPE": "azure", "BOGUS": "x"})


def test_pyiceberg_and_rest_property_names() -> None:
    gcs = fst.settings_from_properties(
        "gcs",
        {
            "gcs.oauth2.token": "tok",
            "gcs.project-id": "p",
            "gcs.service.host": "http://h:1",
            "s3.endpoint": "x",
        },
    )
    assert dict(gcs.options) == {"token": "tok", "project": "p", "endpoint": "http://h:1"}
    adls = fst.settings_from_properties(
        "azure",
        {
            "adls.account-name": "acct",
            "adls.account-key": "k",
            "adls.sas-token.other.dfs.core.windows.net": "sv=1",
        },
    )
    assert dict(adls.options) == {"account_name": "acct", "account_key": "k", "sas_token.other": "sv=1"}
    # the vended per-account SAS token is used for that account's URLs
    kwargs = fst._azure_kwargs(adls, "other", "abfss://c@other.dfs.core.windows.net/t")
    assert kwargs["account_name"] == "other" and kwargs["sas_token"] == "sv=1"


def test_registry_order_and_scopes_per_store() -> None:
    reg = fst.StoreRegistry(parent=fst.StoreRegistry())
    secret = fst.settings_from_secret({"TYPE": "gcs", "BEARER_TOKEN": "a"})[0]
    vended = fst.settings_from_properties("gcs", {"gcs.oauth2.token": "b"})
    reg.register(secret, source=Source.SECRET)
    reg.register(vended, scope="gs://b/t1", source=Source.VENDED)
    assert reg.settings_for("gs://b/t1/data/x.parquet") == vended
    assert reg.settings_for("gcs://b/t1/data/x.parquet") == vended  # gcs:// is gs://
    assert reg.settings_for("gs://b/t10/x") == secret  # a sibling whose name starts the same
    assert reg.settings_for("az://b/t1/x").is_empty  # another store
    acct = fst.settings_from_secret({"TYPE": "azure", "ACCOUNT_NAME": "one"})[0]
    reg.register(acct, scope="abfss://c@one.dfs.core.windows.net/", source=Source.SECRET)
    assert reg.settings_for("abfss://c@one.dfs.core.windows.net/t/x") == acct
    assert reg.settings_for("abfss://c@two.dfs.core.windows.net/t/x").is_empty


def test_paths_handed_to_duckdb_keep_one_spelling() -> None:
    assert duckdb_path("gcs://b/t/x.parquet") == "gs://b/t/x.parquet"
    assert duckdb_path("abfss://c@a.dfs.core.windows.net/t/x") == "abfss://c@a.dfs.core.windows.net/t/x"
    assert duckdb_path("az://c/t//x") == "az://c/t/x"


def test_missing_azure_credentials_fail_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("adlfs")
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME"):
        monkeypatch.delenv(name, raising=False)
    path = "az://nocreds/t/metadata/v1.metadata.json"
    with pytest.raises(StorageAccessDeniedError) as e:
        IO.read(path)
    text = str(e.value)
    assert text.startswith(f"{path}: no Azure credentials") and "\n" not in text


def test_missing_gcs_credentials_fail_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gcsfs")
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "true")  # no probe of a cloud metadata server
    monkeypatch.setenv("CLOUDSDK_CONFIG", "/nonexistent")  # no gcloud user credentials either
    path = "gs://nocreds/t/metadata/v1.metadata.json"
    with pytest.raises(StorageAccessDeniedError) as e:
        IO.read(path)
    text = str(e.value)
    assert text.startswith(f"{path}: no GCS credentials") and "\n" not in text


# -- tables on the emulators ---------------------------------------------------------------------


@pytest.fixture
def store_wh(store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh warehouse on the emulator, its SQLite catalog in a per-test cache folder."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    yield f"{store.root()}/{uuid.uuid4().hex}/wh"


def _backend_listing(store: StoreServer, prefix: str) -> list[str]:
    """Object keys under `prefix`, listed by the backend itself (not iceduck's FileIO)."""
    fs = fst.filesystem(fst.REGISTRY.settings_for(prefix), prefix)
    return sorted(fs.find(fst.locate(prefix).fs_path + "/"))


def test_fileio_round_trip(store: StoreServer) -> None:
    root = f"{store.root()}/{uuid.uuid4().hex}"
    a, b = f"{root}/x/a.bin", f"{root}/x/y/b.bin"
    IO.write_new(a, b"0123456789")
    with pytest.raises(AlreadyExistsError, match=r"file exists already"):
        IO.write_new(a, b"again")
    IO.write_atomic(b, b"hello")
    assert IO.read(a) == b"0123456789" and IO.size(a) == 10 and IO.exists(a)
    with IO.open_input(a) as f:
        assert f.read_at(3, 4) == b"3456"
    stream = IO.open_stream(a)
    stream.seek(-3, 2)
    assert stream.read() == b"789"
    assert [(i.path, i.size) for i in IO.list_prefix(f"{root}/x")] == [(a, 10), (b, 5)]
    assert [o.status for o in IO.delete_many([a, f"{root}/x/missing"])] == ["deleted", "not_found"]
    with pytest.raises(FileNotFoundInTableError, match=r"file not found$"):
        IO.read(a)
    assert _backend_listing(store, f"{root}/x") == [f"{BUCKET}/{root.split('/', 3)[3]}/x/y/b.bin"]


def test_table_lifecycle(store: StoreServer, store_wh: str) -> None:
    """Create, insert, delete (deletion vectors), select, time travel and iceberg_scan by metadata
    path, on each store; every answer checked against rows computed here and the files read by
    the test helpers."""
    with iceduck.connect(store_wh) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t AS SELECT range AS id, range % 7 AS k FROM range(5000)")
        first = lake.table("ns.t").metadata_location
        lake.sql("INSERT INTO ns.t SELECT range AS id, range % 7 AS k FROM range(5000, 6000)")
        lake.sql("DELETE FROM ns.t WHERE k = 3")
        location = lake.table("ns.t").metadata_location
        kept = [i for i in range(6000) if i % 7 != 3]
        assert lake.sql("SELECT count(*), sum(id) FROM lake.ns.t").fetchall() == [(len(kept), sum(kept))]
        truth = sorted(r["id"] for r in mh.rows(location, columns=["id"]))
        assert truth == kept
        assert location.startswith(store_wh) and first.startswith(store_wh)
        # the delete wrote a deletion vector (v3): a Puffin file on the store
        md = mh.metadata(location)
        deletes = [e["data_file"] for _, e in mh.live_entries(md) if e["data_file"]["content"] == 1]
        assert deletes and all(d["file_format"].upper() == "PUFFIN" for d in deletes)
        assert all(IO.exists(d["file_path"]) for d in deletes)
        # time travel: the first snapshot, by id
        snaps = sorted(md["snapshots"], key=lambda s: s["sequence-number"])
        old = lake.sql(
            f"SELECT count(*), sum(id) FROM iceberg_scan('ns.t', snapshot_id := {snaps[0]['snapshot-id']})"
        )
        assert old.fetchall() == [(5000, sum(range(5000)))]
        # reading the table by its metadata path, in the lake and in a plain DuckDB connection
        got = lake.sql(f"SELECT count(*), sum(id) FROM iceberg_scan('{location}')").fetchall()
        assert got == [(len(kept), sum(kept))]
        assert lake.sql(f"SELECT count(*) FROM iceberg_scan('{first}')").fetchall() == [(5000,)]
        # the user's own SQL on the store's paths goes through the same filesystem (gcs:// too)
        data_files = [e["data_file"] for _, e in mh.live_entries(md) if e["data_file"]["content"] == 0]
        for f in data_files:
            path = f["file_path"].replace("gs://", "gcs://")
            assert lake.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall() == [
                (f["record_count"],)
            ]
    con = duckdb.connect()
    iceduck.register(con)
    assert con.execute("SELECT count(*), sum(id) FROM iceberg_scan(?)", [location]).fetchone() == (
        len(kept),
        sum(kept),
    )
    data = [p for p in _backend_listing(store, store_wh) if p.endswith(".parquet")]
    assert len(data) >= 2  # the data files really are on the emulator
    con.close()


def test_maintenance_expire_and_orphans(store: StoreServer, store_wh: str) -> None:
    """Expire snapshots deletes what only the expired snapshots reached; orphan removal lists the
    table's prefix on the store and deletes what no metadata reaches, keeping the rows."""
    with iceduck.connect(store_wh) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t AS SELECT range AS id FROM range(100)")
        lake.sql("INSERT INTO ns.t SELECT range AS id FROM range(100, 200)")
        lake.sql("DELETE FROM ns.t WHERE id < 150")
        t = lake.table("ns.t")
        md = mh.metadata(t.metadata_location)
        before = set().union(
            *(mh.snapshot_files(t.metadata_location, s["snapshot-id"]) for s in md["snapshots"])
        )
        time.sleep(0.01)
        out = lake.sql(
            "SELECT kind, item, outcome FROM iceberg_expire_snapshots('ns.t', older_than := now(), "
            "retain_last := 1, dry_run := false)"
        ).fetchall()
        deleted = {r[1] for r in out if r[2] == "deleted"}
        current = lake.table("ns.t").metadata_location
        live = mh.snapshot_files(current)
        assert deleted and not deleted & live
        assert not any(IO.exists(p) for p in deleted) and all(IO.exists(p) for p in live)
        assert len(mh.metadata(current)["snapshots"]) == 1
        assert before - live >= {p for p in deleted if not p.endswith(".avro")}
        root = store_wh + "/ns/t"
        junk = [f"{root}/data/crashed-writer.parquet", f"{root}/metadata/crashed-1-m0.avro"]
        sibling = f"{store_wh}/ns/t2/data/not-this-tables.parquet"  # its key starts with ".../t"
        for p in [*junk, sibling]:
            IO.write_new(p, b"x" * 10)
        time.sleep(0.01)
        m = Maintainer.for_lake(lake, "ns.t")
        planned = m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True)
        assert sorted(c.path for c in planned.plan.candidates) == sorted(junk)
        done = m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True, dry_run=False)
        assert done.status == "succeeded"
        assert sorted((o.item, o.outcome) for o in done.outcomes) == sorted((p, "deleted") for p in junk)
        assert not any(IO.exists(p) for p in junk) and IO.exists(sibling)
        assert lake.sql("SELECT count(*), sum(id) FROM lake.ns.t").fetchall() == [(50, sum(range(150, 200)))]


def test_create_secret_through_lake_sql(
    store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the session's registration the store is unreachable; the lake's CREATE SECRET reaches
    it for that lake alone."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", "/nonexistent")
    wh = f"{store.root()}/{uuid.uuid4().hex}/wh"
    settings, _ = fst.settings_from_secret(store.secret_options())
    fst.REGISTRY.unregister(store.kind, scope=store.root(), source=Source.SECRET)
    try:
        with iceduck.connect(wh) as lake:
            assert lake.sql(store.secret_sql()) is None
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t AS SELECT range AS id FROM range(10)")
            assert lake.sql("SELECT sum(id) FROM lake.ns.t").fetchall() == [(45,)]
            location = lake.table("ns.t").metadata_location
        with iceduck.connect(wh) as again, pytest.raises(Exception) as e:
            again.sql(f"SELECT sum(id) FROM iceberg_scan('{location}')").fetchall()
        assert str(e.value).splitlines()[0].startswith(location.split("/metadata/")[0]) or location in str(
            e.value
        )
    finally:
        fst.REGISTRY.register(settings, scope=store.root(), source=Source.SECRET)


def test_missing_bucket_fails_with_one_line(
    store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    settings, _ = fst.settings_from_secret(store.secret_options())
    missing = f"{store.scheme}://nobucket{uuid.uuid4().hex[:8]}"
    fst.REGISTRY.register(settings, scope=missing, source=Source.SECRET)
    try:
        with pytest.raises(FileNotFoundInTableError) as read:
            IO.read(f"{missing}/t/metadata/v1.metadata.json")
        assert str(read.value).startswith(f"{missing}/t/metadata/v1.metadata.json: the ")
        assert "does not exist" in str(read.value)
        with iceduck.connect(f"{missing}/wh") as lake:
            lake.sql("CREATE SCHEMA ns")
            with pytest.raises(FileNotFoundInTableError) as e:
                lake.sql("CREATE TABLE ns.t AS SELECT range AS id FROM range(10)")
        text = str(e.value)
        what = "bucket" if store.kind == "gcs" else "container"
        assert text.startswith(missing) and f"the {what} '{missing.split('//')[1]}' does not exist" in text
        assert "\n" not in text
    finally:
        fst.REGISTRY.unregister(store.kind, scope=missing, source=Source.SECRET)


# -- REST vended credentials ---------------------------------------------------------------------

CREDENTIALS = ("me", "s3cret")


@pytest.fixture
def served_elsewhere(
    store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    """`iceduck serve --vend-credentials` in a process of its own on a warehouse on the emulator,
    reaching it through the standard environment there (STORAGE_EMULATOR_HOST,
    AZURE_STORAGE_CONNECTION_STRING); this process has no settings for the store meanwhile.
    Yields (url, warehouse)."""
    where = f"{store.root()}/{uuid.uuid4().hex}/wh"
    port = free_port()
    env = {**os.environ, "ICEDUCK_CACHE_DIR": str(tmp_path / "server-cache")}
    if store.kind == "gcs":
        env["STORAGE_EMULATOR_HOST"] = store.endpoint
    else:
        env["AZURE_STORAGE_CONNECTION_STRING"] = str(store.secret_options()["CONNECTION_STRING"])
    cmd = [
        sys.executable, "-c", "from iceduck.cli import main; raise SystemExit(main())", "serve",
        "--warehouse", where, "--port", str(port), "--credentials", ":".join(CREDENTIALS), "--vend-credentials",
    ]  # fmt: skip
    for name in ("STORAGE_EMULATOR_HOST", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "none"))
    settings, _ = fst.settings_from_secret(store.secret_options())
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_listening(proc, port, "iceduck serve", log)
        fst.REGISTRY.unregister(store.kind, scope=store.root(), source=Source.SECRET)
        yield f"http://127.0.0.1:{port}", where
    finally:
        fst.REGISTRY.register(settings, scope=store.root(), source=Source.SECRET)
        proc.terminate()
        proc.wait(20)


def test_client_reads_and_writes_with_vended_credentials_alone(
    served_elsewhere: tuple[str, str], store: StoreServer
) -> None:
    url, where = served_elsewhere
    lake = iceduck.connect(url, client_id=CREDENTIALS[0], client_secret=CREDENTIALS[1])
    lake.sql("CREATE SCHEMA demo")
    lake.sql("CREATE TABLE demo.t AS SELECT range AS id, range % 5 AS k FROM range(1000)")
    lake.sql("DELETE FROM demo.t WHERE k = 2")
    kept = [i for i in range(1000) if i % 5 != 2]
    assert lake.sql("SELECT count(*), sum(id) FROM lake.demo.t").fetchall() == [(len(kept), sum(kept))]
    location = f"{where}/demo/t"
    # vended to this lake alone: the process has nothing for the store
    assert not store_registry(lake.io).settings_for(location).is_empty
    assert fst.REGISTRY.settings_for(location).is_empty
    lake.close()
    # without them nothing in this process reaches the store: a clear error, no rows
    other = iceduck.connect(
        url, client_id=CREDENTIALS[0], client_secret=CREDENTIALS[1], access_delegation_mode="none"
    )
    with pytest.raises((IcebergError, duckdb.Error), match=r"no (GCS|Azure) credentials"):
        other.sql("SELECT count(*) FROM lake.demo.t").fetchall()
    other.close()


def test_pyiceberg_reads_the_tables(
    store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An independent reader: PyIceberg (its fsspec FileIO on gcsfs / adlfs) reads a table iceduck
    wrote, deletion vectors applied. On Azure through the `abfss://container@account...` spelling
    (PyIceberg has no az://)."""
    table_mod = pytest.importorskip("pyiceberg.table")
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    if store.kind == "gcs":
        import gcsfs.core

        # PyIceberg asks for `gcsfs.GCSFileSystem`, by default the class that first asks a gRPC
        # control plane about each bucket (a minute of timeouts against an emulator)
        monkeypatch.setattr("gcsfs.GCSFileSystem", gcsfs.core.GCSFileSystem)
        root = store.root()
        props = {"gcs.service.host": store.endpoint, "gcs.no-auth": "true"}
    else:
        root = f"abfss://{BUCKET}@{AZURITE_ACCOUNT}.dfs.core.windows.net"
        props = {"adls.connection-string": str(store.secret_options()["CONNECTION_STRING"])}
    with iceduck.connect(f"{root}/{uuid.uuid4().hex}/wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t AS SELECT range AS id, range % 7 AS k FROM range(5000)")
        lake.sql("DELETE FROM ns.t WHERE k = 3")
        location = lake.table("ns.t").metadata_location
    assert location.startswith(root)
    kept = [i for i in range(5000) if i % 7 != 3]
    table = table_mod.StaticTable.from_metadata(
        location, properties={**props, "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
    )
    got = table.scan().to_arrow()
    assert sorted(got.column("id").to_pylist()) == kept
