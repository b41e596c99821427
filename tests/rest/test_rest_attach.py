"""`ATTACH ... (TYPE iceberg, ...)`, `CREATE SECRET (TYPE iceberg, ...)` and `DETACH` in `Lake.sql`
and the shell, against `iceduck serve`.

Truth: plain DuckDB running the same statements on an ordinary table; the reference peer (DuckDB
1.5.5 + iceberg) attached to the same server reading the rows and the snapshots; PyIceberg's
RestCatalog reading the partition spec; the served warehouse's own catalog.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError
from iceduck.serve.server import RestServer
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer, sql_string
from tests.support.rest_helpers import call, serving

STATEMENTS = [
    "INSERT INTO {t} SELECT i, TIMESTAMP '2026-10-01 06:00' + INTERVAL (i % 4) DAY, 'st' || (i % 5), "
    "(i % 7)::INTEGER FROM range(3000) r(i)",
    "DELETE FROM {t} WHERE delay = 4",
    "UPDATE {t} SET delay = delay + 100 WHERE id % 50 = 1",
    "INSERT INTO {t} VALUES (9000, TIMESTAMP '2026-10-09 12:00', 'late', 1)",
    "DELETE FROM {t} WHERE ts >= TIMESTAMP '2026-10-03' AND id > 2000",
]
COLUMNS = "id BIGINT, ts TIMESTAMP, station VARCHAR, delay INTEGER"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(tmp_path / "served") as s:
        yield s


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[iceduck.Lake]:
    with iceduck.connect(tmp_path / "local") as lk:
        yield lk


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    assert relation is not None
    return sorted(relation.fetchall(), key=repr)


def _attach(lake: iceduck.Lake, server: RestServer, options: str = "AUTHORIZATION_TYPE 'none'") -> None:
    lake.sql(f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', {options})")


@pytest.mark.peer
def test_attached_catalog_reads_and_writes_like_the_extension(
    lake: iceduck.Lake,
    server: RestServer,
    rest_peer: Peer,  # noqa: F811
) -> None:
    from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
    from pyiceberg.transforms import DayTransform

    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.demo")
    lake.sql(f"CREATE TABLE cat.demo.services ({COLUMNS}) PARTITIONED BY (day(ts))")
    truth = duckdb.connect()
    truth.sql(f"CREATE TABLE t ({COLUMNS})")
    for statement in STATEMENTS:
        counted = lake.sql(statement.format(t="cat.demo.services"))
        assert _rows(counted) == truth.sql(statement.format(t="t")).fetchall()
    expected = _rows(truth.sql("SELECT * FROM t"))
    assert _rows(lake.sql("SELECT * FROM cat.demo.services")) == expected
    # the table is the served catalog's: the lake's own catalog has no `demo`, `ns.t` names stay its own
    assert lake.list_namespaces() == ()
    assert server.warehouse.catalog.list_tables("demo") == ("services",)

    rest_peer.execute(
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
    )
    try:
        assert sorted(rest_peer.query("SELECT * FROM cat.demo.services"), key=repr) == expected
        location = server.warehouse.catalog.load_table("demo", "services")
        ours = _rows(
            lake.sql("SELECT snapshot_id, sequence_number FROM iceberg_snapshots(cat.demo.services)")
        )
        theirs = rest_peer.query(
            f"SELECT snapshot_id, sequence_number FROM iceberg_snapshots({sql_string(location)})"
        )
        assert ours == sorted(theirs, key=repr) and len(ours) == len(STATEMENTS)
        # a table the peer creates behind the lake's back is there at the next statement naming `cat.`
        rest_peer.execute("CREATE TABLE cat.demo.other (x INTEGER)")
        rest_peer.execute("INSERT INTO cat.demo.other VALUES (7)")
        assert ("cat", "demo", "other") in [r[:3] for r in _rows(lake.sql("SHOW ALL TABLES"))]
        assert _rows(lake.sql("SELECT x FROM cat.demo.other")) == [(7,)]
    finally:
        rest_peer.execute("DETACH cat")
    spec = PyIcebergRestCatalog("py", uri=server.url).load_table("demo.services").spec()
    assert [(f.name, type(f.transform)) for f in spec.fields] == [("ts_day", DayTransform)]

    # v2 by WITH, as on the lake; DuckDB's own ATTACH keeps working beside it
    lake.sql("CREATE TABLE cat.demo.v2 (id BIGINT) WITH ('format-version' = '2')")
    assert PyIcebergRestCatalog("py", uri=server.url).load_table("demo.v2").format_version == 2
    lake.sql("ATTACH ':memory:' AS scratch")
    lake.sql("CREATE TABLE scratch.t AS SELECT 1 AS y")
    assert _rows(lake.sql("SELECT y FROM scratch.t")) == [(1,)]
    lake.sql("DETACH scratch")


def test_detach_and_attach_again(lake: iceduck.Lake, server: RestServer) -> None:
    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.d")
    lake.sql("CREATE TABLE cat.d.t AS SELECT range AS i FROM range(5)")
    assert "cat" in {r[0] for r in _rows(lake.sql("SELECT database_name FROM duckdb_databases()"))}
    lake.sql("DETACH cat")
    assert "cat" not in {r[0] for r in _rows(lake.sql("SELECT database_name FROM duckdb_databases()"))}
    with pytest.raises(duckdb.Error):
        lake.sql("SELECT * FROM cat.d.t")
    with pytest.raises(duckdb.Error, match=r"cat\.d\.t"):
        _rows(lake.sql("SELECT * FROM iceberg_snapshots(cat.d.t)"))
    lake.sql("DETACH DATABASE IF EXISTS cat")  # nothing attached: no error
    lake.sql(
        f"ATTACH IF NOT EXISTS 'warehouse' AS CAT (TYPE ICEBERG, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
    )
    assert _rows(lake.sql("SELECT count(*) FROM cat.d.t")) == [(5,)]
    with pytest.raises(IcebergError, match="exists already"):
        _attach(lake, server)  # without IF NOT EXISTS the name is taken
    lake.sql(f"ATTACH OR REPLACE 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}')")
    assert _rows(lake.sql("SELECT count(*) FROM cat.d.t")) == [(5,)]


def test_refusals_are_one_clear_line(lake: iceduck.Lake, server: RestServer) -> None:
    with pytest.raises(IcebergError, match="ENDPOINT"):
        lake.sql("ATTACH 'warehouse' AS cat (TYPE iceberg)")
    with pytest.raises(IcebergError, match="no secret of TYPE iceberg named nope"):
        lake.sql(f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{server.url}', SECRET nope)")
    with pytest.raises(IcebergError, match="'lake' is the lake's own catalog"):
        lake.sql(f"ATTACH 'w' AS lake (TYPE iceberg, ENDPOINT '{server.url}')")
    with pytest.raises(IcebergError, match="'w' is not a Glue catalog"):
        lake.sql("ATTACH 'w' AS g (TYPE iceberg, ENDPOINT_TYPE glue)")
    with pytest.raises(IcebergError, match="unknown option"):
        lake.sql("CREATE SECRET s (TYPE iceberg, KEY_ID 'x')")
    dead = server.url.rsplit(":", 1)[0] + ":9"  # nothing listens on the discard port
    with pytest.raises(IcebergError):
        lake.sql(f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{dead}', TIMEOUT 2)")
    assert "cat" not in {r[0] for r in _rows(lake.sql("SELECT database_name FROM duckdb_databases()"))}
    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.d")
    with pytest.raises(IcebergError, match="name the namespace too"):
        lake.sql("CREATE TABLE cat.t (i INTEGER)")
    with pytest.raises(IcebergError, match="namespace 'nope' does not exist"):
        lake.sql("CREATE TABLE cat.nope.t (i INTEGER)")
    with pytest.raises(IcebergError, match="does not exist"):
        lake.sql("INSERT INTO cat.d.missing VALUES (1)")
    with pytest.raises(IcebergError, match="exists already"):
        lake.sql("CREATE SCHEMA cat.d")


def test_secrets_oauth2_client_credentials_and_token(tmp_path: Path) -> None:
    with (
        serving(tmp_path / "served", credentials=("me", "s3cret")) as server,
        iceduck.connect(tmp_path / "local") as lake,
    ):
        u = server.url
        lake.sql(
            f"CREATE SECRET s (TYPE iceberg, CLIENT_ID 'me', CLIENT_SECRET 'wrong', OAUTH2_SERVER_URI '{u}/v1/oauth/tokens')"
        )
        with pytest.raises(IcebergError, match=r"invalid_client|401|credentials"):
            lake.sql(f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{u}', SECRET s)")
        lake.sql(
            f"CREATE OR REPLACE SECRET s (TYPE iceberg, CLIENT_ID 'me', CLIENT_SECRET 's3cret', "
            f"OAUTH2_SERVER_URI '{u}/v1/oauth/tokens')"
        )
        lake.sql(f"ATTACH 'w' AS cat (TYPE iceberg, ENDPOINT '{u}', SECRET s)")
        lake.sql("CREATE SCHEMA cat.d")
        lake.sql("CREATE TABLE cat.d.t AS SELECT 1 AS i")
        assert server.warehouse.catalog.list_tables("d") == ("t",)
        lake.sql("DETACH cat")
        form = {"grant_type": "client_credentials", "client_id": "me", "client_secret": "s3cret"}
        status, body, _ = call(u, "POST", "/v1/oauth/tokens", form=form)
        assert status == 200
        # an unnamed secret is the default of an ATTACH naming neither a SECRET nor an authorization
        lake.sql(f"CREATE SECRET (TYPE iceberg, TOKEN '{body['access_token']}')")
        lake.sql(f"ATTACH 'w' AS tok (TYPE iceberg, ENDPOINT '{u}')")
        assert _rows(lake.sql("SELECT i FROM tok.d.t")) == [(1,)]
        lake.sql("DROP SECRET __default_iceberg")
        with pytest.raises(IcebergError, match=r"401|token|NotAuthorized"):
            lake.sql(f"ATTACH 'w' AS other (TYPE iceberg, ENDPOINT '{u}')")


def test_the_shell_attaches_a_rest_catalog(
    server: RestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iceduck.cli import main

    statements = [
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')",
        "CREATE SCHEMA cat.demo",
        "CREATE TABLE cat.demo.services (id BIGINT, ts TIMESTAMP) PARTITIONED BY (day(ts))",
        "INSERT INTO cat.demo.services SELECT range, TIMESTAMP '2026-10-04' + INTERVAL (range) HOUR FROM range(30)",
        "DELETE FROM cat.demo.services WHERE id >= 24",
        "SELECT count(*) FROM cat.demo.services",
        "SELECT operation FROM iceberg_snapshots(cat.demo.services) ORDER BY sequence_number",
        "SHOW ALL TABLES",
        "DETACH cat",
    ]
    args = ["--warehouse", str(tmp_path / "local"), "--create", "--mode", "csv"]
    for s in statements:
        args += ["-c", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "count_star()\n24\n" in out
    assert "operation\nappend\ndelete\n" in out
    assert "cat,demo,services," in out


def test_time_travel_on_an_attached_table(
    lake: iceduck.Lake, server: RestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cat.ns.t AT (VERSION => id)` / `AT (TIMESTAMP => ts)` read that snapshot, in Lake.sql and the
    shell, as on `lake.ns.t` (truth: the snapshots' own rows by `iceberg_scan(..., snapshot_id :=)`)."""
    from iceduck.cli import main

    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.demo")
    lake.sql("CREATE TABLE cat.demo.t (id BIGINT)")
    lake.sql("INSERT INTO cat.demo.t VALUES (1)")
    lake.sql("INSERT INTO cat.demo.t VALUES (2), (3)")
    snapshots = lake.sql(
        "SELECT snapshot_id, committed_at FROM iceberg_snapshots(cat.demo.t) ORDER BY sequence_number"
    )
    assert snapshots is not None
    first, at = snapshots.fetchall()[0]
    truth = _rows(lake.sql(f"SELECT id FROM iceberg_scan('cat.demo.t', snapshot_id := {first})"))
    assert truth == [(1,)]
    for query in (
        f"SELECT id FROM cat.demo.t AT (VERSION => {first})",
        f"SELECT t.id FROM cat.demo.t AT (VERSION => {first}) WHERE t.id > 0",
        f"SELECT x.id FROM cat.demo.t AT (TIMESTAMP => TIMESTAMPTZ '{at.isoformat()}') AS x",
    ):
        assert _rows(lake.sql(query)) == truth, query
    assert _rows(
        lake.sql(f"SELECT count(*) FROM cat.demo.t JOIN cat.demo.t AT (VERSION => {first}) o USING (id)")
    ) == [(1,)]
    with pytest.raises(duckdb.Error) as failure:
        lake.sql("SELECT * FROM cat.demo.t AT (VERSION => 42)").fetchall()  # type: ignore[union-attr]
    assert str(failure.value) == "Invalid Input Error: cat.demo.t AT (VERSION => 42): no snapshot with id 42"
    args = ["--warehouse", str(tmp_path / "shell"), "--create", "--mode", "csv"]
    args += [
        "-c",
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')",
    ]
    args += ["-c", f"SELECT id FROM cat.demo.t AT (VERSION => {first})"]
    assert main(args) == 0
    assert capsys.readouterr().out == "id\n1\n"


def test_a_where_on_an_attached_table_and_a_users_view_over_it_prunes(
    lake: iceduck.Lake, server: RestServer
) -> None:
    """`cat.ns.t WHERE ...` and a user's view over it: only the files of the kept day are opened
    (DuckDB's own file log), the rows those of an unpruned read."""
    from tests.sql.test_natural_where import opened

    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.demo")
    lake.sql(f"CREATE TABLE cat.demo.services ({COLUMNS}) PARTITIONED BY (day(ts))")
    for part in range(2):
        lake.sql(
            "INSERT INTO cat.demo.services SELECT i, TIMESTAMP '2026-10-01 06:00' + INTERVAL (i % 4) DAY, "
            f"'st' || (i % 5), (i % 7)::INTEGER FROM range({part * 100}, {part * 100 + 100}) r(i)"
        )
    loc = sql_string(server.warehouse.catalog.load_table("demo", "services"))
    where = "ts >= TIMESTAMP '2026-10-02' AND ts < TIMESTAMP '2026-10-03'"
    kept = {
        r[0]
        for r in lake.con.execute(
            f"SELECT file_path FROM iceberg_scan_plan({loc}, filter := {sql_string(where)}) WHERE kept"
        ).fetchall()
    }
    every = {r[0] for r in lake.con.execute(f"SELECT file_path FROM iceberg_files({loc})").fetchall()}
    assert len(kept) == 2 and len(every) == 8
    expected = lake.con.execute(
        f"SELECT count(*) FROM iceberg_scan({loc}, prune := false) WHERE {where}"
    ).fetchall()
    lake.con.execute("CREATE TEMP VIEW served AS SELECT * FROM cat.demo.services")
    for query in (
        f"SELECT count(*) FROM cat.demo.services WHERE {where}",
        f"SELECT count(*) FROM served WHERE {where}",
    ):
        for _ in range(2):
            with opened(lake.con, python=False) as files:
                assert _rows(lake.sql(query)) == expected, query
            assert {f.rsplit("/", 1)[-1] for f in files} == {f.rsplit("/", 1)[-1] for f in kept}, query


def test_explain_of_a_write_and_spark_procedures_reach_an_attached_catalog(
    lake: iceduck.Lake, server: RestServer, tmp_path: Path
) -> None:
    _attach(lake, server)
    lake.sql("CREATE SCHEMA cat.ns")
    lake.sql("CREATE TABLE cat.ns.t AS SELECT range AS id, range % 3 AS k FROM range(100)")
    lake.sql("INSERT INTO cat.ns.t VALUES (1000, 1)")
    # EXPLAIN: the files the DELETE would read and skip, and why (the same plan the lake's own tables get)
    plan = _rows(lake.sql("EXPLAIN DELETE FROM cat.ns.t WHERE id = 5"))
    assert sorted((count, action) for _, _, count, action, _ in plan) == [(1, "skip"), (100, "read")]
    assert next(row for row in plan if row[3] == "skip")[4].startswith("column bounds:")
    # nothing was deleted by the EXPLAIN; after USE the bare name is the same table
    assert _rows(lake.sql("SELECT count(*) FROM cat.ns.t")) == [(101,)]
    lake.sql("USE cat.ns")
    assert _rows(lake.sql("EXPLAIN DELETE FROM t WHERE id = 5")) == plan
    lake.sql("USE memory.main")
    first, second = [
        r[0]
        for r in lake.sql(
            "SELECT snapshot_id FROM iceberg_snapshots(cat.ns.t) ORDER BY sequence_number"
        ).fetchall()
    ]
    # Spark's procedures: the table argument names the attached catalog, or the call does (Spark's spelling)
    assert _rows(
        lake.sql(f"CALL system.rollback_to_snapshot(table => 'cat.ns.t', snapshot_id => {first})")
    ) == [(second, first)]
    assert _rows(lake.sql("SELECT count(*) FROM cat.ns.t")) == [(100,)]
    assert _rows(
        lake.sql(f"CALL cat.system.set_current_snapshot(table => 'ns.t', snapshot_id => {second})")
    ) == [(first, second)]
    assert _rows(lake.sql("SELECT count(*) FROM cat.ns.t")) == [(101,)]
    # the served warehouse's own catalog moved: not a copy in this process
    with iceduck.connect(tmp_path / "served") as served:
        assert _rows(served.sql("SELECT count(*) FROM lake.ns.t")) == [(101,)]
