"""Helpers for the write tests: reading tables back with independent readers, listing their files."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from pyiceberg.table import StaticTable

from iceduck.io.storage import default_io, is_remote
from iceduck.lake import Lake, connect
from tests.support.s3_fixture import pyiceberg_properties


def pyiceberg_rows(
    metadata_location: str, columns: tuple[str, ...] | None = None, sort_by: str | None = None
) -> list[dict[str, Any]]:
    """Every row of the table as PyIceberg 0.12 reads it (sorted by `sort_by` when given)."""
    table = StaticTable.from_metadata(metadata_location, properties=pyiceberg_properties(metadata_location))
    scan = table.scan(selected_fields=columns) if columns else table.scan()
    rows = scan.to_arrow().to_pylist()
    if sort_by is not None:
        rows.sort(key=lambda r: (r[sort_by] is None, r[sort_by]))
    return rows


def avro_records(path: str) -> list[dict[str, Any]]:
    """Raw records of an Avro file (manifest or manifest list), read with fastavro."""
    return list(fastavro.reader(io.BytesIO(default_io().read(path))))


def manifest_entries(metadata_location: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest list row, raw manifest entry) of the current snapshot, straight from the Avro files."""
    table = StaticTable.from_metadata(metadata_location, properties=pyiceberg_properties(metadata_location))
    snap = table.metadata.current_snapshot()
    if snap is None:
        return
    for mf in avro_records(snap.manifest_list):
        for entry in avro_records(mf["manifest_path"]):
            yield mf, entry


def table_files(folder: str | Path) -> set[str]:
    """Every file under a table folder."""
    if is_remote(str(folder)):
        return {f.path for f in default_io().list_prefix(str(folder))}
    out = set()
    for root, _dirs, files in os.walk(folder):
        for name in files:
            out.add(os.path.join(root, name))
    return out


def new_lake(path: Path | str, catalog: str = "sql") -> Lake:
    """A lake on a fresh warehouse with namespace `ns`."""
    lake = connect(path, catalog=catalog)
    lake.create_namespace("ns")
    return lake


def arrow_rows(n: int, start: int = 0) -> pa.Table:
    """`n` rows: id (long), day (date, 4 values), name (string), score (double)."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([19000 + i % 4 for i in ids], pa.date32()),
            "name": pa.array([f"n{i}" for i in ids]),
            "score": pa.array([i / 2 for i in ids], pa.float64()),
        }
    )


SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("name", pa.string()), ("score", pa.float64())])
