"""Which byte source reads S3 (iceduck.io.s3_readers): obstore when the settings carry explicit keys
and say where to go, s3fs for what only botocore resolves. Truth: the settings each case is built
from; on moto, rows known from how they were made (0..n-1) and the modules a fresh process loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.io import s3, s3_clients, s3_reads, s3_settings
from iceduck.io.s3_readers import ObstoreReader, S3fsReader, obstore_config
from tests.support.cutting_proxy import CuttingProxy
from tests.support.s3_fixture import BUCKET, S3Server


def _keyed(**kw: Any) -> s3_settings.S3Settings:
    """Settings with an explicit key pair."""
    return s3_settings.S3Settings(access_key_id="AK", secret_access_key="SK", **kw)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # a local S3 server: path-style (an IP address or localhost, as botocore reads it)
        (
            _keyed(endpoint="http://127.0.0.1:9000", region="eu-west-1"),
            {
                "endpoint": "http://127.0.0.1:9000",
                "virtual_hosted_style_request": False,
                "region": "eu-west-1",
            },
        ),
        # no region at a custom endpoint: botocore signs with us-east-1 there
        (
            _keyed(endpoint="http://localhost:9000/"),
            {
                "endpoint": "http://localhost:9000",
                "virtual_hosted_style_request": False,
                "region": "us-east-1",
            },
        ),
        (
            _keyed(endpoint="https://minio.example.com", path_style=True),
            {
                "endpoint": "https://minio.example.com",
                "virtual_hosted_style_request": False,
                "region": "us-east-1",
            },
        ),
        # AWS itself: virtual-hosted unless asked for path style
        (
            _keyed(region="eu-west-1"),
            {"region": "eu-west-1", "virtual_hosted_style_request": True},
        ),
        (
            _keyed(region="eu-west-1", path_style=True),
            {"region": "eu-west-1", "virtual_hosted_style_request": False},
        ),
        # only botocore resolves these: s3fs reads
        (s3_settings.S3Settings(endpoint="http://127.0.0.1:9000"), None),  # no keys: the credential chain
        (s3_settings.S3Settings(access_key_id="AK", endpoint="http://127.0.0.1:9000"), None),  # half a key pair
        (_keyed(region="eu-west-1", profile="dev"), None),
        (_keyed(), None),  # AWS without a region: the bucket's region redirect
        (_keyed(endpoint="https://minio.example.com"), None),  # addressing "auto"
        (_keyed(endpoint="https://minio.example.com", path_style=False), None),
    ],
)
def test_which_settings_obstore_reads_with(
    settings: s3_settings.S3Settings, expected: dict[str, object] | None
) -> None:
    assert obstore_config(settings) == expected
    assert isinstance(s3_clients.reader(settings), ObstoreReader if expected is not None else S3fsReader)


def test_a_session_token_goes_with_its_keys(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore reads AWS_* variables of the environment; the keys of the settings win over them
    (a session token there, sent with other keys, would break every signature)."""
    monkeypatch.setenv("AWS_SESSION_TOKEN", "not-for-these-keys")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "someone-else")
    settings, _ = s3_settings.settings_from_secret(moto_s3.secret_options())
    path = f"s3://{BUCKET}/{uuid.uuid4().hex}/x.bin"
    s3.S3FileIO().write_new(path, b"0123456789")
    s3_reads.forget_seen()
    rd = s3_clients.reader(settings)
    assert isinstance(rd, ObstoreReader)
    assert rd.read_all(path.removeprefix("s3://")) == b"0123456789"
    assert rd.info(path.removeprefix("s3://"))["size"] == 10


_CHILD = """
import json, sys
from iceduck.io import s3_settings
settings, _ = s3_settings.settings_from_secret(json.loads(sys.argv[1]))
s3_settings.REGISTRY.register(settings, scope="s3://lake", source=s3_settings.Source.SECRET)
import duckdb, iceduck
con = duckdb.connect()
iceduck.register(con)
rows = con.execute("SELECT count(*), sum(id) FROM iceberg_scan(?)", [sys.argv[2]]).fetchall()
print(json.dumps({"rows": rows, "s3fs": "s3fs" in sys.modules, "aiobotocore": "aiobotocore" in sys.modules}))
"""


def test_a_scan_in_a_fresh_process_reads_without_s3fs(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning and DuckDB's reads of a table on S3 (metadata, manifests, footers, column chunks,
    deletion vectors) all go through obstore: s3fs and aiobotocore (~35 MB, a second of imports)
    are never loaded by a process that only reads."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    with iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t PARTITIONED BY (p) AS SELECT i AS id, i % 3 AS p FROM range(30000) r(i)")
        lake.sql("DELETE FROM s.t WHERE id % 10 = 7")
        metadata = lake.table("s.t").metadata_location
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(moto_s3.secret_options()), metadata],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    kept = [i for i in range(30000) if i % 10 != 7]
    assert got == {"rows": [[len(kept), sum(kept)]], "s3fs": False, "aiobotocore": False}


def test_a_head_whose_connection_fails_is_asked_again(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """obstore is told not to retry (iceduck asks a cut GET again itself): a HEAD whose answer
    breaks off (a pooled connection the server had closed) is asked again all the same, as
    botocore does, and the query is right."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    with iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t AS SELECT i FROM range(1000) r(i)")
        metadata = lake.table("s.t").metadata_location
    with CuttingProxy(moto_s3.port) as proxy:
        via = S3Server("cutting", "127.0.0.1", proxy.port, moto_s3.key_id, moto_s3.secret)
        settings, _ = s3_settings.settings_from_secret(via.secret_options())
        registry = s3_settings.S3Registry(parent=s3_settings.REGISTRY)
        registry.register(settings, scope=f"s3://{BUCKET}", source=s3_settings.Source.SECRET)
        assert isinstance(s3_clients.reader(settings), ObstoreReader)
        io = s3.S3FileIO(registry)
        proxy.cut("HEAD", ".metadata.json", -5)  # the answer breaks off inside its status line
        assert io.exists(metadata)
        heads = [r for r in proxy.requests if r[0] == "HEAD"]
        assert proxy.cuts == heads[:1] and len(heads) == 2
        assert not io.exists(metadata + ".missing")
