"""Table metadata of format versions 1, 2 and 3: model, parser, validator and JSON writer.

`read_table_metadata(data, path=...)` reads a metadata file's bytes (plain JSON, or GZIP as the spec
allows; zstd too, which iceberg-go and iceberg-rust write), `parse_table_metadata(obj, path=...)`
a decoded JSON object, and `table_metadata_to_json(md)` writes what the format version requires.
Parsing then writing then parsing gives an equal `TableMetadata`.

What the parser refuses, always naming the file:
- a format version other than 1, 2, 3 (`UnsupportedFormatError`);
- fields the version requires that are missing (v2+: `table-uuid`, `last-sequence-number`,
  `schemas`, `current-schema-id`, `partition-specs`, `default-spec-id`, `last-partition-id`,
  `sort-orders`, `default-sort-order-id`; v1: `location`, `schema` or `schemas`, ...);
- fields the version does not allow: `next-row-id`, `encryption-keys`, snapshot `first-row-id`,
  `added-rows`, `key-id`, v3-only types (`timestamp_ns`, `variant`, `unknown`, `geometry`, ...)
  and multi-argument partition/sort fields before v3; v1 `manifests` in v2+ snapshots;
- ids that refer to nothing (`current-schema-id`, `default-spec-id`, `default-sort-order-id`,
  `current-snapshot-id`, refs), a `main` ref that disagrees with `current-snapshot-id`, duplicate
  schema/spec/order/snapshot ids and duplicate field ids within a schema or spec;
- non-null defaults on `unknown`/`variant`/`geometry`/`geography` columns, required `unknown` columns;
- malformed JSON (with line and column) and damaged compressed streams.

Where the spec allows it or real writers deviate harmlessly, the parser is lenient (pass
`strict=True` to refuse the deviations marked *):
- v1 deprecated keys: `schema` / `partition-spec` (partition field ids assigned from 1000 when
  absent), missing `schemas`, `partition-specs`, `last-partition-id`, `sort-orders`,
  `last-sequence-number` (0) and snapshot sequence numbers (0);
- `current-snapshot-id` of -1 means none (Appendix F); when it is absent, a `main` ref gives it;
- * non-null `initial-default` / `write-default` in v1/v2 schemas (a v3 feature, but PyIceberg writes
  it into v2 tables and DuckDB applies it);
- * a v3 table without `next-row-id` (taken as one past the highest assigned row id, or 0);
- * a v3 snapshot with `first-row-id` but no `added-rows` (iceberg-go);
- * snapshot ids outside the 64-bit range (hand-edited DuckDB test tables; kept as Python ints);
- * v1 `partition-specs` without `default-spec-id` (the highest spec id is taken), v1 `schemas`
  without `current-schema-id` when the deprecated `schema` says which one is current;
- * `statistics-files` / `partition-statistics-files` spelled that way (AWS Glue);
- * `default-sort-order-id` 0 when `sort-orders` lacks the unsorted order (it is added).
"""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import msgspec

from iceduck._gc import gc_paused
from iceduck.errors import CorruptFileError, InvalidMetadataError, UnsupportedFormatError, ValidationError
from iceduck.spec.json_fields import JsonFields, frozen_map
from iceduck.spec.partitioning import (
    PARTITION_DATA_ID_START,
    PartitionSpec,
    parse_partition_fields,
    parse_partition_spec,
    partition_fields_to_json,
    partition_spec_to_json,
)
from iceduck.spec.snapshots import (
    MAIN_BRANCH,
    EncryptionKey,
    MetadataLogEntry,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotFields,
    SnapshotFieldsV3,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    StatisticsFile,
    encryption_key_to_json,
    metadata_log_entry_to_json,
    parse_encryption_key,
    parse_metadata_log_entry,
    parse_partition_statistics_file,
    parse_snapshot,
    parse_snapshot_log_entry,
    parse_snapshot_ref,
    parse_statistics_file,
    partition_statistics_file_to_json,
    plain_snapshot_fields,
    snapshot_log_entry_to_json,
    snapshot_ref_to_json,
    snapshot_to_json,
    statistics_file_to_json,
    typed_snapshots_plain,
)
from iceduck.spec.sorting import UNSORTED, UNSORTED_ORDER_ID, SortOrder, parse_sort_order, sort_order_to_json
from iceduck.spec.types import (
    NULL_DEFAULT_ONLY_TYPES,
    V3_ONLY_TYPES,
    Schema,
    parse_schema,
    schema_to_json,
)

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)

# Keys a table metadata file of the version must have, grouped in the order they are checked (so
# the first problem reported is the one the reference implementation reports). Schemas, specs and
# sort orders are checked where they are parsed, since v1 may use deprecated keys.
_REQUIRED_V1 = ("location", "last-updated-ms", "last-column-id")
_REQUIRED_V2 = ("table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id")
_REQUIRED_V2_SPECS = ("partition-specs", "default-spec-id", "last-partition-id")
_REQUIRED_V2_ORDERS = ("sort-orders", "default-sort-order-id")
# Table metadata keys that first appeared in v3.
_V3_KEYS = ("next-row-id", "encryption-keys")

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


T = TypeVar("T")


class LazyItems(Sequence[T], Generic[T]):
    """A read-only sequence of items parsed from their JSON objects on first access.

    A metadata file of a long-lived table lists thousands of snapshots and log entries, and most
    reads need one of them (the current snapshot): `read_table_metadata(..., lazy=True)` keeps
    them as JSON and parses each when asked, with the messages the eager parser gives. It
    compares equal to a tuple of the same items.
    """

    __slots__ = ("_items", "_parse", "_raw")

    def __init__(self, raw: Sequence[Any], parse: Callable[[int, Any], T]) -> None:
        self._raw = raw
        self._parse = parse
        self._items: list[T | None] = [None] * len(raw)

    def __len__(self) -> int:
        return len(self._raw)

    def item(self, i: int) -> T:
        """Item `i` (parsed now if not yet)."""
        got = self._items[i]
        if got is None:
            got = self._items[i] = self._parse(i, self._raw[i])
        return got

    def raw(self, i: int) -> Any:
        """The JSON of item `i`, as read."""
        return self._raw[i]

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            return tuple(self.item(j) for j in range(len(self))[i])
        return self.item(range(len(self))[i])  # negative indexes and IndexError as a tuple's

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self._raw)):
            yield self.item(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyItems | tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[T]) -> tuple[T, ...]:
        return (*self, *other)

    def __repr__(self) -> str:
        return repr(tuple(self))


class _LazySnapshots(LazyItems[Snapshot]):
    """Lazily parsed snapshots whose ids (and v3 row-id ranges) are read from the JSON at once: the
    checks across the file (duplicate ids, refs, next-row-id) need them for every snapshot. A
    snapshot whose id or row-id fields are not plain in-range integers is parsed at once, so
    its error (or its converted id) is the eager parser's."""

    __slots__ = ("_plain", "ids")

    def __init__(
        self,
        raw: Sequence[Any],
        parse: Callable[[int, Any], Snapshot],
        plain: Callable[[Any], SnapshotFields | None],
    ) -> None:
        super().__init__(raw, parse)
        self._plain = plain
        ids: list[int] = []
        for i, obj in enumerate(raw):
            if type(obj) is dict:
                sid = obj.get("snapshot-id")
            else:  # decoded typed (`SnapshotFields`: a long), or anything else (parsed now)
                sid = obj.snapshot_id if isinstance(obj, SnapshotFields) else None
            ids.append(sid if type(sid) is int and _LONG_MIN <= sid <= _LONG_MAX else self.item(i).snapshot_id)
        self.ids = ids

    def fields(self, i: int) -> Snapshot | SnapshotFields:
        """Snapshot `i`, or its fields read from the JSON when it is not parsed yet and of the plain
        shape (the values parsing gives); any other snapshot is parsed now (its error, if any, is
        the eager parser's)."""
        got = self._items[i]
        if got is not None:
            return got
        plain = self._plain(self._raw[i])
        return plain if plain is not None else self.item(i)

    def row_range(self, i: int) -> tuple[int | None, int | None]:
        """(first-row-id, added-rows) of snapshot `i`."""
        obj = self.raw(i)
        if isinstance(obj, SnapshotFields):
            return obj.first_row_id, obj.added_rows
        first, added = obj.get("first-row-id"), obj.get("added-rows")
        if (first is None or type(first) is int) and (added is None or (type(added) is int and added >= 0)):
            return first, added
        snap = self.item(i)
        return snap.first_row_id, snap.added_rows


def _row_ranges(snapshots: Sequence[Snapshot]) -> Iterator[tuple[int, int | None, int | None]]:
    """(snapshot id, first-row-id, added-rows) of every snapshot."""
    if isinstance(snapshots, _LazySnapshots):
        for i, sid in enumerate(snapshots.ids):
            yield (sid, *snapshots.row_range(i))
    else:
        for snap in snapshots:
            yield snap.snapshot_id, snap.first_row_id, snap.added_rows


@dataclass(frozen=True, slots=True)
class TableMetadata:
    """A table's metadata file, every spec field, with lookups.

    Collections are tuples in file order; `properties` and `refs` are read-only mappings. `refs`
    always has the `main` branch when the table has a current snapshot. `next_row_id` is None
    before v3; `table_uuid` may be None only in v1.
    """

    format_version: int
    table_uuid: uuid.UUID | None
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    properties: Mapping[str, str] = field(default_factory=lambda: frozen_map(None), hash=False)
    current_snapshot_id: int | None = None
    snapshots: Sequence[Snapshot] = ()
    snapshot_log: Sequence[SnapshotLogEntry] = ()
    metadata_log: Sequence[MetadataLogEntry] = ()
    sort_orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_sort_order_id: int = UNSORTED_ORDER_ID
    refs: Mapping[str, SnapshotRef] = field(default_factory=lambda: frozen_map(None), hash=False)
    statistics: tuple[StatisticsFile, ...] = ()
    partition_statistics: tuple[PartitionStatisticsFile, ...] = ()
    next_row_id: int | None = None
    encryption_keys: tuple[EncryptionKey, ...] = ()
    _schemas_by_id: dict[int, Schema] = field(default_factory=dict, compare=False, repr=False, hash=False)
    _specs_by_id: dict[int, PartitionSpec] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )
    _orders_by_id: dict[int, SortOrder] = field(default_factory=dict, compare=False, repr=False, hash=False)
    # snapshot id -> position in `snapshots` (ids of lazily parsed snapshots are read from their JSON)
    _snapshot_index: dict[int, int] = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        # First occurrence wins; the parser refuses duplicates anyway.
        for s in self.schemas:
            self._schemas_by_id.setdefault(s.schema_id, s)
        for p in self.partition_specs:
            self._specs_by_id.setdefault(p.spec_id, p)
        for o in self.sort_orders:
            self._orders_by_id.setdefault(o.order_id, o)
        snaps = self.snapshots
        ids = snaps.ids if isinstance(snaps, _LazySnapshots) else [snap.snapshot_id for snap in snaps]
        for i, sid in enumerate(ids):
            self._snapshot_index.setdefault(sid, i)

    # -- schemas, specs, orders ------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The current schema."""
        return self._schemas_by_id[self.current_schema_id]

    def schema_by_id(self, schema_id: int) -> Schema | None:
        """The schema with this id, or None."""
        return self._schemas_by_id.get(schema_id)

    @property
    def default_spec(self) -> PartitionSpec:
        """The partition spec writers use by default."""
        return self._specs_by_id[self.default_spec_id]

    def spec_by_id(self, spec_id: int) -> PartitionSpec | None:
        """The partition spec with this id, or None."""
        return self._specs_by_id.get(spec_id)

    @property
    def default_sort_order(self) -> SortOrder:
        """The sort order writers use by default."""
        return self._orders_by_id[self.default_sort_order_id]

    def sort_order_by_id(self, order_id: int) -> SortOrder | None:
        """The sort order with this id, or None."""
        return self._orders_by_id.get(order_id)

    # -- snapshots -------------------------------------------------------------------------

    def current_snapshot(self) -> Snapshot | None:
        """The current snapshot (head of `main`), or None for a table without one."""
        return None if self.current_snapshot_id is None else self.snapshot_by_id(self.current_snapshot_id)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot with this id, or None (unknown or expired)."""
        i = self._snapshot_index.get(snapshot_id)
        return None if i is None else self.snapshots[i]

    def snapshot_fields(self) -> Sequence[Snapshot | SnapshotFields]:
        """Every snapshot in order, each validated as parsing it does (same errors), without building
        a `Snapshot` for a lazily read one of the plain shape: its fields come straight from the JSON."""
        snaps = self.snapshots
        if isinstance(snaps, _LazySnapshots):
            return [snaps.fields(i) for i in range(len(snaps))]
        return snaps

    @property
    def snapshot_ids(self) -> Sequence[int]:
        """The ids of `snapshots`, in order (without parsing lazily read snapshots)."""
        snaps = self.snapshots
        return snaps.ids if isinstance(snaps, _LazySnapshots) else [s.snapshot_id for s in snaps]

    def snapshot_for_ref(self, name: str) -> Snapshot | None:
        """The snapshot a branch or tag points to, or None when there is no such ref."""
        ref = self.refs.get(name)
        return None if ref is None else self.snapshot_by_id(ref.snapshot_id)

    def snapshot_as_of(self, timestamp_ms: int) -> Snapshot | None:
        """The snapshot that was current at `timestamp_ms` (inclusive), from `snapshot-log`.

        Returns None when the log has no entry at or before that time (or no entries at all); a
        caller doing time travel should then raise (spec, Appendix F). Raises `ValidationError`
        when the snapshot that was current then has since been expired.
        """
        best: SnapshotLogEntry | None = None
        for entry in self.snapshot_log:
            if entry.timestamp_ms <= timestamp_ms and (
                best is None or entry.timestamp_ms >= best.timestamp_ms
            ):
                best = entry
        if best is None:
            return None
        snap = self.snapshot_by_id(best.snapshot_id)
        if snap is None:
            raise ValidationError(
                f"table {self.location}: snapshot {best.snapshot_id}, current at {best.timestamp_ms} ms, "
                "has expired and can no longer be read"
            )
        return snap

    def ancestors_of(self, snapshot_id: int) -> tuple[Snapshot, ...]:
        """The snapshot itself, then its parent, grandparent, ... while they are still in the table."""
        out: list[Snapshot] = []
        seen: set[int] = set()
        current = self.snapshot_by_id(snapshot_id)
        while current is not None and current.snapshot_id not in seen:
            out.append(current)
            seen.add(current.snapshot_id)
            parent = current.parent_snapshot_id
            current = None if parent is None else self.snapshot_by_id(parent)
        return tuple(out)

    def schema_for_snapshot(self, snapshot: Snapshot) -> Schema:
        """The schema a snapshot was written with (by its `schema-id`), else the current schema."""
        if snapshot.schema_id is not None:
            schema = self._schemas_by_id.get(snapshot.schema_id)
            if schema is not None:
                return schema
        return self.schema


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def _prefix(path: str | None) -> str:
    return f"{path}: " if path else ""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_table_metadata(
    data: bytes, *, path: str | None = None, strict: bool = False, lazy: bool = False
) -> TableMetadata:
    """Read a table metadata file from its bytes: plain JSON, GZIP or zstd (by magic bytes).

    `lazy`: see `parse_table_metadata`."""
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptFileError(path, f"damaged gzip-compressed metadata: {e}") from None
    elif data[:4] == _ZSTD_MAGIC:
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError as e:
            raise CorruptFileError(path, f"damaged zstd-compressed metadata: {e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidMetadataError(
            f"{_prefix(path)}table metadata is not UTF-8 text (byte {e.start})"
        ) from None
    if not text.strip():
        raise InvalidMetadataError(f"{_prefix(path)}table metadata file is empty ({len(data)} bytes)")
    # Decoding makes a container per JSON object and list (~100,000 for 10,000 snapshots) and no
    # reference cycles: the cyclic collector, which would walk the heap every few thousand, waits.
    with gc_paused():
        return _parse_text(text, path=path, strict=strict, lazy=lazy)


# msgspec decodes metadata JSON (in C, ~2x json), v2/v3 snapshots straight into `SnapshotFields`
# (their types checked while decoding: 10,000 snapshots in ~6 ms, against ~40 ms for json.loads and
# the plain-shape checks in Python). It is stricter than json: what it refuses (NaN, numbers beyond
# a double, a lone surrogate escape, a BOM, malformed text, ...) is decoded by json, which is the
# judge of every error message, and snapshots of any other shape are decoded as JSON objects.
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY_DECODER = msgspec.json.Decoder()
_SNAPSHOTS_DECODERS: dict[int, msgspec.json.Decoder[Any]] = {
    2: msgspec.json.Decoder(list[SnapshotFields]),
    3: msgspec.json.Decoder(list[SnapshotFieldsV3]),
}
_MSGSPEC_REFUSALS = (msgspec.MsgspecError, RecursionError, ValueError)


def decode_metadata_json(text: str, *, strict: bool = False) -> Any:
    """The JSON value of a metadata file's text as msgspec decodes it, None where it refuses the text
    (json then decodes it, or names the problem). Values are those `json.loads` gives, except that
    v2/v3 `snapshots` of the plain shape come as `SnapshotFields` (the values parsing reads from
    their JSON objects)."""
    try:
        top = _TOP_DECODER.decode(text)
    except _MSGSPEC_REFUSALS:
        return None
    out: dict[str, Any] = {}
    try:
        for key, raw in top.items():
            out[key] = _ANY_DECODER.decode(raw) if key != "snapshots" else None
        version = out.get("format-version")
        typed = _SNAPSHOTS_DECODERS.get(version) if type(version) is int else None
        raw_snapshots = top.get("snapshots")
        if raw_snapshots is not None:
            snapshots = None
            if typed is not None and type(version) is int:
                try:
                    snapshots = typed.decode(raw_snapshots)
                except _MSGSPEC_REFUSALS:
                    snapshots = None
                if snapshots is not None and not typed_snapshots_plain(snapshots, version, strict):
                    snapshots = None
            out["snapshots"] = snapshots if snapshots is not None else _ANY_DECODER.decode(raw_snapshots)
    except _MSGSPEC_REFUSALS:
        return None
    return out


def _parse_text(text: str, *, path: str | None, strict: bool, lazy: bool) -> TableMetadata:
    fast = decode_metadata_json(text, strict=strict)
    if fast is not None:
        return parse_table_metadata(fast, path=path, strict=strict, lazy=lazy)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        # json's messages end in "... starting at" / "... at" before the position we print ourselves.
        msg = e.msg.removesuffix(" starting at").removesuffix(" at")
        # An unterminated string or a value missing at the very end means the text stops early.
        ends_early = e.msg.startswith("Unterminated string") or e.pos >= len(text.rstrip())
        hint = " (the file ends early: truncated)" if ends_early else ""
        raise InvalidMetadataError(
            f"{_prefix(path)}malformed JSON at line {e.lineno} column {e.colno} (char {e.pos}): {msg}{hint}"
        ) from None
    except ValueError as e:
        raise InvalidMetadataError(f"{_prefix(path)}malformed JSON: {e}") from None
    except RecursionError:
        raise InvalidMetadataError(f"{_prefix(path)}JSON nested too deeply to be table metadata") from None
    return parse_table_metadata(obj, path=path, strict=strict, lazy=lazy)


def parse_format_version(obj: Mapping[str, Any], *, path: str | None = None) -> int:
    """The table's `format-version`, refusing versions iceduck does not read."""
    version = obj.get("format-version")
    if version is None:
        raise InvalidMetadataError(f"{_prefix(path)}table metadata has no 'format-version'")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidMetadataError(f"{_prefix(path)}'format-version' must be an integer, not {version!r}")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        where = f" in {path}" if path else ""
        raise UnsupportedFormatError(f"unsupported format-version {version}{where}; iceduck reads 1, 2 and 3")
    return version


def parse_table_metadata(
    obj: Any, *, path: str | None = None, strict: bool = False, lazy: bool = False
) -> TableMetadata:
    """Parse and validate decoded table metadata JSON. `path` names the file in error messages.

    `strict=True` refuses the deviations from the spec that are otherwise tolerated because real
    writers produce them (see the module documentation).

    `lazy=True` (for reading tables) keeps `snapshots`, `snapshot-log` and `metadata-log` as JSON
    and parses each item when it is first used (`LazyItems`): a table of 10,000 snapshots is read
    for its current one at the cost of the JSON decoding. The checks across the file still run at
    once (snapshot ids, refs, row-id ranges); a malformed item's error, the eager parser's, comes
    when that item is used.
    """
    if not isinstance(obj, Mapping):
        raise InvalidMetadataError(
            f"{_prefix(path)}table metadata must be a JSON object, not {type(obj).__name__}"
        )
    version = parse_format_version(obj, path=path)
    f = JsonFields(obj, path, "")

    def require(keys: tuple[str, ...]) -> None:
        for key in keys:
            if obj.get(key) is None:
                raise f.fail(f"missing {key!r}, required in format-version {version}")

    require(_REQUIRED_V2 if version >= 2 else _REQUIRED_V1)
    for key in _V3_KEYS:
        f.forbid(key, version)
    if version >= 3 and obj.get("next-row-id") is None and strict:
        raise f.fail("missing 'next-row-id', required in format-version 3")

    table_uuid = _parse_uuid(f)
    schemas, current_schema_id = _parse_schemas(f, version, strict)
    if version >= 2:
        require(_REQUIRED_V2_SPECS)
    specs, default_spec_id = _parse_specs(f, version, strict)
    last_partition_id = f.integer(
        "last-partition-id",
        max((s.last_assigned_field_id for s in specs), default=PARTITION_DATA_ID_START - 1),
    )
    if version >= 2:
        require(_REQUIRED_V2_ORDERS)
    sort_orders, default_sort_order_id = _parse_sort_orders(f, version, strict)

    def one_snapshot(i: int, s: Any) -> Snapshot:
        return parse_snapshot(s, format_version=version, path=path, where=f"snapshots[{i}]", strict=strict)

    def one_log_entry(i: int, e: Any) -> SnapshotLogEntry:
        return parse_snapshot_log_entry(e, path=path, where=f"snapshot-log[{i}]")

    def one_metadata_log_entry(i: int, e: Any) -> MetadataLogEntry:
        return parse_metadata_log_entry(e, path=path, where=f"metadata-log[{i}]")

    raw_snapshots = f.array("snapshots", [])
    raw_log, raw_metadata_log = f.array("snapshot-log", []), f.array("metadata-log", [])
    snapshots: Sequence[Snapshot]
    snapshot_log: Sequence[SnapshotLogEntry]
    metadata_log: Sequence[MetadataLogEntry]
    if lazy:
        snapshots = _LazySnapshots(
            raw_snapshots, one_snapshot, lambda s: plain_snapshot_fields(s, version, strict)
        )
        snapshot_log = LazyItems(raw_log, one_log_entry)
        metadata_log = LazyItems(raw_metadata_log, one_metadata_log_entry)
    else:
        snapshots = tuple(one_snapshot(i, x) for i, x in enumerate(raw_snapshots))
        snapshot_log = tuple(one_log_entry(i, x) for i, x in enumerate(raw_log))
        metadata_log = tuple(one_metadata_log_entry(i, x) for i, x in enumerate(raw_metadata_log))
    current_snapshot_id = f.integer("current-snapshot-id", None)
    if current_snapshot_id == -1:
        current_snapshot_id = None  # Java's "no current snapshot" (spec, Appendix F)
    refs = _parse_refs(f, current_snapshot_id)
    if current_snapshot_id is None and MAIN_BRANCH in refs:
        if strict:
            raise f.fail(
                f"no current-snapshot-id, but the main branch points to {refs[MAIN_BRANCH].snapshot_id}"
            )
        current_snapshot_id = refs[MAIN_BRANCH].snapshot_id
    elif current_snapshot_id is not None and MAIN_BRANCH not in refs:
        # The spec's implicit main branch ("always a main branch reference, even if refs is null").
        refs = {**refs, MAIN_BRANCH: SnapshotRef(current_snapshot_id, SnapshotRefType.BRANCH)}

    statistics = _parse_list(f, "statistics", "statistics-files", strict, parse_statistics_file)
    partition_statistics = _parse_list(
        f, "partition-statistics", "partition-statistics-files", strict, parse_partition_statistics_file
    )

    next_row_id: int | None = None
    if version >= 3:
        next_row_id = f.integer("next-row-id", None)
        if next_row_id is None:
            next_row_id = max(
                (first + (added or 0) for _, first, added in _row_ranges(snapshots) if first is not None),
                default=0,
            )
        elif next_row_id < 0:
            raise f.fail(f"'next-row-id' must not be negative: {next_row_id}")

    md = TableMetadata(
        format_version=version,
        table_uuid=table_uuid,
        location=f.string("location"),
        last_sequence_number=f.integer("last-sequence-number") if version >= 2 else 0,
        last_updated_ms=f.integer("last-updated-ms"),
        last_column_id=f.integer("last-column-id"),
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        properties=f.str_map("properties"),
        current_snapshot_id=current_snapshot_id,
        snapshots=snapshots,
        snapshot_log=snapshot_log,
        metadata_log=metadata_log,
        sort_orders=sort_orders,
        default_sort_order_id=default_sort_order_id,
        refs=frozen_map(refs),
        statistics=statistics,
        partition_statistics=partition_statistics,
        next_row_id=next_row_id,
        encryption_keys=tuple(
            parse_encryption_key(k, path=path, where=f"encryption-keys[{i}]")
            for i, k in enumerate(f.array("encryption-keys", []))
        ),
    )
    validate_table_metadata(md, path=path, strict=strict)
    return md


def _parse_uuid(f: JsonFields) -> uuid.UUID | None:
    text = f.string("table-uuid", None)
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise f.fail(f"'table-uuid' is not a UUID: {text!r}") from None


def _parse_one_schema(f: JsonFields, obj: Any, where: str, *, need_id: bool) -> Schema:
    if not isinstance(obj, Mapping):
        raise f.fail(f"{where} must be an object, not {obj!r}")
    # parse_schema would take a missing type for a struct; the spec (and Java) require it.
    if "type" not in obj:
        raise f.fail(f"{where} is missing 'type' (must be \"struct\")")
    if need_id and obj.get("schema-id") is None:
        raise f.fail(f"{where} is missing 'schema-id'")
    try:
        return parse_schema(obj)
    except InvalidMetadataError as e:
        raise f.fail(f"{where}: {e}") from None


def _parse_schemas(f: JsonFields, version: int, strict: bool) -> tuple[tuple[Schema, ...], int]:
    schemas: list[Schema] = []
    if version >= 2:
        for key in ("schemas", "current-schema-id"):
            if f.obj.get(key) is None:
                raise f.fail(f"missing {key!r}, required in format-version {version}")
    if f.obj.get("schemas") is not None:
        schemas = [
            _parse_one_schema(f, s, f"schemas[{i}]", need_id=version >= 2)
            for i, s in enumerate(f.array("schemas"))
        ]
        if not schemas:
            raise f.fail("'schemas' is empty")
        current_id = f.integer("current-schema-id", None)
        if current_id is None:
            # Only v1 gets here (v2+ require current-schema-id): the deprecated `schema` is current.
            if not f.has("schema") or strict:
                raise f.fail(
                    "'schemas' without 'current-schema-id' (and no 'schema' to say which is current)"
                )
            legacy = _parse_one_schema(f, f.obj["schema"], "schema", need_id=False)
            if all(s.schema_id != legacy.schema_id for s in schemas):
                schemas.append(legacy)
            current_id = legacy.schema_id
    elif version == 1 and f.has("schema"):
        legacy = _parse_one_schema(f, f.obj["schema"], "schema", need_id=False)
        schemas, current_id = [legacy], legacy.schema_id
    else:
        raise f.fail(f"missing 'schema' (or 'schemas'), required in format-version {version}")

    _check_ids(f, [s.schema_id for s in schemas], "schema", "schemas", "current-schema-id", current_id)
    return tuple(schemas), current_id


def _check_ids(
    f: JsonFields, ids: Sequence[int], what: str, key: str, current_key: str, current: int | None, absent_ok: bool = False
) -> bool:
    """Refuse a repeated id among the schemas, specs or sort orders (`what`) listed under `key`, and
    a current/default id (`current_key`) naming none of them. With `absent_ok` such an id is no
    error: the result says whether it is listed."""
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            raise f.fail(f"duplicate {what} id {i} in {key!r}")
        seen.add(i)
    if current in seen or absent_ok:
        return current in seen
    raise f.fail(f"{current_key} {current} refers to no {what} ({what} ids: {sorted(seen)})")


def _parse_specs(f: JsonFields, version: int, strict: bool) -> tuple[tuple[PartitionSpec, ...], int]:
    if f.obj.get("partition-specs") is not None:
        specs = [
            parse_partition_spec(s, format_version=version, path=f.path, where=f"partition-specs[{i}]")
            for i, s in enumerate(f.array("partition-specs"))
        ]
        if not specs:
            raise f.fail("'partition-specs' is empty")
        default_id = f.integer("default-spec-id", None)
        if default_id is None:
            # Only v1 gets here: the newest spec is the default (as iceberg-rust reads it).
            if strict:
                raise f.fail("'partition-specs' without 'default-spec-id'")
            default_id = max(s.spec_id for s in specs)
    elif version == 1 and f.obj.get("partition-spec") is not None:
        default_id = f.integer("default-spec-id", 0)
        specs = [
            parse_partition_fields(
                f.array("partition-spec"),
                spec_id=default_id,
                format_version=1,
                path=f.path,
                where="partition-spec",
            )
        ]
    else:
        raise f.fail(f"missing 'partition-spec' (or 'partition-specs'), required in format-version {version}")

    _check_ids(f, [s.spec_id for s in specs], "partition spec", "partition-specs", "default-spec-id", default_id)
    return tuple(specs), default_id


def _parse_sort_orders(f: JsonFields, version: int, strict: bool) -> tuple[tuple[SortOrder, ...], int]:
    orders = [
        parse_sort_order(o, format_version=version, path=f.path, where=f"sort-orders[{i}]")
        for i, o in enumerate(f.array("sort-orders", []))
    ]
    default_id = f.integer("default-sort-order-id", UNSORTED_ORDER_ID)
    # a default of 0 with no order listed means unsorted (v1 tables without sort orders)
    implied_unsorted = default_id == UNSORTED_ORDER_ID and not (strict and version >= 2)
    ids = [o.order_id for o in orders]
    if not _check_ids(f, ids, "sort order", "sort-orders", "default-sort-order-id", default_id, implied_unsorted):
        orders.insert(0, UNSORTED)
    return tuple(orders), default_id


def _parse_refs(f: JsonFields, current_snapshot_id: int | None) -> dict[str, SnapshotRef]:
    raw = f.obj.get("refs")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise f.fail(f"'refs' must be an object, not {raw!r}")
    refs = {str(name): parse_snapshot_ref(value, name=str(name), path=f.path) for name, value in raw.items()}
    main = refs.get(MAIN_BRANCH)
    if main is not None:
        if main.type != SnapshotRefType.BRANCH:
            raise f.fail("ref 'main' must be a branch, not a tag")
        if current_snapshot_id is not None and main.snapshot_id != current_snapshot_id:
            raise f.fail(
                f"current-snapshot-id {current_snapshot_id} disagrees with the main branch ({main.snapshot_id})"
            )
    return refs


def _parse_list(f: JsonFields, key: str, alias: str, strict: bool, parse: Any) -> tuple[Any, ...]:
    if f.obj.get(key) is None and f.obj.get(alias) is not None and not strict:
        key = alias
    return tuple(parse(item, path=f.path, where=f"{key}[{i}]") for i, item in enumerate(f.array(key, [])))


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def validate_table_metadata(md: TableMetadata, *, path: str | None = None, strict: bool = False) -> None:
    """Check the cross-references and version rules of a `TableMetadata` (the parser calls this).

    Raises `InvalidMetadataError` naming `path`; writers can call it before committing.
    """
    pre = _prefix(path)
    version = md.format_version
    if version not in SUPPORTED_FORMAT_VERSIONS:
        where = f" in {path}" if path else ""
        raise UnsupportedFormatError(f"unsupported format-version {version}{where}; iceduck reads 1, 2 and 3")
    if version >= 2 and md.table_uuid is None:
        raise InvalidMetadataError(f"{pre}missing 'table-uuid', required in format-version {version}")
    if md.schema_by_id(md.current_schema_id) is None:
        raise InvalidMetadataError(f"{pre}current-schema-id {md.current_schema_id} refers to no schema")
    if md.spec_by_id(md.default_spec_id) is None:
        raise InvalidMetadataError(f"{pre}default-spec-id {md.default_spec_id} refers to no partition spec")
    if md.sort_order_by_id(md.default_sort_order_id) is None:
        raise InvalidMetadataError(
            f"{pre}default-sort-order-id {md.default_sort_order_id} refers to no sort order"
        )
    for schema in md.schemas:
        _check_schema(schema, version, pre, strict)
    # A partition field's source column may have been dropped since (it stays in an older schema),
    # but one that no schema ever had cannot be interpreted.
    known_ids = {f.id for schema in md.schemas for f, _ in schema.walk()}
    for spec in md.partition_specs:
        for pf in spec.fields:
            missing = [i for i in pf.source_ids if i not in known_ids]
            if missing:
                raise InvalidMetadataError(
                    f"{pre}partition spec {spec.spec_id} field {pf.name!r} (id {pf.field_id}): source-id "
                    f"{missing[0]} is not a field of any schema"
                )

    if len(md._snapshot_index) != len(md.snapshots):
        ids = md.snapshot_ids
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidMetadataError(f"{pre}duplicate snapshot id {dup} in 'snapshots'")
    if md.current_snapshot_id is not None and md.snapshot_by_id(md.current_snapshot_id) is None:
        raise InvalidMetadataError(f"{pre}current-snapshot-id {md.current_snapshot_id} refers to no snapshot")
    for name, ref in md.refs.items():
        if md.snapshot_by_id(ref.snapshot_id) is None:
            raise InvalidMetadataError(
                f"{pre}ref {name!r} refers to snapshot {ref.snapshot_id}, which does not exist"
            )
    main = md.refs.get(MAIN_BRANCH)
    if (main.snapshot_id if main else None) != md.current_snapshot_id:
        raise InvalidMetadataError(
            f"{pre}current-snapshot-id {md.current_snapshot_id} disagrees with the main branch "
            f"({main.snapshot_id if main else 'absent'})"
        )
    if version < 3:
        if md.next_row_id is not None:
            raise InvalidMetadataError(
                f"{pre}next-row-id is not allowed before format-version 3 (table is v{version})"
            )
        if md.encryption_keys:
            raise InvalidMetadataError(
                f"{pre}encryption-keys are not allowed before format-version 3 (table is v{version})"
            )
    elif md.next_row_id is None:
        raise InvalidMetadataError(f"{pre}missing 'next-row-id', required in format-version 3")
    else:
        for sid, first, added in _row_ranges(md.snapshots):
            if first is not None and first + (added or 0) > md.next_row_id:
                raise InvalidMetadataError(
                    f"{pre}next-row-id {md.next_row_id} is not above the row ids of snapshot {sid} "
                    f"(first-row-id {first}, added-rows {added or 0})"
                )


def unassigned_field(md: TableMetadata, schema: Schema) -> tuple[str, int] | None:
    """The first field (name, id) of `schema` whose id is above the table's `last-column-id`: an id
    never assigned (ids are assigned upwards from it), so no data file can hold its column.

    Not a parse error: test tables of other projects (iceberg-rust's examples, iceberg-cpp's mocks)
    carry such ids and are read by their own projects; a scan refuses them (read/sql.py), where a
    damaged id would otherwise read as NULL."""
    return next(((name, f.id) for f, name in schema.walk() if f.id > md.last_column_id), None)


def _check_schema(schema: Schema, version: int, pre: str, strict: bool) -> None:
    where = f"schema {schema.schema_id}"
    seen: set[int] = set()
    for f, name in schema.walk():
        if f.id in seen:
            raise InvalidMetadataError(f"{pre}{where}: duplicate field id {f.id} (at {name!r})")
        seen.add(f.id)
        type_name = f.type.name
        if type_name in V3_ONLY_TYPES and version < 3:
            raise InvalidMetadataError(
                f"{pre}{where}: field {name!r} (id {f.id}) has type {f.type}, which needs format-version 3 "
                f"(table is v{version})"
            )
        defaults = [v for v in (f.initial_default, f.write_default) if v is not None]
        if defaults and type_name in NULL_DEFAULT_ONLY_TYPES:
            raise InvalidMetadataError(f"{pre}{where}: field {name!r} of type {f.type} must default to null")
        if type_name == "unknown" and f.required:
            raise InvalidMetadataError(f"{pre}{where}: field {name!r} of type unknown must be optional")
        if strict and defaults and version < 3:
            raise InvalidMetadataError(
                f"{pre}{where}: field {name!r} has a default value, which needs format-version 3 (table is v{version})"
            )


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def table_metadata_to_json(md: TableMetadata) -> dict[str, Any]:
    """The JSON object of a metadata file: what the format version requires, nothing it forbids.

    v1 files also get the deprecated `schema` and `partition-spec` (required in v1) besides their
    replacements; `current-snapshot-id` is -1 for "none" in v1/v2 (older readers expect it) and
    omitted in v3.
    """
    version = md.format_version
    out: dict[str, Any] = {"format-version": version}
    if md.table_uuid is not None:
        out["table-uuid"] = str(md.table_uuid)
    out["location"] = md.location
    if version >= 2:
        out["last-sequence-number"] = md.last_sequence_number
    out["last-updated-ms"] = md.last_updated_ms
    out["last-column-id"] = md.last_column_id
    if version >= 3:
        out["next-row-id"] = md.next_row_id
    if version == 1:
        out["schema"] = schema_to_json(md.schema)
    out["current-schema-id"] = md.current_schema_id
    out["schemas"] = [schema_to_json(s) for s in md.schemas]
    if version == 1:
        out["partition-spec"] = partition_fields_to_json(md.default_spec)
    out["default-spec-id"] = md.default_spec_id
    out["partition-specs"] = [partition_spec_to_json(s) for s in md.partition_specs]
    out["last-partition-id"] = md.last_partition_id
    out["default-sort-order-id"] = md.default_sort_order_id
    out["sort-orders"] = [sort_order_to_json(o) for o in md.sort_orders]
    out["properties"] = dict(md.properties)
    if md.current_snapshot_id is not None:
        out["current-snapshot-id"] = md.current_snapshot_id
    elif version < 3:
        out["current-snapshot-id"] = -1
    out["refs"] = {name: snapshot_ref_to_json(ref) for name, ref in md.refs.items()}
    out["snapshots"] = [snapshot_to_json(s, format_version=version) for s in md.snapshots]
    out["statistics"] = [statistics_file_to_json(s) for s in md.statistics]
    out["partition-statistics"] = [partition_statistics_file_to_json(s) for s in md.partition_statistics]
    out["snapshot-log"] = [snapshot_log_entry_to_json(e) for e in md.snapshot_log]
    out["metadata-log"] = [metadata_log_entry_to_json(e) for e in md.metadata_log]
    if version >= 3 and md.encryption_keys:
        out["encryption-keys"] = [encryption_key_to_json(k) for k in md.encryption_keys]
    return out
