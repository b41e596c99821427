"""Iceberg types <-> DuckDB and Arrow types, for writing data files.

* `duck_type(t)`: the DuckDB type that holds an Iceberg type (`iceduck.vocabulary`'s map), for CASTs
  and `read_parquet` schemas; `WriteTypeError` for the types DuckDB cannot write the way the spec
  requires (`fixed`, `timestamptz_ns`, geospatial and variant).
* `iceberg_type_from_arrow(pa_type)`: the Iceberg type for an Arrow type, with placeholder field ids
  (`schema_from_arrow` assigns fresh ids to a whole schema: top-level fields first, then nested
  ones, struct by struct, as Java and PyIceberg do).
* `iceberg_type_of_duck(t)`: the Iceberg type for a DuckDB type, the one mapping of SQL and the
  Python API (exact or refused: TIME_NS, BIT, BIGNUM, HUGEINT, INTERVAL, ... are refused).
* `schema_from_columns([(name, duckdb_type_text)])`: a schema from DuckDB type names, as SQL maps them.
* `arrow_schema_of_relation(types, arrow_schema)`: the Arrow schema a DuckDB relation is appended
  with, its DuckDB types mapped first (so an append refuses what SQL refuses).
* `compatible(source, target)`: whether values of an Iceberg type can be written into a column of
  another without loss (the spec's promotions plus narrower integers), with the reason when not.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

import iceduck.vocabulary as vocabulary
from iceduck.errors import ValidationError
from iceduck.spec.types import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    UUID,
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
)

if TYPE_CHECKING:
    from duckdb.sqltypes import DuckDBPyType

# Reserved field ids of the v3 row lineage columns (spec "Reserved Field IDs").
ROW_ID_FIELD_ID = 2147483540
LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID = 2147483539
ROW_ID = "_row_id"
LAST_UPDATED_SEQUENCE_NUMBER = "_last_updated_sequence_number"
# Reserved field ids of position delete files.
DELETE_FILE_PATH_FIELD_ID = 2147483546
DELETE_POS_FIELD_ID = 2147483545


class WriteTypeError(ValidationError):
    """A type Iceberg cannot hold, or one iceduck's DuckDB writer cannot write as the spec requires."""


_UNWRITABLE = {
    "fixed": "DuckDB has no fixed-length binary type to write Parquet fixed_len_byte_array with",
    "timestamptz_ns": "DuckDB has no nanosecond timestamp with time zone",
    "geometry": "iceduck does not write geospatial columns yet",
    "geography": "iceduck does not write geospatial columns yet",
    "variant": "iceduck does not write variant columns yet",
}


def duck_type(t: IcebergType, where: str = "") -> str:
    """The DuckDB type name holding values of `t` (`iceduck.vocabulary.duck_type`), for writing:
    `WriteTypeError` naming `where` for a type iceduck cannot write as the spec requires."""
    _check_writable(t, where)
    return vocabulary.duck_type(t)


def _check_writable(t: IcebergType, where: str) -> None:
    if isinstance(t, StructType):
        for f in t.fields:
            _check_writable(f.type, f"{where}.{f.name}")
    elif isinstance(t, ListType):
        _check_writable(t.element, where + ".element")
    elif isinstance(t, MapType):
        _check_writable(t.key, where + ".key")
        _check_writable(t.value, where + ".value")
    elif t.name in _UNWRITABLE:
        raise WriteTypeError(f"column {where or '?'} has type {t}: {_UNWRITABLE[t.name]}")


def check_writable(schema: Schema) -> None:
    """`WriteTypeError` naming the first column whose type iceduck cannot write."""
    for f in schema.fields:
        duck_type(f.type, f.name)


# -- DuckDB -> Iceberg --------------------------------------------------------------------------------

_DUCK_PRIMITIVES: dict[str, IcebergType] = {
    "boolean": BOOLEAN,
    "tinyint": INT,
    "smallint": INT,
    "integer": INT,
    "utinyint": INT,
    "usmallint": INT,
    "bigint": LONG,
    "uinteger": LONG,
    "float": FLOAT,
    "double": DOUBLE,
    "date": DATE,
    "time": TIME,
    "timestamp": TIMESTAMP,
    "timestamp_ms": TIMESTAMP,
    "timestamp_s": TIMESTAMP,
    "timestamp_ns": TIMESTAMP_NS,
    "timestamp with time zone": TIMESTAMPTZ,
    "varchar": STRING,
    "enum": STRING,
    "blob": BINARY,
    "uuid": UUID,
}

_DUCK_NO_TYPE = {
    "hugeint": "a 128-bit integer; use BIGINT or DECIMAL(38, 0)",
    "uhugeint": "an unsigned 128-bit integer; use BIGINT or DECIMAL(38, 0)",
    "ubigint": "an unsigned 64-bit integer; use BIGINT or DECIMAL(20, 0)",
    "bignum": "an integer of any size; use BIGINT or DECIMAL(38, 0)",
    "interval": "use BIGINT (e.g. microseconds) or a STRUCT of its parts",
    "time with time zone": "use TIME or TIMESTAMPTZ",
    "time_ns": "Iceberg's time has microsecond precision; use TIME",
    "union": "use a STRUCT with one field per member",
    "bit": "use BLOB or BOOLEAN[]",
}


_DUCK_NESTED = frozenset({"decimal", "list", "array", "map"})


def iceberg_type_of_duck(t: DuckDBPyType, where: str) -> IcebergType:
    """The Iceberg type for a DuckDB type, the one mapping SQL and the Python API use (nested field
    ids are placeholders); `WriteTypeError` naming the column `where` when Iceberg has no such type
    or would hold it with less (TIME_NS: Iceberg's time has microseconds): exact or refused."""
    return _convert(t, where, itertools.count(1))


def _convert(t: DuckDBPyType, where: str, ids: Iterator[int]) -> IcebergType:
    kind = t.id
    children: dict[str, Any] = dict(t.children) if kind in _DUCK_NESTED else {}
    if kind in _DUCK_PRIMITIVES:
        return _DUCK_PRIMITIVES[kind]
    if kind == "decimal":
        return DecimalType(int(children["precision"]), int(children["scale"]))
    if kind == "struct":
        fields = []
        for name, child in t.children:
            fields.append(
                NestedField(next(ids), name, _convert(cast("DuckDBPyType", child), f"{where}.{name}", ids))
            )
        if not fields:
            raise WriteTypeError(f"column {where}: a STRUCT needs at least one field")
        return StructType(tuple(fields))
    if kind in ("list", "array"):
        return ListType(next(ids), _convert(children["child"], f"{where}.element", ids), False)
    if kind == "map":
        key = _convert(children["key"], f"{where}.key", ids)
        if not isinstance(key, PrimitiveType | DecimalType):
            raise WriteTypeError(f"column {where}: map keys must be of a primitive type, not {children['key']}")
        key_id = next(ids)
        return MapType(key_id, key, next(ids), _convert(children["value"], f"{where}.value", ids), False)
    hint = _DUCK_NO_TYPE.get(kind)
    message = f"column {where}: Iceberg has no type for {t}"
    raise WriteTypeError(f"{message} ({hint})" if hint else message)


# -- Arrow -> Iceberg ---------------------------------------------------------------------------------


def _placeholder_ids() -> Iterator[int]:
    return itertools.count(1)


def iceberg_type_from_arrow(t: pa.DataType, where: str = "") -> IcebergType:
    """The Iceberg type for an Arrow type (nested field ids are placeholders; see `schema_from_arrow`).

    `WriteTypeError` names `where` for types Iceberg cannot hold: unsigned 64-bit integers, durations,
    intervals, decimals wider than 38 digits, unions, nanosecond times, and extension types other
    than UUID and JSON (DuckDB hands BIGNUM to Arrow as an opaque binary).
    """
    return _from_arrow(t, where, _placeholder_ids())


def _from_arrow(t: pa.DataType, where: str, ids: Iterator[int]) -> IcebergType:
    if pa.types.is_dictionary(t):
        return _from_arrow(t.value_type, where, ids)
    if pa.types.is_boolean(t):
        return BOOLEAN
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return INT
    if t in (pa.int64(), pa.uint32()):
        return LONG
    if t == pa.uint64():
        raise WriteTypeError(
            f"column {where} has type uint64 (UBIGINT): Iceberg has no unsigned 64-bit integer; "
            "cast it to BIGINT or DECIMAL(20, 0)"
        )
    if t in (pa.float16(), pa.float32()):
        return FLOAT
    if t == pa.float64():
        return DOUBLE
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise WriteTypeError(
                f"column {where} has type decimal({t.precision}, {t.scale}): Iceberg decimals hold at most "
                "38 digits (HUGEINT values need 39)"
            )
        return DecimalType(t.precision, t.scale)
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_time(t):
        if t == pa.time64("ns"):
            raise WriteTypeError(
                f"column {where} has type time64[ns]: Iceberg's time has microsecond precision; "
                "cast it to time64[us]"
            )
        return TIME
    if pa.types.is_timestamp(t):
        nanos = t.unit == "ns"
        if t.tz is None:
            return TIMESTAMP_NS if nanos else TIMESTAMP
        return TIMESTAMPTZ_NS if nanos else TIMESTAMPTZ
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    extension = getattr(t, "extension_name", None)
    if extension is not None:
        return _from_arrow_extension(t, extension, where, ids)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BINARY
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_null(t):
        return UNKNOWN
    if pa.types.is_struct(t):
        fields = tuple(
            NestedField(
                next(ids),
                t.field(i).name,
                _from_arrow(t.field(i).type, f"{where}.{t.field(i).name}", ids),
                required=not t.field(i).nullable,
            )
            for i in range(t.num_fields)
        )
        return StructType(fields)
    if pa.types.is_map(t):
        return MapType(
            next(ids),
            _from_arrow(t.key_type, where + ".key", ids),
            next(ids),
            _from_arrow(t.item_type, where + ".value", ids),
            value_required=not t.item_field.nullable,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ListType(
            next(ids), _from_arrow(t.value_type, where + ".element", ids), not t.value_field.nullable
        )
    raise WriteTypeError(f"column {where} has type {t}: Iceberg has no such type")


# Arrow's canonical extension types whose values Iceberg holds exactly: a UUID, and JSON text (a
# string). Any other extension type (DuckDB's `arrow.opaque` BIGNUM, a tensor, a geospatial encoding)
# means more than its storage bytes: taking the storage type would write values no reader could tell
# apart from plain binary, so it is refused.
_EXACT_EXTENSIONS = {"arrow.uuid": UUID, "arrow.json": STRING}


def _from_arrow_extension(t: pa.DataType, extension: str, where: str, ids: Iterator[int]) -> IcebergType:
    if extension in _EXACT_EXTENSIONS:
        return _EXACT_EXTENSIONS[extension]
    named = getattr(t, "type_name", "") if extension == "arrow.opaque" else ""
    what = f"{extension} ({named})" if named else extension
    raise WriteTypeError(
        f"column {where} has Arrow extension type {what}: Iceberg has no such type (its storage, "
        f"{t.storage_type}, would lose what the values are); cast the column to a type Iceberg has"
    )


def assign_fresh_ids(fields: Sequence[NestedField], start: int = 1) -> tuple[tuple[NestedField, ...], int]:
    """The fields with new ids from `start`: the fields of each struct first, then their children.

    Returns the fields and the last id assigned.
    """
    counter = itertools.count(start)
    out = _reassign(tuple(fields), counter)
    return out, next(counter) - 1


def _reassign(fields: tuple[NestedField, ...], ids: Iterator[int]) -> tuple[NestedField, ...]:
    new_ids = [next(ids) for _ in fields]
    return tuple(
        NestedField(
            new_id,
            f.name,
            _reassign_type(f.type, ids),
            f.required,
            f.doc,
            f.initial_default,
            f.write_default,
            f.has_initial_default,
            f.has_write_default,
        )
        for new_id, f in zip(new_ids, fields, strict=True)
    )


def _reassign_type(t: IcebergType, ids: Iterator[int]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(_reassign(t.fields, ids))
    if isinstance(t, ListType):
        element_id = next(ids)
        return ListType(element_id, _reassign_type(t.element, ids), t.element_required)
    if isinstance(t, MapType):
        key_id, value_id = next(ids), next(ids)
        return MapType(
            key_id, _reassign_type(t.key, ids), value_id, _reassign_type(t.value, ids), t.value_required
        )
    return t


def schema_from_arrow(schema: pa.Schema) -> Schema:
    """An Iceberg schema (id 0) for an Arrow schema, with fresh field ids from 1."""
    names = [f.name for f in schema]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"duplicate column names: {', '.join(dupes)}")
    fields = [
        NestedField(0, f.name, iceberg_type_from_arrow(f.type, f.name), required=not f.nullable)
        for f in schema
    ]
    fresh, _ = assign_fresh_ids(fields)
    return Schema(fresh, schema_id=0)


def schema_from_columns(con: Any, columns: Iterable[tuple[str, str]], required: Iterable[str] = ()) -> Schema:
    """An Iceberg schema for `(name, DuckDB type)` pairs (as in a CREATE TABLE); `required` names the
    NOT NULL columns. The types map as in SQL (`iceberg_type_of_duck`)."""
    must = set(required)
    fields = [
        NestedField(0, name, iceberg_type_of_duck_text(con, name, text), required=name in must)
        for name, text in columns
    ]
    names = [f.name for f in fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"duplicate column names: {', '.join(dupes)}")
    fresh, _ = assign_fresh_ids(fields)
    return Schema(fresh, schema_id=0)


def iceberg_type_of_duck_text(con: Any, where: str, text: str) -> IcebergType:
    """The Iceberg type for the DuckDB type named `text` (any spelling DuckDB accepts), as SQL maps it."""
    try:
        t = con.sql(f"SELECT CAST(NULL AS {text}) AS v").types[0]
    except Exception as e:  # DuckDB parser/binder errors: an unknown type name
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise WriteTypeError(f"column {where}: unknown DuckDB type {text!r}: {first}") from None
    return iceberg_type_of_duck(t, where)


def arrow_schema_of_relation(types: Sequence[DuckDBPyType], schema: pa.Schema) -> pa.Schema:
    """The Arrow schema a DuckDB relation's rows are appended with: the relation's own Arrow schema,
    each column's DuckDB type first mapped as SQL maps it (`iceberg_type_of_duck`), so the Python API
    refuses what SQL refuses, where Arrow would hold it with less (TIME_NS, BIT, BIGNUM, HUGEINT,
    INTERVAL, TIMETZ). UUID columns, which DuckDB hands to Arrow as strings, become Arrow UUIDs.
    A column that is or holds NULL (`NULL AS c`, `[] AS tags`) takes the table's type at the append."""
    fields = []
    for f, t in zip(schema, types, strict=True):
        if not _holds_null(t):
            iceberg_type_of_duck(t, f.name)
        fields.append(pa.field(f.name, pa.uuid(), f.nullable) if t.id == "uuid" else f)
    return pa.schema(fields)


def _holds_null(t: DuckDBPyType) -> bool:
    """Whether a DuckDB type is NULL or has NULL somewhere inside (a list, struct, map or array)."""
    if t.id == "null":
        return True
    if t.id in ("list", "array", "map", "struct", "union"):
        return any(hasattr(child, "id") and _holds_null(cast("DuckDBPyType", child)) for _, child in t.children)
    return False


# -- compatibility ------------------------------------------------------------------------------------


def _rank(t: IcebergType) -> tuple[str, int] | None:
    # Integer and float widening chains: a narrower source fits a wider target.
    if isinstance(t, PrimitiveType):
        return {"int": ("i", 32), "long": ("i", 64), "float": ("f", 32), "double": ("f", 64)}.get(t.name)
    return None


def compatible(source: IcebergType, target: IcebergType) -> str | None:
    """None if values of `source` can be written into a `target` column without loss, else why not.

    Allowed: equal types; int -> long, float -> double, decimal(P, S) -> decimal(P', S) with P' >= P;
    structs by field name (missing optional fields become null), lists and maps element-wise.
    """
    if source == target:
        return None
    if source == UNKNOWN:
        return None  # a column of nulls fits any type
    rs, rt = _rank(source), _rank(target)
    if rs is not None and rt is not None and rs[0] == rt[0] and rs[1] <= rt[1]:
        return None
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        if source.scale == target.scale and source.precision <= target.precision:
            return None
        return f"{source} does not fit {target}"
    if isinstance(source, StructType) and isinstance(target, StructType):
        names = {f.name for f in target.fields}
        extra = [f.name for f in source.fields if f.name not in names]
        if extra:
            return f"struct fields {', '.join(extra)} are not in {target}"
        for tf in target.fields:
            sf = source.field_by_name(tf.name)
            if sf is None:
                if tf.required:
                    return f"required struct field {tf.name} is missing"
                continue
            why = compatible(sf.type, tf.type)
            if why:
                return f"struct field {tf.name}: {why}"
        return None
    if isinstance(source, ListType) and isinstance(target, ListType):
        why = compatible(source.element, target.element)
        return f"list element: {why}" if why else None
    if isinstance(source, MapType) and isinstance(target, MapType):
        why = compatible(source.key, target.key) or compatible(source.value, target.value)
        return f"map: {why}" if why else None
    return f"{source} cannot be written as {target}"
