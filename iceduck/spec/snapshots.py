"""Snapshots, snapshot references, history logs, statistics files and encryption keys.

These are the parts of table metadata that describe table state over time ("Snapshots",
"Snapshot References", "Table Statistics", "Partition Statistics", "Encryption Keys" of the table
spec). Each parser takes the table's format version, because what a field may hold depends on it:
v1 snapshots may list `manifests` instead of a `manifest-list` and have no sequence numbers (they
default to 0); row lineage (`first-row-id`, `added-rows`) and `key-id` appear in v3.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, ClassVar

import msgspec

from iceduck.spec.json_fields import EMPTY_MAP as _EMPTY
from iceduck.spec.json_fields import LONG_MAX as _LONG_MAX
from iceduck.spec.json_fields import LONG_MIN as _LONG_MIN
from iceduck.spec.json_fields import MISSING as _MISSING
from iceduck.spec.json_fields import JsonFields
from iceduck.spec.json_fields import all_str as _all_str
from iceduck.spec.json_fields import frozen_map as frozen_map  # re-exported: its old home

MAIN_BRANCH = "main"

class Operation(StrEnum):
    """The `operation` of a snapshot summary."""

    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot of the table.

    `summary` holds the summary map including `operation` (v1 snapshots may have none: empty map).
    `manifest_list` is the manifest list location; v1 snapshots may instead carry `manifests`, the
    manifest file locations themselves (then `manifest_list` is None). `sequence_number` is 0 for v1
    snapshots. `first_row_id` / `added_rows` are v3 row lineage, None for snapshots written before
    a table was upgraded to v3. `key_id` names the encryption key of the manifest list (v3).
    """

    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str | None
    summary: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    schema_id: int | None = None
    first_row_id: int | None = None
    added_rows: int | None = None
    key_id: str | None = None
    manifests: tuple[str, ...] | None = None

    @property
    def operation(self) -> str | None:
        """The summary's `operation` (`append`, `replace`, `overwrite`, `delete`), or None."""
        return self.summary.get("operation")


class SnapshotRefType(StrEnum):
    """Kind of a snapshot reference."""

    BRANCH = "branch"
    TAG = "tag"


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    """A named reference (branch or tag) to a snapshot, with its retention settings."""

    snapshot_id: int
    type: SnapshotRefType = SnapshotRefType.BRANCH
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None

    @property
    def is_branch(self) -> bool:
        """True for a branch, False for a tag."""
        return self.type == SnapshotRefType.BRANCH


@dataclass(frozen=True, slots=True)
class SnapshotLogEntry:
    """An entry of `snapshot-log`: the current snapshot changed to `snapshot_id` at `timestamp_ms`."""

    timestamp_ms: int
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class MetadataLogEntry:
    """An entry of `metadata-log`: a previous metadata file and when it was written."""

    timestamp_ms: int
    metadata_file: str


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """A statistics blob listed in a table statistics file entry."""

    type: str
    snapshot_id: int
    sequence_number: int
    fields: tuple[int, ...]
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)


@dataclass(frozen=True, slots=True)
class StatisticsFile:
    """A Puffin table statistics file for one snapshot. `key_metadata` is kept base64-encoded."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    file_footer_size_in_bytes: int
    key_metadata: str | None = None
    blob_metadata: tuple[BlobMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionStatisticsFile:
    """A partition statistics file for one snapshot."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int


@dataclass(frozen=True, slots=True)
class EncryptionKey:
    """A table encryption key (v3). `encrypted_key_metadata` is kept base64-encoded."""

    key_id: str
    encrypted_key_metadata: str
    encrypted_by_id: str | None = None
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)

    @property
    def encrypted_key_metadata_bytes(self) -> bytes:
        """The encrypted key metadata, base64-decoded."""
        return base64.b64decode(self.encrypted_key_metadata)


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------

def _base64(f: JsonFields, key: str, default: Any = _MISSING) -> Any:
    value = f.string(key, default)
    if value is not None and value is not default:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise f.fail(f"{key!r} is not valid base64: {value!r}") from None
    return value


# The keys of a snapshot `_plain_snapshot` reads, by format version (v3 adds row lineage and keys).
_PLAIN_KEYS = {
    1: frozenset({"snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary", "schema-id"}),
    3: frozenset({"snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary", "schema-id", "first-row-id", "added-rows", "key-id"}),
}  # fmt: skip
_PLAIN_KEYS[2] = _PLAIN_KEYS[1]


def _long_or_none(value: Any) -> bool:
    return value is None or (type(value) is int and _LONG_MIN <= value <= _LONG_MAX)


# A long as the plain shape takes it: a JSON integer in Java's 64-bit range (for the typed decoder).
_Long = Annotated[int, msgspec.Meta(ge=_LONG_MIN, le=_LONG_MAX)]
_JSON_KEYS = {
    "snapshot_id": "snapshot-id", "parent_snapshot_id": "parent-snapshot-id", "sequence_number": "sequence-number",
    "timestamp_ms": "timestamp-ms", "manifest_list": "manifest-list", "schema_id": "schema-id",
    "first_row_id": "first-row-id", "added_rows": "added-rows", "key_id": "key-id",
}  # fmt: skip


class SnapshotFields(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename=_JSON_KEYS):
    """The fields of a snapshot of the plain shape (see `plain_snapshot_fields`) without a
    `Snapshot`: the same names and values (`summary` is the decoded JSON object, read only). Listing
    10,000 snapshots' ids needs no 10,000 model objects.

    Also the type metadata.json's v1/v2 snapshots are decoded into (`table_metadata`): a JSON object
    the class takes (no other keys, these types, longs in range) is of the plain shape, except for
    what `typed_snapshots_plain` checks after decoding. v1/v2 have no row lineage: their v3 fields
    are None (and a v3 key in the JSON is refused as unknown)."""

    snapshot_id: _Long
    sequence_number: _Long
    timestamp_ms: _Long
    manifest_list: str
    summary: dict[str, str]
    parent_snapshot_id: _Long | None = None
    schema_id: _Long | None = None
    first_row_id: ClassVar[int | None] = None
    added_rows: ClassVar[int | None] = None
    key_id: ClassVar[str | None] = None

    @property
    def operation(self) -> str | None:
        """The summary's `operation`, as `Snapshot.operation`."""
        return self.summary.get("operation")


class SnapshotFieldsV3(SnapshotFields, frozen=True, gc=False, forbid_unknown_fields=True, rename=_JSON_KEYS):
    """`SnapshotFields` with v3 row lineage and key id (the type of v3 snapshots)."""

    first_row_id: _Long | None = None  # type: ignore[misc]  # a field here, None in v1/v2
    added_rows: Annotated[int, msgspec.Meta(ge=0, le=_LONG_MAX)] | None = None  # type: ignore[misc]
    key_id: str | None = None  # type: ignore[misc]


def typed_snapshots_plain(snapshots: list[SnapshotFields], format_version: int, strict: bool) -> bool:
    """Whether snapshots decoded into `SnapshotFields` (v2) / `SnapshotFieldsV3` (v3) are all of
    the plain shape: what the types cannot say (v1 is never decoded typed: its sequence numbers
    default to 0)."""
    if format_version not in (2, 3):
        return False
    if not all("operation" in s.summary for s in snapshots):
        return False
    return not (strict and any(s.first_row_id is not None and s.added_rows is None for s in snapshots))


def plain_snapshot_fields(obj: Any, format_version: int, strict: bool) -> SnapshotFields | None:
    """The fields of a snapshot of the common, well-formed shape (a dict of known keys, in-range
    integers, strings, a string summary with an operation), read without `JsonFields`; None for
    anything else, which `parse_snapshot` then reads with every check and message. A snapshot
    these fields come from is exactly the one `parse_snapshot` returns (it is built from them)."""
    if isinstance(obj, SnapshotFields):
        return obj  # decoded typed, of the plain shape
    if type(obj) is not dict or not obj.keys() <= _PLAIN_KEYS.get(format_version, frozenset()):
        return None
    sid, parent, seq = obj.get("snapshot-id"), obj.get("parent-snapshot-id"), obj.get("sequence-number")
    ts, manifest_list, summary = obj.get("timestamp-ms"), obj.get("manifest-list"), obj.get("summary")
    schema_id, first, added = obj.get("schema-id"), obj.get("first-row-id"), obj.get("added-rows")
    key_id = obj.get("key-id")
    if (
        sid is None
        or ts is None
        or not (_long_or_none(sid) and _long_or_none(parent) and _long_or_none(ts) and _long_or_none(schema_id))
        or not (_long_or_none(seq) and (seq is not None or format_version == 1))
        or type(manifest_list) is not str
        or type(summary) is not dict
        or "operation" not in summary
        or not _all_str(summary)
        or not (_long_or_none(first) and _long_or_none(added) and (added is None or added >= 0))
        or (strict and first is not None and added is None)
        or not (key_id is None or type(key_id) is str)
    ):
        return None
    return SnapshotFieldsV3(
        snapshot_id=sid, parent_snapshot_id=parent, sequence_number=0 if seq is None else seq, timestamp_ms=ts,
        manifest_list=manifest_list, summary=summary, schema_id=schema_id, first_row_id=first, added_rows=added,
        key_id=key_id,
    )  # fmt: skip


def _plain_snapshot(obj: Any, format_version: int, strict: bool) -> Snapshot | None:
    """The snapshot of the plain shape (`plain_snapshot_fields`), None for any other. Only a
    speed-up: a table of 10,000 snapshots lists them all in `iceberg_snapshots`."""
    f = plain_snapshot_fields(obj, format_version, strict)
    if f is None:
        return None
    return Snapshot(
        f.snapshot_id, f.parent_snapshot_id, f.sequence_number, f.timestamp_ms, f.manifest_list,
        frozen_map(f.summary), f.schema_id, f.first_row_id, f.added_rows, f.key_id,
    )  # fmt: skip


def parse_snapshot(
    obj: Any, *, format_version: int, path: str | None = None, where: str = "snapshot", strict: bool = False
) -> Snapshot:
    """Parse one entry of `snapshots` for a table of the given format version.

    v2+ require `sequence-number`, `manifest-list` and a `summary` with `operation`. v3 row lineage
    fields are optional on read: snapshots committed before an upgrade to v3 have none. Some
    writers (iceberg-go) set `first-row-id` without `added-rows`, and some test tables have
    snapshot ids beyond a 64-bit long; both are accepted unless `strict`.
    """
    fast = _plain_snapshot(obj, format_version, strict)
    if fast is not None:
        return fast
    f = JsonFields(obj, path, where)
    snapshot_id = f.integer("snapshot-id")
    f.where = f"{where} {snapshot_id}"
    for key in ("first-row-id", "added-rows", "key-id"):
        f.forbid(key, format_version)
    manifest_list = f.string("manifest-list", None)
    manifests: tuple[str, ...] | None = None
    if f.has("manifests"):
        raw = f.array("manifests")
        if format_version > 1:
            raise f.fail(f"'manifests' is a v1 field; v{format_version} snapshots use 'manifest-list'")
        if not all(isinstance(m, str) for m in raw):
            raise f.fail(f"'manifests' must be a list of strings, not {raw!r}")
        manifests = tuple(raw)
    if manifest_list is None and manifests is None:
        raise f.fail("missing 'manifest-list'")
    if format_version > 1:
        sequence_number = f.integer("sequence-number")
        if not f.has("summary"):
            raise f.fail("missing 'summary'")
    else:
        # v1 has no sequence numbers; readers default them to 0 (Appendix E). Keep one if present.
        sequence_number = f.integer("sequence-number", 0)
    summary = f.str_map("summary")
    if f.has("summary") and "operation" not in summary:
        raise f.fail("the summary has no 'operation'")
    added_rows = f.integer("added-rows", None)
    if added_rows is not None and added_rows < 0:
        raise f.fail(f"'added-rows' must not be negative: {added_rows}")
    first_row_id = f.integer("first-row-id", None)
    if strict and first_row_id is not None and added_rows is None:
        raise f.fail("'added-rows' is required when 'first-row-id' is set")
    parent = f.integer("parent-snapshot-id", None)
    if strict:
        # Snapshot ids are Java longs. Out-of-range ids occur in hand-edited test tables that other
        # readers accept (the manifests carry their own ids), so only strict mode refuses them.
        for key in ("snapshot-id", "parent-snapshot-id"):
            value = f.obj.get(key)
            if isinstance(value, int) and not _LONG_MIN <= value <= _LONG_MAX:
                raise f.fail(f"{key!r} {value} is outside the range of a 64-bit long")
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=sequence_number,
        timestamp_ms=f.integer("timestamp-ms"),
        manifest_list=manifest_list,
        summary=summary,
        schema_id=f.integer("schema-id", None),
        first_row_id=first_row_id,
        added_rows=added_rows,
        key_id=f.string("key-id", None),
        manifests=manifests,
    )


def snapshot_to_json(s: Snapshot, *, format_version: int) -> dict[str, Any]:
    """The JSON form of a snapshot for a table of the given format version."""
    out: dict[str, Any] = {"snapshot-id": s.snapshot_id}
    if s.parent_snapshot_id is not None:
        out["parent-snapshot-id"] = s.parent_snapshot_id
    if format_version > 1 or s.sequence_number != 0:
        out["sequence-number"] = s.sequence_number
    out["timestamp-ms"] = s.timestamp_ms
    if s.manifest_list is not None:
        out["manifest-list"] = s.manifest_list
    if s.manifests is not None:
        out["manifests"] = list(s.manifests)
    if s.summary or format_version > 1:
        out["summary"] = dict(s.summary)
    if s.schema_id is not None:
        out["schema-id"] = s.schema_id
    if format_version >= 3:
        if s.first_row_id is not None:
            out["first-row-id"] = s.first_row_id
        if s.added_rows is not None:
            out["added-rows"] = s.added_rows
        if s.key_id is not None:
            out["key-id"] = s.key_id
    return out


# A ref's optional retention settings (JSON key, SnapshotRef attribute): one list for the parser's
# range check and the writer, so a setting added to one is not forgotten by the other.
_REF_RETENTION = (
    ("max-ref-age-ms", "max_ref_age_ms"),
    ("max-snapshot-age-ms", "max_snapshot_age_ms"),
    ("min-snapshots-to-keep", "min_snapshots_to_keep"),
)


def parse_snapshot_ref(obj: Any, *, name: str, path: str | None = None) -> SnapshotRef:
    """Parse one value of the `refs` map. Retention settings must be positive; tags keep no history."""
    f = JsonFields(obj, path, f"ref {name!r}")
    kind = f.string("type")
    try:
        ref_type = SnapshotRefType(kind.lower())
    except ValueError:
        raise f.fail(f"'type' must be 'branch' or 'tag', not {kind!r}") from None
    ref = SnapshotRef(
        snapshot_id=f.integer("snapshot-id"),
        type=ref_type,
        max_ref_age_ms=f.integer("max-ref-age-ms", None),
        max_snapshot_age_ms=f.integer("max-snapshot-age-ms", None),
        min_snapshots_to_keep=f.integer("min-snapshots-to-keep", None),
    )
    for key, attribute in _REF_RETENTION:
        value = getattr(ref, attribute)
        if value is not None and value <= 0:
            raise f.fail(f"{key!r} must be positive, not {value}")
    if ref_type == SnapshotRefType.TAG:
        for key in ("max-snapshot-age-ms", "min-snapshots-to-keep"):
            if f.obj.get(key) is not None:
                raise f.fail(f"{key!r} applies to branches only, not to a tag")
    return ref


def snapshot_ref_to_json(ref: SnapshotRef) -> dict[str, Any]:
    """The JSON object of a ref (a value of the `refs` map)."""
    out: dict[str, Any] = {"snapshot-id": ref.snapshot_id, "type": str(ref.type)}
    for key, attribute in _REF_RETENTION:
        value = getattr(ref, attribute)
        if value is not None:
            out[key] = value
    return out


def parse_snapshot_log_entry(
    obj: Any, *, path: str | None = None, where: str = "snapshot-log"
) -> SnapshotLogEntry:
    """Parse one `snapshot-log` entry."""
    if type(obj) is dict and len(obj) == 2:  # the common shape, read without JsonFields (a speed-up)
        ts, sid = obj.get("timestamp-ms"), obj.get("snapshot-id")
        if type(ts) is int and type(sid) is int and _LONG_MIN <= sid <= _LONG_MAX:
            return SnapshotLogEntry(ts, sid)
    f = JsonFields(obj, path, where)
    return SnapshotLogEntry(timestamp_ms=f.integer("timestamp-ms"), snapshot_id=f.integer("snapshot-id"))


def snapshot_log_entry_to_json(e: SnapshotLogEntry) -> dict[str, Any]:
    """The JSON object of a `snapshot-log` entry."""
    return {"timestamp-ms": e.timestamp_ms, "snapshot-id": e.snapshot_id}


def parse_metadata_log_entry(
    obj: Any, *, path: str | None = None, where: str = "metadata-log"
) -> MetadataLogEntry:
    """Parse one `metadata-log` entry."""
    f = JsonFields(obj, path, where)
    return MetadataLogEntry(timestamp_ms=f.integer("timestamp-ms"), metadata_file=f.string("metadata-file"))


def metadata_log_entry_to_json(e: MetadataLogEntry) -> dict[str, Any]:
    """The JSON object of a `metadata-log` entry."""
    return {"timestamp-ms": e.timestamp_ms, "metadata-file": e.metadata_file}


def parse_statistics_file(obj: Any, *, path: str | None = None, where: str = "statistics") -> StatisticsFile:
    """Parse one entry of `statistics` (a Puffin table statistics file and its blobs)."""
    f = JsonFields(obj, path, where)
    blobs = []
    for i, b in enumerate(f.array("blob-metadata")):
        bf = JsonFields(b, path, f"{where} blob {i}")
        ids = bf.array("fields")
        if any(isinstance(x, bool) or not isinstance(x, int) for x in ids):
            raise bf.fail(f"'fields' must be a list of field ids, not {ids!r}")
        blobs.append(
            BlobMetadata(
                type=bf.string("type"),
                snapshot_id=bf.integer("snapshot-id"),
                sequence_number=bf.integer("sequence-number"),
                fields=tuple(ids),
                properties=bf.str_map("properties"),
            )
        )
    return StatisticsFile(
        snapshot_id=f.integer("snapshot-id"),
        statistics_path=f.string("statistics-path"),
        file_size_in_bytes=f.integer("file-size-in-bytes"),
        file_footer_size_in_bytes=f.integer("file-footer-size-in-bytes"),
        key_metadata=_base64(f, "key-metadata", None),
        blob_metadata=tuple(blobs),
    )


def statistics_file_to_json(s: StatisticsFile) -> dict[str, Any]:
    """The JSON object of a `statistics` entry."""
    out: dict[str, Any] = {
        "snapshot-id": s.snapshot_id,
        "statistics-path": s.statistics_path,
        "file-size-in-bytes": s.file_size_in_bytes,
        "file-footer-size-in-bytes": s.file_footer_size_in_bytes,
    }
    if s.key_metadata is not None:
        out["key-metadata"] = s.key_metadata
    blobs = []
    for b in s.blob_metadata:
        blob: dict[str, Any] = {
            "type": b.type,
            "snapshot-id": b.snapshot_id,
            "sequence-number": b.sequence_number,
            "fields": list(b.fields),
        }
        if b.properties:
            blob["properties"] = dict(b.properties)
        blobs.append(blob)
    out["blob-metadata"] = blobs
    return out


def parse_partition_statistics_file(
    obj: Any, *, path: str | None = None, where: str = "partition-statistics"
) -> PartitionStatisticsFile:
    """Parse one entry of `partition-statistics`."""
    f = JsonFields(obj, path, where)
    return PartitionStatisticsFile(
        snapshot_id=f.integer("snapshot-id"),
        statistics_path=f.string("statistics-path"),
        file_size_in_bytes=f.integer("file-size-in-bytes"),
    )


def partition_statistics_file_to_json(s: PartitionStatisticsFile) -> dict[str, Any]:
    """The JSON object of a `partition-statistics` entry."""
    return {
        "snapshot-id": s.snapshot_id,
        "statistics-path": s.statistics_path,
        "file-size-in-bytes": s.file_size_in_bytes,
    }


def parse_encryption_key(
    obj: Any, *, path: str | None = None, where: str = "encryption-keys"
) -> EncryptionKey:
    """Parse one entry of `encryption-keys`.

    The spec's field table names the payload `encrypted-key-metadata`, while its Appendix C example
    writes `key-metadata`; both are read, the former is written.
    """
    f = JsonFields(obj, path, where)
    key = (
        "encrypted-key-metadata"
        if f.has("encrypted-key-metadata") or not f.has("key-metadata")
        else "key-metadata"
    )
    return EncryptionKey(
        key_id=f.string("key-id"),
        encrypted_key_metadata=_base64(f, key),
        encrypted_by_id=f.string("encrypted-by-id", None),
        properties=f.str_map("properties"),
    )


def encryption_key_to_json(k: EncryptionKey) -> dict[str, Any]:
    """The JSON object of an `encryption-keys` entry."""
    out: dict[str, Any] = {"key-id": k.key_id, "encrypted-key-metadata": k.encrypted_key_metadata}
    if k.encrypted_by_id is not None:
        out["encrypted-by-id"] = k.encrypted_by_id
    if k.properties:
        out["properties"] = dict(k.properties)
    return out
