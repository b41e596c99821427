"""`iceduck serve`'s view endpoints and the lakes reading its views, as a hostile authenticated
client probes them (redteam, session 9): a view's stored SQL never makes a reading lake write or read
files, and no view's files land in or around a table's folder.

Truth: files on disk (a marker file written or not, the folders of tables), the catalog's own rows,
plain DuckDB for what a view reads.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.support.rest_helpers import assert_error, call, serving

P = "/v1/iceduck"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "a", "required": False, "type": "int"}],
}


def _view(name: str, sql: str = "SELECT 1 AS a", **extra: Any) -> dict[str, Any]:
    version = {
        "version-id": 1,
        "timestamp-ms": 1000,
        "schema-id": 0,
        "summary": {"engine-name": "hostile"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "duckdb"}],
        "default-namespace": ["ns"],
    }
    return {"name": name, "schema": SCHEMA, "view-version": version, "properties": {}, **extra}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(tmp_path / "wh") as s:
        assert call(s.url, "POST", f"{P}/namespaces", {"namespace": ["ns"]})[0] == 200
        yield s


def test_a_views_sql_never_runs_statements_or_reads_files_in_a_reading_lake(
    server: RestServer, tmp_path: Path
) -> None:
    marker = tmp_path / "written-by-a-view.csv"
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t\n")
    hostile = {
        "copy": f"SELECT 1 AS a; COPY (SELECT 42) TO '{marker}'",
        "query": f"SELECT 1 AS a FROM query('COPY (SELECT 42) TO ''{marker}''')",
        "text": f"SELECT length(content)::INT AS a FROM read_text('{secret}')",
        "nested": f"SELECT (SELECT count(*)::INT FROM read_csv('{secret}')) AS a",
        "scan": f"SELECT count(*)::INT AS a FROM '{secret}'",
    }
    for name, sql in hostile.items():
        assert call(server.url, "POST", f"{P}/namespaces/ns/views", _view(name, sql))[0] == 200
    call(
        server.url,
        "POST",
        f"{P}/namespaces/ns/views",
        _view("fine", "SELECT count(*)::INT AS a FROM range(3)"),
    )
    with iceduck.connect(server.url) as lake:
        assert lake.sql("FROM lake.ns.fine").fetchall() == [(3,)]  # views attach; a pure one reads
        for name in hostile:
            with pytest.raises(Exception, match=f"ns.{name} cannot be read by DuckDB"):
                lake.sql(f"FROM lake.ns.{name}").fetchall()
        # and through SQL the lake refuses to store such a view in the first place
        for sql in (hostile["text"], hostile["nested"], hostile["query"]):
            with pytest.raises(Exception, match="not a table or view of the"):
                lake.sql(f"CREATE VIEW lake.ns.mine AS {sql}")
    assert not marker.exists()


def _views(server: RestServer) -> list[str]:
    return [i["name"] for i in call(server.url, "GET", f"{P}/namespaces/ns/views")[1]["identifiers"]]


def test_no_table_takes_a_views_folder(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    view = call(u, "POST", f"{P}/namespaces/ns/views", _view("v"))[1]
    assert call(u, "POST", f"{P}/views/rename", {
        "source": {"namespace": ["ns"], "name": "v"}, "destination": {"namespace": ["ns"], "name": "w"},
    })[0] == 204  # fmt: skip
    folder = tmp_path / "wh" / "ns" / "v"  # the view's location, kept by the rename
    # a table named as the view was (its default location is the view's), or placed in or around it
    for body in (
        {"name": "v", "schema": SCHEMA},
        {"name": "t", "schema": SCHEMA, "location": str(folder / "sub")},
        {"name": "t", "schema": SCHEMA, "location": f"file://{folder}/../v"},
    ):
        status, reply, _ = call(u, "POST", f"{P}/namespaces/ns/tables", body)
        assert_error(status, reply, 400, "BadRequestException", "view ns.w")
    table = call(u, "POST", f"{P}/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})[1]
    move = {"requirements": [], "updates": [{"action": "set-location", "location": str(folder)}]}
    status, reply, _ = call(u, "POST", f"{P}/namespaces/ns/tables/t", move)
    assert_error(status, reply, 400, "BadRequestException", "view ns.w")
    assert call(u, "GET", f"{P}/namespaces/ns/tables/t")[1]["metadata-location"] == table["metadata-location"]
    assert sorted(p.name for p in (folder / "metadata").iterdir()) == [Path(view["metadata-location"]).name]
    # a view may not take a table's folder either (the other way round, as before)
    status, reply, _ = call(
        u, "POST", f"{P}/namespaces/ns/views", _view("x", location=str(tmp_path / "wh/ns/t"))
    )
    assert_error(status, reply, 400, "BadRequestException", "table ns.t")


def test_register_view_checks_the_view_before_adding_it(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    table = call(u, "POST", f"{P}/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})[1]
    table_folder = tmp_path / "wh" / "ns" / "t"
    metadata = call(u, "POST", f"{P}/namespaces/ns/views", _view("v"))[1]["metadata"]
    # a client able to put files in the warehouse (a local one, or one with the bucket's keys)
    # writes view metadata files naming places of its choosing
    outside = {**copy.deepcopy(metadata), "location": str(tmp_path / "outside")}
    in_table_folder = table_folder / "metadata" / "99999-planted.metadata.json"
    in_table_folder.write_text(json.dumps(metadata))
    at_table = tmp_path / "wh" / "ns" / "planted" / "metadata" / "00000-x.metadata.json"
    at_table.parent.mkdir(parents=True)
    at_table.write_text(json.dumps({**metadata, "location": str(table_folder)}))
    elsewhere = tmp_path / "wh" / "ns2" / "metadata" / "00000-y.metadata.json"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text(json.dumps(outside))
    for name, path, words in (
        ("r1", in_table_folder, "table ns.t"),  # its commits would write *.metadata.json files there
        ("r2", at_table, "table ns.t"),
        ("r3", elsewhere, "not inside the warehouse"),
    ):
        status, reply, _ = call(
            u, "POST", f"{P}/namespaces/ns/register-view", {"name": name, "metadata-location": str(path)}
        )
        assert_error(status, reply, 400, "BadRequestException", *words.split(" not "))
    assert _views(server) == ["v"]  # none of them was added
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    assert call(u, "POST", f"{P}/namespaces/ns/views/r1", commit)[0] == 404
    assert sorted(p.name for p in (table_folder / "metadata").iterdir()) == sorted(
        [Path(table["metadata-location"]).name, in_table_folder.name]
    )


def test_view_version_numbers_beyond_javas_int_and_long_are_400(server: RestServer) -> None:
    u = server.url
    for key, value in (
        ("timestamp-ms", 2**64 - 1),
        ("timestamp-ms", 2**63),
        ("version-id", 2**31),
        ("schema-id", -(2**31) - 1),
    ):
        body = _view("big")
        body["view-version"][key] = value
        status, reply, _ = call(u, "POST", f"{P}/namespaces/ns/views", body)
        assert_error(status, reply, 400, "BadRequestException", key, "signed")
    created = call(u, "POST", f"{P}/namespaces/ns/views", _view("v"))[1]
    version = {**created["metadata"]["versions"][0], "version-id": 2, "timestamp-ms": 2**63}
    commit = {"requirements": [], "updates": [{"action": "add-view-version", "view-version": version}]}
    status, reply, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", commit)
    assert_error(status, reply, 400, "BadRequestException", "timestamp-ms")
    assert _views(server) == ["v"]
    assert (
        call(u, "GET", f"{P}/namespaces/ns/views/v")[1]["metadata-location"] == created["metadata-location"]
    )


def test_a_lakes_view_never_lands_in_a_tables_folder(tmp_path: Path) -> None:
    folder = tmp_path / "wh" / "ns" / "t"
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t AS SELECT 1 AS a")
        lake.sql("ALTER TABLE ns.t RENAME TO u")  # u keeps its folder <wh>/ns/t, a view ns.t's default
        with pytest.raises(Exception, match=r"view ns\.t: its location .* is the location of table ns\.u"):
            lake.sql("CREATE VIEW lake.ns.t AS SELECT a FROM lake.ns.u")
        for _ in range(3):  # (each replace wrote a newer-numbered view metadata file into u's folder)
            with pytest.raises(Exception, match=r"location of table ns\.u"):
                lake.sql("CREATE OR REPLACE VIEW lake.ns.t AS SELECT a + 1 AS a FROM lake.ns.u")
        # every metadata file in the folder is the table's, and the table reads by its folder
        files = [json.loads(p.read_text()) for p in (folder / "metadata").glob("*.metadata.json")]
        assert files and all("table-uuid" in f for f in files)
        assert lake.sql(f"SELECT a FROM iceberg_scan('{folder}')").fetchall() == [(1,)]


def test_a_metadata_file_turned_folder_is_a_4xx_not_a_5xx(server: RestServer) -> None:
    u = server.url
    view = call(u, "POST", f"{P}/namespaces/ns/views", _view("v"))[1]["metadata-location"]
    table = call(u, "POST", f"{P}/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})[1][
        "metadata-location"
    ]
    for path in (view, table):
        Path(path).unlink()
        Path(path).mkdir()  # someone with the warehouse's files at hand
    for route in ("views/v", "tables/t"):
        status, body, _ = call(u, "GET", f"{P}/namespaces/ns/{route}")
        assert 400 <= status < 500 and "is a folder, not a file" in body["error"]["message"], (route, body)
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/views/v", commit)
    assert 400 <= status < 500, body
