"""Iceberg's type system: primitive and nested types, fields and schemas, and their JSON form.

Types are immutable values. `parse_type` / `type_to_json` convert to and from the JSON encoding of
the table spec ("Appendix C: JSON serialization"), so a schema survives a round trip unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from iceduck.errors import InvalidMetadataError
from iceduck.spec.json_fields import JsonFields

# ---------------------------------------------------------------------------------------------
# Primitive types
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    """A primitive type with no parameters, named as in the spec (`long`, `timestamptz_ns`, ...)."""

    is_primitive: ClassVar[bool] = True

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class DecimalType:
    """`decimal(P,S)`: fixed-point decimal with precision P (<= 38) and scale S."""

    name: ClassVar[str] = "decimal"
    is_primitive: ClassVar[bool] = True

    precision: int
    scale: int

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@dataclass(frozen=True, slots=True)
class FixedType:
    """`fixed[L]`: fixed-length byte array of length L."""

    name: ClassVar[str] = "fixed"
    is_primitive: ClassVar[bool] = True

    length: int

    def __str__(self) -> str:
        return f"fixed[{self.length}]"


@dataclass(frozen=True, slots=True)
class GeometryType:
    """`geometry(C)` (v3): geospatial features in a planar edge model, CRS C."""

    name: ClassVar[str] = "geometry"
    is_primitive: ClassVar[bool] = True

    crs: str = "OGC:CRS84"

    def __str__(self) -> str:
        return "geometry" if self.crs == "OGC:CRS84" else f"geometry({self.crs})"


@dataclass(frozen=True, slots=True)
class GeographyType:
    """`geography(C, A)` (v3): geospatial features with edge-interpolation algorithm A."""

    name: ClassVar[str] = "geography"
    is_primitive: ClassVar[bool] = True

    crs: str = "OGC:CRS84"
    algorithm: str = "spherical"

    def __str__(self) -> str:
        if self.crs == "OGC:CRS84" and self.algorithm == "spherical":
            return "geography"
        if self.algorithm == "spherical":
            return f"geography({self.crs})"
        return f"geography({self.crs}, {self.algorithm})"


BOOLEAN = PrimitiveType("boolean")
INT = PrimitiveType("int")
LONG = PrimitiveType("long")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
DATE = PrimitiveType("date")
TIME = PrimitiveType("time")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMPTZ = PrimitiveType("timestamptz")
TIMESTAMP_NS = PrimitiveType("timestamp_ns")
TIMESTAMPTZ_NS = PrimitiveType("timestamptz_ns")
STRING = PrimitiveType("string")
UUID = PrimitiveType("uuid")
BINARY = PrimitiveType("binary")
VARIANT = PrimitiveType("variant")
UNKNOWN = PrimitiveType("unknown")

_SIMPLE: dict[str, PrimitiveType] = {
    t.name: t
    for t in (
        BOOLEAN, INT, LONG, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, TIMESTAMP_NS,
        TIMESTAMPTZ_NS, STRING, UUID, BINARY, VARIANT, UNKNOWN,
    )
}  # fmt: skip

# Types that first appeared in format version 3 (the one home of this set: metadata checks, the
# Python API, SQL and schema evolution all ask it).
V3_ONLY_TYPES = frozenset({"timestamp_ns", "timestamptz_ns", "variant", "unknown", "geometry", "geography"})
# "All columns of `unknown`, `variant`, `geometry`, and `geography` types must default to null."
NULL_DEFAULT_ONLY_TYPES = frozenset({"unknown", "variant", "geometry", "geography"})

# ---------------------------------------------------------------------------------------------
# Nested types
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NestedField:
    """A field of a struct: id, name, type, required flag, doc, and the v3 default values.

    `initial_default` / `write_default` hold the JSON single-value form from the metadata (decode
    with `iceduck.spec.values.from_json`); `None` means no default, and then the matching `has_*` flag
    is False: the spec's JSON has no null form for a default ("If either default is not set for an
    optional field, then the default value is null"), the key is left out (Java Iceberg refuses a
    JSON null there).
    """

    id: int
    name: str
    type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None
    has_initial_default: bool = False
    has_write_default: bool = False


@dataclass(frozen=True, slots=True)
class StructType:
    """A tuple of named, typed fields."""

    name: ClassVar[str] = "struct"
    is_primitive: ClassVar[bool] = False

    fields: tuple[NestedField, ...] = ()

    def field_by_id(self, field_id: int) -> NestedField | None:
        for f in self.fields:
            if f.id == field_id:
                return f
        return None

    def field_by_name(self, name: str) -> NestedField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def __str__(self) -> str:
        return "struct<" + ", ".join(f"{f.name}: {f.type}" for f in self.fields) + ">"


@dataclass(frozen=True, slots=True)
class ListType:
    """A list of elements of one type; the element has its own field id."""

    name: ClassVar[str] = "list"
    is_primitive: ClassVar[bool] = False

    element_id: int
    element: IcebergType
    element_required: bool = False

    @property
    def element_field(self) -> NestedField:
        return NestedField(self.element_id, "element", self.element, self.element_required)

    def __str__(self) -> str:
        return f"list<{self.element}>"


@dataclass(frozen=True, slots=True)
class MapType:
    """A map from keys to values; key and value each have a field id. Keys are required."""

    name: ClassVar[str] = "map"
    is_primitive: ClassVar[bool] = False

    key_id: int
    key: IcebergType
    value_id: int
    value: IcebergType
    value_required: bool = False

    @property
    def key_field(self) -> NestedField:
        return NestedField(self.key_id, "key", self.key, True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(self.value_id, "value", self.value, self.value_required)

    def __str__(self) -> str:
        return f"map<{self.key}, {self.value}>"


IcebergType = (
    PrimitiveType | DecimalType | FixedType | GeometryType | GeographyType | StructType | ListType | MapType
)
PRIMITIVE_CLASSES = (PrimitiveType, DecimalType, FixedType, GeometryType, GeographyType)


def is_primitive(t: IcebergType) -> bool:
    """True for every type that is not a struct, list or map."""
    return isinstance(t, PRIMITIVE_CLASSES)


def child_fields(t: IcebergType) -> tuple[NestedField, ...]:
    """The directly nested fields of a struct, list (element) or map (key, value)."""
    if isinstance(t, StructType):
        return t.fields
    if isinstance(t, ListType):
        return (t.element_field,)
    if isinstance(t, MapType):
        return (t.key_field, t.value_field)
    return ()


# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schema:
    """A table schema: a struct with an id and optional identifier fields."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()
    _index: dict[int, NestedField] = field(default_factory=dict, compare=False, repr=False, hash=False)
    _paths: dict[int, str] = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        for f, path in _walk(self.fields, ""):
            self._index[f.id] = f
            self._paths[f.id] = path

    @property
    def as_struct(self) -> StructType:
        return StructType(self.fields)

    def find_field(self, field_id: int) -> NestedField | None:
        """The field with this id anywhere in the schema (nested included), or None."""
        return self._index.get(field_id)

    def find_type(self, field_id: int) -> IcebergType | None:
        f = self._index.get(field_id)
        return f.type if f else None

    def column_name(self, field_id: int) -> str | None:
        """Dotted path of a field (`address.city`, `tags.element`, `attrs.key`)."""
        return self._paths.get(field_id)

    def field_by_name(self, name: str, case_sensitive: bool = True) -> NestedField | None:
        """Find a field by its dotted path."""
        for fid, path in self._paths.items():
            if path == name or (not case_sensitive and path.lower() == name.lower()):
                return self._index[fid]
        return None

    def field_ids(self) -> list[int]:
        """Every field id, in depth-first order."""
        return list(self._paths)

    def walk(self) -> Iterator[tuple[NestedField, str]]:
        """Every field with its dotted path, depth first."""
        yield from _walk(self.fields, "")

    @property
    def highest_field_id(self) -> int:
        return max(self._index, default=0)


def _walk(fields: tuple[NestedField, ...], prefix: str) -> Iterator[tuple[NestedField, str]]:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield f, path
        yield from _walk(child_fields(f.type), path + ".")


# ---------------------------------------------------------------------------------------------
# JSON form
# ---------------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\s*\[\s*(\d+)\s*\]$")
_GEOMETRY = re.compile(r"^geometry\s*(?:\(\s*([^,)]*?)\s*\))?$")
_GEOGRAPHY = re.compile(r"^geography\s*(?:\(\s*([^,)]*?)\s*(?:,\s*([^)]*?)\s*)?\))?$")


def parse_type(obj: Any) -> IcebergType:
    """Parse a type from its JSON form (a string for primitives, an object for nested types)."""
    if isinstance(obj, str):
        return _parse_primitive(obj)
    if isinstance(obj, Mapping):
        kind = obj.get("type")
        f = JsonFields(obj, None, f"{kind} type" if isinstance(kind, str) else "type")
        if kind == "struct":
            return StructType(tuple(parse_field(x) for x in f.array("fields")))
        if kind == "list":
            return ListType(f.field_id("element-id"), parse_type(f.obj.get("element")), f.boolean("element-required"))
        if kind == "map":
            return MapType(
                f.field_id("key-id"),
                parse_type(f.obj.get("key")),
                f.field_id("value-id"),
                parse_type(f.obj.get("value")),
                f.boolean("value-required"),
            )
    raise InvalidMetadataError(f"unknown type: {obj!r:.80}")


def _parse_primitive(text: str) -> IcebergType:
    t = text.strip()
    simple = _SIMPLE.get(t.lower())
    if simple is not None:
        return simple
    if m := _DECIMAL.match(t):
        precision, scale = int(m.group(1)), int(m.group(2))
        if not 0 < precision <= 38 or scale > precision:
            raise InvalidMetadataError(f"invalid decimal type: {text!r}")
        return DecimalType(precision, scale)
    if m := _FIXED.match(t):
        return FixedType(int(m.group(1)))
    if m := _GEOMETRY.match(t):
        return GeometryType(m.group(1) or "OGC:CRS84")
    if m := _GEOGRAPHY.match(t):
        return GeographyType(m.group(1) or "OGC:CRS84", (m.group(2) or "spherical").lower())
    raise InvalidMetadataError(f"unknown type: {text!r}")


def parse_field(obj: Mapping[str, Any]) -> NestedField:
    """Parse one struct field, keeping v3 `initial-default` / `write-default` as JSON values."""
    if not isinstance(obj, Mapping):
        raise InvalidMetadataError(f"a struct field must be an object, not {type(obj).__name__} {obj!r:.40}")
    f = JsonFields(obj, None, "struct field")
    field_id = f.field_id("id")
    f.where = f"struct field {field_id}"
    if "type" not in obj:
        raise f.fail("missing 'type'")
    return NestedField(
        id=field_id,
        name=f.string("name"),
        type=parse_type(obj["type"]),
        required=f.boolean("required"),
        doc=f.string("doc", None),
        initial_default=obj.get("initial-default"),
        write_default=obj.get("write-default"),
        # a JSON null default is the same as none (some writers spell it out; it is never written back)
        has_initial_default=obj.get("initial-default") is not None,
        has_write_default=obj.get("write-default") is not None,
    )


def parse_schema(obj: Mapping[str, Any]) -> Schema:
    """Parse a schema object (`{"type": "struct", "schema-id": ..., "fields": [...]}`)."""
    if obj.get("type", "struct") != "struct" or "fields" not in obj:
        raise InvalidMetadataError(f"a schema must be a struct with fields: {dict(obj)!r:.120}")
    f = JsonFields(obj, None, "schema")
    return Schema(
        fields=tuple(parse_field(x) for x in f.array("fields")),
        schema_id=f.integer("schema-id", 0),
        identifier_field_ids=f.integers("identifier-field-ids"),
    )


def type_to_json(t: IcebergType) -> Any:
    """The JSON form of a type."""
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {
            "type": "list",
            "element-id": t.element_id,
            "element": type_to_json(t.element),
            "element-required": t.element_required,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "key-id": t.key_id,
            "key": type_to_json(t.key),
            "value-id": t.value_id,
            "value": type_to_json(t.value),
            "value-required": t.value_required,
        }
    if isinstance(t, DecimalType):
        return f"decimal({t.precision}, {t.scale})"
    return str(t)


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.id, "name": f.name, "required": f.required, "type": type_to_json(f.type)}
    if f.doc is not None:
        out["doc"] = f.doc
    # an absent default is left out, never written as JSON null (see NestedField)
    if f.has_initial_default and f.initial_default is not None:
        out["initial-default"] = f.initial_default
    if f.has_write_default and f.write_default is not None:
        out["write-default"] = f.write_default
    return out


def schema_to_json(s: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "struct", "schema-id": s.schema_id}
    if s.identifier_field_ids:
        out["identifier-field-ids"] = list(s.identifier_field_ids)
    out["fields"] = [field_to_json(f) for f in s.fields]
    return out
