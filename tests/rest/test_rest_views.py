"""Iceberg views through the REST catalog: `iceduck serve`'s view endpoints, iceduck's REST client and
`ATTACH ... TYPE iceberg`, and Java Iceberg (Spark 3.5.7 + Iceberg 1.10.2) on the same server.

Truth: the REST spec's shapes (LoadViewResult, the documented statuses and error types); plain DuckDB
for rows; Spark reading iceduck's view and iceduck reading Spark's. (The reference peer, DuckDB
1.5.5's iceberg extension, lists and reads no views through REST: only tables.)
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError
from iceduck.rest.client import RestCatalog
from iceduck.serve.server import RestServer
from iceduck.serve.views import VIEW_ENDPOINTS
from tests.interop.conftest import INSTALL, load_reference
from tests.support.rest_helpers import assert_error, call, serving

P = "/v1/iceduck"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "a", "required": False, "type": "int"}],
}


def _version(sql: str = "SELECT a FROM t", dialect: str = "duckdb") -> dict[str, Any]:
    return {
        "version-id": 1,
        "timestamp-ms": 1000,
        "schema-id": 0,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": ["ns"],
    }


def _create(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA, "view-version": _version(), "properties": {}, **extra}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(tmp_path / "wh") as s:
        yield s


def test_the_view_endpoints_follow_the_spec(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    config = call(u, "GET", "/v1/config")[1]
    assert set(VIEW_ENDPOINTS) <= set(config["endpoints"])
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views", _create("v"))
    assert status == 200 and set(body) == {"metadata-location", "metadata", "config"}
    location = body["metadata-location"]
    assert location.startswith(str(tmp_path / "wh" / "ns" / "v" / "metadata" / "00000-"))
    assert json.loads(Path(location).read_text()) == body["metadata"]
    assert body["metadata"]["versions"][0]["representations"][0]["sql"] == "SELECT a FROM t"
    assert call(u, "GET", f"{P}/namespaces/ns/views")[1] == {
        "identifiers": [{"namespace": ["ns"], "name": "v"}]
    }
    assert call(u, "HEAD", f"{P}/namespaces/ns/views/v")[0] == 204
    assert call(u, "GET", f"{P}/namespaces/ns/views/v")[1]["metadata-location"] == location
    # the same name again, as a view or a table: 409
    status, body409, _ = call(u, "POST", f"{P}/namespaces/ns/views", _create("v"))
    assert_error(status, body409, 409, "AlreadyExistsException", "ns.v")
    status, body409, _ = call(
        u, "POST", f"{P}/namespaces/ns/tables", {"name": "v", "schema": {"type": "struct", "fields": []}}
    )
    assert status == 409
    # replace: a new version, made current (what Java's REST client sends)
    uuid = body["metadata"]["view-uuid"]
    commit = {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [
            {"action": "add-schema", "schema": SCHEMA},
            {
                "action": "add-view-version",
                "view-version": {**_version("SELECT a + 1 AS a FROM t"), "schema-id": -1},
            },
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    status, replaced, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", commit)
    assert status == 200 and replaced["metadata"]["current-version-id"] == 2
    assert replaced["metadata-location"].rsplit("/", 1)[1].startswith("00001-")
    stale = copy.deepcopy(commit)
    stale["requirements"][0]["uuid"] = "00000000-0000-0000-0000-000000000000"
    status, conflict, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", stale)
    assert_error(status, conflict, 409, "CommitFailedException", "assert-view-uuid")
    # rename, drop, and what is missing afterwards
    rename = {"source": {"namespace": ["ns"], "name": "v"}, "destination": {"namespace": ["ns"], "name": "w"}}
    assert call(u, "POST", f"{P}/views/rename", rename)[0] == 204
    status, missing, _ = call(u, "GET", f"{P}/namespaces/ns/views/v")
    assert_error(status, missing, 404, "NoSuchViewException", "ns.v")
    assert call(u, "HEAD", f"{P}/namespaces/ns/views/v")[0] == 404
    status, not_empty, _ = call(u, "DELETE", f"{P}/namespaces/ns")
    assert_error(status, not_empty, 409, "NamespaceNotEmptyException", "w")
    assert call(u, "DELETE", f"{P}/namespaces/ns/views/w")[0] == 204
    status, missing, _ = call(u, "DELETE", f"{P}/namespaces/ns/views/w")
    assert_error(status, missing, 404, "NoSuchViewException")
    # register-view brings a metadata file back
    status, registered, _ = call(
        u, "POST", f"{P}/namespaces/ns/register-view", {"name": "back", "metadata-location": location}
    )
    assert status == 200 and registered["metadata"]["view-uuid"] == uuid


def test_the_view_endpoints_keep_the_servers_rules(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    for location in ("/tmp/elsewhere", str(tmp_path / "wh-sibling" / "v"), "relative/v"):
        status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views", _create("v", location=location))
        assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/ns/register-view", {"name": "r", "metadata-location": "/etc/passwd"}
    )
    assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    created = call(u, "POST", f"{P}/namespaces/ns/views", _create("v"))[1]
    move = {"requirements": [], "updates": [{"action": "set-location", "location": "/tmp/x"}]}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", move)
    assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    malformed: list[Any] = [
        [],
        {"name": "x"},
        _create("x", schema="nope"),
        {**_create("x"), "view-version": {**_version(), "representations": []}},
        {**_create("x"), "view-version": {**_version(), "default-namespace": "ns"}},
        _create("a/b"),
        _create(".."),
        _create("x", properties={"k": 1}),
    ]
    for bad in malformed:
        status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views", bad)
        assert status == 400 and body["error"]["type"] == "BadRequestException", (bad, body)
    for bad_commit in (
        {"updates": [{"action": "add-snapshot"}]},
        {"updates": "x"},
        {"requirements": [{"type": "?"}], "updates": []},
    ):
        status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", bad_commit)
        assert status == 400, (bad_commit, body)
    assert call(u, "GET", f"{P}/namespaces/ns/views/a%01b")[0] == 400
    assert call(u, "PUT", f"{P}/namespaces/ns/views/v")[0] == 405
    assert call(u, "GET", f"{P}/namespaces/nope/views")[0] == 404
    # nothing above changed the view
    assert (
        call(u, "GET", f"{P}/namespaces/ns/views/v")[1]["metadata-location"] == created["metadata-location"]
    )


def test_sql_views_through_rest_and_attach(server: RestServer, tmp_path: Path) -> None:
    truth = duckdb.connect()
    truth.sql("CREATE TABLE t AS SELECT i AS a, i % 3 AS g FROM range(20) r(i)")
    truth.sql("CREATE VIEW v AS SELECT g, count(*) AS n FROM t WHERE a > 4 GROUP BY g")
    with iceduck.connect(server.url) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t AS SELECT i AS a, i % 3 AS g FROM range(20) r(i)")
        lake.sql("CREATE VIEW lake.ns.v AS SELECT g, count(*) AS n FROM lake.ns.t WHERE a > 4 GROUP BY g")
        assert sorted(lake.sql("FROM lake.ns.v").fetchall()) == sorted(truth.sql("FROM v").fetchall())
    catalog = RestCatalog(server.url)
    assert catalog.holds_views() and catalog.list_views("ns") == ("v",)
    assert server.warehouse.catalog.list_views("ns") == ("v",)  # the served SQLite catalog's row
    with iceduck.connect(tmp_path / "local") as local:
        local.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        assert sorted(local.sql("FROM cat.ns.v").fetchall()) == sorted(truth.sql("FROM v").fetchall())
        local.sql("CREATE OR REPLACE VIEW cat.ns.v AS SELECT max(a) AS m FROM cat.ns.t")
        local.sql("ALTER VIEW cat.ns.v RENAME TO top")
        assert local.sql("SELECT m FROM cat.ns.top").fetchall() == [(19,)]
        assert local.list_namespaces() == ()  # nothing landed in the local catalog
    with iceduck.connect(server.url) as again:
        assert again.sql("SELECT m FROM lake.ns.top").fetchall() == [(19,)]
        again.sql("DROP VIEW lake.ns.top")
    assert catalog.list_views("ns") == ()


def test_a_namespace_holding_views_is_refused_naming_them_views(server: RestServer, tmp_path: Path) -> None:
    """Dropping a namespace that still holds a table, views and a child namespace names each as what
    it is, through the server's 409, the embedded SQLite catalog and DROP SCHEMA (both fronts)."""
    held = "table t, view v, view w, namespace ns.c"
    with iceduck.connect(server.url) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (a INTEGER)")
        lake.sql("CREATE VIEW lake.ns.v AS SELECT a FROM lake.ns.t")
        lake.sql("CREATE VIEW lake.ns.w AS SELECT 1 AS one")
        lake.create_namespace("ns.c")
        status, body, _ = call(server.url, "DELETE", f"{P}/namespaces/ns")
        assert_error(status, body, 409, "NamespaceNotEmptyException", f"namespace 'ns' is not empty: {held}")
        with pytest.raises(IcebergError, match=f"namespace 'ns' is not empty: {held} \\(DELETE"):
            lake.drop_namespace("ns")
        with pytest.raises(IcebergError, match="namespace 'ns' holds table t, view v, view w; drop them"):
            lake.sql("DROP SCHEMA ns")
        lake.sql("DROP TABLE ns.t")
        with pytest.raises(IcebergError, match="namespace 'ns' holds view v, view w; drop them"):
            lake.sql("DROP SCHEMA ns")
    with iceduck.connect(tmp_path / "wh") as embedded:  # the served warehouse, opened embedded
        with pytest.raises(IcebergError, match=r"is not empty: view v, view w$"):
            embedded.catalog.drop_namespace("ns")
        with pytest.raises(IcebergError, match="namespace 'ns' holds view v, view w; drop them"):
            embedded.sql("DROP SCHEMA ns")


@pytest.mark.xdist_group("java_reference")  # one JVM at a time, on the interop tests' worker
def test_spark_reads_iceducks_view_and_iceduck_reads_sparks(tmp_path: Path) -> None:
    reference = load_reference()
    if reference is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"Java Iceberg reference not installed: {INSTALL}; CI requires it", pytrace=False)
        pytest.skip(f"Java Iceberg reference not installed: {INSTALL}")
    with serving(tmp_path / "wh") as server:
        with iceduck.connect(server.url) as lake:
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t (a INTEGER, b VARCHAR)")
            lake.sql("INSERT INTO ns.t VALUES (1, 'x'), (2, 'y'), (3, 'z')")
            lake.sql("CREATE VIEW lake.ns.v AS SELECT a, upper(b) AS b FROM lake.ns.t WHERE a > 1")
        rows = reference.spark_sql(
            [
                "SELECT * FROM rest.ns.v ORDER BY a",  # checked below through the last statement's rows
                "USE rest.ns",
                "CREATE VIEW sv AS SELECT a * 2 AS a2 FROM t WHERE a < 3",
                "CREATE VIEW sparky AS SELECT a FROM t LATERAL VIEW explode(array(1, 2)) e AS x",
                "SELECT v.a, v.b, (SELECT count(*) FROM rest.ns.sv) AS n FROM rest.ns.v v ORDER BY v.a",
            ],
            rest_uri=server.url,
        )
        assert rows == [[2, "Y", 2], [3, "Z", 2]]
        with iceduck.connect(server.url) as again:
            assert again.catalog.list_views("ns") == ("sparky", "sv", "v")
            assert again.sql("SELECT * FROM lake.ns.sv ORDER BY a2").fetchall() == [(2,), (4,)]
            with pytest.raises(
                duckdb.InvalidInputException, match=r"Iceberg view ns\.sparky .* its SQL \(spark\)"
            ):
                again.sql("SELECT * FROM lake.ns.sparky").fetchall()
            with pytest.raises(IcebergError):
                again.sql("CREATE VIEW lake.ns.sv AS SELECT 1 AS x")  # exists: Spark's view stays
