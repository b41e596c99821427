"""What a plain full scan loads: `iceberg_scan` of a local table (with and without row deletes)
in a fresh process (import duckdb, connect, import iceduck, register, scan) must not import the heavy modules
its path does not need (without deletes: no pyarrow at all); each costs a fresh process many MB of its peak memory (issue 11:
peak memory of a full scan)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iceduck.lake import connect

# Modules (and their submodules) a full scan of a small local table without deletes must leave
# unloaded, with what each costs a fresh process (VmHWM, DuckDB 2.0.1): pandas ~41 MB (pyarrow
# imports it to build arrays from Python values), polars ~28 MB (manifest decoding past
# POLARS_AFTER_BYTES only), pyarrow.parquet ~5 MB (footers are read by iceduck.read.footer),
# fsspec ~5 MB (DuckDB's S3 filesystem, registered when iceduck first hands it an S3 path).
HEAVY = ("pandas", "polars", "pyarrow.parquet", "fsspec")

# Smaller ones a scan by metadata path never uses, on `register(con)` without a catalog, with and
# without row deletes (fresh-process VmRSS, measured one at a time): the SQLite and folder catalogs
# with the commit machinery and the metadata updates they apply (~2 MB: catalog.sql imports
# sqlite3), concurrent.futures (~0.7 MB with logging: the decoding and footer pools start on first
# use, for many manifests or remote footers); without deletes also Puffin and its codecs
# (zstandard, lz4.frame), which load with the first deletion vector.
UNUSED = (
    "sqlite3",
    "iceduck.catalog.sql",
    "iceduck.catalog.folder",
    "iceduck.catalog.commit",
    "iceduck.spec.updates",
    "concurrent.futures",
    "logging",
)
UNUSED_WITHOUT_DELETES = ("iceduck.puffin", "zstandard", "lz4.frame")

_SCAN = """
import sys
import duckdb
con = duckdb.connect()
import iceduck
iceduck.register(con)
con.execute("SELECT 1").fetchall()
print(con.execute("SELECT count(*), sum(id) FROM iceberg_scan(?)", [sys.argv[1]]).fetchall()[0])
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.local_only("the modules of a local scan (an S3 table needs the S3 filesystem)")
@pytest.mark.parametrize("kind", ["none", "dv"])
def test_a_full_scan_loads_none_of_the_heavy_modules(tmp_path: Path, kind: str) -> None:
    deletes = kind != "none"
    lake = connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (id BIGINT, v VARCHAR, d DATE) PARTITIONED BY (d) WITH ('format-version' = '3')")
    for k in range(3):
        lake.sql(
            f"INSERT INTO s.t SELECT i, 'v' || i, DATE '2024-01-01' + {k} FROM range({k * 100}, {k * 100 + 100}) t(i)"
        )
    expected = (300, sum(range(300)))
    if deletes:  # row deletes: deletion vectors (live-row bits read through a keyed source)
        lake.sql("DELETE FROM s.t WHERE id % 7 = 0")
        expected = (300 - len(range(0, 300, 7)), sum(i for i in range(300) if i % 7))
    location = str(lake.table("s.t").metadata_location)
    out = subprocess.run(
        [sys.executable, "-c", _SCAN, location], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    result, modules = out.stdout.splitlines()[-2:]
    assert result == str(expected)  # the scan ran and read every live row
    loaded = set(modules.split())
    assert {"iceduck.duckdb.binding", "iceduck.read.footer"} <= loaded
    # Without deletes no Arrow data is built at all, so pyarrow itself stays out (~25 MB beyond
    # numpy, which DuckDB's create_function loads): the functions register without their schemas.
    # Deletion vectors need no Parquet reader beyond DuckDB's: the data files' row counts come from
    # the footers planning read (`read.footer`), not pyarrow.parquet (~5 MB). pyroaring (~0.5 MB)
    # decodes deletion vectors only. Nor pyarrow with them: DuckDB builds the live-row bits' Arrow
    # itself (`hooks.NativeSource`), which saves ~25 MB of the scan's peak (issue 28).
    unused = [*HEAVY, "pyarrow"] if deletes else [*HEAVY, "pyarrow", "pyroaring"]
    unused += [*UNUSED] if deletes else [*UNUSED, *UNUSED_WITHOUT_DELETES]
    heavy = [h for h in unused if any(m == h or m.startswith(h + ".") for m in loaded)]
    assert not heavy, f"a plain full scan imported {heavy}"
