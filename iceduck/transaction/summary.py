"""Snapshot summaries: the standard counters of spec Appendix F ("Optional Snapshot Summary Fields").

Added/removed counters describe the change; `total-*` counters describe the snapshot, carried over
from the parent's summary when it has them and recounted from the manifests otherwise. Deletion
vectors count as delete files (`added-delete-files`, `total-delete-files`) and their positions as
position deletes, but not as position delete files: `added-dvs` / `removed-dvs` count them, as in
Java's `SnapshotSummary`. A DV's size is its blob's `content_size_in_bytes`, not the Puffin file's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from iceduck.spec.manifest import CONTENT_DATA, CONTENT_EQUALITY_DELETES, DataFile

TOTAL_KEYS = (
    "total-data-files",
    "total-delete-files",
    "total-records",
    "total-files-size",
    "total-position-deletes",
    "total-equality-deletes",
)


def content_size(d: DataFile) -> int:
    """Bytes a file contributes to size counters: the blob length for DVs, else the file size."""
    if d.is_deletion_vector and d.content_size_in_bytes is not None:
        return d.content_size_in_bytes
    return d.file_size_in_bytes


@dataclass(slots=True)
class Totals:
    """Live-file totals of a snapshot."""

    data_files: int = 0
    delete_files: int = 0
    records: int = 0
    files_size: int = 0
    position_deletes: int = 0
    equality_deletes: int = 0

    def add(self, d: DataFile, sign: int = 1) -> None:
        """Count (sign 1) or uncount (sign -1) one live file."""
        self.files_size += sign * content_size(d)
        if d.content == CONTENT_DATA:
            self.data_files += sign
            self.records += sign * d.record_count
        else:
            self.delete_files += sign
            if d.content == CONTENT_EQUALITY_DELETES:
                self.equality_deletes += sign * d.record_count
            else:
                self.position_deletes += sign * d.record_count

    @classmethod
    def of(cls, files: Iterable[DataFile]) -> Totals:
        """Totals of the given live files."""
        out = cls()
        for d in files:
            out.add(d)
        return out

    @classmethod
    def from_summary(cls, summary: Mapping[str, str]) -> Totals | None:
        """Totals recorded in a summary, or None if any is missing or unreadable."""
        try:
            values = [int(summary[k]) for k in TOTAL_KEYS]
        except (KeyError, ValueError):
            return None
        return cls(*values)

    def to_summary(self) -> dict[str, str]:
        return dict(zip(TOTAL_KEYS, (str(v) for v in (
            self.data_files, self.delete_files, self.records, self.files_size,
            self.position_deletes, self.equality_deletes,
        )), strict=True))  # fmt: skip


def change_summary(added: Iterable[DataFile], removed: Iterable[DataFile]) -> dict[str, str]:
    """The added/removed counters of a change (zero counters left out, as Java does)."""
    counts: dict[str, int] = {}

    def bump(key: str, n: int) -> None:
        counts[key] = counts.get(key, 0) + n

    partitions: set[tuple[int, tuple[object, ...]]] = set()
    for sign, files in ((1, added), (-1, removed)):
        for d in files:
            partitions.add((d.spec_id, tuple(repr(v) for v in d.partition)))
            prefix = "added" if sign > 0 else "removed"
            bump(f"{prefix}-files-size", content_size(d))
            if d.content == CONTENT_DATA:
                bump("added-data-files" if sign > 0 else "deleted-data-files", 1)
                bump("added-records" if sign > 0 else "deleted-records", d.record_count)
                continue
            bump(f"{prefix}-delete-files", 1)
            if d.content == CONTENT_EQUALITY_DELETES:
                bump(f"{prefix}-equality-delete-files", 1)
                bump(f"{prefix}-equality-deletes", d.record_count)
            else:
                bump(f"{prefix}-dvs" if d.is_deletion_vector else f"{prefix}-position-delete-files", 1)
                bump(f"{prefix}-position-deletes", d.record_count)
    out = {k: str(v) for k, v in counts.items() if v}
    out["changed-partition-count"] = str(len(partitions))
    return out
