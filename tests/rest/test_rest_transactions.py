"""`BEGIN ... COMMIT` over REST catalogs: the client's `POST .../transactions/commit` and
`iceduck serve` answering it (one commit of every table, or none), through `iceduck.connect(url)`
and through `ATTACH ... (TYPE iceberg)`.

Truth: plain DuckDB running the same statements on ordinary tables; the reference peer (DuckDB
1.5.5 + iceberg) reading the result through the server, and committing its own transaction there;
the served warehouse's own
SQLite catalog (each table's metadata log, the files on disk); the server's answers to raw
requests (a change outside a table's location is refused and no table moves).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.catalog.sql import SqlCatalog
from iceduck.errors import CommitConflictError, IcebergError
from iceduck.serve.server import RestServer
from iceduck.spec.table_metadata import read_table_metadata
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer, sql_string
from tests.support.rest_helpers import assert_error, call, serving

P = "/v1/iceduck"
SETUP = [
    "CREATE TABLE {a} (id INTEGER, v VARCHAR)",
    "CREATE TABLE {b} (id INTEGER, n INTEGER)",
    "INSERT INTO {b} VALUES (1, 10), (2, 20), (3, 30)",
]
BODY = [
    "INSERT INTO {a} VALUES (1, 'one'), (2, 'two')",
    "UPDATE {b} SET n = n * 2 WHERE id > 1",
    "DELETE FROM {b} WHERE id = 3",
    "INSERT INTO {b} VALUES (4, 40)",
]


@pytest.fixture
def served(tmp_path: Path) -> Path:
    return tmp_path / "served"


@pytest.fixture
def server(served: Path) -> Iterator[RestServer]:
    with serving(served) as s:
        yield s


def rows(rel: Any) -> list[tuple[Any, ...]]:
    return [] if rel is None else rel.fetchall()


def plain_after(end: str) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA s")
    for statement in [*SETUP, "BEGIN", *BODY, end]:
        con.execute(statement.format(a="s.a", b="s.b"))
    return {t: con.execute(f"SELECT * FROM s.{t} ORDER BY ALL").fetchall() for t in "ab"}


def served_state(served: Path) -> dict[str, tuple[str, int, list[tuple[Any, ...]]]]:
    """Each table as the served warehouse's catalog has it: metadata file, metadata-log length, rows."""
    catalog = SqlCatalog.open(str(served))
    out = {}
    with iceduck.connect(served) as lake:
        for t in "ab":
            location = catalog.load_table("s", t)
            md = read_table_metadata(Path(location).read_bytes())
            out[t] = (
                location,
                len(md.metadata_log),
                rows(lake.sql(f"SELECT * FROM lake.s.{t} ORDER BY ALL")),
            )
    return out


def table_files(served: Path) -> set[Path]:
    return {p for p in (served / "s").rglob("*") if p.is_file()}


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_a_transaction_through_a_rest_catalog_commits_all_tables_in_one_request(
    server: RestServer, served: Path, end: str
) -> None:
    with iceduck.connect(server.url) as lake:
        lake.sql("CREATE SCHEMA s")
        for statement in SETUP:
            lake.sql(statement.format(a="s.a", b="s.b"))
        before, before_files = served_state(served), table_files(served)
        lake.sql("BEGIN")
        for statement in BODY:
            lake.sql(statement.format(a="s.a", b="s.b"))
        # the transaction reads its own writes; the server has none of them yet
        assert rows(lake.sql("SELECT * FROM lake.s.b ORDER BY ALL")) == plain_after("COMMIT")["b"]
        assert served_state(served) == before
        lake.sql(end)
        after = served_state(served)
        plain = plain_after(end)
        assert {t: after[t][2] for t in "ab"} == plain
        assert {t: rows(lake.sql(f"SELECT * FROM lake.s.{t} ORDER BY ALL")) for t in "ab"} == plain
    if end == "COMMIT":
        # one commit per table: each metadata log grew by one entry, though b took three statements
        assert {t: after[t][1] for t in "ab"} == {t: before[t][1] + 1 for t in "ab"}
        snapshots = read_table_metadata(Path(after["b"][0]).read_bytes()).snapshots
        assert len(snapshots) == 1 + 3
    else:
        assert after == before
        assert table_files(served) == before_files


def test_a_conflict_through_attach_fails_every_table(
    tmp_path: Path, server: RestServer, served: Path
) -> None:
    with iceduck.connect(tmp_path / "local") as lake, iceduck.connect(served) as other:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.s")
        for statement in SETUP:
            lake.sql(statement.format(a="cat.s.a", b="cat.s.b"))
        lake.sql("BEGIN")
        for statement in BODY:
            lake.sql(statement.format(a="cat.s.a", b="cat.s.b"))
        assert rows(lake.sql("SELECT * FROM cat.s.a ORDER BY ALL")) == [(1, "one"), (2, "two")]
        other.sql("INSERT INTO s.b VALUES (9, 90)")  # a writer on the server's side, meanwhile
        before, before_files = served_state(served), table_files(served)
        with pytest.raises(CommitConflictError, match=r"nothing was committed.*s\.b.*409"):
            lake.sql("COMMIT")
        assert served_state(served) == before
        assert table_files(served) < before_files  # the transaction's files are gone
        assert rows(lake.sql("SELECT * FROM cat.s.b ORDER BY ALL")) == [(1, 10), (2, 20), (3, 30), (9, 90)]
        # again, with nobody in between: committed, both tables
        lake.sql("BEGIN; INSERT INTO cat.s.a VALUES (5, 'five'); DELETE FROM cat.s.b WHERE id = 9; COMMIT")
        assert rows(other.sql("SELECT * FROM lake.s.a")) == [(5, "five")]
        assert rows(other.sql("SELECT * FROM lake.s.b ORDER BY ALL")) == [(1, 10), (2, 20), (3, 30)]
        # one transaction writes one catalog, as DuckDB writes one attached database
        lake.sql("CREATE SCHEMA mine; CREATE TABLE mine.t (x INTEGER)")
        lake.sql("BEGIN; INSERT INTO cat.s.a VALUES (6, 'six')")
        with pytest.raises(IcebergError, match="one transaction commits to one catalog"):
            lake.sql("INSERT INTO mine.t VALUES (1)")
        lake.sql("ROLLBACK")
        assert rows(other.sql("SELECT count(*) FROM lake.s.a")) == [(1,)]


def test_serve_refuses_a_transaction_with_a_change_outside_a_tables_location(
    server: RestServer, served: Path
) -> None:
    u = server.url
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "x", "type": "int", "required": False}],
    }
    assert call(u, "POST", f"{P}/namespaces", {"namespace": ["s"]})[0] == 200
    for name in "ab":
        assert call(u, "POST", f"{P}/namespaces/s/tables", {"name": name, "schema": schema})[0] == 200
    catalog = SqlCatalog.open(str(served))
    before = {t: catalog.load_table("s", t) for t in "ab"}
    before_files = table_files(served)
    elsewhere = f"{served}/s/a/metadata/b-snap.avro"  # inside the warehouse, in another table's folder

    def change(name: str, manifest_list: str) -> dict[str, Any]:
        snapshot = {
            "snapshot-id": 7, "sequence-number": 1, "timestamp-ms": 1_700_000_000_000,
            "manifest-list": manifest_list, "summary": {"operation": "append"}, "schema-id": 0,
        }  # fmt: skip
        return {
            "identifier": {"namespace": ["s"], "name": name},
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
            ],
        }

    good = change("a", f"{served}/s/a/metadata/snap.avro")
    status, body, _ = call(
        u, "POST", f"{P}/transactions/commit", {"table-changes": [good, change("b", elsewhere)]}
    )
    assert_error(status, body, 400, "BadRequestException", "manifest-list", "s.b")
    assert {t: catalog.load_table("s", t) for t in "ab"} == before  # a did not move either
    assert table_files(served) == before_files  # a's new metadata file was deleted
    # malformed: 4xx, nothing moves
    bad: Any
    for bad in ({"table-changes": []}, {"table-changes": [good, good]}, {"table-changes": "x"}, []):
        assert 400 <= call(u, "POST", f"{P}/transactions/commit", bad)[0] < 500
    assert {t: catalog.load_table("s", t) for t in "ab"} == before


@pytest.mark.peer
def test_the_peer_reads_our_transaction_and_commits_its_own_through_serve(
    server: RestServer,
    served: Path,
    rest_peer: Peer,  # noqa: F811
) -> None:
    with iceduck.connect(server.url) as lake:
        lake.sql("CREATE SCHEMA s")
        for statement in SETUP:
            lake.sql(statement.format(a="s.a", b="s.b"))
        lake.sql("BEGIN")
        for statement in BODY:
            lake.sql(statement.format(a="s.a", b="s.b"))
        lake.sql("COMMIT")
        plain = plain_after("COMMIT")
        rest_peer.execute(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        try:
            assert {t: sorted(rest_peer.query(f"SELECT * FROM cat.s.{t}"), key=repr) for t in "ab"} == plain
            location = SqlCatalog.open(str(served)).load_table("s", "b")
            snapshots = "SELECT snapshot_id, sequence_number FROM iceberg_snapshots({}) ORDER BY ALL"
            theirs = rest_peer.query(snapshots.format(sql_string(location)))
            assert theirs == rows(lake.sql(snapshots.format("'lake.s.b'"))) and len(theirs) == 1 + 3
            # the extension's own BEGIN ... COMMIT goes to iceduck serve's transactions/commit
            before = served_state(served)
            for statement in [
                "BEGIN",
                "INSERT INTO cat.s.a VALUES (9, 'peer')",
                "DELETE FROM cat.s.b WHERE id = 4",
                "COMMIT",
            ]:
                rest_peer.execute(statement)
        finally:
            rest_peer.execute("DETACH cat")
        after = served_state(served)
        assert after["a"][2] == sorted([*plain["a"], (9, "peer")])
        assert after["b"][2] == [r for r in plain["b"] if r[0] != 4]
        assert {t: after[t][1] for t in "ab"} == {t: before[t][1] + 1 for t in "ab"}
