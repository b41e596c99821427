"""The DuckDB iceberg extension's catalog-table functions: iceberg_load_table_response,
iceberg_table_properties, iceberg_schema_properties, on the SQLite catalog and a REST catalog.

Truth comes from elsewhere: the metadata file itself (read as JSON), PyIceberg's view of the same
SQLite catalog, and the REST server's own LoadTable answer fetched over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

import iceduck
from tests.support.rest_helpers import call, serving


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    lake = iceduck.connect(str(tmp_path / "wh"))
    lake.sql("CREATE SCHEMA rail")
    lake.sql(
        "CREATE TABLE rail.trips (id BIGINT, station VARCHAR) WITH ('owner' = 'ops', 'write.target-file-size-bytes' = '1048576')"
    )
    lake.sql("INSERT INTO rail.trips VALUES (1, 'Utrecht'), (2, 'Gouda')")
    lake.close()
    return tmp_path / "wh"


def _error(lake: iceduck.Lake, sql: str) -> str:
    with pytest.raises(duckdb.Error) as failure:
        lake.sql(sql).fetchall()
    return str(failure.value)


def test_load_table_response_on_the_sqlite_catalog(warehouse: Path) -> None:
    lake = iceduck.connect(str(warehouse))
    rel = lake.sql("SELECT * FROM iceberg_load_table_response('rail.trips')")
    assert [str(t) for t in rel.types] == [
        "VARCHAR",
        "VARIANT",
        "MAP(VARCHAR, VARCHAR)",
        "STRUCT(prefix VARCHAR, config MAP(VARCHAR, VARCHAR))[]",
        "VARCHAR",
    ]
    assert rel.columns == ["metadata_location", "metadata", "config", "storage_credentials", "request_url"]
    ((location, metadata, config, credentials, url),) = rel.fetchall()
    py = PyIcebergSqlCatalog("iceduck", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=str(warehouse))
    assert location == py.load_table("rail.trips").metadata_location
    written = json.loads(Path(location).read_text())
    assert metadata["table-uuid"] == written["table-uuid"]
    assert metadata["current-snapshot-id"] == written["current-snapshot-id"]
    assert metadata["properties"] == written["properties"]
    assert (config, credentials, url) == ({}, [], None)
    # the VARIANT is navigable in SQL, and a table can be named as an identifier
    assert lake.sql(
        "SELECT metadata['format-version']::INTEGER, metadata.properties.owner::VARCHAR "
        "FROM iceberg_load_table_response(lake.rail.trips)"
    ).fetchall() == [(written["format-version"], "ops")]
    lake.close()


def test_table_and_schema_properties(warehouse: Path) -> None:
    py = PyIcebergSqlCatalog("iceduck", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=str(warehouse))
    py.update_namespace_properties("rail", updates={"team": "timetables"})
    lake = iceduck.connect(str(warehouse))
    rows = lake.sql("SELECT key, value FROM iceberg_table_properties('rail.trips') ORDER BY key").fetchall()
    assert rows == sorted(py.load_table("rail.trips").properties.items())
    assert ("owner", "ops") in rows
    for name in ("'rail'", "'lake.rail'"):
        got = lake.sql(f"SELECT key, value FROM iceberg_schema_properties({name}) ORDER BY key").fetchall()
        assert got == sorted(py.load_namespace_properties("rail").items())
        assert ("team", "timetables") in got
    lake.close()


def test_paths_and_unknown_names_are_refused_in_one_line(warehouse: Path) -> None:
    lake = iceduck.connect(str(warehouse))
    folder = warehouse / "rail" / "trips"
    assert _error(lake, f"SELECT * FROM iceberg_table_properties('{folder}')") == (
        f"Invalid Input Error: iceberg_table_properties: Cannot call iceberg_table_properties() on a "
        f"file/directory ({folder}): it reads tables of a catalog; use iceberg_properties('{folder}') "
        "for a table by path"
    )
    assert _error(lake, f"SELECT * FROM iceberg_load_table_response('{folder}')").startswith(
        "Invalid Input Error: iceberg_load_table_response: Cannot call iceberg_load_table_response() on a "
        f"file/directory ({folder})"
    )
    assert _error(lake, "SELECT * FROM iceberg_schema_properties('nope')") == (
        "Invalid Input Error: iceberg_schema_properties: nope: no such schema (namespace) in catalog 'iceduck'"
    )
    lake.close()


def test_load_table_response_on_a_rest_catalog_is_the_servers_answer(warehouse: Path) -> None:
    with serving(warehouse) as server:
        lake = iceduck.connect(server.url)
        prefix = call(server.url, "GET", "/v1/config")[1]["overrides"]["prefix"]
        status, body, _ = call(server.url, "GET", f"/v1/{prefix}/namespaces/rail/tables/trips")
        assert status == 200
        ((location, metadata, config, credentials, url),) = lake.sql(
            "SELECT * FROM iceberg_load_table_response('rail.trips')"
        ).fetchall()
        assert location == body["metadata-location"]
        assert url == f"{server.url}/v1/{prefix}/namespaces/rail/tables/trips"
        assert config == body.get("config", {})
        assert credentials == [
            {"prefix": c["prefix"], "config": c["config"]} for c in body.get("storage-credentials", [])
        ]
        for key in ("table-uuid", "current-snapshot-id", "properties", "location", "format-version"):
            assert metadata[key] == body["metadata"][key], key
        assert lake.sql(
            "SELECT value FROM iceberg_table_properties('rail.trips') WHERE key = 'owner'"
        ).fetchall() == [("ops",)]
        lake.close()
