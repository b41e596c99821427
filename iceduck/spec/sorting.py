"""Sort orders ("Sorting" and "Appendix C: Sort Orders" of the table spec).

A `SortOrder` is an id and a tuple of `SortField`s; each sorts on a transform of one source column
(or several, for v3 multi-argument transforms), in a direction, with nulls first or last. Order id 0
is reserved for the unsorted order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from iceduck.errors import InvalidMetadataError
from iceduck.spec.partitioning import parse_source_ids, single_source_id, source_ids_to_json, transform_call
from iceduck.spec.transforms import Transform, parse_transform

UNSORTED_ORDER_ID = 0


class SortDirection(StrEnum):
    """Sort direction of a sort field."""

    ASC = "asc"
    DESC = "desc"


class NullOrder(StrEnum):
    """Where nulls sort: before or after every value."""

    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"


@dataclass(frozen=True, slots=True)
class SortField:
    """One sort key: transform of the source column(s), direction and placement of nulls."""

    source_ids: tuple[int, ...]
    transform: Transform
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder = NullOrder.NULLS_FIRST

    @property
    def source_id(self) -> int:
        """The single source column id; multi-argument fields have no single source."""
        return single_source_id(self.source_ids, f"sort field {self}")

    def __str__(self) -> str:
        return f"{transform_call(self.transform, self.source_ids)} {self.direction} {self.null_order}"


@dataclass(frozen=True, slots=True)
class SortOrder:
    """A sort order: its id and its fields, most significant first."""

    order_id: int
    fields: tuple[SortField, ...] = ()

    @property
    def is_unsorted(self) -> bool:
        """True for the unsorted order (no fields)."""
        return not self.fields

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"


UNSORTED = SortOrder(UNSORTED_ORDER_ID, ())


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def _error(path: str | None, where: str, problem: str) -> InvalidMetadataError:
    return InvalidMetadataError(f"{path}: {where}: {problem}" if path else f"{where}: {problem}")


def _parse_enum(
    kind: type[SortDirection] | type[NullOrder],
    obj: Mapping[str, Any],
    key: str,
    path: str | None,
    where: str,
) -> Any:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _error(
            path, where, f"missing {key!r}" if value is None else f"{key!r} must be a string: {value!r}"
        )
    # Writers differ in case and separator (`NULLS_FIRST`); the meaning is unambiguous.
    normalised = value.strip().lower().replace("_", "-")
    try:
        return kind(normalised)
    except ValueError:
        allowed = ", ".join(repr(str(m)) for m in kind)
        raise _error(path, where, f"{key!r} must be one of {allowed}, not {value!r}") from None


def parse_sort_order(
    obj: Any, *, format_version: int = 2, path: str | None = None, where: str = "sort order"
) -> SortOrder:
    """Parse a sort order object `{"order-id": .., "fields": [..]}`."""
    if not isinstance(obj, Mapping):
        raise _error(path, where, f"must be an object, not {obj!r}")
    order_id = obj.get("order-id")
    if isinstance(order_id, bool) or not isinstance(order_id, int):
        raise _error(
            path, where, "missing 'order-id'" if order_id is None else f"invalid 'order-id' {order_id!r}"
        )
    where = f"{where} {order_id}"
    raw = obj.get("fields")
    if not isinstance(raw, list):
        raise _error(
            path, where, "missing 'fields'" if raw is None else f"'fields' must be a list, not {raw!r}"
        )
    fields = []
    for i, f in enumerate(raw):
        fwhere = f"{where} field {i}"
        if not isinstance(f, Mapping):
            raise _error(path, fwhere, f"must be an object, not {f!r}")
        source_ids = parse_source_ids(f, format_version=format_version, path=path, where=fwhere)
        text = f.get("transform")
        if not isinstance(text, str):
            raise _error(
                path, fwhere, "missing 'transform'" if text is None else f"invalid 'transform' {text!r}"
            )
        fields.append(
            SortField(
                source_ids,
                parse_transform(text),
                _parse_enum(SortDirection, f, "direction", path, fwhere),
                _parse_enum(NullOrder, f, "null-order", path, fwhere),
            )
        )
    if order_id == UNSORTED_ORDER_ID and fields:
        raise _error(path, where, "order id 0 is reserved for the unsorted order but has fields")
    return SortOrder(order_id, tuple(fields))


def sort_field_to_json(f: SortField) -> dict[str, Any]:
    """The JSON object of one sort field (Appendix C)."""
    out: dict[str, Any] = {"transform": str(f.transform)}
    source_ids_to_json(out, f.source_ids)
    out["direction"] = str(f.direction)
    out["null-order"] = str(f.null_order)
    return out


def sort_order_to_json(order: SortOrder) -> dict[str, Any]:
    """The JSON object form of a sort order."""
    return {"order-id": order.order_id, "fields": [sort_field_to_json(f) for f in order.fields]}
