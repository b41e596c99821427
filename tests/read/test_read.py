"""How planned files are read: equality deletes (NULL equals NULL, sequence numbers), type promotion,
nested types with renamed and added fields, and the SQL that reads them.

Tables are written here with PyIceberg (an independent writer) or, for equality deletes (which no
writer at hand produces), with the spec writers and a hand-made metadata file; expected rows are
computed from what was written.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iceduck
from iceduck.spec.manifest import (
    CONTENT_DATA,
    CONTENT_EQUALITY_DELETES,
    MANIFEST_CONTENT_DATA,
    MANIFEST_CONTENT_DELETES,
    STATUS_ADDED,
    DataFile,
    ManifestEntry,
    ManifestFile,
    write_manifest_list,
)
from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.types import StructType
from tests.support.write_helpers import pyiceberg_rows

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "k", "type": "long", "required": False},
        {"id": 2, "name": "v", "type": "string", "required": False},
    ],
}
ARROW = pa.schema(
    [
        pa.field("k", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ]
)


@pytest.fixture
def con() -> Any:
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


class _EqTable:
    """A v2 table, one snapshot per step, whose steps add data files or equality-delete files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "metadata").mkdir(parents=True)
        (folder / "data").mkdir()
        self.manifests: list[ManifestFile] = []
        self.snapshots: list[dict[str, Any]] = []
        self.metadata_path = ""

    def _parquet(self, name: str, rows: list[tuple[Any, Any]], columns: tuple[str, ...] = ("k", "v")) -> str:
        path = str(self.folder / "data" / name)
        table = pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=ARROW)
        pq.write_table(table.select(list(columns)), path)
        return path

    def step(self, data: list[tuple[Any, Any]] | None = None, deletes: list[tuple[Any, Any]] | None = None,
             equality_ids: tuple[int, ...] = (1,)) -> int:  # fmt: skip
        seq = len(self.snapshots) + 1
        sid = 1000 + seq
        if data is not None:
            path = self._parquet(f"d{seq}.parquet", data)
            f = DataFile(CONTENT_DATA, path, "PARQUET", 0, (), len(data), Path(path).stat().st_size)
            self.manifests.append(self._manifest(f"m{seq}.avro", f, MANIFEST_CONTENT_DATA, sid, seq))
        if deletes is not None:
            names = tuple("kv"[i - 1] for i in equality_ids)
            path = self._parquet(f"e{seq}.parquet", deletes, names)
            f = DataFile(
                CONTENT_EQUALITY_DELETES, path, "PARQUET", 0, (), len(deletes), Path(path).stat().st_size,
                equality_ids=equality_ids,
            )  # fmt: skip
            self.manifests.append(self._manifest(f"m{seq}.avro", f, MANIFEST_CONTENT_DELETES, sid, seq))
        written = write_manifest_list(
            self.manifests,
            format_version=2,
            snapshot_id=sid,
            parent_snapshot_id=self.snapshots[-1]["snapshot-id"] if self.snapshots else None,
            sequence_number=seq,
        )
        self.manifests = list(written.manifests)
        mlist = str(self.folder / "metadata" / f"snap-{sid}.avro")
        Path(mlist).write_bytes(written.data)
        snap = {"snapshot-id": sid, "sequence-number": seq, "timestamp-ms": 1_700_000_000_000 + seq,
                "manifest-list": mlist, "summary": {"operation": "append"}, "schema-id": 0}  # fmt: skip
        if self.snapshots:
            snap["parent-snapshot-id"] = self.snapshots[-1]["snapshot-id"]
        self.snapshots.append(snap)
        md = {
            "format-version": 2, "table-uuid": str(uuid.uuid4()), "location": str(self.folder),
            "last-sequence-number": seq, "last-updated-ms": snap["timestamp-ms"], "last-column-id": 2,
            "current-schema-id": 0, "schemas": [SCHEMA], "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
            "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
            "current-snapshot-id": sid, "refs": {"main": {"snapshot-id": sid, "type": "branch"}},
            "snapshots": self.snapshots,
            "snapshot-log": [{"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in self.snapshots],
            "metadata-log": [],
        }  # fmt: skip
        self.metadata_path = str(self.folder / "metadata" / f"v{seq}.metadata.json")
        text = json.dumps(md).encode()
        read_table_metadata(text, path=self.metadata_path, strict=True)
        Path(self.metadata_path).write_bytes(text)
        return sid

    def _manifest(self, name: str, f: DataFile, content: int, sid: int, seq: int) -> ManifestFile:
        entries = [ManifestEntry(STATUS_ADDED, None, None, None, f)]
        path = str(self.folder / "metadata" / name)
        data = write_manifest(
            entries, format_version=2, schema_json=SCHEMA, partition_spec_json=[], partition_spec_id=0,
            partition_type=StructType(()), content=content, snapshot_id=sid,
        )  # fmt: skip
        Path(path).write_bytes(data)
        return summarize_manifest(
            entries, manifest_path=path, manifest_length=len(data), partition_spec_id=0,
            partition_type=StructType(()), content=content, added_snapshot_id=sid, sequence_number=seq,
        )  # fmt: skip


def _rows(con: duckdb.DuckDBPyConnection, table: str, **kw: Any) -> list[tuple[Any, ...]]:
    args = "".join(f", {k} := {v}" for k, v in kw.items())
    return sorted(con.execute(f"SELECT k, v FROM iceberg_scan('{table}'{args})").fetchall(), key=repr)


def test_equality_deletes_match_null_and_respect_sequence_numbers(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    t = _EqTable(tmp_path / "t")
    s1 = t.step(data=[(1, "a"), (2, "b"), (None, "n"), (3, "c"), (2, "b2")])
    s2 = t.step(deletes=[(2, None), (None, None)])  # k = 2 and k IS NULL, for older data only
    s3 = t.step(data=[(2, "new"), (None, "new-null"), (4, "d")])  # newer than the delete: kept
    s4 = t.step(deletes=[(4, "d"), (3, "zzz"), (None, "new-null")], equality_ids=(1, 2))  # on (k, v)
    assert _rows(con, t.metadata_path, snapshot_id=s1) == sorted(
        [(1, "a"), (2, "b"), (None, "n"), (3, "c"), (2, "b2")], key=repr
    )
    after_first_delete = [(1, "a"), (3, "c")]
    assert _rows(con, t.metadata_path, snapshot_id=s2) == sorted(after_first_delete, key=repr)
    assert _rows(con, t.metadata_path, snapshot_id=s3) == sorted(
        [*after_first_delete, (2, "new"), (None, "new-null"), (4, "d")], key=repr
    )
    assert _rows(con, t.metadata_path, snapshot_id=s4) == sorted([*after_first_delete, (2, "new")], key=repr)
    # with filters (pruning) and with the plan naming the deletes
    assert _rows(con, t.metadata_path, filter="'k >= 2'") == [(2, "new"), (3, "c")]
    plan = con.execute(
        f"SELECT file_path, delete_files FROM iceberg_scan_plan('{t.metadata_path}')"
    ).fetchall()
    kinds = {Path(p).name: sorted((Path(d["path"]).name, d["kind"]) for d in ds) for p, ds in plan}
    assert kinds == {
        "d1.parquet": [("e2.parquet", "equality-delete-file"), ("e4.parquet", "equality-delete-file")],
        "d3.parquet": [("e4.parquet", "equality-delete-file")],
    }


def test_type_promotion_and_nested_renames(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DecimalType, DoubleType, LongType, StringType

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    point = pa.struct([("x", pa.int32()), ("label", pa.string())])
    first = pa.table(
        {
            "i": pa.array([1, 2], pa.int32()),
            "f": pa.array([1.5, 2.25], pa.float32()),
            "d": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(9, 2)),
            "p": pa.array([{"x": 1, "label": "a"}, {"x": 2, "label": None}], point),
            "tags": pa.array([["a", "b"], []], pa.list_(pa.string())),
            "attrs": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
        }
    )
    table = catalog.create_table("ns.t", first.schema)
    table.append(first)
    with table.update_schema() as u:
        u.update_column("i", LongType())
        u.update_column("f", DoubleType())
        u.update_column("d", DecimalType(12, 2))
        u.rename_column("p.label", "name")
        u.add_column(("p", "y"), StringType())
        u.rename_column("tags", "labels")
    table = catalog.load_table("ns.t")
    second = pa.table(
        {
            "i": pa.array([2**40], pa.int64()),
            "f": pa.array([0.1], pa.float64()),
            "d": pa.array([Decimal("12345678.91")], pa.decimal128(12, 2)),
            "p": pa.array(
                [{"x": 3, "name": "c", "y": "yy"}],
                pa.struct([("x", pa.int32()), ("name", pa.string()), ("y", pa.string())]),
            ),
            "labels": pa.array([["z"]], pa.list_(pa.string())),
            "attrs": pa.array([[("q", 2)]], pa.map_(pa.string(), pa.int64())),
        }
    )
    table.append(second)
    loc = table.metadata_location.removeprefix("file://")
    rel = con.sql(f"SELECT * FROM iceberg_scan('{loc}') ORDER BY i")
    assert [str(t) for t in rel.types] == [
        "BIGINT",
        "DOUBLE",
        "DECIMAL(12,2)",
        'STRUCT(x INTEGER, "name" VARCHAR, y VARCHAR)',
        "VARCHAR[]",
        "MAP(VARCHAR, BIGINT)",
    ]
    ours = rel.fetchall()
    theirs = pyiceberg_rows(loc, sort_by="i")
    assert ours == [
        (r["i"], r["f"], r["d"], r["p"], r["labels"], dict(r["attrs"]) if r["attrs"] is not None else None)
        for r in theirs
    ]
    assert ours[0][3] == {"x": 1, "name": "a", "y": None}  # renamed nested field keeps its values
    assert ours[0][1] == 1.5 and ours[1][1] == 2.25  # float values read as double


def test_pruning_on_timestamps_uses_the_session_time_zone(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    utc = dt.UTC
    table = catalog.create_table("ns.t", pa.schema([("ts", pa.timestamp("us", tz="UTC"))]))
    for hour in range(4):  # four files, one hour each
        table.append(
            pa.table(
                {
                    "ts": pa.array(
                        [dt.datetime(2026, 1, 1, hour, 30, tzinfo=utc)], pa.timestamp("us", tz="UTC")
                    )
                }
            )
        )
    loc = catalog.load_table("ns.t").metadata_location.removeprefix("file://")
    con.execute("SET TimeZone = 'Europe/Amsterdam'")  # UTC+1 in January
    flt = "ts >= '2026-01-01 03:00:00'"  # 02:00 UTC
    got = con.execute(f"SELECT count(*) FROM iceberg_scan('{loc}', filter := $${flt}$$)").fetchall()
    assert got == [(2,)]  # 02:30 and 03:30 UTC
    kept = con.execute(
        f"SELECT count(*) FILTER (WHERE kept) FROM iceberg_scan_plan('{loc}', filter := $${flt}$$)"
    ).fetchall()
    assert kept == [(2,)]


@pytest.mark.parametrize("groups", [64, 0])
def test_identity_partition_values_fill_absent_columns(
    conformance: Path, con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch, groups: int
) -> None:
    """Files of a Hive-style layout lack their partition columns: the values come from the partition,
    whether each partition gets its own read (defaults) or constant lists stand in (many partitions)."""
    from iceduck.read import sql as read_sql

    monkeypatch.setattr(read_sql, "MAX_DEFAULT_GROUPS", groups)
    read_sql_cache_clear()
    table = conformance / "duckdb-iceberg/data/persistent/hive_partitioned_table"
    rows = con.execute(f"SELECT * FROM iceberg_scan('{table}') ORDER BY ALL").fetchall()
    assert [(str(d), u, e) for d, u, e in rows] == [
        ("2024-01-01", 12345, "click"),
        ("2024-01-02", 67890, "purchase"),
        ("2024-01-03", 13579, "view"),
        ("2024-01-03", 24680, "click"),
        ("2024-01-04", 86420, "view"),
        ("2024-01-04", 97531, "purchase"),
    ]
    got = con.execute(
        f"SELECT user_id FROM iceberg_scan('{table}', filter := 'event_type = ''view''') ORDER BY 1"
    ).fetchall()
    assert got == [(13579,), (86420,)]


def read_sql_cache_clear() -> None:
    from iceduck.duckdb.scan import clear_scan_caches

    clear_scan_caches()


def test_only_data_file_formats_of_the_spec_are_read(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    import dataclasses

    from iceduck.duckdb.binding import Context
    from iceduck.duckdb.scan import plan_for
    from iceduck.read.sql import scan_sql

    t = _EqTable(tmp_path / "t")
    t.step(data=[(1, "a")])
    plan = plan_for(Context().table({"tbl": t.metadata_path}))
    def as_format(fmt: str) -> Any:
        task = dataclasses.replace(plan.tasks[0], file=dataclasses.replace(plan.tasks[0].file, file_format=fmt))
        return dataclasses.replace(plan, tasks=(task,))

    # Formats the spec does not define are refused by name (ORC and Avro: tests/read/test_orc_avro.py).
    with pytest.raises(Exception, match="LANCE are not supported"):
        scan_sql(as_format("LANCE"))
    # A Parquet file the manifest calls ORC is read as the manifest says: it is not ORC.
    with pytest.raises(Exception, match="cannot read ORC file"):
        scan_sql(as_format("ORC"))
