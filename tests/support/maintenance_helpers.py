"""Independent readers for the maintenance tests: a table's rows and files at any snapshot, computed
from the metadata JSON, the Avro manifests (fastavro) and the data files (pyarrow), following the
spec's inheritance and delete rules in this file, without iceduck's table, scan or writer code.
(Deletion vector blobs are decoded with iceduck's decoder, which is checked against Java's goldens.)
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.io.storage import default_io, is_remote
from iceduck.puffin import decode_deletion_vector

ROW_ID = 2147483540
LAST_UPDATED = 2147483539


def file_bytes(path: str) -> bytes:
    """A file's bytes: local files straight from disk, S3 objects through iceduck's FileIO (the
    bytes are the store's; parsing them stays with fastavro/pyarrow/json)."""
    if is_remote(path):
        return default_io().read(path)
    with open(path, "rb") as f:
        return f.read()


def write_file(path: str, data: bytes) -> None:
    """Create or replace a file (local, making its folder, or an object on S3) with `data`."""
    if is_remote(path):
        default_io().write_atomic(path, data)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)


def remove(path: str) -> None:
    """Delete a file (local, or an object on S3)."""
    if is_remote(path):
        default_io().delete(path)
    else:
        os.remove(path)


def parquet_bytes(table: pa.Table) -> bytes:
    """`table` as the bytes of a Parquet file (to write with `write_file`)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def read_parquet(path: str) -> pa.Table:
    """A Parquet file read by pyarrow from its bytes (local or on S3)."""
    return pq.read_table(pa.BufferReader(file_bytes(path)))


def norm(path: str) -> str:
    """`os.path.normpath` for local paths; object-store URIs as they are."""
    return path if is_remote(path) else os.path.normpath(path)


def exists(path: str) -> bool:
    """Whether a file exists (local, or an object on S3)."""
    return default_io().exists(path) if is_remote(path) else os.path.exists(path)


def metadata(location: str) -> dict[str, Any]:
    return json.loads(file_bytes(location))


_AVRO: dict[str, list[dict[str, Any]]] = {}


def avro(path: str) -> list[dict[str, Any]]:
    """Records of an Avro file (cached: manifests and manifest lists never change)."""
    found = _AVRO.get(path)
    if found is None:
        found = _AVRO[path] = list(fastavro.reader(io.BytesIO(file_bytes(path))))
    return found


def _snapshot(md: dict[str, Any], snapshot_id: int | None) -> dict[str, Any] | None:
    sid = md.get("current-snapshot-id") if snapshot_id is None else snapshot_id
    return next((s for s in md.get("snapshots", []) if s["snapshot-id"] == sid), None)


def live_entries(
    md: dict[str, Any], snapshot_id: int | None = None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest list row, entry with inherited seq / first_row_id) of the snapshot's live entries."""
    snap = _snapshot(md, snapshot_id)
    if snap is None:
        return []
    out = []
    for mf in avro(snap["manifest-list"]):
        running = mf.get("first_row_id")
        for entry in avro(mf["manifest_path"]):
            d = entry["data_file"]
            if (
                entry["status"] != 2
                and mf["content"] == 0
                and d.get("first_row_id") is None
                and running is not None
            ):
                d = {**d, "first_row_id": running}
                running += d["record_count"]
            seq = entry.get("sequence_number")
            if seq is None:
                seq = mf["sequence_number"]
            if entry["status"] == 2:
                continue
            out.append((mf, {**entry, "data_file": d, "sequence_number": seq}))
    return out


def snapshot_files(location: str, snapshot_id: int | None = None) -> set[str]:
    """Every file a snapshot reads: manifest list, manifests, live data and delete files."""
    md = metadata(location)
    snap = _snapshot(md, snapshot_id)
    if snap is None:
        return set()
    files = {norm(snap["manifest-list"])}
    for mf in avro(snap["manifest-list"]):
        files.add(norm(mf["manifest_path"]))
    for _mf, e in live_entries(md, snapshot_id):
        files.add(norm(e["data_file"]["file_path"]))
    return files


_FILE_CACHE: dict[str, Any] = {}


def _read(path: str) -> Any:
    table = _FILE_CACHE.get(path)
    if table is None:
        if len(_FILE_CACHE) > 4096:
            _FILE_CACHE.clear()
        table = _FILE_CACHE[path] = pq.read_table(
            pa.BufferReader(file_bytes(path)) if is_remote(path) else path
        )
    return table


def rows(
    location: str, snapshot_id: int | None = None, columns: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The rows of a snapshot with `_row_id` and `_last_updated_sequence_number` (v3 rules)."""
    md = metadata(location)
    snap = _snapshot(md, snapshot_id)
    if snap is None:
        return []
    schema_id = snap.get("schema-id", md["current-schema-id"])
    schema = next(s for s in md["schemas"] if s["schema-id"] == schema_id)
    wanted = list(columns) if columns is not None else [f["name"] for f in schema["fields"]]
    entries = live_entries(md, snapshot_id)
    data = [(e["data_file"], e["sequence_number"]) for mf, e in entries if mf["content"] == 0]
    deleted: dict[str, set[int]] = {}
    equality: list[tuple[int, dict[str, Any], tuple[int, ...], set[tuple[Any, ...]]]] = []
    spec_of = {
        e["data_file"]["file_path"]: mf["partition_spec_id"] for mf, e in entries if mf["content"] == 0
    }
    unpartitioned = {s["spec-id"] for s in md.get("partition-specs", []) if not s["fields"]}
    for mf, e in entries:
        d = e["data_file"]
        if mf["content"] == 0:
            continue
        if d["content"] == 2:
            # spec: applies to data files of an older data sequence number in its partition (or
            # everywhere when its spec is unpartitioned), to rows equal on every equality column
            t = _read(d["file_path"])
            by_id = {int(f.metadata[b"PARQUET:field_id"]): f.name for f in t.schema if f.metadata}
            eq_ids = tuple(d["equality_ids"])
            values = set(zip(*(t.column(by_id[i]).to_pylist() for i in eq_ids), strict=True))
            equality.append((e["sequence_number"], {**d, "spec_id": mf["partition_spec_id"]}, eq_ids, values))
            continue
        if d["file_format"].upper() == "PUFFIN":
            start = d["content_offset"]
            blob = file_bytes(d["file_path"])[start : start + d["content_size_in_bytes"]]
            deleted.setdefault(d["referenced_data_file"], set()).update(
                int(p) for p in decode_deletion_vector(blob, path=d["file_path"])
            )
        else:
            t = _read(d["file_path"])
            for path, pos in zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True):
                # a position delete applies to data files with a data sequence number not above its own
                target_seq = next((s for df, s in data if df["file_path"] == path), None)
                if target_seq is not None and target_seq <= e["sequence_number"]:
                    deleted.setdefault(path, set()).add(int(pos))
    out = []
    by_name = {f["name"]: f["id"] for f in schema["fields"]}
    for d, seq in data:
        t = _read(d["file_path"])
        ids = {int(f.metadata[b"PARQUET:field_id"]): f.name for f in t.schema if f.metadata}
        gone = set(deleted.get(d["file_path"], set()))
        cols = {
            name: t.column(ids[fid]).to_pylist() if fid in ids else [None] * t.num_rows
            for name, fid in by_name.items()
        }
        for eq_seq, eq_file, eq_ids, values in equality:
            applies = eq_file["spec_id"] in unpartitioned or (
                eq_file["spec_id"] == spec_of[d["file_path"]] and eq_file["partition"] == d["partition"]
            )
            if seq < eq_seq and applies:
                by_field = {fid: t.column(ids[fid]).to_pylist() for fid in eq_ids}
                gone |= {p for p in range(t.num_rows) if tuple(by_field[i][p] for i in eq_ids) in values}
        row_ids = t.column(ids[ROW_ID]).to_pylist() if ROW_ID in ids else [None] * t.num_rows
        seqs = t.column(ids[LAST_UPDATED]).to_pylist() if LAST_UPDATED in ids else [None] * t.num_rows
        first = d.get("first_row_id")
        for pos in range(t.num_rows):
            if pos in gone:
                continue
            row = {name: cols[name][pos] for name in wanted}
            row["_row_id"] = (
                None if first is None else (row_ids[pos] if row_ids[pos] is not None else first + pos)
            )
            row["_last_updated_sequence_number"] = (
                None if first is None else (seqs[pos] if seqs[pos] is not None else seq)
            )
            out.append(row)
    return out


def checksum(rows_: Iterable[dict[str, Any]], columns: Iterable[str]) -> list[tuple[Any, ...]]:
    """A table's rows as a sorted list of tuples (a multiset, comparable across layouts)."""
    cols = list(columns)
    return sorted((tuple(r[c] for c in cols) for r in rows_), key=repr)


def tree(folder: str | Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under a folder: (size, mtime ns, first bytes) by path, to prove nothing changed."""
    out = {}
    for root, _dirs, names in os.walk(folder):
        for name in names:
            p = os.path.join(root, name)
            st = os.stat(p)
            with open(p, "rb") as f:
                head = f.read(64)
            out[p] = (st.st_size, st.st_mtime_ns, head)
    return out
