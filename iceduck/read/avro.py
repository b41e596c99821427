"""Avro data and delete files (Trino and Iceberg's Java writers can write them) as Arrow with Iceberg
field ids.

Iceberg's Avro schemas carry the ids as `field-id` on record fields, `element-id` on arrays and
`key-id` / `value-id` on maps (string-keyed Avro maps, or arrays of key/value records with logical
type `map` for other keys). Logical types give the Iceberg type: date, time-micros, timestamp-micros
(`adjust-to-utc` says timestamptz), timestamp-nanos, decimal, uuid. `avro_batches` decodes the file
with fastavro and yields Arrow tables with the ids as `PARQUET:field_id`, rows in file order.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from iceduck.errors import CorruptFileError, UnsupportedFormatError
from iceduck.read.types import arrow_type
from iceduck.spec.types import PrimitiveType
from iceduck.vocabulary import quote_ident, quote_str

FIELD_ID_KEY = b"PARQUET:field_id"
_BATCH_ROWS = 65536

Convert = Callable[[Any], Any]

# Avro's primitive types hold the Iceberg types of the same name, "bytes" being binary
_AVRO_PRIMITIVES = frozenset({"boolean", "int", "long", "float", "double", "string", "bytes"})


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
        if schema not in _AVRO_PRIMITIVES:
            raise UnsupportedFormatError(f"{path}: Avro type {schema!r} is not supported")
        return arrow_type(PrimitiveType("binary" if schema == "bytes" else schema)), _identity
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "date":
        return arrow_type(PrimitiveType("date")), _identity
    if logical == "time-micros":
        return arrow_type(PrimitiveType("time")), _identity
    if logical in ("timestamp-micros", "timestamp-nanos", "local-timestamp-micros", "local-timestamp-nanos"):
        utc = bool(schema.get("adjust-to-utc", not logical.startswith("local")))
        name = "timestamp" + ("tz" if utc else "") + ("_ns" if logical.endswith("nanos") else "")
        return arrow_type(PrimitiveType(name)), _identity
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
            if not list(struct_type):
                raise CorruptFileError(path, "the Avro data file's schema has no fields")
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
    except (UnsupportedFormatError, CorruptFileError):
        raise
    except OSError as e:
        raise CorruptFileError(path, f"cannot read Avro file: {e.strerror or e}") from e
    except KeyError as e:  # fastavro looks its header entries up unchecked
        raise CorruptFileError(path, f"damaged Avro header: no {e} entry") from None
    except Exception as e:  # damage decodes as IndexError, ValueError, SchemaParseException, ...
        raise CorruptFileError(path, f"truncated or corrupt Avro file ({_first_line(e)})") from None


# ---------------------------------------------------------------------------------------------
# Any Avro file as DuckDB rows (`read_avro`)
# ---------------------------------------------------------------------------------------------
# `read_avro` reads files that are not Iceberg data files (manifests, manifest lists, anyone's
# Avro), so it follows the DuckDB avro extension's types rather than Iceberg's: a union of several
# non-null branches is a DuckDB UNION whose members are named u<index in the Avro union>, an enum
# is an ENUM, uuid is VARCHAR (UUID on a fixed(16)), fixed is BLOB, key/value record arrays with logical type `map` are
# MAPs, the Avro `null` type is an always-NULL INTEGER. Decimals stored as bytes are DECIMAL too
# (the extension gives BLOB there). The rows go to DuckDB through a Parquet copy (read/copies.py),
# which cannot hold unions or enums: a union is stored as a struct of its tag and branches and an
# enum as its symbol, and `AvroColumns.select` rebuilds both in SQL.


@dataclass(frozen=True, slots=True)
class AvroNode:
    """How one Avro schema node is stored in the copy and read back by DuckDB."""

    arrow: pa.DataType
    convert: Convert
    duck: str  # the DuckDB type users see
    rebuild: Callable[[str], str] | None = None  # SQL from the stored value, when it differs


@dataclass(frozen=True, slots=True)
class AvroColumns:
    """The Parquet schema of a file's copy and the SQL expressions that read its columns back."""

    schema: pa.Schema
    select: tuple[str, ...]  # one `<expr> AS "<name>"` per column, in file order
    convert: Convert


_PRIMITIVES = {
    "null": (pa.int32(), "INTEGER"),
    "boolean": (pa.bool_(), "BOOLEAN"),
    "int": (pa.int32(), "INTEGER"),
    "long": (pa.int64(), "BIGINT"),
    "float": (pa.float32(), "FLOAT"),
    "double": (pa.float64(), "DOUBLE"),
    "string": (pa.string(), "VARCHAR"),
    "bytes": (pa.binary(), "BLOB"),
}
# The Python class fastavro decodes each kind to, to tell a union's branches apart.
_PY_KIND = {
    "null": type(None),
    "boolean": bool,
    "int": int,
    "long": int,
    "float": float,
    "double": float,
    "string": str,
    "bytes": bytes,
}


def _name_of(schema: Any) -> str | None:
    if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed"):
        name = schema.get("name")
        ns = schema.get("namespace")
        return f"{ns}.{name}" if ns and "." not in str(name) else str(name)
    return None


class _AvroTypes:
    """Avro schema nodes -> `AvroNode`s for one file (named types resolved, recursion refused)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.named: dict[str, Any] = {}
        self.active: set[str] = set()

    def fail(self, what: str) -> UnsupportedFormatError:
        return UnsupportedFormatError(f"{self.path}: {what}")

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            found = self.named.get(schema) or next(
                (v for k, v in self.named.items() if k.rsplit(".", 1)[-1] == schema), None
            )
            if found is None:
                raise self.fail(f"Avro type {schema!r} is not defined")
            return found
        return schema

    def node(self, schema: Any) -> AvroNode:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            return self.union(schema)
        if isinstance(schema, str):
            t, duck = _PRIMITIVES[schema]
            return AvroNode(t, _identity, duck)
        name = _name_of(schema)
        if name is not None:
            if name in self.active:
                raise self.fail(f"Avro type {name!r} is recursive, which DuckDB rows cannot hold")
            self.named[name] = schema
            self.active.add(name)
            try:
                return self.complex(schema)
            finally:
                self.active.discard(name)
        return self.complex(schema)

    def complex(self, schema: dict[str, Any]) -> AvroNode:
        kind, logical = schema.get("type"), schema.get("logicalType")
        if isinstance(kind, (dict, list)):  # {"type": {...}} wraps another schema
            return self.node(kind)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
            if precision > 38:
                raise self.fail(f"Avro decimal({precision},{scale}) is wider than DuckDB's DECIMAL(38)")
            return AvroNode(pa.decimal128(precision, scale), _identity, f"DECIMAL({precision},{scale})")
        if logical == "date" and kind == "int":
            return AvroNode(pa.date32(), _identity, "DATE")
        if logical in ("time-millis", "time-micros"):
            return AvroNode(pa.time64("us"), _identity, "TIME")
        if logical in ("timestamp-millis", "timestamp-micros", "timestamp-nanos") and kind == "long":
            unit = "ns" if logical == "timestamp-nanos" else "us"
            if schema.get("adjust-to-utc") is True:  # Iceberg's marker of timestamptz
                return AvroNode(pa.timestamp(unit, tz="UTC"), _identity, "TIMESTAMPTZ")
            if unit == "ns":  # fastavro hands nanoseconds over as the stored integer
                return AvroNode(pa.timestamp(unit), _identity, "TIMESTAMP_NS")
            return AvroNode(pa.timestamp(unit), _utc_wall_time, "TIMESTAMP")
        if logical in ("local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"):
            unit = "ns" if logical.endswith("nanos") else "us"
            return AvroNode(pa.timestamp(unit), _identity, "TIMESTAMP_NS" if unit == "ns" else "TIMESTAMP")
        if logical == "uuid" and kind == "string":
            return AvroNode(pa.string(), lambda v: None if v is None else str(v), "VARCHAR")
        if logical == "uuid" and kind == "fixed" and schema.get("size") == 16:
            # stored as text: pyarrow cannot build nested UUID (extension) values from Python
            return AvroNode(pa.string(), _uuid_text, "UUID", lambda e: f"CAST({e} AS UUID)")
        if kind in _PRIMITIVES:
            t, duck = _PRIMITIVES[kind]
            return AvroNode(t, _identity, duck)
        if kind == "fixed":
            return AvroNode(pa.binary(), _identity, "BLOB")
        if kind == "enum":
            symbols = [str(s) for s in schema["symbols"]]
            duck = "ENUM(" + ", ".join(quote_str(s) for s in symbols) + ")"
            return AvroNode(pa.string(), _identity, duck, lambda e: f"CAST({e} AS {duck})")
        if kind == "record":
            return self.record(schema)
        if kind == "array":
            items = self.resolve(schema["items"])
            if isinstance(items, list) and len(real := [b for b in items if b != "null"]) == 1:
                items = self.resolve(real[0])  # map entries written as a nullable record
            if logical == "map" and isinstance(items, dict) and items.get("type") == "record":
                k_field, v_field = items["fields"]
                return self.map(
                    self.node(k_field["type"]), self.node(v_field["type"]), k_field["name"], v_field["name"]
                )
            return self.array(self.node(items))
        if kind == "map":
            return self.map(
                AvroNode(pa.string(), _identity, "VARCHAR"), self.node(schema["values"]), None, None
            )
        raise self.fail(f"Avro schema {json.dumps(schema)[:200]} is not supported")

    def record(self, schema: dict[str, Any]) -> AvroNode:
        if not schema["fields"]:  # an unpartitioned table's partition tuple: no value to hold
            return AvroNode(pa.int32(), lambda _v: None, "INTEGER")
        names = [str(f["name"]) for f in schema["fields"]]
        nodes = [self.node(f["type"]) for f in schema["fields"]]
        arrow = pa.struct([pa.field(n, c.arrow) for n, c in zip(names, nodes, strict=True)])
        duck = (
            "STRUCT("
            + ", ".join(f"{quote_ident(n)} {c.duck}" for n, c in zip(names, nodes, strict=True))
            + ")"
        )
        pairs = list(zip(names, nodes, strict=True))

        def convert(v: Any) -> Any:
            return None if v is None else {n: c.convert(v.get(n)) for n, c in pairs}

        rebuild = None
        if any(c.rebuild is not None for c in nodes):

            def rebuild(e: str) -> str:
                parts = ", ".join(
                    f"{quote_ident(n)} := {_read(c, f'{e}.{quote_ident(n)}')}" for n, c in pairs
                )
                return f"CASE WHEN {e} IS NULL THEN NULL ELSE struct_pack({parts}) END"

        return AvroNode(arrow, convert, duck, rebuild)

    def array(self, item: AvroNode) -> AvroNode:
        def convert(v: Any) -> Any:
            return None if v is None else [item.convert(x) for x in v]

        rebuild = None
        if item.rebuild is not None:
            rebuild = lambda e: f"list_transform({e}, lambda __x: {_read(item, '__x')})"  # noqa: E731
        return AvroNode(pa.list_(item.arrow), convert, f"{item.duck}[]", rebuild)

    def map(self, key: AvroNode, value: AvroNode, kn: str | None, vn: str | None) -> AvroNode:
        if key.rebuild is not None:
            raise self.fail("Avro map keys of a union or enum type are not supported")

        def convert(v: Any) -> Any:
            if v is None:
                return None
            items = v.items() if kn is None else ((e[kn], e[vn]) for e in map(_unnamed, v))
            return [(key.convert(k), value.convert(x)) for k, x in items]

        rebuild = None
        if value.rebuild is not None:
            rebuild = lambda e: (  # noqa: E731
                f"map_from_entries(list_transform(map_entries({e}), lambda __e: "
                f"struct_pack(key := __e.key, value := {_read(value, '__e.value')})))"
            )
        return AvroNode(pa.map_(key.arrow, value.arrow), convert, f"MAP({key.duck}, {value.duck})", rebuild)

    def union(self, branches: list[Any]) -> AvroNode:
        resolved = [self.resolve(b) for b in branches]
        real = [(i, b) for i, b in enumerate(resolved) if b != "null"]
        if len(real) == 1:  # [null, T] or [T]: a nullable T
            inner = self.node(real[0][1])
            if _name_of(real[0][1]) is None:
                return inner
            # fastavro hands a named type inside a union over as (name, value)
            return AvroNode(inner.arrow, lambda v: inner.convert(_unnamed(v)), inner.duck, inner.rebuild)
        if not real:
            return self.node("null")
        nodes = [(i, self.node(b), b) for i, b in real]
        kinds = [self.py_kind(b) for _, b in real]
        plain = [k for k in kinds if not isinstance(k, str)]
        if len(set(plain)) != len(plain):
            raise self.fail(
                f"Avro union {json.dumps(branches)[:200]}: its branches cannot be told apart when decoded"
            )
        fields = [pa.field("tag", pa.int8())] + [pa.field(f"u{i}", c.arrow) for i, c, _ in nodes]
        duck = "UNION(" + ", ".join(f"u{i} {c.duck}" for i, c, _ in nodes) + ")"
        by_name = {k: (i, c) for (i, c, _), k in zip(nodes, kinds, strict=True) if isinstance(k, str)}
        by_class = [(k, i, c) for (i, c, _), k in zip(nodes, kinds, strict=True) if not isinstance(k, str)]

        def convert(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, tuple) and len(v) == 2 and v[0] in by_name:  # a named type: (name, value)
                i, c = by_name[v[0]]
                return {"tag": i, f"u{i}": c.convert(v[1])}
            for k, i, c in by_class:
                if isinstance(v, k) and not (k is int and isinstance(v, bool)):
                    return {"tag": i, f"u{i}": c.convert(v)}
            raise self.fail(f"an Avro union value {v!r} matches none of its branches")

        def rebuild(e: str) -> str:
            cases = " ".join(
                f"WHEN {i} THEN CAST(union_value(u{i} := {_read(c, f'{e}.u{i}')}) AS {duck})"
                for i, c, _ in nodes
            )
            return f"CASE {e}.tag {cases} END"

        return AvroNode(pa.struct(fields), convert, duck, rebuild)

    def py_kind(self, schema: Any) -> Any:
        """The Python class fastavro decodes this branch to, or the full name of a named type."""
        name = _name_of(schema)
        if name is not None:
            return name
        if isinstance(schema, str):
            return _PY_KIND[schema]
        kind, logical = schema.get("type"), schema.get("logicalType")
        if logical == "decimal":
            return decimal.Decimal
        if logical == "date":
            return dt.date
        if logical in ("time-millis", "time-micros"):
            return dt.time
        if logical is not None and "timestamp" in logical:
            return dt.datetime
        if logical == "uuid":
            return str if kind == "string" else uuid.UUID
        if kind == "array":
            return list
        if kind == "map":
            return dict
        if isinstance(kind, str) and kind in _PY_KIND:
            return _PY_KIND[kind]
        raise self.fail(f"Avro union branch {json.dumps(schema)[:200]} is not supported")


def _uuid_text(v: Any) -> str | None:
    if v is None:
        return None
    return str(v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)))


def _utc_wall_time(v: Any) -> Any:
    if v is None or v.tzinfo is None:
        return v
    return v.astimezone(dt.UTC).replace(tzinfo=None)


def _unnamed(v: Any) -> Any:
    return v[1] if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) else v


def _read(node: AvroNode, expr: str) -> str:
    return node.rebuild(expr) if node.rebuild is not None else expr


def avro_columns(root: Any, path: str) -> AvroColumns:
    """How the rows of an Avro file with writer schema `root` are copied and read back (DuckDB's
    avro extension's types; a root that is not a record is one column named `avro_value`)."""
    types = _AvroTypes(path)
    resolved = types.resolve(root)
    if isinstance(resolved, dict) and resolved.get("type") == "record":
        if not resolved["fields"]:
            raise UnsupportedFormatError(f"{path}: the Avro records have no fields")
        node = types.node(resolved)  # also registers the named types the fields refer to
        names = [str(f["name"]) for f in resolved["fields"]]
        sub = [types.node(f["type"]) for f in resolved["fields"]]
        fields = [pa.field(n, c.arrow) for n, c in zip(names, sub, strict=True)]
        select = tuple(
            f"{_read(c, quote_ident(n))} AS {quote_ident(n)}" for n, c in zip(names, sub, strict=True)
        )
        return AvroColumns(pa.schema(fields), select, node.convert)
    node = types.node(resolved)
    schema = pa.schema([pa.field("avro_value", node.arrow)])
    return AvroColumns(
        schema,
        (f'{_read(node, quote_ident("avro_value"))} AS "avro_value"',),
        lambda v: {"avro_value": node.convert(v)},
    )


def _open_reader(path: str, f: Any) -> Any:
    try:
        return fastavro.reader(f, return_named_type=True, return_named_type_override=False)
    except Exception as e:  # fastavro reports a bad header or schema with many types
        raise CorruptFileError(path, f"not a readable Avro file ({_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e).strip() else type(e).__name__


def avro_file_columns(path: str) -> AvroColumns:
    """The copy layout of any Avro file, from its header."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"Obj\x01":
                raise CorruptFileError(path, "not an Avro file (no Avro magic bytes at its start)")
            f.seek(0)
            return avro_columns(_open_reader(path, f).writer_schema, path)
    except OSError as e:
        raise CorruptFileError(path, f"cannot read Avro file: {e.strerror or e}") from e


def avro_row_batches(path: str, columns: AvroColumns) -> Iterator[pa.Table]:
    """The rows of any Avro file in order, in batches of `columns.schema`."""
    try:
        with open(path, "rb") as f:
            batch: list[Any] = []
            emitted = False
            for rec in _open_reader(path, f):
                batch.append(columns.convert(rec))
                if len(batch) >= _BATCH_ROWS:
                    yield pa.Table.from_pylist(batch, schema=columns.schema)
                    batch, emitted = [], True
            if batch or not emitted:
                yield pa.Table.from_pylist(batch, schema=columns.schema)
    except (UnsupportedFormatError, CorruptFileError):
        raise
    except OSError as e:
        raise CorruptFileError(path, f"cannot read Avro file: {e.strerror or e}") from e
    except Exception as e:  # damage surfaces as EOFError, ValueError, zlib.error, ArrowException, ...
        raise CorruptFileError(path, f"truncated or corrupt Avro file ({_first_line(e)})") from None
