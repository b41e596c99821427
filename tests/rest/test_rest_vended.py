"""Vended credentials: `iceduck serve --vend-credentials --credentials ID:SECRET` on an S3 warehouse
hands the S3 settings it uses itself to authenticated clients asking for `vended-credentials`, and
iceduck's client reads and writes S3 tables with those alone (they feed `iceduck.io.s3` per table
location). Off by default, and off without authentication (tests/rest/test_rest_guard.py).

Truth: the reference peer (DuckDB 1.5.5 + iceberg + httpfs, no S3 secret of its own) reading and
writing the same tables through the same server; boto3 listing the bucket; plain DuckDB running the
same statements.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError
from iceduck.io import s3_settings
from iceduck.io.storage import s3_registry
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer
from tests.support.rest_helpers import call, serving
from tests.support.s3_fixture import BUCKET, S3Server, free_port, s3_warehouse

COLUMNS = "id BIGINT, d DATE, name VARCHAR"
STATEMENTS = [
    "INSERT INTO {t} SELECT i, DATE '2026-10-01' + (i % 3)::INT, 'n' || (i % 7) FROM range(1200) r(i)",
    "DELETE FROM {t} WHERE name = 'n3'",
    "UPDATE {t} SET name = 'u' WHERE id % 100 = 5",
]
DELEGATION = {"X-Iceberg-Access-Delegation": "vended-credentials"}
CREDENTIALS = ("me", "s3cret")  # vending needs authentication: only a caller who has these gets keys


def _bearer(url: str) -> dict[str, str]:
    form = {"grant_type": "client_credentials", "client_id": CREDENTIALS[0], "client_secret": CREDENTIALS[1]}
    status, body, _ = call(url, "POST", "/v1/oauth/tokens", form=form)
    assert status == 200, body
    return {"Authorization": f"Bearer {body['access_token']}"}


def _secret_sql(url: str) -> str:
    """The DuckDB secret (iceduck's SQL and the peer's) authenticating to the server at `url`."""
    return (
        f"CREATE OR REPLACE SECRET served (TYPE iceberg, CLIENT_ID '{CREDENTIALS[0]}', "
        f"CLIENT_SECRET '{CREDENTIALS[1]}', OAUTH2_SERVER_URI '{url}/v1/oauth/tokens')"
    )


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    assert relation is not None
    return sorted(relation.fetchall(), key=repr)


def test_serve_vends_its_s3_settings_only_when_asked(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = s3_warehouse(request, tmp_path)
    moto: S3Server = request.getfixturevalue("moto_s3")
    with serving(where, credentials=CREDENTIALS, vend_credentials=True) as server:  # type: ignore[arg-type]
        lake = iceduck.connect(
            server.url, client_id=CREDENTIALS[0], client_secret=CREDENTIALS[1], access_delegation_mode="none"
        )
        lake.sql("CREATE SCHEMA v")
        lake.sql("CREATE TABLE v.t (i INTEGER)")
        path = f"/v1/{server.warehouse.prefix}/namespaces/v/tables/t"
        auth = _bearer(server.url)
        status, plain, _ = call(server.url, "GET", path, headers=auth)
        assert status == 200 and plain["config"] == {} and "storage-credentials" not in plain
        status, vended, _ = call(server.url, "GET", path, headers={**DELEGATION, **auth})
        location = vended["metadata"]["location"]
        expected = {
            "s3.endpoint": moto.endpoint,
            "s3.access-key-id": moto.key_id,
            "s3.secret-access-key": moto.secret,
            "s3.region": moto.region,
            "s3.path-style-access": "true",
        }
        assert status == 200 and vended["config"] == expected
        assert vended["storage-credentials"] == [{"prefix": location, "config": expected}]
        status, creds, _ = call(server.url, "GET", path + "/credentials", headers={**DELEGATION, **auth})
        assert status == 200 and creds == {"storage-credentials": vended["storage-credentials"]}
        # without a token: 401, nothing vended
        assert call(server.url, "GET", path + "/credentials", headers=DELEGATION)[0] == 401
    with serving(where, credentials=CREDENTIALS) as server:  # type: ignore[arg-type]  # vending is off by default
        status, body, _ = call(server.url, "GET", path, headers={**DELEGATION, **_bearer(server.url)})
        assert status == 200 and body["config"] == {} and "storage-credentials" not in body
    with serving(tmp_path / "local") as server:  # local tables: nothing to vend
        lake = iceduck.connect(server.url, authorization_type="none")
        lake.sql("CREATE SCHEMA v")
        lake.sql("CREATE TABLE v.t (i INTEGER)")
        status, body, _ = call(server.url, "GET", f"/v1/{server.warehouse.prefix}/namespaces/v/tables/t",
                               headers=DELEGATION)  # fmt: skip
        assert status == 200 and body["config"] == {} and "storage-credentials" not in body


@pytest.fixture
def served_elsewhere(moto_s3: S3Server, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`iceduck serve` in a process of its own on an S3 warehouse, its keys from the AWS environment
    there; this process forgets its own S3 settings meanwhile. Yields (url, warehouse)."""
    where = f"s3://{BUCKET}/{uuid.uuid4().hex}/wh"
    port = free_port()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": moto_s3.key_id,
        "AWS_SECRET_ACCESS_KEY": moto_s3.secret,
        "AWS_REGION": moto_s3.region,
        "AWS_ENDPOINT_URL": moto_s3.endpoint,
        "ICEDUCK_CACHE_DIR": str(tmp_path / "server-cache"),
    }
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from iceduck.cli import main; raise SystemExit(main())", "serve", "--warehouse", where, "--port", str(port),
             "--credentials", ":".join(CREDENTIALS), "--vend-credentials"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    saved = s3_settings.REGISTRY.settings_for(f"s3://{BUCKET}")
    try:
        _wait_listening(proc, port, log)
        s3_settings.REGISTRY.forget()
        yield f"http://127.0.0.1:{port}", where
    finally:
        s3_settings.REGISTRY.forget()
        s3_settings.REGISTRY.register(saved, scope=f"s3://{BUCKET}", source=s3_settings.Source.SECRET)
        proc.terminate()
        proc.wait(20)


@pytest.mark.peer
def test_client_reads_and_writes_s3_tables_with_vended_credentials_alone(
    served_elsewhere: tuple[str, str],
    moto_s3: S3Server,
    rest_peer: Peer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, where = served_elsewhere
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata to ask
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    lake = iceduck.connect(tmp_path / "local")
    lake.sql(_secret_sql(url))
    lake.sql(f"ATTACH 'wh' AS cat (TYPE iceberg, ENDPOINT '{url}', SECRET served)")
    lake.sql("CREATE SCHEMA cat.demo")
    lake.sql(f"CREATE TABLE cat.demo.t ({COLUMNS}) PARTITIONED BY (d)")
    truth = duckdb.connect()
    truth.sql(f"CREATE TABLE t ({COLUMNS})")
    for statement in STATEMENTS:
        assert (
            _rows(lake.sql(statement.format(t="cat.demo.t"))) == truth.sql(statement.format(t="t")).fetchall()
        )
    expected = _rows(truth.sql("SELECT * FROM t"))
    assert _rows(lake.sql("SELECT * FROM cat.demo.t")) == expected
    location = f"{where}/demo/t"
    # vended, to this lake alone: nothing else is set, and the process's settings have none
    assert s3_registry(lake.io).settings_for(location).access_key_id == moto_s3.key_id
    assert s3_registry(lake.io).settings_for(f"s3://{BUCKET}/elsewhere").is_empty
    assert s3_settings.REGISTRY.settings_for(location).is_empty
    listing = moto_s3.client().list_objects_v2(Bucket=BUCKET, Prefix=location[len(f"s3://{BUCKET}/") :])  # type: ignore[attr-defined]
    keys = [o["Key"] for o in listing["Contents"]]
    assert any(k.endswith(".parquet") for k in keys) and any(k.endswith(".puffin") for k in keys)

    # the DuckDB extension reads and writes with what the server vends, as iceduck does
    rest_peer.execute(_secret_sql(url))
    rest_peer.execute(f"ATTACH 'wh' AS cat (TYPE iceberg, ENDPOINT '{url}', SECRET served)")
    try:
        assert sorted(rest_peer.query("SELECT * FROM cat.demo.t"), key=repr) == expected
        rest_peer.execute("INSERT INTO cat.demo.t VALUES (5000, DATE '2026-10-09', 'peer')")
    finally:
        rest_peer.execute("DETACH cat")
    assert _rows(lake.sql("SELECT * FROM cat.demo.t")) == sorted(
        [*expected, (5000, datetime.date(2026, 10, 9), "peer")], key=repr
    )

    # without vended credentials nothing in this process can reach the bucket: a clear error, no rows
    s3_settings.REGISTRY.forget()
    other = iceduck.connect(
        url, client_id=CREDENTIALS[0], client_secret=CREDENTIALS[1], access_delegation_mode="none"
    )
    with pytest.raises((IcebergError, duckdb.Error)):
        _rows(other.sql("SELECT * FROM lake.demo.t"))


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"iceduck serve did not listen on port {port}: {log.read_text()[-2000:]}")
