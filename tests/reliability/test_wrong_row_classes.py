"""The fuzzer's silent wrong-row classes, each now one clear line naming the file (issue 15).

Every case mutates one value of a real table iceduck wrote (re-encoded with fastavro, independent
of iceduck's codecs) so the file stays valid on its own, and checks the scan refuses with the file
named instead of returning other rows. Before these checks each case returned other rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pytest

import iceduck
from iceduck.duckdb.scan import clear_scan_caches
from iceduck.lake import Lake
from tests.support.rewrite import current_manifests, rewrite_avro

LAKE_NAMESPACES = ("s",)


def _scan(target: str) -> list[tuple[Any, ...]]:
    clear_scan_caches()  # metadata files are immutable, so cached by path: these tests rewrite them
    con = duckdb.connect()
    iceduck.register(con)
    try:
        return sorted(con.execute("SELECT * FROM iceberg_scan(?)", [target]).fetchall())
    finally:
        con.close()


def _refused(target: str, names: str) -> str:
    with pytest.raises(duckdb.Error) as e:
        _scan(target)
    message = str(e.value).splitlines()[0]
    assert names in message and "Traceback" not in message, message
    return message


def _table(lake: Lake, version: int) -> tuple[str, list[tuple[Any, ...]]]:
    lake.sql(
        f"CREATE TABLE s.t (id BIGINT, p VARCHAR) PARTITIONED BY (p) WITH ('format-version' = '{version}')"
    )
    lake.sql("INSERT INTO s.t SELECT i, 'p' || (i % 2) FROM range(20) t(i)")
    lake.sql("DELETE FROM s.t WHERE id % 3 = 0")
    md = str(lake.table("s.t").metadata_location)
    rows = _scan(md)
    assert len(rows) == 13
    return md, rows


def _manifest_list(md: str) -> Path:
    doc = json.loads(Path(md).read_text())
    snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
    return Path(snap["manifest-list"])


def _set(field: str, value: Callable[[Any], Any], where: Callable[[dict[str, Any]], bool] = lambda r: True) -> Any:
    done = []

    def edit(rec: dict[str, Any]) -> dict[str, Any]:
        target = rec["data_file"] if field in rec.get("data_file", {}) else rec
        if not done and where(rec):
            target[field] = value(target[field])
            done.append(True)
        return rec

    return edit


@pytest.mark.parametrize("version", [2, 3])
def test_an_entry_status_changed_to_deleted_is_an_error(lake: Lake, version: int) -> None:
    md, _ = _table(lake, version)
    (data,) = current_manifests(md, content=0)

    def deleted(rec: dict[str, Any]) -> dict[str, Any]:
        if rec["data_file"]["file_path"].endswith("-00000.parquet"):
            # as a writer that spells out sequence numbers (else the null ones already give it away)
            rec.update(status=2, sequence_number=1, file_sequence_number=1)
        return rec

    rewrite_avro(data, deleted)
    _refused(md, f"{Path(data).name}: the manifest holds 1 ADDED, 0 EXISTING, 1 DELETED entries")


def test_a_lowered_or_raised_manifest_sequence_number_is_an_error(lake: Lake) -> None:
    md, rows = _table(lake, 3)
    listed = _manifest_list(md)
    original = listed.read_bytes()

    def deletes(r: dict[str, Any]) -> bool:
        return bool(r["content"] == 1)

    rewrite_avro(listed, _set("sequence_number", lambda s: s - 1, deletes))  # the DVs then skip their files
    _refused(md, f"{listed.name}: manifest list row 0 has min_sequence_number 2 above its sequence_number 1")
    listed.write_bytes(original)
    rewrite_avro(listed, _set("sequence_number", lambda s: s + 1, deletes))
    rewrite_avro(listed, _set("min_sequence_number", lambda s: s + 1, deletes))
    _refused(md, "has sequence_number 3, but the snapshot listing it has sequence number 2")
    listed.write_bytes(original)
    assert _scan(md) == rows


@pytest.mark.parametrize("other", ["x", "s3://other-bucket/f.parquet"])
def test_a_dv_of_no_live_data_file_is_an_error(lake: Lake, other: str) -> None:
    md, _ = _table(lake, 3)
    (deletes,) = current_manifests(md, content=1)
    rewrite_avro(deletes, _set("referenced_data_file", lambda _: other))
    message = _refused(md, ".puffin: the deletion vector at offset")
    assert f"references {other}, which is no live data file" in message


def test_a_dv_moved_to_another_live_data_file_is_an_error(lake: Lake) -> None:
    md, _ = _table(lake, 3)
    (deletes,) = current_manifests(md, content=1)
    with open(deletes, "rb") as f:
        targets = [r["data_file"]["referenced_data_file"] for r in fastavro.reader(f)]
    assert len(targets) == 2
    # both DVs swap their data files: each bitmap would delete the other file's positions
    swap = {targets[0]: targets[1], targets[1]: targets[0]}

    def edit(rec: dict[str, Any]) -> dict[str, Any]:
        rec["data_file"]["referenced_data_file"] = swap[rec["data_file"]["referenced_data_file"]]
        return rec

    rewrite_avro(deletes, edit)
    # the partition check of the spec's rule 3 would also keep the DV off; iceduck must not apply it
    message = _refused(md, ".puffin: the deletion vector at offset")
    assert "was written for" in message or "no live data file" in message
