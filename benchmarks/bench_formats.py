"""ORC and Avro data files (issue 13) against the same rows in Parquet.

One table per format over the same rows (id BIGINT, v DOUBLE, s VARCHAR; 1 M rows at full scale,
50,000 small), registered like `add_files` does (tests/support/register_files.py) in benchmarks/.data/formats.
Every case runs `count(*), sum(v), count(DISTINCT s)` through iceberg_scan; the peer column is the
reference peer reading the Parquet table (it reads no ORC or Avro), so every ratio is against the
same rows read from Parquet by the peer, and the results must be equal.

  formats_parquet     iceduck on the Parquet table
  formats_orc_warm    iceduck on the ORC table, its Parquet copy already made (later scans)
  formats_orc_cold    iceduck on the ORC table, copy made inside the timed run (first scan)
  formats_avro_warm / formats_avro_cold   the same for Avro
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import Case, Context, benchmark
from iceduck.duckdb.scan import clear_scan_caches
from tests.support.peer import sql_string
from tests.support.register_files import FileToAdd, register_files

if TYPE_CHECKING:
    import duckdb

_ROOT = Path(__file__).resolve().parent / ".data" / "formats"
_SCHEMA = [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "v", "type": "double", "required": False},
    {"id": 3, "name": "s", "type": "string", "required": False},
]
_QUERY = "SELECT count(*), sum(v), count(DISTINCT s) FROM iceberg_scan({t})"


def _tables(scale: str) -> dict[str, str]:
    """Metadata file of the table of each format (built once per scale)."""
    import fastavro
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    rows = 1_000_000 if scale == "full" else 50_000
    base = _ROOT / f"{scale}-{rows}"
    out = {
        fmt: base / fmt / "metadata" / "00001-registered.metadata.json" for fmt in ("parquet", "orc", "avro")
    }
    if all(p.exists() for p in out.values()):
        return {k: str(v) for k, v in out.items()}
    ids = pa.array(range(rows), pa.int64())
    data = pa.table(
        {
            "id": ids,
            "v": pa.array([i * 0.5 for i in range(rows)]),
            "s": pa.array([f"s{i % 1000}" for i in range(rows)]),
        }
    )
    for fmt, key in (("parquet", b"PARQUET:field_id"), ("orc", b"iceberg.id"), ("avro", None)):
        folder = base / fmt
        (folder / "data").mkdir(parents=True, exist_ok=True)
        path = folder / "data" / f"f.{fmt}"
        if key is not None:
            schema = pa.schema(
                [f.with_metadata({key: str(i + 1).encode()}) for i, f in enumerate(data.schema)]
            )
            table = data.cast(schema)
            (pq.write_table if fmt == "parquet" else orc.write_table)(table, path)
        else:
            avro_schema = {"type": "record", "name": "table", "fields": [
                {"name": "id", "type": ["null", "long"], "field-id": 1},
                {"name": "v", "type": ["null", "double"], "field-id": 2},
                {"name": "s", "type": ["null", "string"], "field-id": 3}]}  # fmt: skip
            with open(path, "wb") as f:
                fastavro.writer(f, fastavro.parse_schema(avro_schema), data.to_pylist(), codec="deflate")
        register_files(folder, _SCHEMA, [FileToAdd(str(path), path, fmt.upper(), rows)])
    return {k: str(v) for k, v in out.items()}


def _case(ctx: Context, fmt: str, cold: bool) -> Case:
    tables = _tables(ctx.scale)
    sql = _QUERY.format(t=sql_string(tables[fmt]))
    cache = Path(tempfile.gettempdir()) / f"iceduck-bench-copies-{os.getpid()}-{fmt}-{cold}"

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> Any:
        if cold:
            shutil.rmtree(cache, ignore_errors=True)  # the copy is made inside the timed run
        os.environ["ICEDUCK_CACHE_DIR"] = str(cache)
        clear_scan_caches()
        return con.execute(sql).fetchall()

    return Case(
        peer_sql=_QUERY.format(t=sql_string(tables["parquet"])),
        iceduck=iceduck_side,
        compare=True,
        extra={"format": fmt, "copy": "made in the run" if cold else ("reused" if fmt != "parquet" else "-")},
    )


# (case name, table format, Parquet copy made inside the timed run?, description)
_CASES = (
    ("formats_parquet", "parquet", False, "Parquet table (the baseline for the ORC and Avro cases)."),
    ("formats_orc_warm", "orc", False, "ORC table, Parquet copy already made."),
    ("formats_orc_cold", "orc", True, "ORC table, Parquet copy made in the timed run (a first scan)."),
    ("formats_avro_warm", "avro", False, "Avro table, Parquet copy already made."),
    ("formats_avro_cold", "avro", True, "Avro table, Parquet copy made in the timed run (a first scan)."),
)
for _name, _fmt, _cold, _doc in _CASES:
    benchmark(_name, description=_doc)(functools.partial(_case, fmt=_fmt, cold=_cold))
