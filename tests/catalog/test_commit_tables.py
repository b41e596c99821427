"""`commit_tables`: several tables' requirements and updates committed all or nothing
(`iceduck.catalog.commit.PointerCommits`), on the SQLite catalog; a folder catalog refuses.

Truth: the catalog's pointers and the metadata files on disk before and after.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from iceduck.catalog.commit import TableChange
from iceduck.catalog.folder import FolderCatalog
from iceduck.catalog.sql import SqlCatalog
from iceduck.errors import CommitConflictError, ValidationError
from iceduck.lake import connect
from iceduck.spec import updates as upd
from iceduck.spec.table_metadata import read_table_metadata


def _metadata_files(wh: Path) -> set[Path]:
    return set(wh.rglob("*.metadata.json"))


def _props(key: str, value: str) -> tuple[upd.TableUpdate, ...]:
    return (upd.SetProperties({key: value}),)


def test_sqlite_catalog_commits_every_table_or_none(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with connect(wh) as lake:
        lake.sql("CREATE SCHEMA ns; CREATE TABLE ns.a (x INT); CREATE TABLE ns.b (x INT)")
    catalog = SqlCatalog.open(str(wh))
    before = {t: catalog.load_table("ns", t) for t in "ab"}
    files = _metadata_files(wh)
    a_uuid = read_table_metadata(Path(before["a"]).read_bytes()).table_uuid
    assert a_uuid is not None
    good = TableChange("ns", "a", (upd.AssertTableUUID(a_uuid),), _props("k", "a"))
    bad = TableChange("ns", "b", (upd.AssertTableUUID(uuid.uuid4()),), _props("k", "b"))
    with pytest.raises(CommitConflictError, match=r"table ns\.b .*assert-table-uuid"):
        catalog.commit_tables([good, bad])
    assert {t: catalog.load_table("ns", t) for t in "ab"} == before
    assert _metadata_files(wh) == files  # a's new metadata file was deleted
    with pytest.raises(ValidationError, match="twice"):
        catalog.commit_tables([good, good])
    done = catalog.commit_tables([good, TableChange("ns", "b", (), _props("k", "b"))])
    after = {t: catalog.load_table("ns", t) for t in "ab"}
    assert [d.metadata_location for d in done] == [after["a"], after["b"]]
    for t in "ab":
        md = read_table_metadata(Path(after[t]).read_bytes())
        assert md.properties["k"] == t
        assert md.metadata_log[-1].metadata_file == before[t]


def test_a_folder_catalog_refuses_several_tables(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with connect(wh, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA ns; CREATE TABLE ns.a (x INT); CREATE TABLE ns.b (x INT)")
        catalog = lake.catalog
        assert isinstance(catalog, FolderCatalog)
        before = {t: catalog.load_table("ns", t) for t in "ab"}
        with pytest.raises(ValidationError, match="cannot commit several tables at once"):
            catalog.commit_tables([TableChange("ns", t, (), _props("k", t)) for t in "ab"])
        assert {t: catalog.load_table("ns", t) for t in "ab"} == before
        # through SQL: a transaction on one table commits, on two is refused at COMMIT, nothing changed
        lake.sql("BEGIN; INSERT INTO ns.a VALUES (1); INSERT INTO ns.a VALUES (2); COMMIT")
        assert lake.sql("SELECT count(*) FROM lake.ns.a").fetchall() == [(2,)]
        lake.sql("BEGIN; INSERT INTO ns.a VALUES (3); INSERT INTO ns.b VALUES (3)")
        with pytest.raises(ValidationError, match="cannot commit several tables at once"):
            lake.sql("COMMIT")
        assert lake.sql(
            "SELECT count(*) FROM lake.ns.a UNION ALL SELECT count(*) FROM lake.ns.b"
        ).fetchall() == [(2,), (0,)]



def _interrupted_once(catalog: SqlCatalog, wh: Path, method: str, other: TableChange) -> list[str]:
    """Make `catalog.<method>` (a publish step) lose its first swap: another writer commits `other`
    just before it. Returns the publishes tried."""
    real = getattr(type(catalog), method).__get__(catalog)
    tried: list[str] = []

    def publish(*args: object) -> object:
        tried.append(method)
        if len(tried) == 1:
            SqlCatalog.open(str(wh)).commit_tables([other])
        return real(*args)

    setattr(catalog, method, publish)
    return tried


@pytest.mark.parametrize("several", [False, True])
def test_a_lost_swap_is_tried_again_when_the_requirements_still_hold(tmp_path: Path, several: bool) -> None:
    # the one commit pipeline the REST server uses: a pointer swap lost to another writer starts
    # again on what that writer left, and the requirements decide
    wh = tmp_path / "wh"
    with connect(wh) as lake:
        lake.sql("CREATE SCHEMA ns; CREATE TABLE ns.a (x INT)")
    catalog = SqlCatalog.open(str(wh))
    a_uuid = read_table_metadata(Path(catalog.load_table("ns", "a")).read_bytes()).table_uuid
    assert a_uuid is not None
    method = "_publish_all" if several else "_publish_next"

    def commit(change: TableChange, attempts: int) -> str:
        if several:
            return catalog.commit_tables([change], attempts=attempts)[0].metadata_location
        reqs, ups = change.requirements, change.updates
        return catalog.commit_table("ns", "a", reqs, ups, attempts=attempts).metadata_location

    mine = TableChange("ns", "a", (upd.AssertTableUUID(a_uuid),), _props("mine", "1"))
    tried = _interrupted_once(catalog, wh, method, TableChange("ns", "a", (), _props("other", "1")))
    with pytest.raises(CommitConflictError, match="another writer committed first"):
        commit(mine, attempts=1)  # the default: the caller retries (the transaction layer re-plans)
    assert tried == [method]
    files = _metadata_files(wh)
    tried = _interrupted_once(catalog, wh, method, TableChange("ns", "a", (), _props("other", "2")))
    location = commit(mine, attempts=3)
    assert tried == [method, method]
    md = read_table_metadata(Path(location).read_bytes())
    assert (md.properties["mine"], md.properties["other"]) == ("1", "2")  # applied on the other's state
    assert catalog.load_table("ns", "a") == location
    assert len(_metadata_files(wh) - files) == 2  # the other's and ours; the lost one was deleted

    # a requirement the other writer broke: 409 naming it, and no second swap
    late = TableChange("ns", "a", (upd.AssertRefSnapshotId("main", None),), _props("late", "1"))
    real = getattr(type(catalog), method).__get__(catalog)
    tried = []

    def insert_first(*args: object) -> object:
        tried.append(method)
        with connect(wh) as other:
            other.sql("INSERT INTO ns.a VALUES (2)")  # main moves: the requirement breaks
        return real(*args)

    setattr(catalog, method, insert_first)
    with pytest.raises(CommitConflictError, match="assert-ref-snapshot-id"):
        commit(late, attempts=3)
    assert tried == [method]  # one swap, lost; the second attempt stops at the requirement
    assert "late" not in read_table_metadata(Path(catalog.load_table("ns", "a")).read_bytes()).properties
