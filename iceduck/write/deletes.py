"""Writing delete files: deletion vectors in one Puffin file (v3) and position delete files (v2).

* `write_deletion_vectors_file`: every DV of a commit in one Puffin file (the spec puts no limit on
  which data files the DVs of one file reference); each becomes a delete manifest entry with the
  data file's partition, `record_count` = cardinality, `referenced_data_file`, and
  `content_offset` / `content_size_in_bytes` equal to the blob's offset and length in the footer.
  Blob metadata follows the spec (`iceduck.puffin.write_deletion_vectors`).
* `write_position_delete_files`: v2 position delete files, one per partition (delete files are
  tracked by partition), rows sorted by file path then position, columns `file_path` and `pos` with
  their reserved field ids; metrics for both columns (bounds untruncated, so readers can tell which
  data files a delete file touches) and `referenced_data_file` when it deletes from one data file.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.io.fileio import FileIO
from iceduck.io.paths import join_path
from iceduck.io.storage import default_io
from iceduck.puffin import Roaring64, write_deletion_vectors
from iceduck.spec.manifest import CONTENT_POSITION_DELETES, DataFile
from iceduck.spec.types import LONG, STRING
from iceduck.spec.values import to_bytes
from iceduck.write.types import DELETE_FILE_PATH_FIELD_ID, DELETE_POS_FIELD_ID

POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field(
            "file_path",
            pa.string(),
            nullable=False,
            metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_FIELD_ID).encode()},
        ),
        pa.field(
            "pos",
            pa.int64(),
            nullable=False,
            metadata={b"PARQUET:field_id": str(DELETE_POS_FIELD_ID).encode()},
        ),
    ]
)


def write_deletion_vectors_file(
    io: FileIO,
    data_path: str,
    vectors: Sequence[tuple[DataFile, Roaring64]],
) -> tuple[str, list[DataFile]]:
    """One Puffin file with a DV per (data file, positions); returns its path and the DV entries."""
    path = join_path(data_path, f"{uuid.uuid4()}-deletes.puffin")
    data, blobs = write_deletion_vectors([(d.file_path, positions) for d, positions in vectors])
    io.write_new(path, data)
    entries = []
    for (d, _), blob in zip(vectors, blobs, strict=True):
        entries.append(
            DataFile(
                CONTENT_POSITION_DELETES,
                path,
                "PUFFIN",
                d.spec_id,
                d.partition,
                blob.cardinality,
                len(data),
                referenced_data_file=d.file_path,
                content_offset=blob.offset,
                content_size_in_bytes=blob.length,
            )
        )
    return path, entries


def write_position_delete_files(
    data_path: str,
    deletes: Mapping[str, np.ndarray],
    files: Mapping[str, DataFile],
    partition_folder: Any = None,
    io: FileIO | None = None,
) -> list[DataFile]:
    """v2 position delete files for `deletes` (data file path -> positions), one per partition.

    `files` gives each data file's `DataFile` (for its spec and partition); `partition_folder(d)`,
    when given, names the sub-folder of `data_path` for a data file's partition.
    """
    groups: dict[tuple[int, tuple[Any, ...]], list[str]] = {}
    for path in sorted(deletes):
        d = files[path]
        groups.setdefault((d.spec_id, tuple(repr(v) for v in d.partition)), []).append(path)
    fio = io or default_io()
    out = []
    for paths in groups.values():
        first = files[paths[0]]
        folder = data_path
        if partition_folder is not None:
            rel = partition_folder(first)
            if rel:
                folder = join_path(data_path, rel)
        target = join_path(folder, f"{uuid.uuid4()}-deletes.parquet")
        positions = [np.unique(np.asarray(deletes[p], dtype=np.int64)) for p in paths]
        counts = [len(p) for p in positions]
        table = pa.table(
            {
                "file_path": pa.array(np.repeat(np.array(paths, dtype=object), counts), pa.string()),
                "pos": pa.array(np.concatenate(positions) if positions else np.zeros(0, np.int64)),
            },
            schema=POSITION_DELETE_SCHEMA,
        )
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd", write_page_checksum=True)  # readers can verify pages
        data = sink.getvalue().to_pybytes()
        fio.write_new(target, data)
        n = table.num_rows
        lower_pos = int(min(int(p[0]) for p in positions if len(p)))
        upper_pos = int(max(int(p[-1]) for p in positions if len(p)))
        out.append(
            DataFile(
                CONTENT_POSITION_DELETES,
                target,
                "PARQUET",
                first.spec_id,
                first.partition,
                n,
                len(data),
                value_counts={DELETE_FILE_PATH_FIELD_ID: n, DELETE_POS_FIELD_ID: n},
                null_value_counts={DELETE_FILE_PATH_FIELD_ID: 0, DELETE_POS_FIELD_ID: 0},
                lower_bounds={
                    DELETE_FILE_PATH_FIELD_ID: to_bytes(STRING, paths[0]),
                    DELETE_POS_FIELD_ID: to_bytes(LONG, lower_pos),
                },
                upper_bounds={
                    DELETE_FILE_PATH_FIELD_ID: to_bytes(STRING, paths[-1]),
                    DELETE_POS_FIELD_ID: to_bytes(LONG, upper_pos),
                },
                referenced_data_file=paths[0] if len(paths) == 1 else None,
            )
        )
    return out
