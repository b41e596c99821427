"""Avro data and delete files (Trino and Iceberg's Java writers can write them) as Arrow with Iceberg
field ids.

Iceberg's Avro schemas carry the ids as `field-id` on record fields, `element-id` on arrays and
`key-id` / `value-id` on maps (string-keyed Avro maps, or arrays of key/value records with logical
type `map` for other keys). Logical types give the Iceberg type: date, time-micros, timestamp-micros
(`adjust-to-utc` says timestamptz), timestamp-nanos, decimal, uuid. `avro_batches` decodes the file
with fastavro and yields Arrow tables with the ids as `PARQUET:field_id`, rows in file order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import fastavro
import pyarrow as pa

from iceduck.errors import CorruptFileError, UnsupportedFormatError

FIELD_ID_KEY = b"PARQUET:field_id"
_BATCH_ROWS = 65536

Convert = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


def _meta(fid: Any) -> dict[bytes, bytes] | None:
    return {FIELD_ID_KEY: str(int(fid)).encode()} if fid is not None else None


def _nonnull(schema: Any) -> tuple[Any, bool]:
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) != 1:
            raise UnsupportedFormatError(f"Avro union {schema} is not an Iceberg type (only [null, T])")
        return branches[0], True
    return schema, False


def _arrow(schema: Any, path: str) -> tuple[pa.DataType, Convert]:
    """The Arrow type of an Avro schema node and a converter from fastavro's values to Arrow's."""
    if isinstance(schema, str):
        simple = {
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "string": pa.string(),
            "bytes": pa.binary(),
        }
        if schema not in simple:
            raise UnsupportedFormatError(f"{path}: Avro type {schema!r} is not supported")
        return simple[schema], _identity
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "date":
        return pa.date32(), _identity
    if logical == "time-micros":
        return pa.time64("us"), _identity
    if logical in ("timestamp-micros", "timestamp-nanos", "local-timestamp-micros", "local-timestamp-nanos"):
        unit = "ns" if logical.endswith("nanos") else "us"
        utc = bool(schema.get("adjust-to-utc", not logical.startswith("local")))
        return pa.timestamp(unit, tz="UTC" if utc else None), _identity
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))), _identity
    if logical == "uuid":
        return (
            pa.uuid(),
            lambda v: (
                None if v is None else (v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(str(v)).bytes)
            ),
        )
    if kind == "fixed":
        return pa.binary(), _identity
    if kind == "record":
        fields, convs = [], []
        for f in schema["fields"]:
            inner, optional = _nonnull(f["type"])
            t, conv = _arrow(inner, path)
            fields.append(pa.field(f["name"], t, optional, _meta(f.get("field-id"))))
            convs.append((f["name"], conv))

        def record(v: Any) -> Any:
            if v is None:
                return None
            return {name: c(v.get(name)) for name, c in convs}

        return pa.struct(fields), record
    if kind == "array":
        items, optional = _nonnull(schema["items"])
        if logical == "map" and isinstance(items, dict) and items.get("type") == "record":
            k_field, v_field = items["fields"]
            kt, kc = _arrow(_nonnull(k_field["type"])[0], path)
            vtype, v_optional = _nonnull(v_field["type"])
            vt, vc = _arrow(vtype, path)
            map_type = pa.map_(
                pa.field("key", kt, False, _meta(k_field.get("field-id"))),
                pa.field("value", vt, v_optional, _meta(v_field.get("field-id"))),
            )
            kn, vn = k_field["name"], v_field["name"]
            return map_type, lambda v: None if v is None else [(kc(e[kn]), vc(e[vn])) for e in v]
        t, conv = _arrow(items, path)
        element = pa.field("element", t, optional, _meta(schema.get("element-id")))
        return pa.list_(element), lambda v: None if v is None else [conv(x) for x in v]
    if kind == "map":
        vtype, v_optional = _nonnull(schema["values"])
        vt, vc = _arrow(vtype, path)
        map_type = pa.map_(
            pa.field("key", pa.string(), False, _meta(schema.get("key-id"))),
            pa.field("value", vt, v_optional, _meta(schema.get("value-id"))),
        )
        return map_type, lambda v: None if v is None else [(k, vc(x)) for k, x in v.items()]
    if kind in ("boolean", "int", "long", "float", "double", "string", "bytes"):
        return _arrow(kind, path)
    raise UnsupportedFormatError(f"{path}: Avro schema {schema!r} is not an Iceberg type")


def avro_batches(path: str) -> Iterator[pa.Table]:
    """The file's rows in order, in batches, with Iceberg field ids as Parquet field ids."""
    try:
        with open(path, "rb") as f:
            reader = fastavro.reader(f)
            root = reader.writer_schema
            if not isinstance(root, dict) or root.get("type") != "record":
                raise UnsupportedFormatError(f"{path}: an Avro data file must hold records")
            struct_type, convert = _arrow(root, path)
            schema = pa.schema(list(struct_type))
            batch: list[Any] = []
            emitted = False
            for rec in reader:
                batch.append(convert(rec))
                if len(batch) >= _BATCH_ROWS:
                    yield pa.Table.from_pylist(batch, schema=schema)
                    batch, emitted = [], True
            if batch or not emitted:
                yield pa.Table.from_pylist(batch, schema=schema)
    except (OSError, ValueError, EOFError, pa.ArrowException) as e:
        raise CorruptFileError(path, f"cannot read Avro file: {e}") from e
