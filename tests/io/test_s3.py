"""S3 storage: settings and their order, the S3 FileIO on a real local S3 server (moto), DuckDB
reading through the registered filesystem, and CREATE SECRET through Lake.sql."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import duckdb
import fsspec.asyn
import pyarrow as pa
import pytest

from iceduck.errors import (
    AlreadyExistsError,
    CorruptFileError,
    FileNotFoundInTableError,
    UnsupportedFormatError,
)
from iceduck.io import s3, s3_duckdb, s3_settings
from iceduck.io.s3_readers import ObstoreReader
from iceduck.io.storage import default_io, duckdb_path
from iceduck.lake import connect
from iceduck.maintenance import Maintainer
from tests.support import maintenance_helpers as mh
from tests.support.s3_fixture import S3Server

IO = default_io()


# -- settings ----------------------------------------------------------------------------------


def test_settings_from_pyiceberg_properties() -> None:
    got = s3_settings.settings_from_properties(
        {
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3.access-key-id": "k",
            "s3.secret-access-key": "s",
            "s3.session-token": "t",
            "s3.region": "eu-west-1",
            "s3.path-style-access": "true",
            "unrelated": "x",
        }
    )
    assert got == s3_settings.S3Settings("http://127.0.0.1:9000", "k", "s", "t", "eu-west-1", True)
    assert s3_settings.settings_from_properties({}).is_empty


def test_settings_from_duckdb_secret_options() -> None:
    settings, scope = s3_settings.settings_from_secret(
        {
            "key_id": "k",
            "SECRET": "s",
            "REGION": "r",
            "ENDPOINT": "localhost:4568",
            "URL_STYLE": "path",
            "USE_SSL": False,
        }
    )
    assert settings == s3_settings.S3Settings("http://localhost:4568", "k", "s", None, "r", True)
    assert scope is None
    tls, scoped = s3_settings.settings_from_secret({"ENDPOINT": "minio:9000", "SCOPE": "s3://b/p"})
    assert tls.endpoint == "https://minio:9000" and tls.path_style is None and scoped == "s3://b/p"
    with pytest.raises(Exception, match="USE_SSL: expected true or false"):
        s3_settings.settings_from_secret({"ENDPOINT": "x:1", "USE_SSL": "maybe"})


def test_registry_order_vended_then_properties_then_secret_longest_scope_first() -> None:
    reg = s3_settings.S3Registry()
    secret = s3_settings.S3Settings(access_key_id="secret")
    props = s3_settings.S3Settings(access_key_id="props")
    vended = s3_settings.S3Settings(access_key_id="vended")
    narrow_secret = s3_settings.S3Settings(access_key_id="narrow")
    assert reg.settings_for("s3://b/t/x").is_empty  # nothing registered: botocore's environment
    reg.register(secret, source=s3_settings.Source.SECRET)
    reg.register(narrow_secret, scope="s3://b/t", source=s3_settings.Source.SECRET)
    assert reg.settings_for("s3://other/x") == secret
    assert reg.settings_for("s3a://b/t/x") == narrow_secret
    assert reg.settings_for("s3://b/tt/x") == secret  # component-wise: b/tt is not under b/t
    reg.register(props, scope="s3://b", source=s3_settings.Source.PROPERTIES)
    assert reg.settings_for("s3://b/t/x") == props
    reg.register(vended, scope="s3n://b/t", source=s3_settings.Source.VENDED)
    assert reg.settings_for("s3://b/t/data/f.parquet") == vended
    assert reg.settings_for("s3://b/u") == props
    reg.forget(source=s3_settings.Source.VENDED)
    assert reg.settings_for("s3://b/t/x") == props


def test_unsupported_schemes_fail_with_one_line_naming_the_path() -> None:
    for path in ("hdfs://nn:8020/t", "wasbs://c@acct.blob.core.windows.net/t"):
        with pytest.raises(UnsupportedFormatError) as e:
            IO.read(path)
        text = str(e.value)
        assert text.startswith(path) and "not supported yet" in text and "s3://" in text and "\n" not in text
        with pytest.raises(UnsupportedFormatError):
            duckdb_path(path)


# -- the FileIO on moto ------------------------------------------------------------------------


def test_s3_fileio_round_trip_on_moto(s3_prefix: str) -> None:
    path = f"{s3_prefix}/metadata/v1.metadata.json"
    assert not IO.exists(path)
    IO.write_new(path, b"0123456789")
    with pytest.raises(AlreadyExistsError, match="exists already"):
        IO.write_new(path, b"other")
    assert IO.read(path) == b"0123456789"
    alias = path.replace("s3://", "s3a://")
    assert IO.read(alias) == b"0123456789" and IO.size(path.replace("s3://", "s3n://")) == 10
    with IO.open_input(path) as f:
        assert f.size == 10 and f.read_at(7, 3) == b"789" and f.read_at(0, 0) == b""
        with pytest.raises(CorruptFileError, match="truncated"):
            f.read_at(8, 5)
    IO.write_atomic(path, b"new")
    assert IO.read(path) == b"new"
    IO.write_new(f"{s3_prefix}/data/a=1/f.parquet", b"x" * 5)
    IO.write_new(f"{s3_prefix}/data2/g", b"y")  # a sibling whose name extends "data": not under data/
    listed = list(IO.list_prefix(f"{s3_prefix}/data"))
    assert [(i.path, i.size) for i in listed] == [(f"{s3_prefix}/data/a=1/f.parquet", 5)]
    assert listed[0].mtime_ms > 0
    assert next(i.path for i in IO.list_prefix(alias.rsplit("/", 2)[0])).startswith("s3a://")
    assert list(IO.list_prefix(f"{s3_prefix}/nothing-here")) == []
    IO.delete(path)
    with pytest.raises(FileNotFoundInTableError, match=r"v1\.metadata\.json: file not found"):
        IO.delete(path)
    with pytest.raises(FileNotFoundInTableError, match="file not found"):
        IO.read(path)


def test_put_file_uploads_a_local_file(s3_prefix: str, tmp_path: Path) -> None:
    local = tmp_path / "f.bin"
    local.write_bytes(b"abc" * 1000)
    IO.put_file(str(local), f"{s3_prefix}/data/f.bin")
    assert IO.read(f"{s3_prefix}/data/f.bin") == b"abc" * 1000


def test_batch_delete_reports_each_file(s3_prefix: str) -> None:
    paths = [f"{s3_prefix}/o/{i}" for i in range(3)]
    for p in paths[:2]:
        IO.write_new(p, b"x")
    outcomes = IO.delete_many([*paths, "/definitely/not/here"])
    assert [(o.path, o.status) for o in outcomes] == [
        (paths[0], "deleted"),
        (paths[1], "deleted"),
        (paths[2], "not_found"),
        ("/definitely/not/here", "not_found"),
    ]
    assert not IO.exists(paths[0])


class _PartialStore:
    """Answers a batch delete with HTTP 200 but per-key errors, as S3 does."""

    def __init__(self) -> None:
        self.loop = fsspec.asyn.get_loop()

    def isfile(self, path: str) -> bool:
        return not path.endswith("gone")

    async def _call_s3(self, method: str, **kwargs: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        keys = [o["Key"] for o in kwargs["Delete"]["Objects"]]
        return {
            "Deleted": [{"Key": k} for k in keys if k.endswith("ok")],
            "Errors": [
                {
                    "Key": k,
                    "Code": "AccessDenied" if k.endswith("denied") else "InternalError",
                    "Message": "m",
                }
                for k in keys
                if not k.endswith("ok") and not k.endswith("silent")
            ],
        }


def test_partial_batch_delete_is_per_file_not_done() -> None:
    keys = ["t/ok", "t/denied", "t/broken", "t/gone", "t/silent"]
    outcomes = s3._delete_batch(_PartialStore(), "b", [f"s3://b/{k}" for k in keys])
    assert [(o.path.rsplit("/", 1)[1], o.status) for o in outcomes] == [
        ("ok", "deleted"),
        ("denied", "denied"),
        ("broken", "other"),
        ("gone", "not_found"),
        ("silent", "other"),
    ]
    assert "InternalError" in outcomes[2].detail


# -- DuckDB through the registered filesystem, and CREATE SECRET --------------------------------


def test_duckdb_reads_every_s3_spelling_through_the_registered_filesystem(s3_prefix: str) -> None:
    con = duckdb.connect()
    s3_duckdb.register_filesystem(con)
    target = f"{s3_prefix}/x/a.parquet"
    con.execute(f"COPY (SELECT range AS id FROM range(100)) TO '{target}'")
    for spelling in (target, target.replace("s3://", "s3a://"), target.replace("s3://", "s3n://")):
        assert con.execute(f"SELECT count(*), sum(id) FROM read_parquet('{spelling}')").fetchone() == (
            100,
            4950,
        )
    assert con.execute(f"SELECT count(*) FROM read_parquet('{s3_prefix}/x/*.parquet')").fetchone() == (100,)


def test_a_plain_connection_gets_its_s3_filesystem_when_iceduck_first_reads_s3(
    moto_s3: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`register(con)` leaves the filesystem (and fsspec) for later: it is registered just before
    iceduck hands the connection SQL naming an S3 path, by each way a scan reaches one."""
    import iceduck

    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    lake = connect(f"{s3_prefix}/wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t AS SELECT range AS id FROM range(1000)")
    metadata = lake.table("s.t").metadata_location
    local = connect(tmp_path / "local")
    local.sql("CREATE SCHEMA s")
    local.sql("CREATE TABLE s.t AS SELECT range AS id FROM range(10)")
    local_metadata = local.table("s.t").metadata_location
    lake.close()
    local.close()
    truth = (1000, sum(range(1000)))
    for call in ("iceberg_scan(?)", f"iceberg_scan('{metadata}')", f"iceberg_scan('{metadata}', filter := 'id < 5000')"):
        con = duckdb.connect()
        iceduck.register(con)
        assert not con.filesystem_is_registered("s3")
        # metadata functions read through iceduck's own FileIO: DuckDB needs no filesystem for them
        assert con.execute("SELECT count(*) FROM iceberg_files(?)", [metadata]).fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM iceberg_scan(?)", [local_metadata]).fetchone() == (10,)
        assert not con.filesystem_is_registered("s3")
        params = [metadata] if "?" in call else []
        assert con.execute(f"SELECT count(*), sum(id) FROM {call}", params).fetchone() == truth, call
        assert con.filesystem_is_registered("s3")
        # the user's own SQL on S3 paths reads through it from then on
        files = con.execute("SELECT file_path FROM iceberg_files(?)", [metadata]).fetchall()
        assert con.execute("SELECT count(*) FROM read_parquet(?)", [files[0][0]]).fetchone() == (1000,)
        con.close()


def test_create_secret_through_lake_sql_reaches_the_server(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The secret serves the lake that ran it (and no later connection: it is not per process)."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    prefix = f"s3://lake/secret-{tmp_path.name}"
    s3_settings.REGISTRY.forget(source=s3_settings.Source.SECRET)  # the session's registration is made again by SQL
    try:
        with connect(f"{prefix}/wh") as lake:
            with pytest.raises(Exception, match=r"s3://lake/secret-.*: "):
                lake.sql(f"SELECT * FROM iceberg_snapshots('{prefix}/t')").fetchall()
            assert lake.sql(moto_s3.secret_sql()) is None
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t AS SELECT range AS id FROM range(10)")
            assert lake.sql(f"SELECT sum(id) FROM iceberg_scan('{prefix}/wh/ns/t')").fetchall() == [(45,)]
        with connect(f"{prefix}/wh") as again, pytest.raises(Exception, match=r"s3://lake/secret-.*: "):
            again.sql(f"SELECT sum(id) FROM iceberg_scan('{prefix}/wh/ns/t')").fetchall()
    finally:
        s3_settings.REGISTRY.register(
            s3_settings.settings_from_secret(moto_s3.secret_options())[0], scope="s3://lake", source=s3_settings.Source.SECRET
        )


def test_s3rver_serves_iceduck_tables(
    s3rver: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The throughput server (s3rver) under a table written and read by iceduck, with its own scoped
    settings: vended-style registration for one prefix wins over the session's moto secret."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    prefix = f"s3://lake/s3rver-{tmp_path.name}"
    s3_settings.register_vended_credentials(
        prefix,
        {
            "s3.endpoint": s3rver.endpoint,
            "s3.access-key-id": s3rver.key_id,
            "s3.secret-access-key": s3rver.secret,
            "s3.region": s3rver.region,
            "s3.path-style-access": "true",
        },
    )
    try:
        with connect(f"{prefix}/wh") as lake:
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t AS SELECT range AS id, range % 7 AS k FROM range(5000)")
            lake.sql("DELETE FROM ns.t WHERE k = 3")
            got = lake.sql("SELECT count(*), sum(id) FROM lake.ns.t").fetchall()
            kept = [i for i in range(5000) if i % 7 != 3]
            assert got == [(len(kept), sum(kept))]
        listed = s3rver.client().list_objects_v2(Bucket="lake", Prefix=prefix[len("s3://lake/") :])  # type: ignore[attr-defined]
        assert listed["KeyCount"] > 0  # the files really are on s3rver, not on moto
    finally:
        s3_settings.REGISTRY.forget(source=s3_settings.Source.VENDED)


def test_orphan_removal_on_s3_lists_by_prefix_and_reports_each_file(
    s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 objects have no settable modification time, so this twin of the local orphan test
    (test_maintenance_sql) counts everything written before the run as old enough."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    with connect(f"{s3_prefix}/wh") as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", [("id", "BIGINT"), ("part", "VARCHAR")], partition_by=["part"])
        for i in range(3):
            t.append(
                pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "part": ["a", "b"] * 5})
            )
        t.delete("id % 7 = 0")
        root = f"{s3_prefix}/wh/ns/t"
        junk = [f"{root}/data/part=a/crashed-writer.parquet", f"{root}/metadata/crashed-1-m0.avro"]
        sibling = f"{s3_prefix}/wh/ns/t2/data/not-this-tables.parquet"  # its key starts with ".../t"
        for p in [*junk, sibling]:
            IO.write_new(p, b"x" * 10)
        referenced = mh.snapshot_files(t.metadata_location)
        rows_before = mh.checksum(mh.rows(t.metadata_location), ["id", "part"])
        time.sleep(0.01)
        m = Maintainer.for_lake(lake, "ns.t")
        planned = m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True)
        assert sorted(c.path for c in planned.plan.candidates) == sorted(junk)
        done = m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True, dry_run=False)
        assert done.status == "succeeded"
        assert sorted((o.item, o.outcome) for o in done.outcomes) == sorted((p, "deleted") for p in junk)
        assert not any(IO.exists(p) for p in junk) and IO.exists(sibling)
        assert all(IO.exists(p) for p in referenced)
        assert mh.checksum(mh.rows(t.metadata_location), ["id", "part"]) == rows_before
        assert lake.sql("SELECT count(*) FROM lake.ns.t").fetchall() == [(30 - 5,)]


def test_orphan_removal_on_moto_reports_a_partial_batch_delete_per_file(
    s3_prefix: str, moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real batch delete on moto that succeeds in part: the store refuses one key (AccessDenied)
    and fails another (InternalError) inside its 200 answer, and one candidate vanishes before it
    is deleted. The run is PARTIAL, not done; each file has its own outcome, and the refused
    ones are still there. (moto enforces no per-key permissions, so the two refused keys are kept
    out of the request and answered as S3 answers them, the rest goes to moto.)"""
    import s3fs

    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    client: Any = moto_s3.client()
    refused = {"denied.parquet": "AccessDenied", "broken.parquet": "InternalError"}
    heads: dict[str, int] = {}
    original = s3fs.S3FileSystem._call_s3

    def headed(bucket: str, key: str) -> None:
        if key.endswith("vanished.parquet"):
            heads[key] = heads.get(key, 0) + 1
            if heads[key] == 2:  # planned and checked, then deleted by someone else before its batch
                client.delete_object(Bucket=bucket, Key=key)

    obstore_info = ObstoreReader.info

    def obstore_head(self: ObstoreReader, key: str) -> Any:  # HEADs of reads go through obstore
        bucket, _, name = key.partition("/")
        headed(bucket, name)
        return obstore_info(self, key)

    async def store(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        key = str(kwargs.get("Key", ""))
        if method == "head_object":
            headed(kwargs["Bucket"], key)
        if method != "delete_objects":
            return await original(self, method, *args, **kwargs)
        objects = kwargs["Delete"]["Objects"]
        kept = [o for o in objects if o["Key"].rsplit("/", 1)[1] not in refused]
        answer = await original(self, method, *args, **{**kwargs, "Delete": {**kwargs["Delete"], "Objects": kept}})
        errors = [
            {"Key": o["Key"], "Code": refused[o["Key"].rsplit("/", 1)[1]], "Message": "refused"}
            for o in objects
            if o not in kept
        ]
        return {**answer, "Errors": [*answer.get("Errors", []), *errors]}

    with connect(f"{s3_prefix}/wh") as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", [("id", "BIGINT")])
        t.append(pa.table({"id": pa.array(range(10), pa.int64())}))
        root = f"{s3_prefix}/wh/ns/t/data"
        junk = {name: f"{root}/{name}" for name in ("gone-1.parquet", "gone-2.parquet", "vanished.parquet", *refused)}
        for p in junk.values():
            IO.write_new(p, b"x" * 10)
        time.sleep(0.01)
        monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", store)
        monkeypatch.setattr(ObstoreReader, "info", obstore_head)
        done = Maintainer.for_lake(lake, "ns.t").remove_orphan_files(
            older_than=int(time.time() * 1000), allow_recent=True, dry_run=False
        )
        monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", original)
        monkeypatch.setattr(ObstoreReader, "info", obstore_info)
        outcomes = {o.item: o.outcome for o in done.outcomes}
        assert outcomes == {
            junk["gone-1.parquet"]: "deleted",
            junk["gone-2.parquet"]: "deleted",
            junk["vanished.parquet"]: "not_found",
            junk["denied.parquet"]: "permission_denied",
            junk["broken.parquet"]: "other",
        }
        assert done.status == "partial"
        assert [IO.exists(junk[n]) for n in ("gone-1.parquet", "denied.parquet", "broken.parquet")] == [
            False,
            True,
            True,
        ]
        assert lake.sql("SELECT count(*) FROM lake.ns.t").fetchall() == [(10,)]


def test_time_travel_and_metadata_functions(warehouse: str) -> None:
    """Runs on a local warehouse and on S3: every snapshot reads as the metadata files (json and
    fastavro, not iceduck) say it should, by id, by time and by tag; the metadata functions agree."""
    with connect(warehouse) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", [("id", "BIGINT"), ("part", "VARCHAR")], partition_by=["part"])
        t.append(pa.table({"id": pa.array(range(10), pa.int64()), "part": ["a", "b"] * 5}))
        time.sleep(0.01)  # distinct commit times, so `as_of` each one names one snapshot
        t.append(pa.table({"id": pa.array(range(10, 15), pa.int64()), "part": ["c"] * 5}))
        time.sleep(0.01)
        t.delete("id % 3 = 0")
        location = t.metadata_location
        md = mh.metadata(location)
        snaps = sorted(md["snapshots"], key=lambda s: s["sequence-number"])
        for snap in snaps:
            sid = snap["snapshot-id"]
            want = sorted(r["id"] for r in mh.rows(location, sid, ["id"]))
            by_id = lake.sql(
                f"SELECT id FROM iceberg_scan('ns.t', snapshot_id := {sid}) ORDER BY id"
            ).fetchall()
            assert [r[0] for r in by_id] == want
            as_of = snap["timestamp-ms"]
            by_time = lake.sql(
                f"SELECT id FROM iceberg_scan('ns.t', as_of := make_timestamptz({as_of * 1000})) ORDER BY id"
            ).fetchall()
            assert [r[0] for r in by_time] == want
        assert lake.sql(
            "SELECT snapshot_id FROM iceberg_snapshots('ns.t') ORDER BY sequence_number"
        ).fetchall() == [(s["snapshot-id"],) for s in snaps]
        live = [e for _, e in mh.live_entries(md) if e["data_file"]["content"] == 0]
        files = lake.sql(
            "SELECT file_path, record_count FROM iceberg_files('ns.t') WHERE content = 'DATA'"
        ).fetchall()
        assert sorted(files) == sorted(
            (e["data_file"]["file_path"], e["data_file"]["record_count"]) for e in live
        )
        manifests = {mf["manifest_path"] for mf in mh.avro(snaps[-1]["manifest-list"])}
        assert {r[0] for r in lake.sql("SELECT path FROM iceberg_manifests('ns.t')").fetchall()} == manifests
        assert all(p.startswith(warehouse.split("/wh")[0]) for p in manifests)
