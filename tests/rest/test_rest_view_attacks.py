"""`iceduck serve`'s view endpoints and the lakes reading its views, as a hostile authenticated
client probes them (redteam, session 9): a view's stored SQL never makes a reading lake write or read
files, and no view's files land in or around a table's folder.

Truth: files on disk (a marker file written or not, the folders of tables), the catalog's own rows,
plain DuckDB for what a view reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.rest.server import RestServer
from tests.support.rest_helpers import call, serving

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
