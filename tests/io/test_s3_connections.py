"""S3 settings belong to a connection: two lakes in one process reaching two S3 servers that both
have a bucket `lake` (so a path alone cannot tell them apart) read and write each their own
objects, queried alternately, and a `CREATE SECRET` run on one lake reaches no other connection.

The process-wide settings (`iceduck.io.s3_settings.REGISTRY`, here the session's moto server scoped to
`s3://lake`) stay below each connection's own: a lake without a secret of its own reaches the
process's server, never another lake's."""

from __future__ import annotations

import uuid
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError
from iceduck.io import s3_settings
from tests.support.s3_fixture import BUCKET, S3Server, moto_server


def _keys(server: S3Server, prefix: str) -> set[str]:
    listed = server.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return {o["Key"] for o in listed.get("Contents", [])}


def test_two_lakes_with_their_own_secrets_never_mix(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, con: duckdb.DuckDBPyConnection
) -> None:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    run = uuid.uuid4().hex
    with moto_server() as a_server, moto_server() as b_server:
        lakes = {}
        for name, server in (("a", a_server), ("b", b_server)):
            lake = iceduck.connect(f"s3://{BUCKET}/{run}/{name}")
            # scoped like the process's registration: at equal source and scope the lake's own wins
            lake.sql(server.secret_sql(f"s3_{name}").replace(")", f", SCOPE 's3://{BUCKET}')"))
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t (id BIGINT, who VARCHAR)")
            lakes[name] = lake
        try:
            # alternately, each writing and reading through its own connection
            for round_ in range(3):
                for name in ("a", "b"):
                    lake = lakes[name]
                    lake.sql(f"INSERT INTO ns.t VALUES ({round_}, '{name}')")
                    rows = lake.sql("SELECT DISTINCT who FROM lake.ns.t").fetchall()
                    assert rows == [(name,)]
                    count = lake.sql(
                        f"SELECT count(*) FROM iceberg_scan('{lake.table('ns.t').metadata_location}')"
                    ).fetchall()
                    assert count == [(round_ + 1,)]
            # each server holds its own lake's objects only (the same bucket name on both)
            a_keys, b_keys = _keys(a_server, f"{run}/a/"), _keys(b_server, f"{run}/b/")
            assert a_keys and b_keys
            assert not _keys(a_server, f"{run}/b/") and not _keys(b_server, f"{run}/a/")
            assert not _keys(moto_s3, f"{run}/")  # nor the process's server

            # the secrets reached no other connection: a third lake, and a plain connection with
            # iceduck registered, reach the process's server, where lake a's table is not
            metadata_a = lakes["a"].table("ns.t").metadata_location
            assert s3_settings.REGISTRY.settings_for(metadata_a).endpoint == moto_s3.endpoint
            with (
                iceduck.connect(tmp_path / "other") as other,
                pytest.raises((IcebergError, duckdb.Error), match=r"no Iceberg table found|not found"),
            ):
                other.sql(f"SELECT count(*) FROM iceberg_scan('{metadata_a}')").fetchall()
            with pytest.raises((IcebergError, duckdb.Error), match=r"no Iceberg table found|not found"):
                con.execute(f"SELECT count(*) FROM iceberg_scan('{metadata_a}')").fetchall()
        finally:
            for lake in lakes.values():
                lake.close()


def test_a_connection_registry_ranks_its_own_settings_above_the_processes_at_equal_scope() -> None:
    process = s3_settings.S3Registry()
    mine = s3_settings.S3Registry(parent=process)
    theirs = s3_settings.S3Registry(parent=process)
    shared = s3_settings.S3Settings(endpoint="http://shared")
    own = s3_settings.S3Settings(endpoint="http://own")
    process.register(shared, scope="s3://lake", source=s3_settings.Source.SECRET)
    mine.register(own, scope="s3://lake", source=s3_settings.Source.SECRET)
    assert mine.settings_for("s3://lake/t/x.parquet") == own
    assert theirs.settings_for("s3://lake/t/x.parquet") == shared
    # a narrower scope, or a higher-ranking source, of the process still wins
    narrow = s3_settings.S3Settings(endpoint="http://narrow")
    process.register(narrow, scope="s3://lake/t", source=s3_settings.Source.SECRET)
    assert mine.settings_for("s3://lake/t/x.parquet") == narrow
    vended = s3_settings.S3Settings(endpoint="http://vended")
    process.register(vended, scope="s3://lake", source=s3_settings.Source.VENDED)
    assert mine.settings_for("s3://lake/u/x.parquet") == vended
