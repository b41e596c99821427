"""`lake.ns.t AT (VERSION => id)` / `AT (TIMESTAMP => ts)` through Lake.sql and the shell.

Each commit's rows are known (the test inserts them), so every snapshot must read as the rows
committed up to it; the snapshot ids and commit times come from the metadata (iceberg_snapshots).
"""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import pytest

from iceduck.lake import Lake
from tests.support.s3_fixture import aws_env


@pytest.fixture
def history(lake: Lake) -> list[tuple[int, object, list[int]]]:
    """(snapshot id, commit time, ids visible) after each of three commits."""
    lake.sql("CREATE TABLE ns.trips (id BIGINT, station VARCHAR)")
    visible: list[int] = []
    out = []
    for batch in ([1, 2], [3], [4, 5, 6]):
        lake.sql("INSERT INTO ns.trips VALUES " + ", ".join(f"({i}, 's{i}')" for i in batch))
        visible = visible + batch
        ((snapshot_id, at),) = lake.sql(
            "SELECT snapshot_id, committed_at FROM iceberg_snapshots('ns.trips') WHERE is_current"
        ).fetchall()
        out.append((snapshot_id, at, list(visible)))
    return out


def test_at_version_and_timestamp_read_each_snapshot(
    lake: Lake, history: list[tuple[int, object, list[int]]]
) -> None:
    for snapshot_id, at, ids in history:
        for sql in (
            f"SELECT id FROM lake.ns.trips AT (VERSION => {snapshot_id}) ORDER BY id",
            f"SELECT trips.id FROM ns.trips AT (VERSION => {snapshot_id}) WHERE trips.id > 0 ORDER BY trips.id",
            f"SELECT x.id FROM lake.ns.trips AT (TIMESTAMP => TIMESTAMPTZ '{at}') AS x ORDER BY x.id",
            f"SELECT id FROM lake.ns.trips AT (TIMESTAMP => TIMESTAMPTZ '{at}') x ORDER BY 1",
        ):
            assert [r[0] for r in lake.sql(sql).fetchall()] == ids, sql
    first, last = history[0], history[-1]
    # in a join with the current table, and as the query of a write
    joined = lake.sql(
        f"SELECT count(*) FROM lake.ns.trips AS now JOIN lake.ns.trips AT (VERSION => {first[0]}) AS old USING (id)"
    ).fetchall()
    assert joined == [(len(first[2]),)]
    lake.sql(f"CREATE TABLE ns.first AS SELECT * FROM lake.ns.trips AT (VERSION => {first[0]})")
    assert lake.sql("SELECT id FROM lake.ns.first ORDER BY id").fetchall() == [(i,) for i in first[2]]
    assert lake.sql("SELECT count(*) FROM lake.ns.trips").fetchall() == [(len(last[2]),)]


def test_an_alias_before_at_as_duckdbs_grammar_puts_it(
    lake: Lake, history: list[tuple[int, object, list[int]]]
) -> None:
    # DuckDB's own grammar: `table alias AT (...)` (independent truth: its parser serialises the
    # alias on the reference that carries the AT clause); main failed these with "Catalog type does
    # not support time travel" (the alias was read as the table's name)
    con = duckdb.connect()
    tree = con.execute("SELECT json_serialize_sql('SELECT * FROM ns.t AS x AT (VERSION => 1)')").fetchall()[0][0]
    assert '"alias":"x"' in tree and '"at_clause":{"unit":"VERSION"' in tree
    for snapshot_id, at, ids in history:
        for sql in (
            f"SELECT x.id FROM lake.ns.trips x AT (VERSION => {snapshot_id}) ORDER BY x.id",
            f"SELECT x.id FROM ns.trips AS x AT (TIMESTAMP => TIMESTAMPTZ '{at}') ORDER BY 1",
            f"SELECT count(*) FROM lake.ns.trips now JOIN ns.trips AS old AT (VERSION => {snapshot_id}) USING (id)",
        ):
            got = [r[0] for r in lake.sql(sql).fetchall()]
            assert got == (ids if "count" not in sql else [len(ids)]), sql


def test_a_write_may_read_a_snapshot_in_its_where_and_set(
    lake: Lake, history: list[tuple[int, object, list[int]]]
) -> None:
    # the writer evaluates WHERE and SET on a cursor of its own, where iceberg_scan does not exist:
    # main failed both with DuckDB trying to install its own iceberg extension. Independent truth:
    # the same statements in plain DuckDB over a table holding the first snapshot's rows.
    first, middle = history[0], history[1]
    mirror = duckdb.connect()
    mirror.execute("CREATE TABLE trips (id BIGINT, station VARCHAR); CREATE TABLE old (id BIGINT, station VARCHAR)")
    mirror.execute("INSERT INTO trips SELECT id, 's' || id FROM unnest(?) u(id)", [history[-1][2]])
    mirror.execute("INSERT INTO old SELECT id, 's' || id FROM unnest(?) u(id)", [first[2]])
    for ours, theirs in [
        (
            f"DELETE FROM ns.trips WHERE id IN (SELECT o.id + 1 FROM ns.trips o AT (VERSION => {first[0]}))",
            "DELETE FROM trips WHERE id IN (SELECT o.id + 1 FROM old o)",
        ),
        (
            f"UPDATE ns.trips SET station = (SELECT max(station) FROM iceberg_scan('ns.trips', snapshot_id := {first[0]})) "
            f"WHERE id NOT IN (SELECT id FROM lake.ns.trips AT (VERSION => {middle[0]}))",
            "UPDATE trips SET station = (SELECT max(station) FROM old) WHERE id NOT IN (1, 2, 3)",
        ),
    ]:
        assert lake.sql(ours).fetchall() == mirror.execute(theirs).fetchall(), ours
    assert sorted(lake.sql("SELECT * FROM lake.ns.trips").fetchall()) == sorted(
        mirror.execute("SELECT * FROM trips").fetchall()
    )
    # the copies the writer read are gone
    assert lake.con.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE '__iceduck_lake_%'").fetchall() == [(0,)]


def test_a_snapshot_that_does_not_exist(lake: Lake, history: list[tuple[int, object, list[int]]]) -> None:
    with pytest.raises(duckdb.Error) as failure:
        lake.sql("SELECT * FROM lake.ns.trips AT (VERSION => 42)").fetchall()
    assert (
        str(failure.value) == "Invalid Input Error: lake.ns.trips AT (VERSION => 42): no snapshot with id 42"
    )
    with pytest.raises(duckdb.Error) as failure:
        lake.sql(
            "SELECT * FROM lake.ns.trips AT (TIMESTAMP => TIMESTAMPTZ '2000-01-01 00:00:00+00')"
        ).fetchall()
    assert str(failure.value) == (
        "Invalid Input Error: lake.ns.trips AT (TIMESTAMP => TIMESTAMPTZ '2000-01-01 00:00:00+00'): "
        "no snapshot was current at 2000-01-01T00:00:00+00:00"
    )


def test_other_tables_are_left_to_duckdb(lake: Lake) -> None:
    lake.sql("CREATE TABLE plain (a INTEGER)")  # a DuckDB table: DuckDB's own answer
    with pytest.raises(duckdb.Error) as failure:
        lake.sql("SELECT * FROM plain AT (VERSION => 1)").fetchall()
    assert "time travel" in str(failure.value)
    # the words inside a string are not a clause
    assert lake.sql("SELECT 'lake.ns.t AT (VERSION => 1)'").fetchall() == [("lake.ns.t AT (VERSION => 1)",)]


def test_the_shell_reads_a_snapshot(
    warehouse: str, lake: Lake, history: list[tuple[int, object, list[int]]]
) -> None:
    snapshot_id, _, ids = history[1]
    lake.close()
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())",
         "--warehouse", warehouse, "--mode", "csv", "-c",
         f"SELECT id FROM lake.ns.trips AT (VERSION => {snapshot_id}) ORDER BY id"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **aws_env()},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "id\n" + "".join(f"{i}\n" for i in ids)
