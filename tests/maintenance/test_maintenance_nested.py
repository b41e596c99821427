"""Maintenance never touches another table's files (issue 15, item 1).

The reproduction of the data-loss bug, through `lake.sql` exactly as reported: a table created at
`<location of s.o>/data/nested_tbl`, then `iceberg_remove_orphan_files('s.o', ...)`. Such a CREATE
is refused now; created anyway (with the documented property, through PyIceberg on the same catalog,
or written by another tool and registered nowhere), the nested table keeps every file and its rows.
Truth: the files' bytes and modification times before and after, and PyIceberg reading the tables.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from unittest.mock import ANY

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.types import IntegerType, NestedField

from iceduck.catalog.locations import ALLOW_NESTED_PROPERTY
from iceduck.catalog.sql import CATALOG_FILE_NAME
from iceduck.errors import IcebergError
from iceduck.lake import Lake, connect
from tests.support.write_helpers import pyiceberg_rows

DAY_S = 24 * 3600
ORPHANS = (
    "SELECT kind, item, outcome FROM iceberg_remove_orphan_files('s.o', "
    "older_than := now() - INTERVAL 1 DAY{extra})"
)


def _tree(folder: str | Path) -> dict[str, tuple[int, int, str]]:
    """path -> (size, mtime ns, sha256) of every file under `folder`."""
    out = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            p = os.path.join(root, name)
            st = os.stat(p)
            out[p] = (st.st_size, st.st_mtime_ns, hashlib.sha256(Path(p).read_bytes()).hexdigest())
    return out


def _age(folder: str | Path, days: float = 3) -> None:
    """Make every file under `folder` look `days` old (orphan removal only takes old files)."""
    old = time.time() - days * DAY_S
    for root, _dirs, files in os.walk(folder):
        for name in files:
            os.utime(os.path.join(root, name), (old, old))


def _outer(tmp_path: Path) -> tuple[Lake, str]:
    lake = connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.o (id INTEGER)")
    lake.sql("INSERT INTO s.o VALUES (1), (2)")
    return lake, lake.table("s.o").location


def _junk(loc: str) -> Path:
    """A real orphan of s.o: old and referenced by nothing."""
    junk = Path(loc) / "data" / "left-behind.parquet"
    junk.write_bytes(b"unreferenced")
    return junk


def test_item_1_create_inside_another_table_is_refused(tmp_path: Path) -> None:
    lake, loc = _outer(tmp_path)
    with pytest.raises(IcebergError, match=r"inside the location of table s\.o") as e:
        lake.sql(f"CREATE TABLE s.inner (id INTEGER) WITH ('location' = '{loc}/data/nested_tbl')")
    assert ALLOW_NESTED_PROPERTY in str(e.value) and "\n" not in str(e.value)
    assert lake.list_tables("s") == ("o",)
    assert not os.path.exists(f"{loc}/data/nested_tbl")
    # ... and the other way round: a table whose location holds an existing table's, or shares it
    with pytest.raises(IcebergError, match=r"contains the location of table s\.o"):
        lake.sql(f"CREATE TABLE s.outer (id INTEGER) WITH ('location' = '{os.path.dirname(loc)}')")
    with pytest.raises(IcebergError, match=r"is the location of table s\.o"):
        lake.sql(f"CREATE TABLE s.twin (id INTEGER) WITH ('location' = '{loc}/')")
    # a sibling whose name merely starts with the same letters is fine
    lake.sql(f"CREATE TABLE s.sibling (id INTEGER) WITH ('location' = '{loc}_2')")


@pytest.mark.parametrize("how", ["property", "pyiceberg"])
def test_item_1_orphan_removal_leaves_a_nested_table_alone(tmp_path: Path, how: str) -> None:
    lake, loc = _outer(tmp_path)
    nested = f"{loc}/data/nested_tbl"
    if how == "property":
        lake.sql(
            f"CREATE TABLE s.inner (id INTEGER) WITH ('location' = '{nested}', '{ALLOW_NESTED_PROPERTY}' = 'true')"
        )
        lake.sql("INSERT INTO s.inner VALUES (10), (20)")
        lake.sql("DELETE FROM s.inner WHERE id = 20")
        lake.sql("INSERT INTO s.inner VALUES (30)")
    else:  # another tool, same catalog: no refusal on its side
        py = PySqlCatalog(
            "iceduck", uri=f"sqlite:///{tmp_path}/wh/{CATALOG_FILE_NAME}", warehouse=str(tmp_path / "wh")
        )
        t = py.create_table(
            "s.inner", PySchema(NestedField(1, "id", IntegerType(), required=False)), location=nested
        )
        t.append(pa.table({"id": pa.array([10, 30], pa.int32())}))
        py.engine.dispose()
    junk = _junk(loc)
    _age(loc)
    inner_files = _tree(nested)
    assert len(inner_files) >= 4
    inner_md = lake.table("s.inner").metadata_location
    rows = pyiceberg_rows(inner_md, sort_by="id")
    assert rows == [{"id": 10}, {"id": 30}]

    planned = lake.sql(ORPHANS.format(extra="")).fetchall()
    assert [(k, item) for k, item, _ in planned if k != "summary"] == [("orphan", str(junk))]
    ran = lake.sql(ORPHANS.format(extra=", dry_run := false")).fetchall()
    assert [(k, item, o) for k, item, o in ran if k == "orphan"] == [("orphan", str(junk), "deleted")]

    assert not junk.exists()
    assert _tree(nested) == inner_files
    assert pyiceberg_rows(lake.table("s.inner").metadata_location, sort_by="id") == rows
    assert sorted(lake.sql("SELECT id FROM lake.s.inner").fetchall()) == [(10,), (30,)]
    assert sorted(lake.sql("SELECT id FROM lake.s.o").fetchall()) == [(1,), (2,)]
    # the nested table's own orphan removal still works on its own folder
    own_junk = Path(nested) / "data" / "mine.parquet"
    own_junk.write_bytes(b"x")
    _age(own_junk.parent)
    out = lake.sql(
        "SELECT kind, item, outcome FROM iceberg_remove_orphan_files('s.inner', "
        "older_than := now() - INTERVAL 1 DAY, dry_run := false) WHERE kind = 'orphan'"
    ).fetchall()
    assert out == [("orphan", str(own_junk), "deleted")]


def test_item_1_unregistered_nested_table_stops_the_run(tmp_path: Path) -> None:
    """A table written into s.o's folder by another tool and registered nowhere: its metadata files
    carry another table uuid, which stops orphan removal before anything is deleted."""
    lake, loc = _outer(tmp_path)
    elsewhere = connect(tmp_path / "other")
    elsewhere.sql("CREATE SCHEMA x")
    elsewhere.sql("CREATE TABLE x.t (id INTEGER)")
    elsewhere.sql("INSERT INTO x.t VALUES (7)")
    source = elsewhere.table("x.t").location
    elsewhere.close()
    nested = f"{loc}/data/nested_tbl"
    shutil.copytree(source, nested)
    junk = _junk(loc)
    _age(loc)
    before = _tree(loc)

    planned = lake.sql(ORPHANS.format(extra="")).fetchall()
    # the dry run shows the stop, and none of the stranger's files as orphans
    assert [(k, i) for k, i, _o in planned if k in ("anomaly", "orphan")] == [
        ("anomaly", None),
        ("orphan", str(junk)),
    ]
    with pytest.raises(duckdb.Error, match=r"nothing deleted.*metadata of another table") as e:
        lake.sql(ORPHANS.format(extra=", dry_run := false")).fetchall()
    assert "Traceback" not in str(e.value)
    assert _tree(loc) == before  # the junk too: the whole run stopped


def test_expiry_keeps_files_a_table_sharing_the_location_reaches(tmp_path: Path) -> None:
    """Two catalog entries on one location (a clone registered on the other's metadata): expiring
    one's snapshots deletes nothing the other still reaches, and orphan removal on the clone does not
    take the original's newer files."""
    lake, loc = _outer(tmp_path)
    lake.sql("INSERT INTO s.o VALUES (3)")
    lake.sql("DELETE FROM s.o WHERE id = 1")
    clone_md = lake.table("s.o").metadata_location
    lake.catalog.register_table("s", "clone", clone_md)  # type: ignore[attr-defined]
    clone_rows = pyiceberg_rows(clone_md, sort_by="id")
    lake.sql("INSERT INTO s.o VALUES (4)")
    lake.sql("DELETE FROM s.o WHERE id = 2")
    time.sleep(0.01)
    out = lake.sql(
        "SELECT kind, item, outcome, detail FROM iceberg_expire_snapshots('s.o', older_than := now(), "
        "retain_last := 1, dry_run := false)"
    ).fetchall()
    kept = [r for r in out if r[2] == "kept"]
    deleted = [r for r in out if r[2] == "deleted"]
    assert kept and all("belongs to table s.clone" in r[3] for r in kept)
    assert deleted  # files only s.o's expired snapshots reached are still cleaned up
    assert pyiceberg_rows(clone_md, sort_by="id") == clone_rows == [{"id": 2}, {"id": 3}]
    assert sorted(lake.sql("SELECT id FROM lake.s.o").fetchall()) == [(3,), (4,)]
    # orphan removal of the clone: s.o's newer files are under the same location but s.o's
    _age(loc)
    after = _tree(loc)
    r = lake.sql(
        "SELECT kind, item FROM iceberg_remove_orphan_files('s.clone', older_than := now() - INTERVAL 1 DAY, "
        "dry_run := false) WHERE kind IN ('orphan', 'anomaly')"
    ).fetchall()
    assert r == []
    assert _tree(loc) == after
    assert sorted(lake.sql("SELECT id FROM lake.s.o").fetchall()) == [(3,), (4,)]


def test_expiry_never_deletes_under_a_nested_table(tmp_path: Path) -> None:
    """A table created at `<location of s.o>/data` holds s.o's own data folder: expiring s.o's old
    snapshots keeps every file there (recorded as kept), deleting only s.o's metadata-side files."""
    lake, loc = _outer(tmp_path)
    lake.sql("INSERT INTO s.o VALUES (3)")
    lake.sql("DELETE FROM s.o WHERE id <= 2")  # the first data file leaves the table
    nested = f"{loc}/data"
    lake.sql(
        f"CREATE TABLE s.inner (id INTEGER) WITH ('location' = '{nested}', '{ALLOW_NESTED_PROPERTY}' = 'true')"
    )
    lake.sql("INSERT INTO s.inner VALUES (10)")
    before = _tree(nested)
    time.sleep(0.01)
    query = (
        "SELECT kind, item, outcome, detail FROM iceberg_expire_snapshots('s.o', older_than := now(), "
        "retain_last := 1{extra}) WHERE kind NOT IN ('summary', 'snapshot', 'ref')"
    )
    planned = lake.sql(query.format(extra="")).fetchall()
    assert [r for r in planned if r[1].startswith(nested + "/")] == [
        ("data", ANY, "would keep", "belongs to table s.inner")
    ]
    out = lake.sql(query.format(extra=", dry_run := false")).fetchall()
    under = [r for r in out if r[1].startswith(nested + "/")]
    assert under and all(r[2] == "kept" and r[3] == "belongs to table s.inner" for r in under)
    assert [r for r in out if r[2] == "deleted"] == [r for r in out if not r[1].startswith(nested + "/")]
    assert any(r[2] == "deleted" for r in out)
    assert _tree(nested) == before
    assert lake.sql("SELECT id FROM lake.s.inner").fetchall() == [(10,)]
    assert sorted(lake.sql("SELECT id FROM lake.s.o").fetchall()) == [(3,)]
