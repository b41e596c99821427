"""iceduck's REST client (`RestCatalog`, `iceduck.connect("http://...")`) against `iceduck serve`.

Truth: the same statements run by plain DuckDB on an ordinary table, the embedded catalog of the
served warehouse, and counts of what reached the server.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.catalog.sql import SqlCatalog
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    ForbiddenError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.rest.client import RestCatalog, updates_between
from iceduck.serve.routes import Tokens
from iceduck.serve.server import RestServer
from iceduck.spec import updates as upd
from iceduck.spec.table_metadata import read_table_metadata
from tests.support.rest_helpers import serving

STATEMENTS = [
    "INSERT INTO {t} SELECT i, DATE '2026-10-01' + (i % 4)::INT, 'n' || (i % 7) FROM range(2000) r(i)",
    "DELETE FROM {t} WHERE id % 10 = 3",
    "UPDATE {t} SET name = 'updated' WHERE id % 100 = 7",
    "INSERT INTO {t} VALUES (5000, DATE '2026-10-09', 'late')",
    "DELETE FROM {t} WHERE day = DATE '2026-10-02' AND id > 1500",
]
QUERY = "SELECT id, day, name FROM {t} ORDER BY id"


@pytest.fixture
def server(tmp_path: Path):
    with serving(tmp_path / "wh") as s:
        yield s


def test_sql_through_the_rest_catalog_equals_plain_duckdb(server: RestServer, tmp_path: Path) -> None:
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA demo")
    lake.sql("CREATE TABLE demo.t (id BIGINT, day DATE, name VARCHAR) PARTITIONED BY (day(day))")
    truth = duckdb.connect()
    truth.sql("CREATE TABLE t (id BIGINT, day DATE, name VARCHAR)")
    for statement in STATEMENTS:
        got = lake.sql(statement.format(t="demo.t"))
        expected = truth.sql(statement.format(t="t"))
        assert got is not None and expected is not None
        assert got.fetchall() == expected.fetchall()
    rows = lake.sql(QUERY.format(t="lake.demo.t"))
    assert rows is not None
    assert rows.fetchall() == truth.sql(QUERY.format(t="t")).fetchall()
    # the server wrote every metadata file: the embedded catalog of the warehouse reads the same table
    embedded = iceduck.connect(tmp_path / "wh")
    again = embedded.sql(QUERY.format(t="lake.demo.t"))
    assert again is not None and again.fetchall() == truth.sql(QUERY.format(t="t")).fetchall()
    snapshots = embedded.sql("SELECT operation FROM iceberg_snapshots('demo.t') ORDER BY sequence_number")
    assert snapshots is not None and len(snapshots.fetchall()) == len(STATEMENTS)
    # the files iceduck wrote as its plan were removed: only the server's metadata files remain
    folder = tmp_path / "wh" / "demo" / "t" / "metadata"
    versions = sorted(p.name.split("-")[0] for p in folder.glob("*.metadata.json"))
    assert versions == [f"{v:05d}" for v in range(len(STATEMENTS) + 1)]


def test_schema_evolution_and_properties_commit_through_rest(server: RestServer, tmp_path: Path) -> None:
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (a INT) WITH ('format-version' = '2')")
    lake.sql("INSERT INTO s.t VALUES (1), (2)")
    lake.sql("ALTER TABLE s.t ADD COLUMN b VARCHAR")
    lake.sql("INSERT INTO s.t VALUES (3, 'x')")
    lake.table("s.t").set_properties({"owner": "team"})
    rows = lake.sql("SELECT a, b FROM lake.s.t ORDER BY a")
    assert rows is not None and rows.fetchall() == [(1, None), (2, None), (3, "x")]
    location = SqlCatalog.open(str(tmp_path / "wh")).load_table("s", "t")
    md = read_table_metadata(Path(location).read_bytes())
    assert md.format_version == 2 and md.properties["owner"] == "team"
    assert [f.name for f in md.schema.fields] == ["a", "b"] and len(md.schemas) == 2


def test_updates_between_round_trips_through_apply_updates(server: RestServer) -> None:
    """The updates the client derives from two metadata versions rebuild the second from the first."""
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (a INT, d DATE) PARTITIONED BY (month(d))")
    catalog: RestCatalog = lake.catalog
    before = catalog.load("s", "t").metadata
    lake.sql("INSERT INTO s.t VALUES (1, DATE '2026-01-01')")
    lake.sql("ALTER TABLE s.t SET PARTITIONED BY (day(d))")
    lake.sql("ALTER TABLE s.t ADD COLUMN z BIGINT")
    after = catalog.load("s", "t").metadata
    rebuilt = upd.apply_updates(before, updates_between(before, after))
    for field in ("schemas", "current_schema_id", "partition_specs", "default_spec_id", "snapshots",
                  "current_snapshot_id", "refs", "last_column_id", "last_partition_id", "next_row_id"):  # fmt: skip
        assert getattr(rebuilt, field) == getattr(after, field), field


def test_errors_are_icedducks_with_the_servers_message(server: RestServer) -> None:
    cat = RestCatalog(server.url, authorization_type="none")
    with pytest.raises(NamespaceNotFoundError, match="nope"):
        cat.list_tables("nope")
    cat.create_namespace("ns")
    with pytest.raises(AlreadyExistsError, match="'ns'"):
        cat.create_namespace("ns")
    with pytest.raises(TableNotFoundError, match=r"ns\.missing"):
        cat.load_table("ns", "missing")
    assert not cat.table_exists("ns", "missing") and cat.namespace_exists("ns")
    assert not cat.namespace_exists("other")
    with pytest.raises(ValidationError, match="not empty"):
        lake = iceduck.connect(server.url, authorization_type="none")
        lake.sql("CREATE TABLE ns.t (a INT)")
        cat.drop_namespace("ns")
    with pytest.raises(ValidationError, match="unknown REST catalog option"):
        RestCatalog.from_options(server.url, AUTHORIZATION_TYPE="none", NO_SUCH_OPTION="1")
    assert RestCatalog.from_options(ENDPOINT=server.url, AUTHORIZATION_TYPE="none").prefix == "iceduck"


def test_409_is_a_conflict_and_the_committer_replans(server: RestServer) -> None:
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (a BIGINT)")
    cat: RestCatalog = lake.catalog
    base = cat.load("s", "t").metadata
    lake.sql("INSERT INTO s.t VALUES (1)")
    # a change planned on the old state: the server refuses it, naming the requirement
    stale = updates_between(base, cat.load("s", "t").metadata)
    with pytest.raises(CommitConflictError, match="assert-ref-snapshot-id"):
        cat.commit_table("s", "t", upd.requirements_for(base, stale), stale)
    # writers through two clients at once: every acknowledged append is in the table
    other = iceduck.connect(server.url, authorization_type="none")
    results: list[Any] = []

    def writer(which: iceduck.Lake, start: int) -> None:
        for i in range(6):
            results.append(which.sql(f"INSERT INTO s.t VALUES ({start + i})"))

    threads = [
        threading.Thread(target=writer, args=(lake, 100)),
        threading.Thread(target=writer, args=(other, 200)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = lake.sql("SELECT a FROM lake.s.t ORDER BY a")
    assert rows is not None
    assert [r[0] for r in rows.fetchall()] == [1, *range(100, 106), *range(200, 206)]


def test_unknown_outcome_is_reported_and_not_retried(
    server: RestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (a BIGINT)")
    real = server.warehouse.commit_table
    calls: list[int] = []

    def commit_then_fail(namespace: Any, name: Any, body: Any) -> Any:
        calls.append(1)
        real(namespace, name, body)  # the commit happens, then the answer is lost
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(server.warehouse, "commit_table", commit_then_fail)
    with pytest.raises(CommitStateUnknownError, match="may or may not"):
        lake.sql("INSERT INTO s.t VALUES (1)")
    assert calls == [1]  # never sent twice
    monkeypatch.setattr(server.warehouse, "commit_table", real)
    rows = lake.sql("SELECT count(*) FROM lake.s.t")
    assert rows is not None and rows.fetchall() == [(1,)]  # committed exactly once

    def slow(namespace: Any, name: Any, body: Any) -> Any:
        calls.append(2)
        time.sleep(4.0)
        return real(namespace, name, body)

    monkeypatch.setattr(server.warehouse, "commit_table", slow)
    # The timeout must exceed what the other requests take on a loaded 2-core machine (0.3 s did
    # not) while staying below the commit's delay.
    slow_lake = iceduck.connect(server.url, authorization_type="none", timeout=2.0)
    with pytest.raises(CommitStateUnknownError, match="no answer within"):
        slow_lake.sql("INSERT INTO s.t VALUES (2)")
    assert calls == [1, 2]


def test_oauth2_token_renewed_before_expiry_and_after_a_401(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(tmp_path / "wh", credentials=("me", "pw"), token_lifetime_s=3) as server:
        with pytest.raises(ForbiddenError, match="wrong secret"):
            RestCatalog(server.url, client_id="me", client_secret="bad")
        with pytest.raises(ForbiddenError, match="401"):
            RestCatalog(server.url, authorization_type="none")
        tokens = server.router.tokens
        issued: list[str] = []
        refused: list[str] = []
        real_issue, real_valid = Tokens.issue, Tokens.valid

        def issue(self: Tokens, *, keep: bool = True) -> str:
            issued.append(real_issue(self, keep=keep))
            return issued[-1]

        def valid(self: Tokens, token: str) -> bool:
            ok = real_valid(self, token)
            if not ok:
                refused.append(token)
            return ok

        monkeypatch.setattr(Tokens, "issue", issue)
        monkeypatch.setattr(Tokens, "valid", valid)
        cat = RestCatalog(server.url, client_id="me", client_secret="pw")
        assert len(issued) == 1
        cat.create_namespace("ns")
        time.sleep(2.8)  # past 90% of the lifetime: renewed before it is used
        assert cat.list_namespaces() == ("ns",)
        assert len(issued) == 2 and refused == []
        tokens.issued.clear()  # the server forgets every token: the next call gets a 401, renews once
        assert cat.namespace_exists("ns")
        assert len(issued) == 3 and refused == [issued[1]]
        # a static token works as it is
        assert RestCatalog(server.url, token=issued[2]).list_namespaces() == ("ns",)


def test_wire_conventions() -> None:
    from iceduck.rest import protocol as wire

    assert wire.encode_namespace("a.b c") == "a%1Fb%20c"
    assert wire.decode_namespace("a%1Fb%20c") == "a.b c" == wire.decode_namespace("a\x1fb c")
    with pytest.raises(ValidationError, match=r"contains '\.'"):
        wire.namespace_name(["a.b"])
    # the spec's types decide; an untyped 404 is about a table unless its message says namespace
    assert isinstance(wire.error_for(404, "NoSuchNamespaceException", "x"), NamespaceNotFoundError)
    assert isinstance(
        wire.error_for(404, "", "Not Found", where="GET /v1/namespaces/a/tables/t"), TableNotFoundError
    )
    assert isinstance(wire.error_for(404, "", "namespace a is missing"), NamespaceNotFoundError)
    assert isinstance(wire.error_for(409, "AlreadyExistsException", "x"), AlreadyExistsError)
    assert isinstance(wire.error_for(409, "", "x", commit=True), CommitConflictError)
    assert isinstance(wire.error_for(503, "", "x", commit=True), CommitStateUnknownError)
    assert isinstance(wire.error_for(403, "", "x"), ForbiddenError)


def test_the_shell_opens_a_rest_catalog(server: RestServer, capsys: pytest.CaptureFixture[str]) -> None:
    from iceduck.cli import main

    code = main(
        ["--warehouse", server.url, "--mode", "csv", "-c", "CREATE SCHEMA s",
         "-c", "CREATE TABLE s.t AS SELECT 42 AS x", "-c", "SELECT x FROM lake.s.t"]
    )  # fmt: skip
    assert code == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "42"
    assert server.warehouse.catalog.list_tables("s") == ("t",)


def test_an_insert_makes_three_requests_and_other_spellings_still_resolve(
    server: RestServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Counted at the server. A name spelled as stored is found with one HEAD (listing namespaces and
    # then tables took two GETs); the load and the commit follow. The peer makes two: load, commit.
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA Demo")
    lake.sql("CREATE TABLE Demo.Events (id BIGINT)")

    def requests(statement: str) -> list[str]:
        caplog.clear()
        with caplog.at_level("INFO", logger="iceduck.serve"):
            result = lake.sql(statement)
            assert result is not None and result.fetchall() == [(1,)]
        return [" ".join(r.getMessage().split()[1:3]) for r in caplog.records if r.name == "iceduck.serve"]

    table = "/v1/iceduck/namespaces/Demo/tables/Events"
    assert requests("INSERT INTO Demo.Events VALUES (1)") == [f"HEAD {table}", f"GET {table}", f"POST {table}"]
    # DuckDB's rule: another case finds the only table of that name, by listing
    spelled = requests("INSERT INTO demo.EVENTS VALUES (2)")
    assert spelled[0] == "HEAD /v1/iceduck/namespaces/demo/tables/EVENTS"
    assert "GET /v1/iceduck/namespaces/Demo/tables" in spelled and spelled[-1] == f"POST {table}"
    rows = lake.sql("SELECT id FROM lake.Demo.Events ORDER BY id")
    assert rows is not None and rows.fetchall() == [(1,), (2,)]
