"""REST catalogs signed with AWS SigV4: `AUTHORIZATION_TYPE 'sigv4'`, `ENDPOINT_TYPE glue | s3_tables`.

Truth: a loopback proxy (`tests/support/sigv4_proxy.py`) in front of `iceduck serve` that lets a
request through only when botocore, computing the signature again from the secret key the proxy
knows and the request as it arrived (body included), gets the signature the request carries, as
AWS does; plain DuckDB running the same statements on an ordinary table; the served warehouse read
back without the proxy; DuckDB's documented endpoints for Glue and S3 Tables.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import ForbiddenError, IcebergError, ValidationError
from iceduck.rest.client import RestCatalog
from iceduck.rest.sigv4 import AwsKeys, SigV4Signer, endpoint_for, service_and_region
from iceduck.serve.server import RestServer
from tests.support.sigv4_proxy import SigV4Proxy

KEY_ID = "AKIDEXAMPLE0000TEST1"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
GLUE = "/aws.glue.us-east-1"  # DuckDB's way to name a service and region in a local endpoint


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing of this machine's AWS setup (keys, profiles, region) reaches the signer."""
    for name in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with RestServer(str(tmp_path / "served")) as s:
        yield s


@pytest.fixture
def proxy(server: RestServer) -> Iterator[SigV4Proxy]:
    with SigV4Proxy(
        server.url, {KEY_ID: SECRET_KEY}, service="glue", region="us-east-1", strip_prefix=GLUE
    ) as p:
        yield p


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[iceduck.Lake]:
    with iceduck.connect(tmp_path / "local") as lk:
        yield lk


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    assert relation is not None
    return sorted(relation.fetchall(), key=repr)


STATEMENTS = [
    "INSERT INTO {t} SELECT i, 'st' || (i % 5), (i % 7)::INTEGER FROM range(2000) r(i)",
    "DELETE FROM {t} WHERE delay = 4",
    "UPDATE {t} SET delay = delay + 100 WHERE id % 50 = 1",
    "INSERT INTO {t} VALUES (9000, 'late', 1)",
]


def test_endpoints_of_glue_and_s3_tables_are_duckdbs() -> None:
    # DuckDB's extension: glue.<region>.amazonaws.com/iceberg and s3tables.<region>.amazonaws.com/iceberg
    assert endpoint_for("glue", "123456789012", "eu-west-1") == (
        "https://glue.eu-west-1.amazonaws.com/iceberg",
        "glue",
    )
    for warehouse in (":", "123456789012:s3tablescatalog/bucket", "cat/child", "123456789012:cat"):
        assert (
            endpoint_for("GLUE", warehouse, "us-east-1")[0] == "https://glue.us-east-1.amazonaws.com/iceberg"
        )
    arn = "arn:aws:s3tables:us-east-2:111122223333:bucket/iceberg-testing"
    assert endpoint_for("s3_tables", arn, None) == (
        "https://s3tables.us-east-2.amazonaws.com/iceberg",
        "s3tables",
    )
    with pytest.raises(ValidationError, match="table bucket's ARN"):
        endpoint_for("s3_tables", "my-bucket", "us-east-1")
    with pytest.raises(ValidationError, match="not a Glue catalog"):
        endpoint_for("glue", "a:b:c", "us-east-1")
    with pytest.raises(ValidationError, match="needs a region"):
        endpoint_for("glue", ":", None)
    with pytest.raises(ValidationError, match="glue, s3_tables"):
        endpoint_for("lakekeeper", ":", "us-east-1")
    # the service and region an endpoint names, as the extension reads them
    assert service_and_region("https://glue.us-east-1.amazonaws.com/iceberg") == ("glue", "us-east-1")
    assert service_and_region("s3tables.ap-southeast-2.amazonaws.com/iceberg") == (
        "s3tables",
        "ap-southeast-2",
    )
    assert service_and_region("http://127.0.0.1:8282/aws.glue.us-east-1") == ("glue", "us-east-1")
    assert service_and_region("https://abc.execute-api.us-gov-west-1.amazonaws.com/x") == (
        "execute-api",
        "us-gov-west-1",
    )
    assert service_and_region("http://localhost:8181") == (None, None)


def test_signed_catalog_attaches_reads_and_writes(
    lake: iceduck.Lake, proxy: SigV4Proxy, tmp_path: Path
) -> None:
    lake.sql(f"CREATE SECRET aws (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET_KEY}', REGION 'us-east-1')")
    lake.sql(
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{proxy.url}{GLUE}', AUTHORIZATION_TYPE 'sigv4', SECRET aws)"
    )
    lake.sql("CREATE SCHEMA cat.demo")
    lake.sql("CREATE TABLE cat.demo.services (id BIGINT, station VARCHAR, delay INTEGER)")
    truth = duckdb.connect()
    truth.sql("CREATE TABLE t (id BIGINT, station VARCHAR, delay INTEGER)")
    for statement in STATEMENTS:
        assert (
            _rows(lake.sql(statement.format(t="cat.demo.services")))
            == truth.sql(statement.format(t="t")).fetchall()
        )
    expected = _rows(truth.sql("SELECT * FROM t"))
    assert _rows(lake.sql("SELECT * FROM cat.demo.services")) == expected
    assert proxy.refused == []
    assert any(a.startswith("POST ") for a in proxy.accepted)  # commits went through, bodies signed
    assert proxy.payload_hashes >= len(STATEMENTS)
    # the served warehouse holds the table (read without the proxy)
    with iceduck.connect(tmp_path / "served") as served:
        assert _rows(served.sql("SELECT * FROM lake.demo.services")) == expected


def test_unsigned_and_wrongly_signed_requests_are_refused(lake: iceduck.Lake, proxy: SigV4Proxy) -> None:
    endpoint = f"{proxy.url}{GLUE}"
    with pytest.raises(ForbiddenError, match=r"^Missing Authentication Token \(GET .*/v1/config.*: 403\)$"):
        lake.sql(f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'none')")
    lake.sql(f"CREATE SECRET bad (TYPE s3, KEY_ID '{KEY_ID}', SECRET 'not-the-secret', REGION 'us-east-1')")
    with pytest.raises(ForbiddenError, match=r"signature we calculated does not match") as e:
        lake.sql(
            f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'sigv4', SECRET bad)"
        )
    assert "\n" not in str(e.value)
    lake.sql(f"CREATE SECRET other (TYPE s3, KEY_ID 'AKIDUNKNOWN', SECRET '{SECRET_KEY}')")
    with pytest.raises(ForbiddenError, match="security token included in the request is invalid"):
        lake.sql(
            f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'sigv4', SECRET other)"
        )
    # right keys, wrong service in the endpoint: the scope is refused
    lake.sql(f"CREATE SECRET good (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET_KEY}')")
    with pytest.raises(ForbiddenError, match="Credential should be scoped to"):
        lake.sql(
            f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{proxy.url}/aws.s3tables.us-east-1', "
            "AUTHORIZATION_TYPE 'sigv4', SECRET good)"
        )
    with pytest.raises(IcebergError, match="no secret of TYPE s3 named nope"):
        lake.sql(
            f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'sigv4', SECRET nope)"
        )
    with pytest.raises(IcebergError, match="cannot be combined with AUTHORIZATION_TYPE"):
        lake.sql(
            "ATTACH ':' AS cat (TYPE iceberg, ENDPOINT_TYPE glue, AUTHORIZATION_TYPE 'sigv4', SECRET good)"
        )
    assert "cat" not in {r[0] for r in _rows(lake.sql("SELECT database_name FROM duckdb_databases()"))}
    assert proxy.accepted == []
    assert len(proxy.refused) == 4


def test_a_body_changed_after_signing_is_refused(proxy: SigV4Proxy) -> None:
    """The payload hash is signed: the same signed headers with another body fail."""
    signer = SigV4Signer(f"{proxy.url}{GLUE}", keys=AwsKeys(KEY_ID, SECRET_KEY))
    url = f"{proxy.url}{GLUE}/v1/namespaces"
    body = b'{"namespace": ["signed"]}'
    headers = signer.sign("POST", url, {"Content-Type": "application/json"}, body)
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert headers["Authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert "/us-east-1/glue/aws4_request" in headers["Authorization"]
    tampered = urllib.request.Request(url, data=b'{"namespace": ["forged"]}', method="POST", headers=headers)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(tampered, timeout=30)
    assert e.value.code == 403
    assert proxy.refused and "x-amz-content-sha256" in proxy.refused[-1]
    refused = len(proxy.refused)
    try:  # signed as sent: through to the server (which may well say 404 to an unprefixed path)
        urllib.request.urlopen(
            urllib.request.Request(url, data=body, method="POST", headers=headers), timeout=30
        )
    except urllib.error.HTTPError as passed:
        assert passed.code != 403
    assert len(proxy.refused) == refused and proxy.accepted == ["POST /aws.glue.us-east-1/v1/namespaces"]


def test_endpoint_type_glue_signs_for_glue_with_the_secrets_region(
    lake: iceduck.Lake, proxy: SigV4Proxy, server: RestServer, tmp_path: Path
) -> None:
    """`ENDPOINT_TYPE glue`: warehouse an account or catalog path, region from the S3 secret, signing
    name `glue`; an ENDPOINT given too replaces AWS's (here the proxy, which names no region)."""
    lake.sql(f"CREATE SECRET (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET_KEY}', REGION 'us-east-1')")
    with pytest.raises(IcebergError, match="not a Glue catalog"):
        lake.sql(f"ATTACH 'a:b:c' AS g (TYPE iceberg, ENDPOINT_TYPE glue, ENDPOINT '{proxy.url}')")
    lake.sql(f"ATTACH '123456789012' AS g (TYPE iceberg, ENDPOINT_TYPE glue, ENDPOINT '{proxy.url}')")
    # a Glue database has a location: tables go under it, and nothing is staged to ask where
    RestCatalog(server.url, authorization_type="none").create_namespace(
        "ns", {"location": f"{tmp_path}/served/glue-db"}
    )
    lake.sql("CREATE TABLE g.ns.t AS SELECT range AS i FROM range(5)")
    lake.sql("CREATE TABLE g.ns.empty (i INTEGER, s VARCHAR) PARTITIONED BY (bucket(4, i))")
    lake.sql("INSERT INTO g.ns.empty VALUES (1, 'a'), (2, 'b')")
    assert _rows(lake.sql("SELECT sum(i) FROM g.ns.t")) == [(10,)]
    assert _rows(lake.sql("SELECT * FROM g.ns.empty")) == [(1, "a"), (2, "b")]
    assert proxy.refused == []
    assert any("warehouse=123456789012" in a for a in proxy.accepted)
    # as DuckDB does for AWS's catalogs: plain creates (no stage-create), then the first snapshot
    creates = [
        json.loads(b)
        for a, b in zip(proxy.accepted, proxy.bodies, strict=True)
        if a.startswith("POST ") and a.endswith("/tables")
    ]
    assert [(c["name"], c["stage-create"]) for c in creates] == [("t", False), ("empty", False)]
    assert [c["location"] for c in creates] == [
        f"{tmp_path}/served/glue-db/t",
        f"{tmp_path}/served/glue-db/empty",
    ]
    assert creates[1]["partition-spec"]["fields"][0]["transform"] == "bucket[4]"


def test_support_stage_create_false_on_any_catalog(lake: iceduck.Lake, server: RestServer) -> None:
    lake.sql(
        f"ATTACH 'w' AS c (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none', SUPPORT_STAGE_CREATE false)"
    )
    lake.sql("CREATE SCHEMA c.s")
    lake.sql("CREATE TABLE c.s.t AS SELECT range AS i, range * 2 AS j FROM range(100)")
    lake.sql("UPDATE c.s.t SET j = -1 WHERE i < 10")
    assert _rows(lake.sql("SELECT count(*), sum(j) FROM c.s.t")) == [
        (100, sum(2 * i for i in range(10, 100)) - 10)
    ]
    assert _rows(lake.sql("SELECT count(*) FROM iceberg_snapshots(c.s.t)")) == [(2,)]
    with pytest.raises(IcebergError, match="SUPPORT_STAGE_CREATE must be true or false"):
        lake.sql(
            f"ATTACH 'w' AS d (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none', SUPPORT_STAGE_CREATE 'maybe')"
        )


def test_connect_signs_with_the_aws_environment_or_a_profile(
    proxy: SigV4Proxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ForbiddenError, match="found no AWS credentials"):
        iceduck.connect(f"{proxy.url}{GLUE}", authorization_type="sigv4")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    with iceduck.connect(f"{proxy.url}{GLUE}", authorization_type="sigv4") as lake:
        lake.sql("CREATE SCHEMA lake.env")
        lake.sql("CREATE TABLE lake.env.t AS SELECT 42 AS answer")
        assert _rows(lake.sql("SELECT * FROM lake.env.t")) == [(42,)]
    # a proxy naming no region: SIGNING_NAME and the region of the AWS environment
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with iceduck.connect(proxy.url, authorization_type="sigv4", signing_name="glue") as lake:
        assert _rows(lake.sql("SELECT * FROM lake.env.t")) == [(42,)]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_REGION")
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(
        f"[lakehouse]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    with iceduck.connect(f"{proxy.url}{GLUE}", authorization_type="sigv4", aws_profile="lakehouse") as lake:
        assert _rows(lake.sql("SELECT * FROM lake.env.t")) == [(42,)]
    with pytest.raises(ValidationError, match="needs a signing region"):
        iceduck.connect(proxy.url, authorization_type="sigv4", aws_profile="lakehouse")
    assert len(proxy.refused) == 0


def test_the_shell_says_a_refused_signature_in_one_line(
    proxy: SigV4Proxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iceduck.cli import main

    endpoint = f"{proxy.url}{GLUE}"
    ok = [
        f"CREATE SECRET aws (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET_KEY}')",
        f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'sigv4', SECRET aws)",
        "CREATE SCHEMA cat.s",
        "CREATE TABLE cat.s.t AS SELECT 7 AS seven",
        "SELECT seven FROM cat.s.t",
    ]
    args = ["--warehouse", str(tmp_path / "local"), "--create", "--mode", "csv"]
    assert main([*args, *(x for s in ok for x in ("-c", s))]) == 0
    assert "seven\n7\n" in capsys.readouterr().out
    bad = [
        f"CREATE SECRET aws (TYPE s3, KEY_ID '{KEY_ID}', SECRET 'wrong')",
        f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'sigv4', SECRET aws)",
    ]
    assert main([*args, *(x for s in bad for x in ("-c", s))]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "signature we calculated does not match" in err and "403" in err


def test_pyiceberg_signing_on_its_own_reads_what_iceduck_wrote_through_the_proxy(
    lake: iceduck.Lake, proxy: SigV4Proxy
) -> None:
    """An independent signer (PyIceberg's `rest.sigv4-enabled`, botocore under `requests`) passes
    the same proxy, and reads the table iceduck created and wrote through it; its wrong key fails."""
    from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog

    lake.sql(f"CREATE SECRET aws (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET_KEY}')")
    lake.sql(
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{proxy.url}{GLUE}', AUTHORIZATION_TYPE 'sigv4')"
    )
    lake.sql("CREATE SCHEMA cat.py")
    lake.sql("CREATE TABLE cat.py.t AS SELECT range AS id, range % 3 AS k FROM range(300)")
    lake.sql("DELETE FROM cat.py.t WHERE k = 0")
    properties = {
        "uri": f"{proxy.url}{GLUE}",
        "warehouse": "warehouse",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "glue",
        "rest.signing-region": "us-east-1",
        "client.access-key-id": KEY_ID,
        "client.secret-access-key": SECRET_KEY,
    }
    catalog = PyIcebergRestCatalog("signed", **properties)
    rows = catalog.load_table("py.t").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["k"]) for r in rows) == [(i, i % 3) for i in range(300) if i % 3]
    accepted = len(proxy.accepted)
    assert proxy.refused == [] and accepted > 0
    with pytest.raises(Exception, match="signature we calculated does not match"):
        PyIcebergRestCatalog("bad", **{**properties, "client.secret-access-key": "wrong"})
    assert len(proxy.refused) == 1
