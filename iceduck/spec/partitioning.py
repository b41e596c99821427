"""Partition specs ("Partitioning" and "Appendix C: Partition Specs" of the table spec).

A `PartitionSpec` is an id and a tuple of `PartitionField`s. Each field names its source column(s)
by field id (`source_ids`; v3 allows several for multi-argument transforms), its own partition
field id, a name and a transform from `iceduck.spec.transforms`.

JSON: a spec is `{"spec-id": .., "fields": [..]}`; v1 metadata may store only the field list
(`partition-spec`) and may omit partition field ids, which are then assigned 1000, 1001, ... in
field order, as the spec describes for v1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from iceduck.errors import IcebergError, InvalidMetadataError, ValidationError
from iceduck.spec.transforms import (
    Transform,
    UnknownTransform,
    VoidTransform,
    malformed_transform,
    parse_transform,
)
from iceduck.spec.types import UNKNOWN, IcebergType, NestedField, Schema, StructType
from iceduck.spec.values import from_bytes

# v1 writers assigned partition field ids from 1000 up; 999 means "none assigned yet".
PARTITION_DATA_ID_START = 1000


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One field of a partition spec: source column id(s), partition field id, name, transform."""

    source_ids: tuple[int, ...]
    field_id: int
    name: str
    transform: Transform

    @property
    def source_id(self) -> int:
        """The single source column id; multi-argument fields have no single source."""
        return single_source_id(self.source_ids, f"partition field {self.name!r}")

    def __str__(self) -> str:
        return f"{self.field_id}: {self.name}: {transform_call(self.transform, self.source_ids)}"


def single_source_id(source_ids: tuple[int, ...], field: str) -> int:
    """The one source column id of a partition or sort field (`field` names it in the error):
    fields of a multi-argument transform have no single source."""
    if len(source_ids) != 1:
        raise ValidationError(f"{field} has {len(source_ids)} source ids {list(source_ids)}; use source_ids")
    return source_ids[0]


def transform_call(transform: Transform, source_ids: tuple[int, ...]) -> str:
    """`bucket[16](1)`: a transform applied to source column ids, as partition and sort fields print."""
    return f"{transform}({', '.join(str(i) for i in source_ids)})"


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """A partition spec: its id and its fields, in order (the order of the partition tuple)."""

    spec_id: int
    fields: tuple[PartitionField, ...] = ()

    @property
    def is_unpartitioned(self) -> bool:
        """True when no field partitions data: no fields, or only `void` ones (dropped in v1)."""
        return all(isinstance(f.transform, VoidTransform) for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        """The highest partition field id of this spec, or 999 when it has none."""
        return max((f.field_id for f in self.fields), default=PARTITION_DATA_ID_START - 1)

    def field_by_id(self, field_id: int) -> PartitionField | None:
        """The field with this partition field id, or None."""
        for f in self.fields:
            if f.field_id == field_id:
                return f
        return None

    def partition_type(self, schema: Schema) -> StructType:
        """The struct of partition values: one optional field per partition field, in order.

        A field's type is its transform's result type over the source column type(s). When a source
        column is missing from `schema` (dropped after the spec was written) the type cannot be
        known and is `unknown`; so is the result of a transform iceduck does not know. Readers take
        the real type of stored values from the manifest's own Avro schema in those cases. A
        transform that cannot apply to its source type (`year` of a string) is invalid metadata.
        """
        out = []
        for f in self.fields:
            found = [schema.find_type(i) for i in f.source_ids]
            result: IcebergType
            if any(t is None for t in found):
                result = UNKNOWN
            else:
                try:
                    result = f.transform.result_type(*(t for t in found if t is not None))
                except ValidationError as e:
                    raise InvalidMetadataError(
                        f"partition spec {self.spec_id} field {f.name!r} (id {f.field_id}): {e}"
                    ) from None
            out.append(NestedField(f.field_id, f.name, result, required=False))
        return StructType(tuple(out))

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"


UNPARTITIONED = PartitionSpec(0, ())


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def _error(path: str | None, where: str, problem: str) -> InvalidMetadataError:
    return InvalidMetadataError(f"{path}: {where}: {problem}" if path else f"{where}: {problem}")


def _int(obj: Mapping[str, Any], key: str, path: str | None, where: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"missing {key!r}" if value is None else f"{key!r} must be an integer, not {value!r}"
        raise _error(path, where, problem)
    return value


def _str(obj: Mapping[str, Any], key: str, path: str | None, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        problem = f"missing {key!r}" if value is None else f"{key!r} must be a string, not {value!r}"
        raise _error(path, where, problem)
    return value


def parse_source_ids(
    obj: Mapping[str, Any], *, format_version: int, path: str | None, where: str
) -> tuple[int, ...]:
    """Source column ids of a partition or sort field, from `source-id` and/or `source-ids`.

    Both keys are accepted in every version; when both are present they must agree. More than one
    source id (a multi-argument transform) needs format version 3.
    """
    single = _int(obj, "source-id", path, where) if "source-id" in obj else None
    many: tuple[int, ...] | None = None
    if "source-ids" in obj:
        raw = obj["source-ids"]
        if (
            not isinstance(raw, list)
            or not raw
            or any(isinstance(i, bool) or not isinstance(i, int) for i in raw)
        ):
            raise _error(path, where, f"'source-ids' must be a non-empty list of integers, not {raw!r}")
        many = tuple(raw)
    if many is None:
        if single is None:
            raise _error(path, where, "missing 'source-id' (or 'source-ids')")
        return (single,)
    if single is not None and many != (single,):
        raise _error(path, where, f"'source-id' {single} disagrees with 'source-ids' {list(many)}")
    if len(many) > 1 and format_version < 3:
        raise _error(
            path,
            where,
            f"multi-argument source ids {list(many)} need format-version 3 (table is v{format_version})",
        )
    return many


def source_ids_to_json(out: dict[str, Any], source_ids: tuple[int, ...]) -> None:
    """Write `source-id` for one argument, `source-ids` for several (Appendix C, v3 notes)."""
    if len(source_ids) == 1:
        out["source-id"] = source_ids[0]
    else:
        out["source-ids"] = list(source_ids)


def parse_partition_fields(
    fields: Any,
    *,
    spec_id: int = 0,
    format_version: int = 2,
    path: str | None = None,
    where: str = "partition spec",
) -> PartitionSpec:
    """Parse a bare list of partition fields (v1 `partition-spec`, or a manifest's `partition-spec`).

    Field ids may be missing only in v1: they are assigned sequentially from 1000, continuing after
    the highest id seen so far in this spec, as the reference implementation did.
    """
    if not isinstance(fields, list):
        raise _error(path, where, f"partition fields must be a list, not {fields!r}")
    out: list[PartitionField] = []
    last_id = PARTITION_DATA_ID_START - 1
    seen: set[int] = set()
    for i, f in enumerate(fields):
        fwhere = f"{where} field {i}"
        if not isinstance(f, Mapping):
            raise _error(path, fwhere, f"must be an object, not {f!r}")
        source_ids = parse_source_ids(f, format_version=format_version, path=path, where=fwhere)
        if "field-id" in f:
            field_id = _int(f, "field-id", path, fwhere)
        elif format_version == 1:
            field_id = last_id + 1
        else:
            raise _error(path, fwhere, f"missing 'field-id' (required in format-version {format_version})")
        if field_id in seen:
            raise _error(path, fwhere, f"duplicate partition field id {field_id}")
        seen.add(field_id)
        last_id = max(last_id, field_id)
        name = _str(f, "name", path, fwhere)
        text = _str(f, "transform", path, fwhere)
        problem = malformed_transform(text)
        if problem is not None:
            raise _error(path, fwhere, problem)
        transform = parse_transform(text)
        out.append(PartitionField(source_ids, field_id, name, transform))
    return PartitionSpec(spec_id, tuple(out))


def parse_partition_spec(
    obj: Any, *, format_version: int = 2, path: str | None = None, where: str = "partition spec"
) -> PartitionSpec:
    """Parse a partition spec object `{"spec-id": .., "fields": [..]}`."""
    if not isinstance(obj, Mapping):
        raise _error(path, where, f"must be an object, not {obj!r}")
    spec_id = _int(obj, "spec-id", path, where)
    if "fields" not in obj:
        raise _error(path, f"{where} {spec_id}", "missing 'fields'")
    return parse_partition_fields(
        obj["fields"], spec_id=spec_id, format_version=format_version, path=path, where=f"{where} {spec_id}"
    )


def partition_field_to_json(f: PartitionField) -> dict[str, Any]:
    """The JSON object of one partition field (Appendix C)."""
    out: dict[str, Any] = {"name": f.name, "transform": str(f.transform)}
    source_ids_to_json(out, f.source_ids)
    # Written in every version (v1 too, as the reference implementation does), so ids that were
    # explicit in a v1 file survive a round trip.
    out["field-id"] = f.field_id
    return out


def partition_fields_to_json(spec: PartitionSpec) -> list[dict[str, Any]]:
    """The bare field list (v1 `partition-spec`, manifest key-value metadata)."""
    return [partition_field_to_json(f) for f in spec.fields]


def partition_spec_to_json(spec: PartitionSpec) -> dict[str, Any]:
    """The JSON object form of a partition spec."""
    return {"spec-id": spec.spec_id, "fields": partition_fields_to_json(spec)}


def partition_disagreement(
    spec: PartitionSpec,
    partition: Sequence[Any],
    lower: Mapping[int, bytes],
    upper: Mapping[int, bytes],
    source_type: Callable[[int], IcebergType | None],
) -> str | None:
    """Why a file's partition tuple contradicts its own column bounds, or None.

    Every row of a file has the partition value, so each field's value lies within its transform
    of the source column's bounds when the transform keeps order (identity, truncate, year..hour:
    bounds truncated by the writer stay on the right side), and equals the transform of the one
    value when lower and upper bounds are the same (bucket); a null value leaves no non-null
    bounds. A file whose partition value was changed would otherwise read with the wrong value
    for a column taken from the partition, and deletes would cover other partitions. Fields with
    several sources, void or unknown transforms, and bounds that do not decode are not judged.
    """
    for pf, value in zip(spec.fields, partition, strict=False):
        if len(pf.source_ids) != 1 or isinstance(pf.transform, VoidTransform | UnknownTransform):
            continue
        fid = pf.source_ids[0]
        lo, hi = lower.get(fid), upper.get(fid)
        t = source_type(fid)
        if lo is None or hi is None or t is None or t.name in ("float", "double"):
            continue
        if value is None:
            return f"partition field {pf.name!r} is null, but source column {fid} has non-null bounds"
        exact = lo == hi
        if not (pf.transform.preserves_order or exact):
            continue
        try:
            bounds = (pf.transform.apply(t, from_bytes(t, lo)), pf.transform.apply(t, from_bytes(t, hi)))
            inside = bounds[0] == value == bounds[1] if exact else bounds[0] <= value <= bounds[1]
        except (IcebergError, ValueError, TypeError, ArithmeticError, OverflowError):
            continue  # bounds another writer encoded otherwise: no verdict
        if not inside:
            return (
                f"partition field {pf.name!r} is {value!r}, but {pf.transform} of source column {fid}'s "
                f"bounds is {bounds[0]!r} .. {bounds[1]!r}"
            )
    return None
