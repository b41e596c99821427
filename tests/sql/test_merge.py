"""MERGE INTO, UPDATE ... FROM and DELETE ... USING on lake tables behave as DuckDB's on a plain table.

Truth is DuckDB itself: each statement runs on a plain DuckDB table holding the same rows and on the
lake table; the result (count, RETURNING rows or an error) and the rows afterwards must be equal.
Row lineage is checked against the rows before the statement (updated rows keep `_row_id`, their
`_last_updated_sequence_number` is the new snapshot's) and against the metadata, read independently
(`tests.write.test_interop_write.expected_rows`).
"""

from __future__ import annotations

import shutil
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
from tests.support.twin_tables import lineage, outcome, sorted_rows, twins
from tests.write.test_interop_write import expected_rows

ON = ["ON t.id = s.id", "ON t.id = s.id AND t.k = s.k", "USING (id)", "ON s.id = t.id AND s.v > 'b'"]
MATCHED = [
    "WHEN MATCHED THEN UPDATE SET v = s.v",
    "WHEN MATCHED AND s.k > 1 THEN UPDATE SET v = t.v || '+', k = s.k",
    "WHEN MATCHED AND t.k < 2 THEN DELETE",
    "WHEN MATCHED THEN DELETE",
    "WHEN MATCHED THEN UPDATE SET *",
    "WHEN MATCHED THEN UPDATE BY NAME",
    "WHEN MATCHED AND s.v = 'c' THEN DO NOTHING",
]
NOT_MATCHED = [
    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.k, s.v)",
    "WHEN NOT MATCHED AND s.k > 0 THEN INSERT *",
    "WHEN NOT MATCHED BY TARGET THEN INSERT BY NAME",
    "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 'new')",
]
BY_SOURCE = [
    "WHEN NOT MATCHED BY SOURCE THEN DELETE",
    "WHEN NOT MATCHED BY SOURCE AND t.k > 1 THEN UPDATE SET v = 'gone'",
    "WHEN NOT MATCHED BY SOURCE AND t.v < 'c' THEN DELETE",
]

# Source rows are unique by id: a target row matched by two source rows is an error (below).
_source = st.lists(
    st.tuples(
        st.integers(0, 12), st.integers(0, 3) | st.none(), st.sampled_from(["a", "b", "c", "d"]) | st.none()
    ),
    max_size=6,
    unique_by=lambda r: r[0],
)
_row = st.tuples(
    st.integers(0, 12), st.integers(0, 3) | st.none(), st.sampled_from(["a", "b", "c", "d"]) | st.none()
)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path_factory.mktemp("merge") / "wh")
    lake.sql("CREATE SCHEMA ns")
    yield lake
    lake.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.lists(_row, max_size=8),
    source=_source,
    on=st.sampled_from(ON),
    matched=st.lists(st.sampled_from(MATCHED), max_size=2),
    not_matched=st.lists(st.sampled_from(NOT_MATCHED), max_size=1),
    by_source=st.lists(st.sampled_from(BY_SOURCE), max_size=1),
    returning=st.booleans(),
    version=st.sampled_from([2, 3]),
)
def test_merge_does_what_duckdb_does_on_a_plain_table(
    lake: iceduck.Lake,
    target: list[Any],
    source: list[Any],
    on: str,
    matched: list[str],
    not_matched: list[str],
    by_source: list[str],
    returning: bool,
    version: int,
) -> None:
    if not (matched or not_matched or by_source):
        matched = [MATCHED[0]]
    clauses = " ".join([*matched, *not_matched, *by_source])
    tail = " RETURNING merge_action, *" if returning else ""
    truth = twins(lake, target, source, version)
    expected = outcome(truth, f"MERGE INTO t USING s {on} {clauses}{tail}")
    got = outcome(lake, f"MERGE INTO lake.ns.t AS t USING s {on} {clauses}{tail}")
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "rows":
        assert got == expected
    assert sorted_rows(lake, "lake.ns.t") == sorted_rows(truth, "t")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.lists(_row, max_size=8),
    source=_source,
    statement=st.sampled_from(
        [
            "UPDATE {t} SET v = s.v FROM s WHERE t.id = s.id",
            "UPDATE {t} SET k = t.k + s.k, v = 'u' FROM s WHERE t.id = s.id AND s.v <> 'a'",
            "UPDATE {t} SET v = s.v FROM (SELECT id, max(v) AS v FROM s GROUP BY id) AS s WHERE t.id = s.id",
            "DELETE FROM {t} USING s WHERE t.id = s.id",
            "DELETE FROM {t} USING s WHERE t.id = s.id AND t.k = s.k",
            "UPDATE {t} SET v = 'r' WHERE k = 1 RETURNING *",
            "DELETE FROM {t} WHERE v = 'b' RETURNING id, v",
            "UPDATE {t} AS x SET v = 'x' FROM s, s AS s2 WHERE x.id = s.id AND s2.id = s.k",
        ]
    ),
    version=st.sampled_from([2, 3]),
)
def test_update_from_and_delete_using_do_what_duckdb_does(
    lake: iceduck.Lake, target: list[Any], source: list[Any], statement: str, version: int
) -> None:
    truth = twins(lake, target, source, version)
    plain = statement.format(t="t")
    on_lake = statement.format(t="lake.ns.t" + ("" if " AS x " in statement else " AS t"))
    expected = outcome(truth, plain)
    got = outcome(lake, on_lake)
    assert got == expected
    assert sorted_rows(lake, "lake.ns.t") == sorted_rows(truth, "t")


def test_merge_keeps_row_lineage_and_commits_once(lake: iceduck.Lake) -> None:
    lake.sql("DROP TABLE IF EXISTS ns.lin")
    lake.sql("CREATE TABLE ns.lin (id INTEGER, v VARCHAR)")
    lake.sql("INSERT INTO ns.lin SELECT i, 'v' || i FROM range(10) r(i)")
    before = lineage(lake, "ns.lin")
    snapshots = len(lake.sql("SELECT * FROM iceberg_snapshots('ns.lin')").fetchall())
    lake.sql(
        "MERGE INTO lake.ns.lin AS t USING (SELECT 2 AS id, 'two' AS v UNION ALL SELECT 5, 'five' "
        "UNION ALL SELECT 7, NULL UNION ALL SELECT 42, 'new') AS s ON t.id = s.id "
        "WHEN MATCHED AND s.v IS NULL THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"
    )
    assert len(lake.sql("SELECT * FROM iceberg_snapshots('ns.lin')").fetchall()) == snapshots + 1
    seq = lake.sql(
        "SELECT sequence_number FROM iceberg_snapshots('ns.lin') ORDER BY sequence_number DESC LIMIT 1"
    ).fetchall()[0][0]
    after = lineage(lake, "ns.lin")
    assert set(after) == (set(before) - {7}) | {42}
    for key in (2, 5):  # updated: same row id, new sequence number
        assert after[key] == (before[key][0], seq)
    for key in set(before) - {2, 5, 7}:  # untouched
        assert after[key] == before[key]
    assert after[42][0] >= max(r for r, _ in before.values()) + 1 and after[42][1] == seq
    computed = expected_rows(lake.table("ns.lin").metadata_location, "id")
    assert after == {k: (v["_row_id"], v["_last_updated_sequence_number"]) for k, v in computed.items()}
    assert sorted(lake.sql("SELECT id, v FROM lake.ns.lin").fetchall()) == sorted(
        [(i, f"v{i}") for i in range(10) if i not in (2, 5, 7)] + [(2, "two"), (5, "five"), (42, "new")]
    )
    # deletes are a deletion vector: no data file was removed
    summary = dict(
        lake.sql(
            "SELECT unnest(map_keys(summary)), unnest(map_values(summary)) FROM iceberg_snapshots('ns.lin') "
            "ORDER BY sequence_number DESC LIMIT 1"
        ).fetchall()
    )
    assert summary.get("deleted-data-files", "0") == "0"


def test_a_target_row_matched_twice_is_an_error_unless_a_condition_picks_one(lake: iceduck.Lake) -> None:
    truth = twins(lake, [(1, 0, "a"), (2, 0, "b")], [(1, 1, "x"), (1, 2, "y"), (2, 1, "z")], 3)
    location = lake.table("ns.t").metadata_location
    for action in ("UPDATE SET v = s.v", "DELETE"):
        with pytest.raises(ValidationError, match="same target row more than once"):
            lake.sql(f"MERGE INTO lake.ns.t AS t USING s ON t.id = s.id WHEN MATCHED THEN {action}")
    assert lake.table("ns.t").metadata_location == location
    # a condition that leaves one action per target row: no error, DuckDB's outcome
    statement = "MERGE INTO {t} USING s ON t.id = s.id WHEN MATCHED AND s.k = 2 THEN UPDATE SET v = s.v"
    assert outcome(lake, statement.format(t="lake.ns.t AS t")) == outcome(truth, statement.format(t="t"))
    assert sorted_rows(lake, "lake.ns.t") == sorted_rows(truth, "t") == [(1, 0, "y"), (2, 0, "b")]


def test_a_merge_that_cannot_run_changes_nothing(lake: iceduck.Lake) -> None:
    lake.sql("DROP TABLE IF EXISTS ns.e")
    lake.sql("CREATE TABLE ns.e (id INTEGER NOT NULL, v VARCHAR)")
    lake.sql("INSERT INTO ns.e VALUES (1, 'a')")
    location = lake.table("ns.e").metadata_location
    with pytest.raises(duckdb.Error, match="NOT NULL"):
        lake.sql(
            "MERGE INTO lake.ns.e USING (SELECT NULL::INT AS id, 'x' AS v) s ON e.id = s.id WHEN NOT MATCHED THEN INSERT *"
        )
    with pytest.raises(duckdb.Error, match="boom"):
        lake.sql(
            "MERGE INTO lake.ns.e USING (SELECT 1 AS id) s ON e.id = s.id WHEN MATCHED THEN ERROR 'boom'"
        )
    assert lake.table("ns.e").metadata_location == location


# -- pruning -------------------------------------------------------------------------------------

PARTITIONS = 20
FILES_PER_PARTITION = 3
ROWS_PER_FILE = 50


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    original = matching.read_sql

    def counting(files: Any, schema: Any, **kw: Any) -> str:
        seen.extend(files)
        return original(files, schema, **kw)

    monkeypatch.setattr(matching, "read_sql", counting)
    return seen


@pytest.fixture
def partitioned(tmp_path: Path) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.big (id BIGINT, p BIGINT, v VARCHAR) PARTITIONED BY (p)")
    for f in range(FILES_PER_PARTITION):
        n = ROWS_PER_FILE * PARTITIONS
        lake.sql(
            f"INSERT INTO ns.big SELECT i, i % {PARTITIONS}, 'v' FROM range({f * n}, {(f + 1) * n}) r(i)"
        )
    yield lake
    lake.close()


def _hide_all_but(lake: iceduck.Lake, keep: str, away: Path) -> int:
    moved = 0
    for f in sorted((Path(lake.table("ns.big").location) / "data").rglob("*.parquet")):
        if f"/{keep}/" not in str(f):
            shutil.move(f, away / str(moved))
            moved += 1
    return moved


def test_an_upsert_opens_only_the_files_its_source_can_match(
    partitioned: iceduck.Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = partitioned
    truth = duckdb.connect()
    truth.sql(
        "CREATE TABLE big AS SELECT * FROM range(3000) r(i), LATERAL (SELECT i AS id, i % 20 AS p, 'v' AS v)"
    )
    truth.sql("CREATE TABLE big2 AS SELECT id, p, v FROM big")
    away = tmp_path / "away"
    away.mkdir()
    # every file outside partition p=7 is moved away: opening one would fail
    assert _hide_all_but(lake, "p=7", away) == (PARTITIONS - 1) * FILES_PER_PARTITION
    opened = _opened(monkeypatch)
    source = "(SELECT id, 7 AS p, 'new' AS v FROM range(7, 3020, 20) r(id) WHERE id < 200 OR id > 3000)"
    statement = (
        "MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id AND t.p = s.p "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    got = lake.sql(statement.format(t="lake.ns.big", s=source)).fetchall()
    assert got == truth.sql(statement.format(t="big2", s=source)).fetchall()
    assert opened and all("/p=7/" in f for f in opened)
    assert len(set(opened)) <= FILES_PER_PARTITION
    summary = dict(
        lake.sql(
            "SELECT unnest(map_keys(summary)), unnest(map_values(summary)) FROM iceberg_snapshots('ns.big') "
            "ORDER BY sequence_number DESC LIMIT 1"
        ).fetchall()
    )
    assert summary.get("deleted-data-files", "0") == "0"  # no data file rewritten
    kept = lake.sql("SELECT id, p, v FROM lake.ns.big WHERE p = 7").fetchall()
    assert sorted(kept) == sorted(truth.sql("SELECT id, p, v FROM big2 WHERE p = 7").fetchall())


def test_an_upsert_by_key_prunes_by_the_source_keys_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.k (id BIGINT, v VARCHAR)")
    for f in range(10):
        lake.sql(f"INSERT INTO ns.k SELECT i, 'v' FROM range({f * 1000}, {(f + 1) * 1000}) r(i)")
    opened = _opened(monkeypatch)
    # 600 distinct keys (a range, not a list) within the 4th file's bounds
    lake.sql(
        "MERGE INTO lake.ns.k AS t USING (SELECT 3000 + i AS id FROM range(600) r(i)) AS s USING (id) "
        "WHEN MATCHED THEN UPDATE SET v = 'u'"
    )
    assert len(set(opened)) == 1
    assert lake.sql("SELECT count(*) FROM lake.ns.k WHERE v = 'u'").fetchall() == [(600,)]
    assert lake.sql("SELECT count(*) FROM lake.ns.k").fetchall() == [(10000,)]
    lake.close()


def test_not_matched_by_source_reads_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.k (id BIGINT, v VARCHAR)")
    for f in range(3):
        lake.sql(f"INSERT INTO ns.k SELECT i, 'v' FROM range({f * 10}, {(f + 1) * 10}) r(i)")
    opened = _opened(monkeypatch)
    lake.sql(
        "MERGE INTO lake.ns.k AS t USING (SELECT 5 AS id) AS s USING (id) "
        "WHEN MATCHED THEN UPDATE SET v = 'u' WHEN NOT MATCHED BY SOURCE AND t.id % 2 = 0 THEN DELETE"
    )
    assert len(set(opened)) == 3
    assert sorted(lake.sql("SELECT id, v FROM lake.ns.k").fetchall()) == sorted(
        [(5, "u")] + [(i, "v") for i in range(30) if i % 2 == 1 and i != 5]
    )
    lake.close()


@pytest.mark.parametrize(
    ("concurrent", "conflict"),
    [("DELETE FROM ns.c WHERE id = 2", True), ("DELETE FROM ns.c WHERE id = 8", False)],
)
def test_a_concurrent_commit_is_validated_as_for_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrent: str, conflict: bool
) -> None:
    from iceduck.errors import CommitConflictError
    from iceduck.sql import merge

    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.c (id INTEGER, v VARCHAR)")
    lake.sql("INSERT INTO ns.c SELECT i, 'v' FROM range(10) r(i)")
    other = iceduck.connect(tmp_path / "wh")
    original = merge.commit_rows

    def after_another_commit(*args: Any, **kwargs: Any) -> Any:
        other.sql(concurrent)  # commits between the MERGE's planning and its commit
        return original(*args, **kwargs)

    monkeypatch.setattr(merge, "commit_rows", after_another_commit)
    statement = (
        "MERGE INTO lake.ns.c AS t USING (SELECT 2 AS id UNION ALL SELECT 3) AS s USING (id) "
        "WHEN MATCHED THEN UPDATE SET v = 'u'"
    )
    if conflict:
        with pytest.raises(CommitConflictError):
            lake.sql(statement)
        expected = [(i, "v") for i in range(10) if i != 2]  # the other commit only
    else:
        lake.sql(statement)
        expected = [(i, "u" if i in (2, 3) else "v") for i in range(10) if i != 8]
    assert sorted(other.sql("SELECT id, v FROM lake.ns.c").fetchall()) == expected
    other.close()
    lake.close()


@pytest.mark.parametrize(("key", "conflicts"), [(5, True), (500, False)])
def test_a_row_another_writer_added_meanwhile_fails_a_merge_that_would_insert_its_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: int, conflicts: bool
) -> None:
    from iceduck.errors import CommitConflictError
    from iceduck.sql import merge

    with iceduck.connect(tmp_path / "wh") as lake, iceduck.connect(tmp_path / "wh") as other:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT, v VARCHAR)")
        lake.sql("INSERT INTO ns.t VALUES (1, 'a')")
        lake.con.execute("CREATE TABLE src AS SELECT * FROM (VALUES (1, 'b'), (5, 'mine')) s(id, v)")
        original = merge._copy_target

        def meanwhile(*args: Any) -> None:
            other.sql(f"INSERT INTO ns.t VALUES ({key}, 'other')")  # after planning, before the commit
            original(*args)

        monkeypatch.setattr(merge, "_copy_target", meanwhile)
        statement = (
            "MERGE INTO ns.t AS t USING src AS s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"
        )
        if conflicts:  # the other writer's row 5 would be matched: inserting 5 again would duplicate it
            with pytest.raises(CommitConflictError, match="concurrent commit added data file"):
                lake.sql(statement)
            assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == [(1, "a"), (5, "other")]
        else:  # the new file's bounds (500) prove it holds no source key: no conflict
            lake.sql(statement)
            assert sorted(lake.sql("SELECT * FROM lake.ns.t").fetchall()) == [
                (1, "b"),
                (5, "mine"),
                (500, "other"),
            ]
        # a MERGE that only updates matched rows inserts nothing, so it never conflicts this way
        monkeypatch.setattr(merge, "_copy_target", original)
        lake.sql("MERGE INTO ns.t AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'z'")
