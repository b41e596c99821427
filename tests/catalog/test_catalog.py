"""Catalogs: the SQLite catalog shared with PyIceberg 0.12, and the folder (Hadoop-style) catalog."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

from iceduck.catalog.base import Catalog
from iceduck.catalog.folder import FolderCatalog
from iceduck.catalog.locate import locate_table
from iceduck.catalog.sql import CATALOG_FILE_NAME, SqlCatalog
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CorruptFileError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.spec.table_metadata import read_table_metadata

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def pyiceberg(tmp_path: Path, name: str = "lake") -> PySqlCatalog:
    return PySqlCatalog(name, uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{tmp_path}/wh")


@pytest.fixture
def py_lake(tmp_path: Path) -> Iterator[PySqlCatalog]:
    """A PyIceberg catalog file with namespaces, properties and a table holding two rows."""
    py = pyiceberg(tmp_path)
    py.create_namespace("sales", {"owner": "ana", "comment": "EU sales"})
    py.create_namespace("empty")
    py.create_namespace(("a", "b"))
    orders = py.create_table("sales.orders", schema=SCHEMA)
    orders.append(pa.table({"id": [1, 2], "name": ["x", "y"]}, schema=SCHEMA))
    py.create_table(("a", "b", "deep"), schema=SCHEMA)
    yield py
    py.engine.dispose()


def ids(table: object) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())  # type: ignore[attr-defined]


# -- PyIceberg -> iceduck ----------------------------------------------------------------------------


def test_a_pyiceberg_catalog_lists_and_loads_in_iceduck(tmp_path: Path, py_lake: PySqlCatalog) -> None:
    cat = SqlCatalog(f"{tmp_path}/cat.db", name="lake")
    assert (
        cat.list_namespaces()
        == tuple(sorted(".".join(ns) for ns in py_lake.list_namespaces()))
        == (
            "a",
            "empty",
            "sales",
        )
    )
    assert cat.list_namespaces("a") == ("a.b",)
    assert cat.list_namespaces("a.b") == ()
    assert cat.list_tables("sales") == ("orders",)
    assert cat.list_tables("a.b") == ("deep",)
    assert cat.list_tables("empty") == ()
    assert cat.load_table("sales", "orders") == py_lake.load_table("sales.orders").metadata_location
    assert cat.namespace_properties("sales") == py_lake.load_namespace_properties("sales")
    assert (
        cat.namespace_properties("empty") == py_lake.load_namespace_properties("empty") == {"exists": "true"}
    )
    assert cat.namespace_exists("a") and cat.namespace_exists("a.b") and not cat.namespace_exists("b")
    # Another catalog name in the same file sees none of it.
    other = SqlCatalog(f"{tmp_path}/cat.db", name="other")
    assert other.list_namespaces() == ()
    with pytest.raises(TableNotFoundError):
        other.load_table("sales", "orders")


def test_default_locations_match_pyiceberg(tmp_path: Path, py_lake: PySqlCatalog) -> None:
    cat = SqlCatalog(f"{tmp_path}/cat.db", name="lake", warehouse=f"file://{tmp_path}/wh")
    assert (
        cat.default_table_location("sales", "fresh") == py_lake.create_table("sales.fresh", SCHEMA).location()
    )
    assert cat.default_table_location("a.b", "fresh") == py_lake.create_table("a.b.fresh", SCHEMA).location()
    py_lake.create_namespace("placed", {"location": f"file://{tmp_path}/elsewhere/"})
    assert cat.default_table_location("placed", "t") == py_lake.create_table("placed.t", SCHEMA).location()


# -- iceduck -> PyIceberg ----------------------------------------------------------------------------


def test_iceduck_entries_are_visible_to_pyiceberg(tmp_path: Path, py_lake: PySqlCatalog) -> None:
    cat = SqlCatalog(f"{tmp_path}/cat.db", name="lake")
    orders = py_lake.load_table("sales.orders")
    cat.create_namespace("ops")
    cat.create_namespace("team", {"owner": "bo"})
    cat.create_namespace("team.x")
    assert ("ops",) in py_lake.list_namespaces() and ("team",) in py_lake.list_namespaces()
    assert py_lake.list_namespaces("team") == [("team", "x")]
    assert py_lake.load_namespace_properties("ops") == {"exists": "true"}
    assert py_lake.load_namespace_properties("team") == {"owner": "bo"}

    assert cat.register_table("ops", "orders_copy", orders.metadata_location) == orders.metadata_location
    assert py_lake.list_tables("ops") == [("ops", "orders_copy")]
    copy = py_lake.load_table("ops.orders_copy")
    assert ids(copy) == [1, 2]

    # PyIceberg commits on the row iceduck created; iceduck sees the new pointer and the old one.
    copy.append(pa.table({"id": [3], "name": ["z"]}, schema=SCHEMA))
    new_location = py_lake.load_table("ops.orders_copy").metadata_location
    assert cat.load_table("ops", "orders_copy") == new_location != orders.metadata_location
    assert cat.previous_metadata_location("ops", "orders_copy") == orders.metadata_location

    # iceduck's compare-and-swap back to the first metadata is what PyIceberg then reads.
    cat.commit("ops", "orders_copy", new_location, orders.metadata_location)
    assert ids(py_lake.load_table("ops.orders_copy")) == [1, 2]

    cat.update_namespace_properties("team", {"owner": "cy", "tier": "gold"})
    assert py_lake.load_namespace_properties("team") == {"owner": "cy", "tier": "gold"}
    cat.update_namespace_properties("team", removals={"owner", "tier"})
    assert py_lake.load_namespace_properties("team") == {"exists": "true"}  # still there

    cat.rename_table("ops", "orders_copy", "team", "orders2")
    assert py_lake.list_tables("ops") == []
    assert ids(py_lake.load_table("team.orders2")) == [1, 2]
    cat.drop_table("team", "orders2")
    assert py_lake.list_tables("team") == []
    assert os.path.exists(orders.metadata_location.removeprefix("file://"))  # dropping keeps files


def test_open_creates_a_warehouse_pyiceberg_can_share(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    cat = SqlCatalog.open(str(wh))
    assert (wh / CATALOG_FILE_NAME).is_file() and cat.name == "iceduck" and cat.warehouse == str(wh)
    py = PySqlCatalog("iceduck", uri=f"sqlite:///{wh}/{CATALOG_FILE_NAME}", warehouse=str(wh))
    cat.create_namespace("ns")
    created = py.create_table("ns.by_pyiceberg", SCHEMA)
    assert created.location() == cat.default_table_location("ns", "by_pyiceberg") == f"{wh}/ns/by_pyiceberg"
    assert cat.list_tables("ns") == ("by_pyiceberg",)
    # The DDL is PyIceberg's, column for column.
    with sqlite3.connect(wh / CATALOG_FILE_NAME) as conn:
        columns = [(r[1], r[2], r[3], r[5]) for r in conn.execute("PRAGMA table_info(iceberg_tables)")]
    assert columns == [
        ("catalog_name", "VARCHAR(255)", 1, 1),
        ("table_namespace", "VARCHAR(255)", 1, 2),
        ("table_name", "VARCHAR(255)", 1, 3),
        ("metadata_location", "VARCHAR(1000)", 0, 0),
        ("previous_metadata_location", "VARCHAR(1000)", 0, 0),
        ("iceberg_type", "VARCHAR(5)", 0, 0),
    ]
    py.engine.dispose()


def test_the_ddl_equals_the_one_pyiceberg_creates(tmp_path: Path) -> None:
    PySqlCatalog("x", uri=f"sqlite:///{tmp_path}/py.db").engine.dispose()
    SqlCatalog(f"{tmp_path}/ice.db")

    def layout(db: Path) -> list[tuple[str, list[tuple[object, ...]]]]:
        with sqlite3.connect(db) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
            ]
            return [(t, [tuple(r) for r in conn.execute(f"PRAGMA table_info({t})")]) for t in tables]

    assert layout(tmp_path / "ice.db") == layout(tmp_path / "py.db")


def test_an_old_catalog_file_without_iceberg_type_is_used_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "v0.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(
            """
            CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
              table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000),
              previous_metadata_location VARCHAR(1000), PRIMARY KEY (catalog_name, table_namespace, table_name));
            CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL,
              namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL,
              property_value VARCHAR(1000) NOT NULL, PRIMARY KEY (catalog_name, namespace, property_key));
            """
        )
    py = PySqlCatalog("c", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path}/wh")
    py.create_namespace("ns")
    t = py.create_table("ns.t", SCHEMA)
    cat = SqlCatalog(str(db), name="c")
    assert cat.load_table("ns", "t") == t.metadata_location
    cat.create_table_entry("ns", "t2", t.metadata_location)
    assert py.load_table("ns.t2").metadata_location == t.metadata_location
    with sqlite3.connect(db) as conn:
        assert "iceberg_type" not in [r[1] for r in conn.execute("PRAGMA table_info(iceberg_tables)")]
    py.engine.dispose()


def test_view_rows_are_not_tables(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c")
    cat.create_namespace("ns")
    with sqlite3.connect(f"{tmp_path}/c.db") as conn:
        conn.execute(
            "INSERT INTO iceberg_tables VALUES ('c', 'ns', 'v', 's3://b/v/metadata/v1.json', NULL, 'VIEW')"
        )
    assert cat.list_tables("ns") == ()
    with pytest.raises(TableNotFoundError):
        cat.load_table("ns", "v")
    with pytest.raises(AlreadyExistsError, match="table or view"):
        cat.create_table_entry("ns", "v", "/x/metadata/v1.metadata.json")


# -- errors ------------------------------------------------------------------------------------------


def test_namespace_errors(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c")
    cat.create_namespace("a.b")
    with pytest.raises(AlreadyExistsError, match=r"namespace 'a\.b'"):
        cat.create_namespace("a.b")
    with pytest.raises(AlreadyExistsError, match="namespace 'a'"):
        cat.create_namespace("a")  # exists through its child, as in PyIceberg
    with pytest.raises(NamespaceNotFoundError, match="namespace 'nope'"):
        cat.drop_namespace("nope")
    with pytest.raises(NamespaceNotFoundError, match="namespace 'nope'"):
        cat.list_tables("nope")
    with pytest.raises(NamespaceNotFoundError):
        cat.list_namespaces("nope")
    with pytest.raises(NamespaceNotFoundError):
        cat.namespace_properties("nope")
    with pytest.raises(NamespaceNotFoundError):
        cat.create_table_entry("nope", "t", "/m.metadata.json")
    cat.create_table_entry("a.b", "t", "/m.metadata.json")
    with pytest.raises(ValidationError, match=r"namespace 'a.b'.*not empty.*\bt\b"):
        cat.drop_namespace("a.b")
    for bad in ("", "a..b", ".a", "a."):
        with pytest.raises(ValidationError, match="invalid namespace"):
            cat.create_namespace(bad)
    with pytest.raises(ValidationError, match="invalid table name"):
        cat.create_table_entry("a.b", "x.y", "/m.metadata.json")
    with pytest.raises(ValidationError, match="both updated and removed"):
        cat.update_namespace_properties("a.b", {"k": "v"}, {"k"})
    with pytest.raises(ValidationError, match="warehouse"):
        cat.default_table_location("a.b", "t")
    cat.drop_table("a.b", "t")
    cat.drop_namespace("a.b")
    assert cat.list_namespaces() == ()


def test_table_errors_rename_and_drop(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c")
    cat.create_namespace("ns")
    cat.create_namespace("other")
    cat.create_table_entry("ns", "t", "/wh/ns/t/metadata/00000-a.metadata.json")
    cat.create_table_entry("ns", "u", "/wh/ns/u/metadata/00000-b.metadata.json")
    with pytest.raises(AlreadyExistsError, match=r"ns\.t"):
        cat.create_table_entry("ns", "t", "/elsewhere.metadata.json")
    with pytest.raises(AlreadyExistsError, match=r"ns\.u"):
        cat.rename_table("ns", "t", "ns", "u")
    with pytest.raises(NamespaceNotFoundError, match="nowhere"):
        cat.rename_table("ns", "t", "nowhere", "t")
    with pytest.raises(TableNotFoundError, match=r"ns\.ghost"):
        cat.rename_table("ns", "ghost", "ns", "g2")
    cat.rename_table("ns", "t", "other", "t2")
    assert cat.list_tables("ns") == ("u",) and cat.list_tables("other") == ("t2",)
    assert cat.load_table("other", "t2") == "/wh/ns/t/metadata/00000-a.metadata.json"
    with pytest.raises(TableNotFoundError, match=r"table ns\.t in catalog 'c'"):
        cat.load_table("ns", "t")
    cat.drop_table("other", "t2")
    with pytest.raises(TableNotFoundError, match=r"other\.t2"):
        cat.drop_table("other", "t2")
    assert not cat.table_exists("other", "t2") and cat.table_exists("ns", "u")
    with pytest.raises(TableNotFoundError, match="metadata file not found"):
        cat.register_table("ns", "r", str(tmp_path / "missing.metadata.json"))


def test_compare_and_swap(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c")
    cat.create_namespace("ns")
    cat.create_table_entry("ns", "t", "m0")
    assert cat.previous_metadata_location("ns", "t") is None
    assert cat.commit("ns", "t", "m0", "m1") == "m1"
    with pytest.raises(CommitConflictError) as e:
        cat.commit("ns", "t", "m0", "m2")  # stale: somebody moved it to m1
    assert "ns.t" in str(e.value) and "m1" in str(e.value)
    assert cat.load_table("ns", "t") == "m1"
    assert cat.previous_metadata_location("ns", "t") == "m0"
    with pytest.raises(TableNotFoundError):
        cat.commit("ns", "ghost", "m0", "m1")


def test_database_forms_and_database_errors(tmp_path: Path) -> None:
    # PyIceberg's SQLAlchemy URL for the same file works as is.
    assert SqlCatalog(f"sqlite:///{tmp_path}/c.db").database == f"{tmp_path}/c.db"
    assert SqlCatalog(f"file://{tmp_path}/c.db").database == f"{tmp_path}/c.db"
    with pytest.raises(ValidationError, match="cannot open catalog database"):
        SqlCatalog(f"{tmp_path}/no/such/folder/c.db")
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CorruptFileError, match=r"junk\.db"):
        SqlCatalog(str(tmp_path / "junk.db"))


def test_a_lock_held_past_the_timeout_is_a_retryable_conflict(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c", timeout=0.2)
    cat.create_namespace("ns")
    cat.create_table_entry("ns", "t", "m0")
    other = sqlite3.connect(f"{tmp_path}/c.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CommitConflictError, match="locked"):
            cat.commit("ns", "t", "m0", "m1")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert cat.commit("ns", "t", "m0", "m1") == "m1"


def _cas_worker(db: str, worker: int, commits: int, barrier: Any, results: Any) -> None:
    cat = SqlCatalog(db, name="race", timeout=60)
    barrier.wait()  # everybody imported and ready: start together, for real contention
    done: list[tuple[str, str]] = []
    conflicts = 0
    for i in range(commits):
        new = f"w{worker}-c{i}"
        while True:
            expected = cat.load_table("ns", "t")
            try:
                cat.commit("ns", "t", expected, new)
            except CommitConflictError:
                conflicts += 1
                continue
            done.append((expected, new))
            break
    results.put((done, conflicts))


def _run_processes(target: Any, args: list[tuple[Any, ...]]) -> list[Any]:
    """Run `target(*a, barrier, queue)` in one spawned process per `a`; the values they queued."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args))
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, barrier, queue)) for a in args]
    for p in procs:
        p.start()
    out = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return out


@pytest.mark.slow
def test_concurrent_committers_form_one_chain(tmp_path: Path) -> None:
    db = str(tmp_path / "race.db")
    cat = SqlCatalog(db, name="race")
    cat.create_namespace("ns")
    cat.create_table_entry("ns", "t", "m0")
    results = _run_processes(_cas_worker, [(db, w, 20) for w in range(8)])
    commits = [pair for done, _ in results for pair in done]
    assert len(commits) == 160
    successor = dict(commits)
    assert len(successor) == 160  # no pointer value was replaced twice: no lost update
    chain = ["m0"]
    while chain[-1] in successor:
        chain.append(successor[chain[-1]])
    assert len(chain) == 161 and len(set(chain)) == 161
    assert chain[-1] == cat.load_table("ns", "t")
    assert cat.previous_metadata_location("ns", "t") == chain[-2]
    # Each worker's own commits appear in its own order along the chain.
    position = {loc: i for i, loc in enumerate(chain)}
    for w in range(8):
        mine = [position[f"w{w}-c{i}"] for i in range(20)]
        assert mine == sorted(mine)


# -- the folder catalog ------------------------------------------------------------------------------


def _stage(folder: Path, name: str, payload: object) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))
    return str(path)


def test_both_catalogs_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(SqlCatalog(f"{tmp_path}/c.db"), Catalog)
    assert isinstance(FolderCatalog(str(tmp_path / "wh")), Catalog)


def test_folder_catalog_commits_numbered_versions(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    cat = FolderCatalog(str(wh))
    cat.create_namespace("ns")
    cat.create_namespace("ns.sub")
    assert cat.list_namespaces() == ("ns",) and cat.list_namespaces("ns") == ("ns.sub",)
    location = cat.default_table_location("ns", "t")
    assert location == f"{wh}/ns/t"
    staged = _stage(Path(location), "metadata/00000-first.metadata.json", {"n": 0})
    v1 = cat.create_table_entry("ns", "t", staged)
    assert v1 == f"{location}/metadata/v1.metadata.json"
    assert not os.path.exists(staged)  # published, then the staged copy goes
    assert (Path(location) / "metadata/version-hint.text").read_text() == "1"
    assert cat.list_tables("ns") == ("t",) and cat.list_namespaces("ns") == ("ns.sub",)
    with pytest.raises(AlreadyExistsError, match=r"ns\.t"):
        cat.create_table_entry("ns", "t", _stage(tmp_path, "again.metadata.json", {}))

    v2 = cat.commit("ns", "t", v1, _stage(tmp_path, "s2.metadata.json", {"n": 2}))
    assert v2 == f"{location}/metadata/v2.metadata.json" == cat.load_table("ns", "t")
    assert json.loads(Path(v2).read_text()) == {"n": 2}
    with pytest.raises(CommitConflictError, match=r"ns\.t.*v2\.metadata\.json"):
        cat.commit("ns", "t", v1, _stage(tmp_path, "stale.metadata.json", {}))
    assert os.path.exists(tmp_path / "stale.metadata.json")  # left to the caller after a conflict

    # A racer published v3 but has not updated the hint yet: readers roll forward, commits conflict.
    (Path(location) / "metadata/v3.metadata.json").write_text(json.dumps({"n": 3}))
    assert cat.load_table("ns", "t") == f"{location}/metadata/v3.metadata.json"
    with pytest.raises(CommitConflictError):
        cat.commit("ns", "t", v2, _stage(tmp_path, "s3.metadata.json", {}))
    v4 = cat.commit("ns", "t", cat.load_table("ns", "t"), str(tmp_path / "s3.metadata.json"))
    assert v4.endswith("/v4.metadata.json")
    assert (Path(location) / "metadata/version-hint.text").read_text() == "4"
    assert locate_table(location).metadata_location == v4  # DuckDB-style readers agree

    with pytest.raises(ValidationError, match="gzip"):
        cat.commit("ns", "t", v4, str(_write_gz(tmp_path / "g.metadata.json")))
    with pytest.raises(ValidationError, match="another name"):
        cat.commit("ns", "t", v4, f"{location}/metadata/v5.metadata.json")
    with pytest.raises(ValidationError, match="not empty"):
        cat.drop_namespace("ns")
    cat.drop_table("ns", "t")
    assert not os.path.exists(location) and cat.list_tables("ns") == ()
    with pytest.raises(TableNotFoundError, match=r"ns\.t"):
        cat.load_table("ns", "t")
    cat.drop_namespace("ns.sub")
    cat.drop_namespace("ns")
    with pytest.raises(NamespaceNotFoundError):
        cat.list_tables("ns")


def _write_gz(path: Path) -> Path:
    import gzip

    path.write_bytes(gzip.compress(b"{}"))
    return path


def test_folder_catalog_errors(tmp_path: Path) -> None:
    cat = FolderCatalog(str(tmp_path / "wh"))
    with pytest.raises(NamespaceNotFoundError, match="namespace 'ns'"):
        cat.create_table_entry("ns", "t", _stage(tmp_path, "s.metadata.json", {}))
    with pytest.raises(ValidationError, match="no namespace properties"):
        cat.create_namespace("ns", {"owner": "x"})
    cat.create_namespace("ns")
    with pytest.raises(AlreadyExistsError):
        cat.create_namespace("ns")
    for bad in ("..", "a/b", ".hidden"):
        with pytest.raises(ValidationError):
            cat.create_namespace(bad)
    with pytest.raises(TableNotFoundError, match=r"ns\.t"):
        cat.commit("ns", "t", "x", "y")
    with pytest.raises(TableNotFoundError):
        cat.drop_table("ns", "t")


def _folder_worker(warehouse: str, worker: int, commits: int, barrier: Any, results: Any) -> None:
    cat = FolderCatalog(warehouse)
    barrier.wait()
    conflicts = 0
    for i in range(commits):
        staged = f"{warehouse}/staging/w{worker}-c{i}.metadata.json"
        with open(staged, "w") as f:
            json.dump({"worker": worker, "i": i}, f)
        while True:
            try:
                cat.commit("ns", "t", cat.load_table("ns", "t"), staged)
                break
            except CommitConflictError:
                conflicts += 1
    results.put(conflicts)


@pytest.mark.slow
def test_folder_catalog_concurrent_committers(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    cat = FolderCatalog(wh)
    cat.create_namespace("ns")
    os.makedirs(f"{wh}/staging")
    cat.create_table_entry("ns", "t", _stage(tmp_path, "first.metadata.json", {"worker": -1, "i": 0}))
    _run_processes(_folder_worker, [(wh, w, 10) for w in range(4)])
    metadata = Path(cat.default_table_location("ns", "t")) / "metadata"
    versions = sorted(int(p.name[1:].split(".")[0]) for p in metadata.glob("v*.metadata.json"))
    assert versions == list(range(1, 42))
    assert cat.load_table("ns", "t") == f"{metadata}/v41.metadata.json"
    contents = [json.loads((metadata / f"v{v}.metadata.json").read_text()) for v in versions[1:]]
    assert sorted((c["worker"], c["i"]) for c in contents) == [(w, i) for w in range(4) for i in range(10)]
    for w in range(4):
        mine = [c["i"] for c in contents if c["worker"] == w]
        assert mine == sorted(mine)
    assert os.listdir(f"{wh}/staging") == []


@pytest.mark.peer
def test_duckdb_reads_a_folder_catalog_table(tmp_path: Path) -> None:
    """A table published by the folder catalog (v1, v2 + version hint) is what DuckDB's iceberg
    extension reads from the folder."""
    from tests.support.peer import Peer, PeerUnavailableError

    try:
        peer = Peer.ensure(quiet=True)
    except PeerUnavailableError as exc:
        pytest.skip(f"reference peer not installed and pip cannot reach the package index: {exc}")
    wh = tmp_path / "wh"
    cat = FolderCatalog(str(wh))
    cat.create_namespace("ns")
    location = cat.default_table_location("ns", "t")
    # PyIceberg writes real metadata and data at that location; the folder catalog publishes it.
    py = pyiceberg(tmp_path)
    py.create_namespace("stage")
    t = py.create_table("stage.t", SCHEMA, location=location)
    first = t.metadata_location.removeprefix("file://")
    t.append(pa.table({"id": [7, 8, 9], "name": ["a", "b", "c"]}, schema=SCHEMA))
    second = py.load_table("stage.t").metadata_location.removeprefix("file://")
    py.engine.dispose()
    v1 = cat.create_table_entry("ns", "t", first)
    v2 = cat.commit("ns", "t", v1, second)
    assert read_table_metadata(Path(v2).read_bytes(), path=v2).current_snapshot() is not None
    with peer:
        rows = peer.query(f"SELECT count(*), sum(id) FROM iceberg_scan('{location}')")
    assert rows == [(3, 24)]
    assert locate_table(location).metadata_location == v2


# -- reads share one connection; the change token ------------------------------------------------


def test_reads_share_a_connection_and_see_every_other_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads reuse one connection per thread, yet each sees what any other connection (another
    catalog object, PyIceberg, a raw sqlite3 writer) committed before it started; the change token
    moves exactly when something was committed."""
    db = f"{tmp_path}/c.db"
    cat = SqlCatalog(db, name="c")
    other = SqlCatalog(db, name="c")
    cat.create_namespace("ns")
    assert cat.list_tables("ns") == ()
    opened: list[object] = []
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(a) or real(*a, **k))
    token = cat.change_token()
    for _ in range(5):
        assert cat.list_tables("ns") == () and cat.list_namespaces() == ("ns",)
        assert cat.change_token() == token
    assert opened == []  # the reads opened no connection
    other.create_table_entry("ns", "t", "m0")
    assert cat.change_token() != token
    assert cat.list_tables("ns") == ("t",) and cat.load_table("ns", "t") == "m0"
    token = cat.change_token()
    raw = real(db, isolation_level=None)
    try:
        raw.execute("UPDATE iceberg_tables SET metadata_location = 'm9' WHERE table_name = 't'")
    finally:
        raw.close()
    assert cat.change_token() != token and cat.load_table("ns", "t") == "m9"
    token = cat.change_token()
    cat.commit("ns", "t", "m9", "m10")  # its own writes move it too (they use connections of their own)
    assert cat.change_token() != token and cat.load_table("ns", "t") == "m10"
    # a failed read drops the shared connection; the next read opens a fresh one
    with pytest.raises(TableNotFoundError):
        cat.load_table("ns", "missing")
    assert cat.load_table("ns", "t") == "m10"


def test_a_lock_during_a_read_is_a_retryable_conflict_and_reads_recover(tmp_path: Path) -> None:
    cat = SqlCatalog(f"{tmp_path}/c.db", name="c", timeout=0.2)
    cat.create_namespace("ns")
    cat.create_table_entry("ns", "t", "m0")
    assert cat.load_table("ns", "t") == "m0"
    other = sqlite3.connect(f"{tmp_path}/c.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CommitConflictError, match="locked"):
            cat.load_table("ns", "t")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert cat.load_table("ns", "t") == "m0"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_reads_through_a_connection_of_its_own(tmp_path: Path) -> None:
    db = f"{tmp_path}/c.db"
    cat = SqlCatalog(db, name="c")
    cat.create_namespace("ns")
    assert cat.list_tables("ns") == ()  # the parent's read connection exists before the fork
    SqlCatalog(db, name="c").create_table_entry("ns", "t", "m0")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        ok = cat.list_tables("ns") == ("t",) and cat.load_table("ns", "t") == "m0"
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cat.list_tables("ns") == ("t",)
