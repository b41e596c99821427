"""Parquet copies of ORC and Avro data and delete files, so one reader path serves every format.

DuckDB reads Parquet natively (projection by field id, defaults, type promotion, filter pushdown,
row numbers for position deletes and row lineage). An ORC or Avro file is copied once into Parquet
with the same rows in the same order and its Iceberg field ids as Parquet field ids (read/orc.py,
read/avro.py): every rule of the scan then applies to it unchanged. ORC stripes become row groups,
so row groups are skipped by predicate where ORC's stripes could be.

Copies live in `$ICEDUCK_CACHE_DIR` (default `$XDG_CACHE_HOME/iceduck/parquet-copies`, else
`~/.cache/...`), named by a hash of the source's path, size and modification time: data files are
immutable, and a rewritten one gets a new copy. A copy is written to a temporary name and renamed,
so readers never see a partial one.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from iceduck.errors import UnsupportedFormatError

if TYPE_CHECKING:
    import pyarrow as pa

    from iceduck.read.avro import AvroColumns

# The readers (read/orc.py, read/avro.py: pyarrow's compute and ORC modules, fastavro) and the
# Parquet writer load in the functions that make a copy: every scan asks `needs_copy`, and a table of
# Parquet files should not pay for them.

COPY_FORMATS = ("ORC", "AVRO")
ROWS_COPY_VERSION = 1  # bump when read_avro's conversion of values changes


def cache_dir() -> Path:
    """Where the Parquet copies are kept."""
    explicit = os.environ.get("ICEDUCK_CACHE_DIR")
    if explicit:
        return Path(explicit) / "parquet-copies"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iceduck" / "parquet-copies"


def needs_copy(file_format: str) -> bool:
    """Whether files of this format are read through a Parquet copy (ORC, Avro)."""
    return file_format.upper() in COPY_FORMATS


def parquet_copy(path: str, file_format: str) -> str:
    """The local path of a Parquet file holding the rows of `path` (an ORC or Avro file), making it
    on first use."""
    fmt = file_format.upper()
    if fmt not in COPY_FORMATS:
        raise UnsupportedFormatError(f"{path}: data files in {file_format} are not supported")
    from iceduck.read.avro import avro_batches
    from iceduck.read.orc import orc_batches

    return _cached_copy(path, "", lambda: orc_batches(path) if fmt == "ORC" else avro_batches(path))


def avro_rows_copy(path: str) -> tuple[str, AvroColumns]:
    """A Parquet copy of any Avro file for `read_avro` (DuckDB's avro types, read/avro.py), and how
    to read its columns back. Kept apart from the Iceberg data-file copy of the same file, whose
    types differ."""
    from iceduck.read.avro import avro_file_columns, avro_row_batches

    columns = avro_file_columns(path)
    # the layout is part of the key: a copy made for other column types is never read back
    kind = f"rows-{ROWS_COPY_VERSION}\0{columns.schema}"
    return _cached_copy(path, kind, lambda: avro_row_batches(path, columns)), columns


def _cached_copy(path: str, kind: str, batches: Callable[[], Iterator[pa.Table]]) -> str:
    import pyarrow.parquet as pq

    st = os.stat(path)
    key = f"{path}\0{st.st_size}\0{st.st_mtime_ns}" + (f"\0{kind}" if kind else "")
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    target = cache_dir() / f"{digest}.parquet"
    if target.exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    writer: pq.ParquetWriter | None = None
    try:
        for table in batches():
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
            # one row group per ORC stripe / Avro batch keeps them skippable on their own
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
        if writer is not None:
            writer.close()
            writer = None
        os.replace(tmp, target)  # atomic: concurrent readers see no copy or a whole one
    except BaseException:
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)
        raise
    return str(target)
