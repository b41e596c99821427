"""Which delete files apply to which data file: the one set of delete rules (table spec, "Scan Planning").

`DeleteIndex` is built from the live delete entries of a snapshot and answers, for one data file,
the deletes a reader (a scan, a DELETE/UPDATE, a compaction, a health report) must apply:

- a deletion vector (v3) whose `referenced_data_file` is the data file, when its data sequence
  number is >= the data file's; a data file with a DV ignores position-delete files (the DV holds
  every earlier position delete of the file);
- position-delete files with a data sequence number >= the data file's: one that names a single
  data file (`referenced_data_file`, or equal lower/upper `file_path` bounds) applies to that file
  only; one that names several applies to the files of its partition (same spec id and values),
  never to other partitions or specs (the spec's exception for unpartitioned deletes is made for
  equality deletes only);
- equality-delete files with a data sequence number strictly greater than the data file's, in the
  same partition, or everywhere when the delete's spec is unpartitioned (a global delete).

Paths are matched by a key function, the table's `PathResolver.match_key`: both the data file's
path and the delete's reference are resolved onto the table's actual folder and normalised, so the
many spellings engines record (`hdfs://nn:8020/w/t/f` and `/w/t/f`, `s3a://` and `s3://`, `file:/`
and `file:///`) match. Deletes that reference no live data file are simply never returned.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from iceduck.io.paths import storage_key
from iceduck.spec.manifest import CONTENT_EQUALITY_DELETES, DataFile, ManifestEntry
from iceduck.spec.partitioning import PartitionSpec
from iceduck.spec.types import STRING
from iceduck.spec.values import from_bytes

# Reserved field id of a position-delete file's file_path column.
FIELD_ID_DELETE_FILE_PATH = 2147483546

KIND_DV = "deletion-vector"
KIND_POSITION = "position-delete-file"
KIND_EQUALITY = "equality-delete-file"

PathKey = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """A live delete file as the scan sees it: the manifest's file plus its sequence number."""

    file: DataFile
    sequence_number: int
    kind: str  # KIND_DV, KIND_POSITION or KIND_EQUALITY
    entry: ManifestEntry | None = None  # the manifest entry (writers replace or remove deletes by it)

    @property
    def path(self) -> str:
        return self.file.file_path


def kind_of(f: DataFile) -> str:
    """KIND_DV, KIND_POSITION or KIND_EQUALITY for a delete file."""
    if f.content == CONTENT_EQUALITY_DELETES:
        return KIND_EQUALITY
    return KIND_DV if f.is_deletion_vector else KIND_POSITION


def is_unpartitioned(specs: dict[int, PartitionSpec], spec_id: int) -> bool:
    """Whether files written with `spec_id` are unpartitioned (no spec, or only void fields).

    The one place this is decided: an unpartitioned equality delete is global.
    """
    spec = specs.get(spec_id)
    return spec is None or spec.is_unpartitioned


def referenced_path(d: DataFile) -> str | None:
    """The one data file a position-delete file or DV references, from referenced_data_file or bounds."""
    if d.referenced_data_file is not None:
        return d.referenced_data_file
    if d.is_deletion_vector:
        return None
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

    def __init__(
        self, deletes: Iterable[DeleteFile], specs: dict[int, PartitionSpec], key: PathKey = storage_key
    ) -> None:
        self.key = key
        self._dvs: dict[str, list[DeleteFile]] = {}
        self._pos_by_path: dict[str, list[DeleteFile]] = {}
        self._pos_by_partition: dict[tuple[int, tuple[Any, ...]], list[DeleteFile]] = {}
        self._eq_by_partition: dict[tuple[int, tuple[Any, ...]], list[DeleteFile]] = {}
        self._eq_global: list[DeleteFile] = []
        self.deletes: list[DeleteFile] = []
        for d in deletes:
            self.deletes.append(d)
            f = d.file
            part = (f.spec_id, tuple(f.partition))
            if d.kind == KIND_DV:
                # A DV without referenced_data_file is refused when the manifest is read; here it
                # simply references nothing.
                if f.referenced_data_file is not None:
                    self._dvs.setdefault(key(f.referenced_data_file), []).append(d)
            elif d.kind == KIND_POSITION:
                single = referenced_path(f)
                if single is not None:
                    self._pos_by_path.setdefault(key(single), []).append(d)
                else:
                    self._pos_by_partition.setdefault(part, []).append(d)
            elif is_unpartitioned(specs, f.spec_id):
                self._eq_global.append(d)
            else:
                self._eq_by_partition.setdefault(part, []).append(d)

    @classmethod
    def of(
        cls,
        files: Iterable[tuple[DataFile, int]],
        specs: dict[int, PartitionSpec],
        key: PathKey = storage_key,
    ) -> DeleteIndex:
        """An index of `(delete file, data sequence number)` pairs, paths matched by `key`."""
        return cls((DeleteFile(f, seq, kind_of(f)) for f, seq in files), specs, key)

    @property
    def count(self) -> int:
        return len(self.deletes)

    def __bool__(self) -> bool:
        return bool(self.deletes)

    def dangling_dv(self, live_keys: Collection[str]) -> DeleteFile | None:
        """A deletion vector whose data file is not among `live_keys` (every live data file's match
        key), if any. The spec makes writers remove a data file's DV with it, so such a DV means a
        damaged `referenced_data_file` (the deleted rows would silently come back)."""
        for key, found in self._dvs.items():
            if key not in live_keys:
                return found[0]
        return None

    @property
    def has_equality_deletes(self) -> bool:
        return any(d.kind == KIND_EQUALITY for d in self.deletes)

    def for_data_file(
        self, data_file: DataFile, sequence_number: int, *, key: str | None = None
    ) -> tuple[DeleteFile, ...]:
        """The deletes that apply to a data file with the given data sequence number.

        `key` is the data file's match key when the caller has computed it already.
        """
        if not self.deletes:
            return ()
        if key is None:
            key = self.key(data_file.file_path)
        part = (data_file.spec_id, tuple(data_file.partition))
        out: list[DeleteFile] = []
        dvs = [d for d in self._dvs.get(key, ()) if d.sequence_number >= sequence_number]
        if dvs:
            # There should be one; if a broken writer left several, apply them all.
            out.extend(dvs)
        else:
            for d in (*self._pos_by_path.get(key, ()), *self._pos_by_partition.get(part, ())):
                if d.sequence_number >= sequence_number:
                    out.append(d)
        for d in (*self._eq_by_partition.get(part, ()), *self._eq_global):
            if d.sequence_number > sequence_number:
                out.append(d)
        return tuple(out)
