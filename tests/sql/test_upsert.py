"""INSERT ... RETURNING, INSERT OR REPLACE / OR IGNORE and INSERT ... ON CONFLICT on lake tables behave
as DuckDB's on a plain table with the same PRIMARY KEY.

Truth is DuckDB itself: each statement runs on a plain DuckDB table holding the same rows (its
PRIMARY KEY the lake table's identifier fields) and on the lake table; the result (count, RETURNING
rows or an error) and the rows afterwards must be equal. Row lineage is checked against the rows
before the statement and against the metadata, read independently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iceduck
from iceduck.errors import ValidationError
from iceduck.write import matching
from tests.support.rest_helpers import serving
from tests.support.twin_tables import lineage, outcome, sorted_rows, twins, values_sql
from tests.write.test_interop_write import expected_rows

_row = st.tuples(
    st.integers(0, 9), st.integers(0, 3) | st.none(), st.sampled_from(["a", "b", "c", "d"]) | st.none()
)

INSERTS = [
    "INSERT{how} INTO {t} VALUES {rows}",
    "INSERT{how} INTO {t} (id, v) SELECT id, v FROM s",
    "INSERT{how} INTO {t} BY NAME SELECT v, id FROM s",
    "INSERT{how} INTO {t} SELECT * FROM s",
    "INSERT{how} INTO {t} (k, id) VALUES {pairs}",
]
CONFLICTS = [
    "",
    " ON CONFLICT DO NOTHING",
    " ON CONFLICT (id) DO NOTHING",
    " ON CONFLICT DO UPDATE SET v = excluded.v",
    " ON CONFLICT (id) DO UPDATE SET k = excluded.k + t.k WHERE t.v < 'c'",
    " ON CONFLICT DO UPDATE SET v = t.v || excluded.v, k = 7 WHERE excluded.k > 1",
    " ON CONFLICT (k) DO NOTHING",
]
HOWS = ["", " OR REPLACE", " OR IGNORE"]
RETURNING = ["", " RETURNING *", " RETURNING id, v || '!' AS w"]


def _columns(version: int, key: bool = True) -> str:
    default = " DEFAULT 'dflt'" if version == 3 else ""
    return f"id INTEGER{' PRIMARY KEY' if key else ''}, k INTEGER, v VARCHAR{default}"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path_factory.mktemp("upsert") / "wh")
    lake.sql("CREATE SCHEMA ns")
    yield lake
    lake.close()


def _twins(
    lake: iceduck.Lake, target: list[Any], source: list[Any], version: int, *, enforced: bool = True
) -> duckdb.DuckDBPyConnection:
    """`twins` keyed by id (the lake table's identifier field; the plain table's PRIMARY KEY when
    `enforced`: a plain INSERT does not enforce Iceberg's identifier fields)."""
    return twins(
        lake, target, source, version, table_columns=_columns(version), truth_columns=_columns(version, enforced)
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.lists(_row, max_size=6, unique_by=lambda r: r[0]),
    source=st.lists(_row, max_size=5),
    insert=st.sampled_from(INSERTS),
    how=st.sampled_from(HOWS),
    conflict=st.sampled_from(CONFLICTS),
    returning=st.sampled_from(RETURNING),
    version=st.sampled_from([2, 3]),
)
def test_upserts_do_what_duckdb_does_on_a_plain_table(
    lake: iceduck.Lake,
    target: list[Any],
    source: list[Any],
    insert: str,
    how: str,
    conflict: str,
    returning: str,
    version: int,
) -> None:
    if how and conflict:
        conflict = ""  # DuckDB refuses both; one is enough
    truth = _twins(lake, target, source, version, enforced=bool(how or conflict))
    rows = values_sql(source) if source else "(0, 0, 'z')"
    pairs = values_sql([(r[1], r[0]) for r in source]) if source else "(1, 1)"
    statement = insert + conflict + returning
    expected = outcome(truth, statement.format(how=how, t="t", rows=rows, pairs=pairs))
    got = outcome(lake, statement.format(how=how, t="lake.ns.t AS t", rows=rows, pairs=pairs))
    assert got == expected, statement
    assert sorted_rows(lake, "lake.ns.t") == sorted_rows(truth, "t")


def _snapshots(lake: iceduck.Lake, name: str) -> list[tuple[Any, ...]]:
    return lake.sql(f"SELECT sequence_number FROM iceberg_snapshots('{name}') ORDER BY 1").fetchall()


def test_an_upsert_keeps_row_lineage_and_commits_once(lake: iceduck.Lake) -> None:
    lake.sql("DROP TABLE IF EXISTS ns.lin")
    lake.sql("CREATE TABLE ns.lin (id INTEGER NOT NULL, v VARCHAR, PRIMARY KEY (id))")
    lake.sql("INSERT INTO ns.lin SELECT i, 'v' || i FROM range(10) r(i)")
    before = lineage(lake, "ns.lin")
    snapshots = _snapshots(lake, "ns.lin")
    got = lake.sql(
        "INSERT INTO lake.ns.lin VALUES (2, 'two'), (5, 'five'), (42, 'new') "
        "ON CONFLICT DO UPDATE SET v = excluded.v RETURNING id, v"
    )
    assert got is not None and sorted(got.fetchall()) == [(2, "two"), (5, "five"), (42, "new")]
    after_snapshots = _snapshots(lake, "ns.lin")
    assert len(after_snapshots) == len(snapshots) + 1
    seq = after_snapshots[-1][0]
    after = lineage(lake, "ns.lin")
    for key in (2, 5):  # replaced: same row id, new sequence number
        assert after[key] == (before[key][0], seq)
    for key in set(before) - {2, 5}:
        assert after[key] == before[key]
    assert after[42][1] == seq and after[42][0] > max(r for r, _ in before.values())
    computed = expected_rows(lake.table("ns.lin").metadata_location, "id")
    assert after == {k: (v["_row_id"], v["_last_updated_sequence_number"]) for k, v in computed.items()}


def test_on_conflict_needs_identifier_fields(lake: iceduck.Lake) -> None:
    lake.sql("DROP TABLE IF EXISTS ns.nokey")
    lake.sql("CREATE TABLE ns.nokey (id INTEGER, v VARCHAR)")
    lake.sql("INSERT INTO ns.nokey VALUES (1, 'a')")
    location = lake.table("ns.nokey").metadata_location
    for statement in (
        "INSERT INTO ns.nokey VALUES (1, 'b') ON CONFLICT DO NOTHING",
        "INSERT OR REPLACE INTO lake.ns.nokey VALUES (1, 'b')",
    ):
        with pytest.raises(ValidationError, match=r"no identifier fields .*SET IDENTIFIER FIELDS"):
            lake.sql(statement)
    assert lake.table("ns.nokey").metadata_location == location


def test_rows_sharing_a_key_in_the_table_are_refused_by_name(lake: iceduck.Lake) -> None:
    lake.sql("DROP TABLE IF EXISTS ns.dup")
    lake.sql("CREATE TABLE ns.dup (id INTEGER PRIMARY KEY, v VARCHAR)")
    lake.sql("INSERT INTO ns.dup VALUES (1, 'a')")
    lake.sql("INSERT INTO ns.dup VALUES (1, 'b')")  # Iceberg does not enforce the key
    with pytest.raises(ValidationError, match="more than one row with key id = 1"):
        lake.sql("INSERT OR REPLACE INTO ns.dup VALUES (1, 'c')")
    assert sorted(lake.sql("SELECT * FROM lake.ns.dup").fetchall()) == [(1, "a"), (1, "b")]


def test_insert_returning_on_a_v1_table_with_parameters(lake: iceduck.Lake) -> None:
    truth = duckdb.connect()
    truth.execute("CREATE TABLE t (id INTEGER, v VARCHAR, d DATE)")
    lake.sql("DROP TABLE IF EXISTS ns.v1")
    lake.sql("CREATE TABLE ns.v1 (id INTEGER, v VARCHAR, d DATE) WITH ('format-version' = '1')")
    statement = "INSERT INTO {t} (d, id) VALUES (?, ?), ('2024-02-29', 7) RETURNING *, id + 1 AS n"
    expected = truth.execute(statement.format(t="t"), ["2020-01-01", 3]).fetchall()
    got = lake.sql(statement.format(t="ns.v1"), ["2020-01-01", 3])
    assert got is not None and got.fetchall() == expected
    assert sorted(lake.sql("SELECT * FROM lake.ns.v1").fetchall()) == sorted(truth.sql("FROM t").fetchall())


def test_an_upsert_opens_only_the_files_holding_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.big (id BIGINT PRIMARY KEY, v VARCHAR)")
        for f in range(10):
            lake.sql(f"INSERT INTO ns.big SELECT i, 'v' FROM range({f * 100}, {(f + 1) * 100}) r(i)")
        seen: list[str] = []
        original = matching.read_sql

        def counting(files: Any, schema: Any, **kw: Any) -> str:
            seen.extend(files)
            return original(files, schema, **kw)

        monkeypatch.setattr(matching, "read_sql", counting)
        lake.sql("INSERT OR REPLACE INTO ns.big VALUES (150, 'x'), (170, 'y'), (5000, 'new')")
        assert len(seen) == 1  # the file of ids 100..199
        monkeypatch.undo()
        assert lake.sql("SELECT count(*), count(*) FILTER (v <> 'v') FROM lake.ns.big").fetchall() == [
            (1001, 3)
        ]
        summary = dict(
            lake.sql(
                "SELECT unnest(map_keys(summary)), unnest(map_values(summary)) FROM iceberg_snapshots('ns.big') "
                "ORDER BY sequence_number DESC LIMIT 1"
            ).fetchall()
        )
        assert summary.get("deleted-data-files", "0") == "0"  # no data file rewritten


def test_upserts_through_attach_to_iceduck_serve(tmp_path: Path) -> None:
    truth = duckdb.connect()
    truth.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
    statements = [
        "INSERT INTO {t} VALUES (1, 'a'), (2, 'b') RETURNING *",
        "INSERT OR REPLACE INTO {t} VALUES (2, 'B'), (3, 'c')",
        "INSERT INTO {t} VALUES (3, 'x'), (4, 'd') ON CONFLICT DO NOTHING RETURNING id",
        "INSERT INTO {t} AS t VALUES (1, 'z') ON CONFLICT (id) DO UPDATE SET v = t.v || excluded.v",
    ]
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        lake.sql("CREATE TABLE cat.ns.t (id BIGINT PRIMARY KEY, v VARCHAR)")
        for statement in statements:
            assert outcome(lake, statement.format(t="cat.ns.t")) == outcome(truth, statement.format(t="t"))
        assert sorted(lake.sql("SELECT * FROM cat.ns.t").fetchall()) == sorted(truth.sql("FROM t").fetchall())
        with iceduck.connect(server.url, authorization_type="none") as remote:
            assert sorted(remote.sql("SELECT * FROM lake.ns.t").fetchall()) == sorted(
                truth.sql("FROM t").fetchall()
            )


@pytest.mark.parametrize(("key", "conflicts"), [(5, True), (500, False)])
def test_a_key_another_writer_inserted_meanwhile_fails_the_upsert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: int, conflicts: bool
) -> None:
    from iceduck.errors import CommitConflictError
    from iceduck.sql import upsert

    with iceduck.connect(tmp_path / "wh") as lake, iceduck.connect(tmp_path / "wh") as other:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT PRIMARY KEY, v VARCHAR)")
        lake.sql("INSERT INTO ns.t VALUES (1, 'a')")
        original = upsert._add_key

        def meanwhile(*args: Any) -> None:
            other.sql(f"INSERT INTO ns.t VALUES ({key}, 'other')")  # after planning, before the commit
            original(*args)

        monkeypatch.setattr(upsert, "_add_key", meanwhile)
        statement = "INSERT INTO ns.t VALUES (1, 'b'), (5, 'mine') ON CONFLICT DO UPDATE SET v = excluded.v"
        if conflicts:
            with pytest.raises(CommitConflictError, match="can hold a key this statement inserts"):
                lake.sql(statement)
            assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == [(1, "a"), (5, "other")]
        else:
            lake.sql(statement)
            assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == [
                (1, "b"),
                (5, "mine"),
                (500, "other"),
            ]
