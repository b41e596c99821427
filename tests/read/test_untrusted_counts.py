"""Counts read from files never size an allocation before the file itself confirms them (issue 15,
item 2), and a deletion vector is applied only when its cardinality agrees with its manifest entry
and its Puffin blob.

A manifest's `record_count` rewritten to 0, 5e9, 2^40 or -1 (fastavro re-encoding): without deletes
the scan returns exactly the rows the table had (the count is not used); with a deletion vector the
scan stops in a fraction of a second with one line naming the file, instead of allocating 6.7 GB or
1 TiB. Each lie runs in a subprocess with a time limit, so a regression fails instead of exhausting
the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iceduck.lake import connect
from tests.support.rewrite import current_manifests, rewrite_avro, rewrite_puffin_footer

LIES = [0, 5_000_000_000, 2**40, -1]

_SCAN = textwrap.dedent(
    """
    import json, resource, sys, time
    import duckdb
    import iceduck
    con = duckdb.connect()
    iceduck.register(con)
    t0 = time.time()
    try:
        rows = sorted(con.execute(f"SELECT id FROM iceberg_scan('{sys.argv[1]}')").fetchall())
        out = {"rows": [r[0] for r in rows]}
    except duckdb.Error as e:
        out = {"error": str(e)}
    out["seconds"] = time.time() - t0
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps(out))
    """
)


def _scan(metadata_location: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _SCAN, metadata_location], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _table(tmp_path: Path, *, delete: bool) -> str:
    lake = connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (id INTEGER)")
    lake.sql("INSERT INTO s.t VALUES (1), (2), (3)")
    if delete:
        lake.sql("DELETE FROM s.t WHERE id = 2")
    location = str(lake.table("s.t").metadata_location)
    lake.close()
    return location


def _lie(metadata_location: str, value: int) -> None:
    def edit(rec: dict[str, object]) -> dict[str, object]:
        rec["data_file"]["record_count"] = value  # type: ignore[index]
        return rec

    for manifest in current_manifests(metadata_location, content=0):
        rewrite_avro(manifest, edit)


@pytest.mark.parametrize("value", LIES)
def test_a_lying_record_count_without_deletes_is_one_clear_error(tmp_path: Path, value: int) -> None:
    # The file is not the one its entry describes (issue 24, item 8: a data file swapped for another
    # valid one): its rows are read, but a count(*) answered from the manifests (Java's aggregate
    # pushdown) would give the lie, so the table is refused as with a deletion vector below.
    md = _table(tmp_path, delete=False)
    assert _scan(md)["rows"] == [1, 2, 3]
    _lie(md, value)
    out = _scan(md)
    error = str(out["error"]).splitlines()[0]
    if value < 0:  # impossible on its face: the manifest is refused, naming it
        assert "negative data_file.record_count -1" in error and "-m0.avro" in error
    else:
        assert ".parquet: the data file holds 3 rows, but its manifest entry says record_count " + str(value) in error
    assert float(out["seconds"]) < 10  # type: ignore[arg-type]


@pytest.mark.parametrize("value", LIES)
def test_a_lying_record_count_with_a_deletion_vector_is_one_clear_error(tmp_path: Path, value: int) -> None:
    md = _table(tmp_path, delete=True)
    assert _scan(md)["rows"] == [1, 3]
    _lie(md, value)
    out = _scan(md)
    # (DuckDB appends the statement's position on a second line to errors raised while binding)
    error = str(out["error"]).splitlines()[0]
    assert "Traceback" not in error and "MemoryError" not in error
    if value < 0:
        assert "negative data_file.record_count -1" in error
    else:
        assert (
            ".parquet: the data file holds 3 rows, but its manifest entry says record_count " + str(value)
            in error
        )
    assert float(out["seconds"]) < 10  # type: ignore[arg-type]
    assert int(out["max_rss_mb"]) < 1500  # type: ignore[call-overload]


def test_a_dv_whose_puffin_blob_disagrees_is_not_applied(tmp_path: Path) -> None:
    md = _table(tmp_path, delete=True)
    (puffin,) = sorted((tmp_path / "wh").rglob("*.puffin"))

    def edit(footer: dict[str, object]) -> dict[str, object]:
        for blob in footer["blobs"]:  # type: ignore[attr-defined]
            blob["properties"]["cardinality"] = "2"
        return footer

    rewrite_puffin_footer(puffin, edit)
    error = str(_scan(md)["error"])
    assert (
        f"{puffin}: the deletion vector at offset 4 holds 1 positions but its Puffin blob says cardinality 2"
        in error
    )
    assert "iceberg_dv_check" in error


def test_a_dv_whose_manifest_record_count_disagrees_is_not_applied(tmp_path: Path) -> None:
    md = _table(tmp_path, delete=True)

    def edit(rec: dict[str, object]) -> dict[str, object]:
        rec["data_file"]["record_count"] = 2  # type: ignore[index]
        return rec

    for manifest in current_manifests(md, content=1):
        rewrite_avro(manifest, edit)
    error = str(_scan(md)["error"])
    assert "holds 1 positions but its manifest entry says record_count 2; it is not applied" in error
    assert "iceberg_dv_check" in error
