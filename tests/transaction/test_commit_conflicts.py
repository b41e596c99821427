"""Commits racing other commits, made deterministic: another writer commits between the moment a
change was planned and its first attempt. Appends rebase; deletes merge concurrent deletes into
their DVs; updates and copy-on-write rewrites fail cleanly when their rows changed; schema changes
fail when the schema changed; a dropped table is reported as dropped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from iceduck.errors import CommitConflictError, TableNotFoundError
from iceduck.lake import Lake
from iceduck.transaction.commit import TableCommitter
from tests.support.s3_fixture import s3_warehouse
from tests.support.write_helpers import SCHEMA, arrow_rows, new_lake, pyiceberg_rows, table_files


@contextlib.contextmanager
def concurrently(action: Callable[[], object]) -> Iterator[list[int]]:
    """While active, the next commit first lets `action` (another writer) commit. Yields the
    number of attempts of the interrupted commit."""
    original = TableCommitter.commit
    state = {"armed": True}
    attempts: list[int] = []

    def commit(self, change, base=None, sleep=lambda s: None):  # type: ignore[no-untyped-def]
        if state["armed"]:
            state["armed"] = False
            action()
            result = original(self, change, base, sleep)
            attempts.append(result.attempts)
            return result
        return original(self, change, base, sleep)

    TableCommitter.commit = commit  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        TableCommitter.commit = original  # type: ignore[method-assign]


@pytest.fixture
def lakes(request: pytest.FixtureRequest, tmp_path: Path, lake_storage: str) -> Iterator[tuple[Lake, Lake]]:
    """Two lakes on one warehouse (on S3 for the S3 twin of an `s3_twin` test)."""
    where: str | Path = s3_warehouse(request, tmp_path) if lake_storage == "s3" else tmp_path / "wh"
    a = new_lake(where)
    from iceduck.lake import connect

    b = connect(where)
    yield a, b
    a.close()
    b.close()


def _ids(lake: Lake) -> list[int]:
    return sorted(r["id"] for r in pyiceberg_rows(lake.table("ns.t").metadata_location))


@pytest.mark.s3_twin
def test_append_rebases_over_a_concurrent_append(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(5))
    with concurrently(lambda: b.table("ns.t").append(arrow_rows(5, 5))) as attempts:
        r = t.append(arrow_rows(5, 10))
    assert attempts == [2] and r.attempts == 2 and r.sequence_number == 3
    assert _ids(a) == list(range(15))
    md = t.load().metadata
    assert [s.sequence_number for s in md.snapshots] == [1, 2, 3]
    assert md.next_row_id == 15
    # the retried snapshot's row ids start after the concurrent one's
    assert [s.first_row_id for s in md.snapshots] == [0, 5, 10]
    # nothing of the failed attempt is left: one manifest list per snapshot
    lists = [p for p in table_files(t.location) if "/snap-" in p]
    assert len(lists) == 3


def test_delete_merges_a_concurrent_delete_of_the_same_file(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(20))
    with concurrently(lambda: b.table("ns.t").delete("id IN (1, 2)")):
        r = t.delete("id IN (2, 3)")
    assert r.attempts == 2 and len(r.merged) == 1 and r.notes
    assert _ids(a) == [i for i in range(20) if i not in (1, 2, 3)]
    snap = t.current_snapshot()
    assert snap.summary["total-delete-files"] == "1" and snap.summary["total-position-deletes"] == "3"


@pytest.mark.s3_twin
def test_delete_follows_rows_a_concurrent_update_moved(lakes: tuple[Lake, Lake]) -> None:
    """An UPDATE that commits while a DELETE of the same rows is planned moves them (a DV on the
    old file, the new values in a new file). Merging the delete's positions into the DV, as for a
    concurrent DELETE, left the updated rows alive although the acknowledged DELETE matched them
    (no serial order gives that); the delete is now planned again on the new snapshot."""
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(20))
    with concurrently(lambda: b.table("ns.t").update({"name": "'moved'"}, "id IN (3, 4)")):
        r = t.delete("id IN (2, 3)")
    assert r.deleted_rows == 2
    rows = {x["id"]: x["name"] for x in pyiceberg_rows(t.metadata_location)}
    assert sorted(rows) == [i for i in range(20) if i not in (2, 3)]
    assert rows[4] == "moved"
    # an UPDATE of other rows of the same file is still merged, not planned again
    with concurrently(lambda: b.table("ns.t").update({"name": "'other'"}, "id = 7")):
        r = t.delete("id = 8")
    assert r.attempts == 2 and r.merged
    rows = {x["id"]: x["name"] for x in pyiceberg_rows(t.metadata_location)}
    assert 8 not in rows and rows[7] == "other" and len(rows) == 17


def test_overwrite_fails_when_a_concurrent_update_moved_its_rows(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(10))
    before_files = table_files(t.location)
    with (
        pytest.raises(CommitConflictError, match="where those rows may live on"),
        concurrently(lambda: b.table("ns.t").update({"name": "'moved'"}, "id = 1")),
    ):
        t.overwrite(arrow_rows(1, 100), "id < 3")
    rows = {x["id"]: x["name"] for x in pyiceberg_rows(t.metadata_location)}
    assert sorted(rows) == list(range(10)) and rows[1] == "moved"
    leftover = {p for p in table_files(t.location) - before_files if p.endswith(".parquet")}
    assert len(leftover) == 1  # the update's file; the overwrite's own data file was removed


@pytest.mark.s3_twin
def test_update_fails_when_a_concurrent_delete_removed_its_rows(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(20))
    before_files = table_files(t.location)
    with (
        pytest.raises(CommitConflictError, match=r"deleted rows of .* that this update rewrote"),
        concurrently(lambda: b.table("ns.t").delete("id = 4")),
    ):
        t.update({"name": "'x'"}, "id = 4")
    assert _ids(a) == [i for i in range(20) if i != 4]
    # the update's data file was removed again
    leftover = {p for p in table_files(t.location) - before_files if p.endswith(".parquet")}
    assert leftover == set()
    # a concurrent delete of other rows of the same file is merged
    with concurrently(lambda: b.table("ns.t").delete("id = 5")):
        r = t.update({"name": "'x'"}, "id = 6")
    assert r.attempts == 2 and r.merged
    rows = {r["id"]: r for r in pyiceberg_rows(t.metadata_location)}
    assert 5 not in rows and rows[6]["name"] == "x" and len(rows) == 18


def test_delete_fails_when_its_file_was_rewritten(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(10))
    with (
        pytest.raises(CommitConflictError, match="no longer in the table"),
        concurrently(lambda: b.table("ns.t").overwrite(arrow_rows(10, 100))),
    ):
        t.delete("id = 1")
    assert _ids(a) == list(range(100, 110))


@pytest.mark.s3_twin
def test_copy_on_write_fails_on_concurrent_deletes(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA, properties={"write.delete.mode": "copy-on-write"})
    t.append(arrow_rows(10))
    with (
        pytest.raises(CommitConflictError, match="copy-on-write"),
        concurrently(
            lambda: (
                b.table("ns.t").set_properties({"write.delete.mode": "merge-on-read"})
                and b.table("ns.t").delete("id = 9")
            )
        ),
    ):
        t.delete("id = 1")
    assert _ids(a) == list(range(9))


def test_overwrite_everything_fails_on_concurrent_appends(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(3))
    with (
        pytest.raises(CommitConflictError, match="added data file"),
        concurrently(lambda: b.table("ns.t").append(arrow_rows(3, 3))),
    ):
        t.overwrite(arrow_rows(1, 100))
    assert _ids(a) == list(range(6))


def test_schema_change_fails_when_the_schema_changed(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)

    def other() -> None:
        with b.table("ns.t").update_schema() as u:
            u.add_column("x", "int")

    with (
        pytest.raises(CommitConflictError, match="schema changed concurrently"),
        concurrently(other),
        t.update_schema() as u,
    ):
        u.add_column("y", "int")
    assert [f.name for f in t.schema.fields] == ["id", "day", "name", "score", "x"]
    # property changes rebase
    with concurrently(lambda: b.table("ns.t").set_properties({"a": "1"})):
        t.set_properties({"b": "2"})
    assert dict(t.properties) == {"a": "1", "b": "2"}


def test_writing_to_a_table_another_writer_dropped(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(3))
    location = t.location
    files = table_files(location)
    with (
        pytest.raises(TableNotFoundError, match="dropped by another writer; nothing was committed"),
        concurrently(lambda: b.drop_table("ns.t")),
    ):
        t.delete("id = 1")
    assert table_files(location) == files  # the attempt's files are gone again
    # dropped and re-created under the same name while a commit was under way: a different table
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(3))

    def replace() -> None:
        b.drop_table("ns.t")
        b.create_table("ns.t", SCHEMA)

    with (
        pytest.raises(TableNotFoundError, match="dropped and replaced by another table"),
        concurrently(replace),
    ):
        t.delete("id = 1")
    assert b.table("ns.t").current_snapshot() is None


def test_retries_are_bounded(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA, properties={"commit.retry.num-retries": "0"})
    t.append(arrow_rows(1))
    before = table_files(t.location)
    with (
        pytest.raises(CommitConflictError, match="gave up after 1 attempts"),
        concurrently(lambda: b.table("ns.t").append(arrow_rows(1, 1))),
    ):
        t.append(arrow_rows(1, 2))
    new_data = {p for p in table_files(t.location) - before if p.endswith(".parquet")}
    live = {e.data_file.file_path for e in t.load().entries(t.current_snapshot())}
    assert len(new_data) == 1 and new_data <= live  # the other writer's file; the failed append left none
    assert _ids(a) == [0, 1]


def test_retry_that_turns_a_dv_into_a_file_removal(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(10))
    t.append(arrow_rows(5, 10))  # a second file that stays
    # planned: a DV for half of the first file; meanwhile the other half is deleted: on retry the
    # merged deletes cover the whole file, which is removed instead (no delete manifest is reused)
    with concurrently(lambda: b.table("ns.t").delete("id >= 5 AND id < 10")):
        r = t.delete("id < 5")
    assert (r.attempts, r.removed_data_files, r.added_delete_files, r.removed_delete_files) == (2, 1, 0, 1)
    assert _ids(a) == list(range(10, 15))
    snap = t.current_snapshot()
    assert snap.summary["total-delete-files"] == "0" and snap.summary["total-data-files"] == "1"


def test_deleting_from_a_table_another_writer_dropped_and_purged(lakes: tuple[Lake, Lake]) -> None:
    a, b = lakes
    t = a.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(8))
    t.delete("id = 0")  # a DV the next delete has to read
    from iceduck.table import clear_caches

    def drop() -> None:
        b.drop_table("ns.t", purge=True)
        clear_caches()

    with (
        pytest.raises(TableNotFoundError, match="dropped by another writer; nothing was committed"),
        concurrently(drop),
    ):
        t.delete("id = 4")
    assert a.list_tables("ns") == ()
