"""Manifest lists (table spec "Manifest Lists"): one Avro file per snapshot listing its manifests.

`read_manifest_list` reads every format version: v1 lists have no content or sequence numbers (read
as 0, as the spec says), and old writers named the file counts `added_data_files_count` etc.; fields
are found by their field id, so either naming reads. `write_manifest_list` writes v1, v2 or v3,
assigning sequence numbers to new manifests and (v3) `first_row_id` to data manifests without one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from iceduck.errors import InvalidMetadataError, ValidationError
from iceduck.spec._avro_schemas import (
    AvroContainer,
    manifest_list_schema,
    record_fields_by_id,
    unwrap_optional,
    write_container,
)

# Content of a manifest (field 517).
MANIFEST_CONTENT_DATA = 0
MANIFEST_CONTENT_DELETES = 1

# A manifest written in this commit whose sequence number is not known yet: `write_manifest_list`
# replaces it with the snapshot's sequence number.
UNASSIGNED_SEQUENCE_NUMBER = -1


@dataclass(frozen=True, slots=True)
class PartitionFieldSummary:
    """Summary of one partition field over a manifest (`field_summary`, ids 509..511, 518).

    Bounds are in the binary single-value form of the partition field's type (spec Appendix D).
    """

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One row of a manifest list: where a manifest is and what it holds.

    Counts may be None only in v1 lists ("assumed to be non-zero"). `content` and the sequence
    numbers are 0 for v1 lists. `first_row_id` (v3) is the first row id assigned to the data files
    in the manifest that have none.
    """

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: int
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files_count: int | None
    existing_files_count: int | None
    deleted_files_count: int | None
    added_rows_count: int | None
    existing_rows_count: int | None
    deleted_rows_count: int | None
    partitions: tuple[PartitionFieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None
    # the manifest list this row was read from, for messages (not part of the row)
    listed_in: str | None = dataclasses.field(default=None, compare=False, hash=False)


# Field ids of manifest_file, and the ones a reader cannot do without in any version.
_F_PATH, _F_LENGTH, _F_SPEC, _F_SNAPSHOT = 500, 501, 502, 503
_F_ADDED_FILES, _F_EXISTING_FILES, _F_DELETED_FILES = 504, 505, 506
_F_PARTITIONS, _F_ADDED_ROWS, _F_EXISTING_ROWS, _F_DELETED_ROWS = 507, 512, 513, 514
_F_SEQ, _F_MIN_SEQ, _F_CONTENT, _F_KEY_METADATA, _F_FIRST_ROW_ID = 515, 516, 517, 519, 520
_REQUIRED_ALL = {
    _F_PATH: "manifest_path",
    _F_LENGTH: "manifest_length",
    _F_SPEC: "partition_spec_id",
    _F_SNAPSHOT: "added_snapshot_id",
}
_REQUIRED_V2 = {
    _F_CONTENT: "content",
    _F_SEQ: "sequence_number",
    _F_MIN_SEQ: "min_sequence_number",
    _F_ADDED_FILES: "added_files_count",
    _F_EXISTING_FILES: "existing_files_count",
    _F_DELETED_FILES: "deleted_files_count",
    _F_ADDED_ROWS: "added_rows_count",
    _F_EXISTING_ROWS: "existing_rows_count",
    _F_DELETED_ROWS: "deleted_rows_count",
}


def _format_version(meta: dict[str, str], by_id: dict[int, Any], path: str | None) -> int:
    text = meta.get("format-version")
    if text is not None:
        try:
            fv = int(text)
        except ValueError:
            raise InvalidMetadataError(
                f"{path}: manifest list format-version is not a number: {text!r}"
            ) from None
        if fv not in (1, 2, 3):
            raise InvalidMetadataError(f"{path}: manifest list has unsupported format-version {fv}")
        return fv
    # Some writers (e.g. BigQuery) leave the key out: judge by the columns present.
    if _F_FIRST_ROW_ID in by_id:
        return 3
    return 2 if _F_SEQ in by_id else 1


def read_manifest_list(data: bytes, *, path: str | None) -> tuple[ManifestFile, ...]:
    """Read a manifest list (any format version) from its bytes.

    Raises CorruptFileError for damaged or non-Avro bytes, UnsupportedFormatError for an encrypted
    list, InvalidMetadataError when a field required by the list's format version is missing, or a
    row has a content outside the spec, a negative sequence number or first_row_id, or repeats a
    manifest path.
    """
    avro = AvroContainer(data, path=path, what="manifest list")
    by_id = record_fields_by_id(avro.schema)
    fv = _format_version(avro.metadata, by_id, path)
    required = dict(_REQUIRED_ALL)
    if fv >= 2:
        required.update(_REQUIRED_V2)
    for fid, name in required.items():
        if fid not in by_id:
            raise InvalidMetadataError(
                f"{path}: manifest list (format v{fv}) has no field {name} (field id {fid})"
            )

    def name_of(fid: int) -> str | None:
        f = by_id.get(fid)
        return f["name"] if f else None

    n_path, n_len, n_spec, n_snap = (name_of(i) for i in (_F_PATH, _F_LENGTH, _F_SPEC, _F_SNAPSHOT))
    n_content, n_seq, n_min_seq = name_of(_F_CONTENT), name_of(_F_SEQ), name_of(_F_MIN_SEQ)
    n_counts = [
        name_of(i)
        for i in (
            _F_ADDED_FILES,
            _F_EXISTING_FILES,
            _F_DELETED_FILES,
            _F_ADDED_ROWS,
            _F_EXISTING_ROWS,
            _F_DELETED_ROWS,
        )
    ]
    n_parts, n_key, n_first = name_of(_F_PARTITIONS), name_of(_F_KEY_METADATA), name_of(_F_FIRST_ROW_ID)
    summary_names = _summary_names(by_id.get(_F_PARTITIONS))
    must_have = [(required[fid], name_of(fid)) for fid in required]

    out: list[ManifestFile] = []
    seen: dict[str, ManifestFile] = {}
    # Decoded columnar (polars), then rows: a list holds at most a few thousand manifests.
    for i, rec in enumerate(avro.columns().values()):
        get = rec.get  # .get(None) is None: absent columns read as null
        for label, n in must_have:
            if get(n) is None:
                raise InvalidMetadataError(f"{path}: manifest list row {i} has null {label}")
        content = get(n_content) or 0
        seq = get(n_seq) or 0
        min_seq = get(n_min_seq) or 0
        first_row_id = get(n_first)
        manifest_path = rec[n_path]
        # Values the spec does not define would silently change what a scan reads (a manifest of
        # unknown content is neither data nor deletes; a manifest listed twice doubles its rows).
        if content not in (MANIFEST_CONTENT_DATA, MANIFEST_CONTENT_DELETES):
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} has content {content}; the spec defines 0 (data) and 1 (deletes)"
            )
        if seq < 0 or min_seq < 0:
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} has a negative sequence number "
                f"(sequence_number {seq}, min_sequence_number {min_seq})"
            )
        if first_row_id is not None and first_row_id < 0:
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} has a negative first_row_id {first_row_id}"
            )
        if min_seq > seq:
            # The minimum over the manifest's files cannot exceed what its ADDED files inherit.
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} has min_sequence_number {min_seq} above its "
                f"sequence_number {seq}"
            )
        parts = get(n_parts)
        row = ManifestFile(
            manifest_path=manifest_path,
            manifest_length=rec[n_len],
            partition_spec_id=rec[n_spec],
            content=content,
            sequence_number=seq,
            min_sequence_number=min_seq,
            added_snapshot_id=rec[n_snap],
            added_files_count=get(n_counts[0]),
            existing_files_count=get(n_counts[1]),
            deleted_files_count=get(n_counts[2]),
            added_rows_count=get(n_counts[3]),
            existing_rows_count=get(n_counts[4]),
            deleted_rows_count=get(n_counts[5]),
            partitions=None if parts is None else _summaries(parts, summary_names),
            key_metadata=get(n_key),
            first_row_id=first_row_id,
            listed_in=path,
        )
        if manifest_path in seen:
            # A data manifest listed twice would return its rows twice. An identical repeat of a
            # delete manifest (an orphan list of the DuckDB corpus has one) changes nothing: deletes are sets.
            first = seen[manifest_path]
            if content == MANIFEST_CONTENT_DELETES and first == row:
                continue
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} lists manifest {manifest_path} a second time"
            )
        seen[manifest_path] = row
        out.append(row)
    return tuple(out)


def _summary_names(field: dict[str, Any] | None) -> tuple[str | None, ...]:
    names: tuple[str | None, ...] = ("contains_null", "contains_nan", "lower_bound", "upper_bound")
    if field is None:
        return names
    arr = unwrap_optional(field["type"])
    items = unwrap_optional(arr.get("items")) if isinstance(arr, dict) else None
    if not isinstance(items, dict):
        return names
    by_id = record_fields_by_id(items)
    return tuple(by_id[i]["name"] if i in by_id else None for i in (509, 518, 510, 511))


def _summaries(parts: list[Any], names: tuple[str | None, ...]) -> tuple[PartitionFieldSummary, ...]:
    n_null, n_nan, n_lower, n_upper = names
    return tuple(
        PartitionFieldSummary(bool(p.get(n_null)), p.get(n_nan), p.get(n_lower), p.get(n_upper))
        for p in parts
        if p is not None
    )


@dataclass(frozen=True, slots=True)
class ManifestListWriteResult:
    """What `write_manifest_list` produced: the file, the manifests as written, the next row id.

    `next_row_id` (v3 only, else None) is the table's next-row-id after this snapshot: the
    snapshot's `first-row-id` plus the row ids assigned to manifests here (`added-rows`).
    """

    data: bytes
    manifests: tuple[ManifestFile, ...]
    next_row_id: int | None


def write_manifest_list(
    manifests: Iterable[ManifestFile],
    *,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int | None = None,
    first_row_id: int | None = None,
    codec: str = "deflate",
) -> ManifestListWriteResult:
    """Write a manifest list for a snapshot.

    Manifests whose `sequence_number` is UNASSIGNED_SEQUENCE_NUMBER (written in this commit) get the
    snapshot's `sequence_number` (and so does an unassigned `min_sequence_number`). In v3, data
    manifests without a `first_row_id` are assigned one, starting at the snapshot's `first_row_id`
    and advancing by each assigned manifest's added plus existing row counts (spec "First Row ID
    Assignment"); existing values are kept and delete manifests keep none.
    """
    fv = format_version
    if fv not in (1, 2, 3):
        raise ValidationError(f"cannot write a manifest list for format version {fv}")
    if fv >= 2 and sequence_number is None:
        raise ValidationError(f"a v{fv} manifest list needs the snapshot's sequence_number")
    if fv >= 3 and first_row_id is None:
        raise ValidationError("a v3 manifest list needs the snapshot's first_row_id")

    written: list[ManifestFile] = []
    next_row_id = first_row_id
    for m in manifests:
        if fv == 1 and m.content != MANIFEST_CONTENT_DATA:
            raise ValidationError(
                f"manifest {m.manifest_path}: a v1 manifest list cannot hold delete manifests"
            )
        changes: dict[str, Any] = {}
        if fv >= 2 and sequence_number is not None:
            if m.sequence_number == UNASSIGNED_SEQUENCE_NUMBER:
                changes["sequence_number"] = sequence_number
            if m.min_sequence_number == UNASSIGNED_SEQUENCE_NUMBER:
                changes["min_sequence_number"] = sequence_number
        if fv >= 3 and next_row_id is not None:
            if m.content == MANIFEST_CONTENT_DATA and m.first_row_id is None:
                if m.added_rows_count is None or m.existing_rows_count is None:
                    raise ValidationError(
                        f"manifest {m.manifest_path} has no row counts: cannot assign first_row_id"
                    )
                changes["first_row_id"] = next_row_id
                next_row_id += m.added_rows_count + m.existing_rows_count
            elif m.content != MANIFEST_CONTENT_DATA and m.first_row_id is not None:
                changes["first_row_id"] = None
        written.append(dataclasses.replace(m, **changes) if changes else m)

    records = [_manifest_file_record(m, fv) for m in written]
    metadata = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id),
        "format-version": str(fv),
    }
    if fv >= 2:
        metadata["sequence-number"] = str(sequence_number)
    if fv >= 3:
        metadata["first-row-id"] = str(first_row_id)
    data = write_container(manifest_list_schema(fv), records, metadata, codec=codec)
    return ManifestListWriteResult(data, tuple(written), next_row_id if fv >= 3 else None)


def _manifest_file_record(m: ManifestFile, fv: int) -> dict[str, Any]:
    if fv >= 2:
        missing = [
            n
            for n in (
                "added_files_count",
                "existing_files_count",
                "deleted_files_count",
                "added_rows_count",
                "existing_rows_count",
                "deleted_rows_count",
            )
            if getattr(m, n) is None
        ]
        if missing:
            raise ValidationError(
                f"manifest {m.manifest_path}: a v{fv} manifest list requires {', '.join(missing)}"
            )
        if m.sequence_number < 0 or m.min_sequence_number < 0:
            raise ValidationError(f"manifest {m.manifest_path} has no sequence number assigned")
    rec: dict[str, Any] = {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "content": m.content,
        "sequence_number": m.sequence_number,
        "min_sequence_number": m.min_sequence_number,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None
        if m.partitions is None
        else [
            {
                "contains_null": p.contains_null,
                "contains_nan": p.contains_nan,
                "lower_bound": p.lower_bound,
                "upper_bound": p.upper_bound,
            }
            for p in m.partitions
        ],
        "key_metadata": m.key_metadata,
        "first_row_id": m.first_row_id,
    }
    return rec


def check_sequence_numbers(
    manifests: Iterable[ManifestFile],
    *,
    snapshot_sequence_number: int,
    added_sequence_numbers: Mapping[int, int],
    path: str | None,
) -> None:
    """A v2+ manifest list's sequence numbers against the table metadata: a manifest's
    `sequence_number` is that of the snapshot that added it (`added_snapshot_id`, where the
    metadata still has it) and never above the listing snapshot's. A changed number would make
    deletes skip the data files they cover (or cover newer ones), which ADDED entries inherit."""
    for i, m in enumerate(manifests):
        added = added_sequence_numbers.get(m.added_snapshot_id)
        if m.sequence_number > snapshot_sequence_number or (added is not None and m.sequence_number != added):
            said = "" if added is None else f", and snapshot {m.added_snapshot_id} that added it has {added}"
            raise InvalidMetadataError(
                f"{path}: manifest list row {i} ({m.manifest_path}) has sequence_number {m.sequence_number}, "
                f"but the snapshot listing it has sequence number {snapshot_sequence_number}{said}"
            )
