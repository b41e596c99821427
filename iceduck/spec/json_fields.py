"""Typed access to the JSON objects of table metadata: one rule for what a JSON integer, string,
boolean or list is, shared by every metadata parser (schemas, specs, sort orders, snapshots, the
table itself), so no parser coerces a value with `int()` or `bool()` (a schema field id of `{}`
raised TypeError there, and a `required` of `"false"` read as true).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from iceduck.errors import InvalidMetadataError

EMPTY_MAP: Mapping[str, str] = MappingProxyType({})


def frozen_map(values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of a mapping (used for every map held by metadata objects)."""
    return MappingProxyType(dict(values)) if values else EMPTY_MAP


MISSING: Any = object()
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MAX = 2**31 - 1


class JsonFields:
    """Typed access to one JSON object of table metadata (a helper for the metadata parsers).

    Every getter raises `InvalidMetadataError` naming the file (`path`) and the place (`where`).
    A key that is absent or JSON `null` counts as missing; `default` makes it optional.
    """

    __slots__ = ("obj", "path", "where")

    def __init__(self, obj: Any, path: str | None, where: str) -> None:
        if type(obj) is not dict and not isinstance(obj, Mapping):  # dict first: ABC checks are slow
            raise json_error(path, where, f"must be a JSON object, not {obj!r}")
        self.obj: Mapping[str, Any] = obj
        self.path = path
        self.where = where

    def fail(self, problem: str) -> InvalidMetadataError:
        return json_error(self.path, self.where, problem)

    def has(self, key: str) -> bool:
        return key in self.obj

    def _absent(self, key: str, default: Any) -> Any:
        """What a getter returns for an absent or null `key`: `default`, or an error without one."""
        if default is MISSING:
            raise self.fail(f"missing {key!r}")
        return default

    def _typed(self, key: str, default: Any, kind: type, what: str) -> Any:
        value = self.obj.get(key)
        if value is None:
            return self._absent(key, default)
        if not isinstance(value, kind):
            raise self.fail(f"{key!r} must be {what}, not {value!r}")
        return value

    def integer(self, key: str, default: Any = MISSING) -> Any:
        value = self.obj.get(key)
        if value is None:
            return self._absent(key, default)
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.fail(f"{key!r} must be an integer, not {value!r}")
        if LONG_MAX < value < 1 << 64 and key.endswith("snapshot-id"):
            # A hand-edited id beyond a Java long: manifests written for it carry the same 64 bits
            # as a signed long, so read it that way to keep metadata and manifests consistent.
            return value - (1 << 64)
        return value

    def field_id(self, key: str, default: Any = MISSING) -> Any:
        """A column id (a schema field, list element, map key or value): an integer in the range
        Iceberg's ids live in (non-negative, within a 32-bit int)."""
        value = self.integer(key, default)
        if value is not default and not 0 <= value <= INT_MAX:
            raise self.fail(f"{key!r} {value} is not a field id (0 to {INT_MAX})")
        return value

    def integers(self, key: str) -> tuple[int, ...]:
        """An optional list of integers (absent or null gives an empty tuple)."""
        value = self.obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or any(type(i) is not int for i in value):
            raise self.fail(f"{key!r} must be a list of integers, not {value!r}")
        return tuple(value)

    def boolean(self, key: str, default: Any = MISSING) -> Any:
        return self._typed(key, default, bool, "true or false")

    def string(self, key: str, default: Any = MISSING) -> Any:
        return self._typed(key, default, str, "a string")

    def array(self, key: str, default: Any = MISSING) -> Any:
        return self._typed(key, default, list, "a list")

    def str_map(self, key: str) -> Mapping[str, str]:
        """An optional string-to-string map (absent or null gives an empty map)."""
        value = self.obj.get(key)
        if value is None:
            return EMPTY_MAP
        if not isinstance(value, Mapping) or not all_str(value):
            raise self.fail(f"{key!r} must be a map of strings to strings, not {value!r}")
        return frozen_map(value)

    def forbid(self, key: str, format_version: int, since: int = 3) -> None:
        if key in self.obj and format_version < since:
            raise self.fail(
                f"{key!r} is not allowed before format-version {since} (table is v{format_version})"
            )


def all_str(m: Mapping[Any, Any]) -> bool:
    """Whether every key and value of `m` is a string."""
    # Summaries have dozens of entries per snapshot: compare the set of types first (JSON gives
    # exact str), and look at each item only when that fails (str subclasses, wrong types).
    if {*map(type, m), *map(type, m.values())} <= {str}:
        return True
    return all(isinstance(k, str) and isinstance(v, str) for k, v in m.items())


def json_error(path: str | None, where: str, problem: str) -> InvalidMetadataError:
    text = f"{where}: {problem}" if where else problem
    return InvalidMetadataError(f"{path}: {text}" if path else text)


