"""DELETE / UPDATE / EXPLAIN DELETE read their WHERE in the session's TimeZone, as DuckDB does.

A TIMESTAMPTZ literal without an offset is local time in the session's zone, and a TIMESTAMP column
compared with a TIMESTAMPTZ is cast in that zone. The writer's cursor is in UTC; each statement here
runs on a lake table and on a plain DuckDB table in the same zone, and the rows must agree, by each
route a row can take: column bounds (metrics), the partition proof (`day`/`hour`, metrics off) and
row evaluation (`iceduck.write.matching`).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.errors import ValidationError

# St. John's: -03:30, and -02:30 from 2024-03-10 02:00 local (its DST change falls between the
# bounds below); Kolkata: +05:30, no DST. As TIMESTAMP (no zone) values, 02:30 and 02:59:59 on
# 2024-03-10 do not exist in St. John's (the clock jumps from 02:00 to 03:00): DuckDB casts them to
# 03:30 and 03:59:59, on the other side of TIMESTAMPTZ '2024-03-10 03:00:00'.
ZONES = ["America/St_Johns", "Asia/Kolkata"]
LAYOUTS = {  # name -> (partition_by, metrics)
    "bounds": (None, "full"),
    "day": (["day(ts)"], "none"),
    "hour": (["hour(ts)"], "none"),
    "rows": (None, "none"),
}
UTC_TIMES = [
    "2024-03-09 18:00:00", "2024-03-09 18:30:00", "2024-03-09 20:00:00", "2024-03-09 23:00:00",
    "2024-03-10 01:59:59", "2024-03-10 02:30:00", "2024-03-10 02:59:59", "2024-03-10 03:29:59", "2024-03-10 03:30:00", "2024-03-10 04:00:00",
    "2024-03-10 05:29:59", "2024-03-10 05:30:00", "2024-03-10 06:00:00", "2024-03-10 12:00:00",
    "2024-03-11 01:00:00",
]  # fmt: skip
WHERES = [
    "ts >= TIMESTAMPTZ '2024-03-10 00:00:00' AND ts < TIMESTAMPTZ '2024-03-10 03:00:00'",
    "ts < TIMESTAMPTZ '2024-03-10 00:00:00'",
    "ts >= TIMESTAMPTZ '2024-03-10 03:00:00'",
]


def _tables(
    tmp_path: Path, zone: str, layout: str, kind: str
) -> tuple[iceduck.Lake, duckdb.DuckDBPyConnection]:
    partition_by, metrics = LAYOUTS[layout]
    lake = iceduck.connect(tmp_path / "wh")
    mirror = duckdb.connect()
    lake.create_namespace("ns")
    lake.create_table(
        "ns.t", [("id", "BIGINT"), ("ts", kind)], partition_by=partition_by,
        properties={"write.metadata.metrics.default": metrics},
    )  # fmt: skip
    mirror.execute(f"CREATE TABLE t (id BIGINT, ts {kind})")
    suffix = "+00" if kind == "TIMESTAMPTZ" else ""
    # one file per row (and one with all of them): files wholly in, wholly out, and mixed
    statements = [f"INSERT INTO {{}} VALUES ({i}, {kind} '{u}{suffix}')" for i, u in enumerate(UTC_TIMES)]
    every = ", ".join(f"({100 + i}, {kind} '{u}{suffix}')" for i, u in enumerate(UTC_TIMES))
    statements.append(f"INSERT INTO {{}} VALUES {every}")
    for con in (lake.con, mirror):
        con.execute(f"SET TimeZone = '{zone}'")
    for s in statements:
        lake.sql(s.format("ns.t"))
        mirror.execute(s.format("t"))
    return lake, mirror


def _same(lake: iceduck.Lake, mirror: duckdb.DuckDBPyConnection) -> None:
    want = sorted(mirror.execute("SELECT id, ts FROM t").fetchall())
    assert sorted(lake.sql("SELECT id, ts FROM lake.ns.t").fetchall()) == want


@pytest.mark.parametrize("kind", ["TIMESTAMPTZ", "TIMESTAMP"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("zone", ZONES)
def test_delete_and_update_match_duckdb_in_the_session_zone(
    tmp_path: Path, zone: str, layout: str, kind: str
) -> None:
    lake, mirror = _tables(tmp_path, zone, layout, kind)
    lake.sql(f"UPDATE ns.t SET id = id + 1000 WHERE {WHERES[1]}")
    mirror.execute(f"UPDATE t SET id = id + 1000 WHERE {WHERES[1]}")
    _same(lake, mirror)
    for where in (WHERES[0], WHERES[2]):
        (n,) = lake.sql(f"DELETE FROM ns.t WHERE {where}").fetchall()[0]
        (m,) = mirror.execute(f"DELETE FROM t WHERE {where}").fetchall()[0]
        assert n == m
        _same(lake, mirror)


@pytest.mark.parametrize("layout", ["bounds", "day", "hour"])
@pytest.mark.parametrize("zone", ZONES)
def test_explain_delete_removes_only_files_whose_rows_all_match(
    tmp_path: Path, zone: str, layout: str
) -> None:
    lake, mirror = _tables(tmp_path, zone, layout, "TIMESTAMPTZ")
    for where in WHERES:
        rows = lake.sql(f"EXPLAIN DELETE FROM ns.t WHERE {where}").fetchall()
        for file_path, _partition, count, action, reason in rows:
            path = file_path.removeprefix("file://")
            matched = mirror.execute(
                f"SELECT count(*) FILTER (WHERE {where}), count(*) FROM read_parquet('{path}')"
            ).fetchall()[0]
            assert matched[1] == count
            if action == "remove":
                assert matched[0] == count, (file_path, reason)
            if action == "skip":
                assert matched[0] == 0, (file_path, reason)
        if layout == "bounds":  # one-row files: their bounds decide, so each is removed or skipped
            singles = {r[0]: r[3] for r in rows if r[2] == 1}
            assert len(singles) == len(UTC_TIMES) and "read" not in singles.values()


def test_a_zone_set_then_reset(tmp_path: Path) -> None:
    lake, mirror = _tables(tmp_path, "America/St_Johns", "day", "TIMESTAMPTZ")
    for con in (lake.con, mirror):
        con.execute("RESET TimeZone")
        con.execute("SET TimeZone = 'Asia/Kolkata'")
    lake.sql(f"DELETE FROM ns.t WHERE {WHERES[1]}")
    mirror.execute(f"DELETE FROM t WHERE {WHERES[1]}")
    _same(lake, mirror)
    for con in (lake.con, mirror):
        con.execute("RESET TimeZone")
    lake.sql(f"DELETE FROM ns.t WHERE {WHERES[0]}")
    mirror.execute(f"DELETE FROM t WHERE {WHERES[0]}")
    _same(lake, mirror)


@pytest.mark.parametrize("layout", ["bounds", "hour", "rows"])
def test_the_python_api_reads_the_where_in_the_lake_connections_zone(tmp_path: Path, layout: str) -> None:
    lake, mirror = _tables(tmp_path, "America/St_Johns", layout, "TIMESTAMPTZ")
    t = lake.table("ns.t")
    t.update({"id": "id + 1000"}, WHERES[1])
    mirror.execute(f"UPDATE t SET id = id + 1000 WHERE {WHERES[1]}")
    _same(lake, mirror)
    t.delete(WHERES[0])
    mirror.execute(f"DELETE FROM t WHERE {WHERES[0]}")
    _same(lake, mirror)
    # overwrite: the matching rows replaced by one row
    new = mirror.sql("SELECT 7::BIGINT AS id, TIMESTAMPTZ '2024-03-10 12:00:00+00' AS ts").arrow()
    t.overwrite(new, WHERES[2])
    mirror.execute(f"DELETE FROM t WHERE {WHERES[2]}")
    mirror.execute("INSERT INTO t VALUES (7, TIMESTAMPTZ '2024-03-10 12:00:00+00')")
    _same(lake, mirror)
    # an explicit zone wins over the connection's
    t.delete("ts < TIMESTAMPTZ '2024-03-10 05:00:00'", zone="Asia/Kolkata")
    mirror.execute("SET TimeZone = 'Asia/Kolkata'")
    mirror.execute("DELETE FROM t WHERE ts < TIMESTAMPTZ '2024-03-10 05:00:00'")
    _same(lake, mirror)


def test_the_python_api_refuses_rather_than_end_an_unfinished_result(tmp_path: Path) -> None:
    """Asking the lake's connection for its zone with `execute` would end a result the user is
    still fetching (its remaining rows gone, silently); the delete refuses instead, the result intact."""
    lake, _ = _tables(tmp_path, "America/St_Johns", "rows", "TIMESTAMPTZ")
    t = lake.table("ns.t")
    pending = lake.con.execute("SELECT * FROM range(10)")
    assert pending.fetchone() == (0,)
    with pytest.raises(ValidationError, match=r"ns\.t: cannot read the TimeZone"):
        t.delete(WHERES[0])
    assert len(pending.fetchall()) == 9
    t.delete(None)  # no WHERE, no zone to read
    assert lake.sql("SELECT count(*) FROM lake.ns.t").fetchall() == [(0,)]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("zone", ZONES)
def test_update_set_values_are_computed_in_the_session_zone(tmp_path: Path, zone: str, mode: str) -> None:
    """`SET d = CAST(ts AS DATE)` and `SET s = strftime(ts, ...)` give the session zone's date and
    text, as DuckDB's UPDATE does; the writer's COPY (in UTC) must not decide them."""
    lake = iceduck.connect(tmp_path / "wh")
    mirror = duckdb.connect()
    lake.create_namespace("ns")
    lake.create_table(
        "ns.t", [("id", "BIGINT"), ("ts", "TIMESTAMPTZ"), ("d", "DATE"), ("s", "VARCHAR")],
        properties={"write.update.mode": mode},
    )  # fmt: skip
    mirror.execute("CREATE TABLE t (id BIGINT, ts TIMESTAMPTZ, d DATE, s VARCHAR)")
    rows = ", ".join(f"({i}, TIMESTAMPTZ '{u}+00', NULL, NULL)" for i, u in enumerate(UTC_TIMES))
    for con in (lake.con, mirror):
        con.execute(f"SET TimeZone = '{zone}'")
    lake.sql(f"INSERT INTO ns.t VALUES {rows}")
    mirror.execute(f"INSERT INTO t VALUES {rows}")
    update = "UPDATE {} SET d = CAST(ts AS DATE), s = strftime(ts, '%Y-%m-%d %H:%M %Z') WHERE id % 2 = 0"
    lake.sql(update.format("ns.t"))
    mirror.execute(update.format("t"))
    want = sorted(mirror.execute("SELECT id, ts, d, s FROM t").fetchall())
    assert sorted(lake.sql("SELECT id, ts, d, s FROM lake.ns.t").fetchall()) == want
    assert any(r[2] is not None and r[2] != r[1].astimezone(dt.UTC).date() for r in want)
