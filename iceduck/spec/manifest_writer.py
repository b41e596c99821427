"""Writing manifests (table spec "Manifests"): the Avro bytes of a manifest for format versions 1..3
(`write_manifest`), and the manifest list row describing one (`summarize_manifest`: counts,
sequence numbers, partition field summaries). Reading them is `iceduck.spec.manifest`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec._avro_schemas import (
    avro_name,
    decimal_required_bytes,
    manifest_entry_schema,
    write_container,
)
from iceduck.spec.manifest import (
    CONTENT_DATA,
    STATUS_ADDED,
    STATUS_DELETED,
    STATUS_EXISTING,
    STATUS_NAMES,
    ManifestEntry,
)
from iceduck.spec.manifest_list import (
    MANIFEST_CONTENT_DATA,
    MANIFEST_CONTENT_DELETES,
    UNASSIGNED_SEQUENCE_NUMBER,
    ManifestFile,
    PartitionFieldSummary,
)
from iceduck.spec.types import DecimalType, IcebergType, PrimitiveType, StructType


def _json_text(value: str | Mapping[str, Any] | Sequence[Any]) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _partition_encoder(t: IcebergType) -> Callable[[Any], Any] | None:
    """Converter from the internal representation to the stored Avro value (None: identity)."""
    if isinstance(t, DecimalType):
        size = decimal_required_bytes(t.precision)
        scale = t.scale

        def enc_decimal(v: Any) -> Any:
            if v is None:
                return None
            sign, digits, exp = Decimal(v).as_tuple()
            if not isinstance(exp, int):
                raise ValidationError(f"cannot store {v} in decimal({t.precision}, {scale})")
            unscaled = int("".join(map(str, digits)) or "0")
            shift = exp + scale
            if shift >= 0:
                unscaled *= 10**shift
            elif unscaled % 10**-shift:
                raise ValidationError(
                    f"{v} has more than {scale} fraction digits for decimal({t.precision}, {scale})"
                )
            else:
                unscaled //= 10**-shift
            return (-unscaled if sign else unscaled).to_bytes(size, "big", signed=True)

        return enc_decimal
    if isinstance(t, PrimitiveType) and t.name == "uuid":

        def enc_uuid(v: Any) -> Any:
            if v is None or isinstance(v, bytes):
                return v
            return (v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))).bytes

        return enc_uuid
    return None


def _kv_list(m: Mapping[int, Any] | None) -> list[dict[str, Any]] | None:
    if not m:
        return None
    return [{"key": k, "value": v} for k, v in m.items()]


def write_manifest(
    entries: Iterable[ManifestEntry],
    *,
    format_version: int,
    schema_json: str | Mapping[str, Any],
    partition_spec_json: str | Sequence[Any] | Mapping[str, Any],
    partition_spec_id: int,
    partition_type: StructType,
    content: int = MANIFEST_CONTENT_DATA,
    snapshot_id: int | None = None,
    codec: str = "deflate",
) -> bytes:
    """Write a manifest (format v1..v3) and return its bytes.

    `schema_json` is the table schema (JSON text or object), `partition_spec_json` the partition
    fields array (a whole spec object is reduced to its fields). `partition_type` is the spec's
    partition struct; entries' partition tuples follow its field order, in the internal
    representation. Entries without a snapshot id get `snapshot_id` (required in v1); in v2+ null
    sequence numbers are written for ADDED entries so that they inherit the snapshot's.
    """
    fv = format_version
    if fv not in (1, 2, 3):
        raise ValidationError(f"cannot write a manifest for format version {fv}")
    if content not in (MANIFEST_CONTENT_DATA, MANIFEST_CONTENT_DELETES):
        raise ValidationError(f"manifest content must be 0 (data) or 1 (deletes), not {content}")
    if fv == 1 and content != MANIFEST_CONTENT_DATA:
        raise ValidationError("v1 manifests hold data files only")
    schema_text = _json_text(schema_json)
    spec_obj: Any = partition_spec_json
    if isinstance(spec_obj, str):
        spec_obj = json.loads(spec_obj)
    if isinstance(spec_obj, Mapping):
        spec_obj = spec_obj.get("fields", [])
    spec_text = json.dumps(spec_obj, separators=(",", ":"))
    try:
        schema_id = json.loads(schema_text).get("schema-id")
    except (ValueError, AttributeError):
        raise ValidationError("schema_json is not a JSON object") from None

    part_fields = partition_type.fields
    part_names = [avro_name(f.name) for f in part_fields]
    part_encs = [_partition_encoder(f.type) for f in part_fields]
    records: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        d = e.data_file
        if e.status not in STATUS_NAMES:
            raise ValidationError(f"manifest entry {i}: status must be 0, 1 or 2, not {e.status}")
        if content == MANIFEST_CONTENT_DATA and d.content != CONTENT_DATA:
            raise ValidationError(
                f"manifest entry {i}: a data manifest cannot hold delete file {d.file_path}"
            )
        if content == MANIFEST_CONTENT_DELETES and d.content == CONTENT_DATA:
            raise ValidationError(
                f"manifest entry {i}: a delete manifest cannot hold data file {d.file_path}"
            )
        if len(d.partition) != len(part_fields):
            raise ValidationError(
                f"manifest entry {i}: partition {d.partition!r} has {len(d.partition)} values, the partition "
                f"type has {len(part_fields)} fields"
            )
        snap = e.snapshot_id if e.snapshot_id is not None else snapshot_id
        if fv == 1 and snap is None:
            raise ValidationError(f"manifest entry {i}: v1 manifests need a snapshot id")
        if (
            fv >= 2
            and e.status != STATUS_ADDED
            and (e.sequence_number is None or e.file_sequence_number is None)
        ):
            raise ValidationError(
                f"manifest entry {i} ({STATUS_NAMES[e.status]}) for {d.file_path} needs explicit sequence numbers"
            )
        partition = {
            name: (v if enc is None else enc(v))
            for name, enc, v in zip(part_names, part_encs, d.partition, strict=True)
        }
        records.append(
            {
                "status": e.status,
                "snapshot_id": snap,
                "sequence_number": e.sequence_number,
                "file_sequence_number": e.file_sequence_number,
                "data_file": {
                    "content": d.content,
                    "file_path": d.file_path,
                    "file_format": d.file_format,
                    "partition": partition,
                    "record_count": d.record_count,
                    "file_size_in_bytes": d.file_size_in_bytes,
                    "column_sizes": _kv_list(d.column_sizes),
                    "value_counts": _kv_list(d.value_counts),
                    "null_value_counts": _kv_list(d.null_value_counts),
                    "nan_value_counts": _kv_list(d.nan_value_counts),
                    "lower_bounds": _kv_list(d.lower_bounds),
                    "upper_bounds": _kv_list(d.upper_bounds),
                    "key_metadata": d.key_metadata,
                    "split_offsets": None if d.split_offsets is None else list(d.split_offsets),
                    "equality_ids": None if d.equality_ids is None else list(d.equality_ids),
                    "sort_order_id": d.sort_order_id,
                    "first_row_id": d.first_row_id,
                    "referenced_data_file": d.referenced_data_file,
                    "content_offset": d.content_offset,
                    "content_size_in_bytes": d.content_size_in_bytes,
                },
            }
        )
    metadata = {
        "schema": schema_text,
        "partition-spec": spec_text,
        "partition-spec-id": str(partition_spec_id),
        "format-version": str(fv),
    }
    if schema_id is not None:
        metadata["schema-id"] = str(schema_id)
    if fv >= 2:
        metadata["content"] = "data" if content == MANIFEST_CONTENT_DATA else "deletes"
    return write_container(manifest_entry_schema(fv, partition_type), records, metadata, codec=codec)


def _default_encode_bound(t: IcebergType, value: Any) -> bytes:
    # Imported lazily: iceduck.spec.values is written alongside this module.
    from iceduck.spec.values import to_bytes

    result: bytes = to_bytes(t, value)
    return result


def _float_key(v: Any) -> Any:
    # Order -0.0 before +0.0 (IEEE totalOrder), as the spec asks of bounds.
    return (v, math.copysign(1.0, v))


def _field_summary(
    t: IcebergType, values: list[Any], encode_bound: Callable[[IcebergType, Any], bytes]
) -> PartitionFieldSummary:
    contains_null = False
    contains_nan = False
    present: list[Any] = []
    for v in values:
        if v is None:
            contains_null = True
        elif isinstance(v, float) and v != v:
            contains_nan = True
        else:
            present.append(v)
    if not present:
        return PartitionFieldSummary(contains_null, contains_nan, None, None)
    is_float = isinstance(t, PrimitiveType) and t.name in ("float", "double")
    lo = min(present, key=_float_key) if is_float else min(present)
    hi = max(present, key=_float_key) if is_float else max(present)
    return PartitionFieldSummary(contains_null, contains_nan, encode_bound(t, lo), encode_bound(t, hi))


def summarize_manifest(
    entries: Sequence[ManifestEntry],
    *,
    manifest_path: str,
    manifest_length: int,
    partition_spec_id: int,
    partition_type: StructType,
    content: int,
    added_snapshot_id: int,
    sequence_number: int | None = None,
    first_row_id: int | None = None,
    key_metadata: bytes | None = None,
    encode_bound: Callable[[IcebergType, Any], bytes] | None = None,
) -> ManifestFile:
    """The manifest list row for a manifest holding `entries`.

    Counts files and rows by status; `min_sequence_number` is the least data sequence number of
    live (non-DELETED) entries, where a null one stands for `sequence_number`. With
    `sequence_number=None` (not known before commit) the row carries UNASSIGNED_SEQUENCE_NUMBER,
    which `write_manifest_list` fills in. Partition summaries cover every entry; bounds are encoded
    with `encode_bound(type, value)` (default `iceduck.spec.values.to_bytes`).
    """
    encode = encode_bound or _default_encode_bound
    counts = {STATUS_ADDED: [0, 0], STATUS_EXISTING: [0, 0], STATUS_DELETED: [0, 0]}
    min_seq: int | None = None
    pending = False  # a live entry will inherit a sequence number not known yet
    for e in entries:
        c = counts[e.status]
        c[0] += 1
        c[1] += e.data_file.record_count
        if e.status != STATUS_DELETED:
            seq = e.sequence_number if e.sequence_number is not None else sequence_number
            if seq is None:
                pending = True
            elif min_seq is None or seq < min_seq:
                min_seq = seq
    unassigned = sequence_number if sequence_number is not None else UNASSIGNED_SEQUENCE_NUMBER
    if min_seq is None or (pending and unassigned != UNASSIGNED_SEQUENCE_NUMBER and unassigned < min_seq):
        # No live entry with a known number: the manifest's own (possibly unassigned) one. Entries
        # that inherit later get the snapshot's number, which is above every existing one.
        min_seq = unassigned
    summaries = tuple(
        _field_summary(f.type, [e.data_file.partition[i] for e in entries], encode)
        for i, f in enumerate(partition_type.fields)
    )
    return ManifestFile(
        manifest_path=manifest_path,
        manifest_length=manifest_length,
        partition_spec_id=partition_spec_id,
        content=content,
        sequence_number=unassigned,
        min_sequence_number=min_seq,
        added_snapshot_id=added_snapshot_id,
        added_files_count=counts[STATUS_ADDED][0],
        existing_files_count=counts[STATUS_EXISTING][0],
        deleted_files_count=counts[STATUS_DELETED][0],
        added_rows_count=counts[STATUS_ADDED][1],
        existing_rows_count=counts[STATUS_EXISTING][1],
        deleted_rows_count=counts[STATUS_DELETED][1],
        partitions=summaries,
        key_metadata=key_metadata,
        first_row_id=first_row_id,
    )
