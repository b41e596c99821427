"""Which delete files apply to which data file (table spec, "Scan Planning").

`DeleteIndex` is built from the live entries of a snapshot's delete manifests and answers, for one
data file, the deletes a reader must apply:

- a deletion vector (v3) whose `referenced_data_file` is the data file, when its data sequence
  number is >= the data file's; a data file with a DV ignores position-delete files (the DV holds
  every earlier position delete of the file);
- position-delete files with a data sequence number >= the data file's, in the data file's
  partition (same spec and values) or unpartitioned, whose `referenced_data_file` (or single-path
  `file_path` bounds) does not exclude the file;
- equality-delete files with a data sequence number strictly greater than the data file's, in the
  same partition or unpartitioned (a global delete).

Paths are compared after normalisation (`file:/a`, `file:///a` and `/a` are one file; `s3a://` and
`s3://` name the same bucket). Deletes that reference no live data file are simply never returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from iceduck.io.paths import normalize_path, split_scheme
from iceduck.spec.manifest import (
    CONTENT_EQUALITY_DELETES,
    CONTENT_POSITION_DELETES,
    DataFile,
)
from iceduck.spec.partitioning import PartitionSpec
from iceduck.spec.types import STRING
from iceduck.spec.values import from_bytes

# Reserved field id of a position-delete file's file_path column.
FIELD_ID_DELETE_FILE_PATH = 2147483546
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}

KIND_DV = "deletion-vector"
KIND_POSITION = "position-delete-file"
KIND_EQUALITY = "equality-delete-file"


def path_key(path: str) -> str:
    """A data file path in the form used to match deletes against data files."""
    norm = normalize_path(path)
    scheme, rest = split_scheme(norm)
    if scheme in _SCHEME_ALIASES:
        return f"{_SCHEME_ALIASES[scheme]}:{rest}"
    return norm


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """A live delete file as the scan sees it: the manifest's file plus its sequence number."""

    file: DataFile
    sequence_number: int
    kind: str  # KIND_DV, KIND_POSITION or KIND_EQUALITY

    @property
    def path(self) -> str:
        return self.file.file_path


def _is_dv(d: DataFile) -> bool:
    return d.content == CONTENT_POSITION_DELETES and (
        d.content_offset is not None or d.file_format.upper() == "PUFFIN"
    )


def _single_path(d: DataFile) -> str | None:
    """The one data file a position-delete file references, from referenced_data_file or bounds."""
    if d.referenced_data_file is not None:
        return d.referenced_data_file
    lo = d.lower_bounds.get(FIELD_ID_DELETE_FILE_PATH)
    hi = d.upper_bounds.get(FIELD_ID_DELETE_FILE_PATH)
    if lo is not None and lo == hi:
        try:
            return str(from_bytes(STRING, lo))
        except Exception:
            return None
    return None


class DeleteIndex:
    """Delete files of one snapshot, indexed for matching against data files."""

    def __init__(self, deletes: Iterable[DeleteFile], specs: dict[int, PartitionSpec]) -> None:
        self._dvs: dict[str, list[DeleteFile]] = {}
        self._pos_by_path: dict[str, list[DeleteFile]] = {}
        self._pos_by_partition: dict[tuple[int, tuple[Any, ...]], list[DeleteFile]] = {}
        self._pos_global: list[DeleteFile] = []
        self._eq_by_partition: dict[tuple[int, tuple[Any, ...]], list[DeleteFile]] = {}
        self._eq_global: list[DeleteFile] = []
        self.count = 0
        for d in deletes:
            self.count += 1
            f = d.file
            spec = specs.get(f.spec_id)
            unpartitioned = spec is None or spec.is_unpartitioned
            part = (f.spec_id, tuple(f.partition))
            if d.kind == KIND_DV:
                if f.referenced_data_file is not None:
                    self._dvs.setdefault(path_key(f.referenced_data_file), []).append(d)
            elif d.kind == KIND_POSITION:
                single = _single_path(f)
                if single is not None:
                    self._pos_by_path.setdefault(path_key(single), []).append(d)
                elif unpartitioned:
                    self._pos_global.append(d)
                else:
                    self._pos_by_partition.setdefault(part, []).append(d)
            elif unpartitioned:
                self._eq_global.append(d)
            else:
                self._eq_by_partition.setdefault(part, []).append(d)

    @classmethod
    def of(cls, files: Iterable[tuple[DataFile, int]], specs: dict[int, PartitionSpec]) -> DeleteIndex:
        """An index of `(delete file, data sequence number)` pairs."""
        return cls((DeleteFile(f, seq, kind_of(f)) for f, seq in files), specs)

    def __bool__(self) -> bool:
        return self.count > 0

    def for_data_file(self, data_file: DataFile, sequence_number: int) -> tuple[DeleteFile, ...]:
        """The deletes that apply to a data file with the given data sequence number."""
        if not self.count:
            return ()
        key = path_key(data_file.file_path)
        part = (data_file.spec_id, tuple(data_file.partition))
        out: list[DeleteFile] = []
        dvs = [d for d in self._dvs.get(key, ()) if d.sequence_number >= sequence_number]
        if dvs:
            # There should be one; if a broken writer left several, apply them all.
            out.extend(dvs)
        else:
            for d in (
                *self._pos_by_path.get(key, ()),
                *self._pos_by_partition.get(part, ()),
                *self._pos_global,
            ):
                if d.sequence_number >= sequence_number:
                    out.append(d)
        for d in (*self._eq_by_partition.get(part, ()), *self._eq_global):
            if d.sequence_number > sequence_number:
                out.append(d)
        return tuple(out)


def kind_of(f: DataFile) -> str:
    """KIND_DV, KIND_POSITION or KIND_EQUALITY for a delete file."""
    if f.content == CONTENT_EQUALITY_DELETES:
        return KIND_EQUALITY
    return KIND_DV if _is_dv(f) else KIND_POSITION
