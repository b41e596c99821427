"""Column metrics of written Parquet files, from the statistics `COPY ... (RETURN_STATS)` reports.

DuckDB reports per column (keyed by its quoted path, `"a"."b"`, `"l"."element"`, `"m"."key"`): value
and null counts, NaN counts of float columns, compressed column size and min/max as text with
exactness flags (an inexact min is a prefix, an inexact max a prefix with its last character
incremented: both still valid bounds). This module maps the paths to field ids and applies the
table's metrics configuration (`write.metadata.metrics.default`, default `truncate(16)`;
`write.metadata.metrics.column.<name>`; `write.metadata.metrics.max-inferred-column-defaults`,
default 100): `none`, `counts`, `truncate(N)` or `full`. Bounds are kept for primitive columns that
are not inside a list or map, encoded per Appendix D, strings and binary truncated to N
(spec "Appendix: metrics"); float bounds are widened across signed zeros, NaN never is a bound.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.types import IcebergType, ListType, MapType, NestedField, Schema, StructType, is_primitive
from iceduck.spec.values import to_bytes, truncate_lower_bound, truncate_upper_bound
from iceduck.vocabulary import quote_ident
from iceduck.write.duck_values import from_duck_text

DEFAULT_MODE = "truncate(16)"
DEFAULT_MAX_INFERRED = 100
_MODE = re.compile(r"^(none|counts|full|truncate\((\d+)\))$")


@dataclass(frozen=True, slots=True)
class MetricsMode:
    """What to record for a column: counts, and bounds truncated to `width` (None: untruncated)."""

    counts: bool
    bounds: bool
    width: int | None = None


NONE = MetricsMode(False, False)
COUNTS = MetricsMode(True, False)
FULL = MetricsMode(True, True)


def parse_mode(text: str, where: str = "metrics mode") -> MetricsMode:
    """`none`, `counts`, `full` or `truncate(N)`; `ValidationError` naming `where` otherwise."""
    m = _MODE.match(text.strip().lower())
    if not m:
        raise ValidationError(f"{where}: invalid metrics mode {text!r} (none, counts, truncate(N), full)")
    kind = m.group(1)
    if kind == "none":
        return NONE
    if kind == "counts":
        return COUNTS
    if kind == "full":
        return FULL
    width = int(m.group(2))
    if width <= 0:
        raise ValidationError(f"{where}: truncate length must be positive in {text!r}")
    return MetricsMode(True, True, width)


@dataclass(frozen=True, slots=True)
class LeafColumn:
    """A primitive column of the written files: DuckDB's stats key, field, dotted name, bounds allowed."""

    key: str
    field: NestedField
    name: str
    bounds_allowed: bool


def leaf_columns(schema: Schema) -> list[LeafColumn]:
    """Every primitive column (nested ones included) in depth-first order, with its stats key."""
    out: list[LeafColumn] = []

    def walk(f: NestedField, key: str, name: str, in_repeated: bool) -> None:
        t: IcebergType = f.type
        if isinstance(t, StructType):
            for child in t.fields:
                walk(child, f"{key}.{quote_ident(child.name)}", f"{name}.{child.name}", in_repeated)
        elif isinstance(t, ListType):
            walk(t.element_field, f'{key}."element"', f"{name}.element", True)
        elif isinstance(t, MapType):
            walk(t.key_field, f'{key}."key"', f"{name}.key", True)
            walk(t.value_field, f'{key}."value"', f"{name}.value", True)
        elif t.name != "unknown":
            out.append(LeafColumn(key, f, name, not in_repeated))

    for top in schema.fields:
        walk(top, quote_ident(top.name), top.name, False)
    return out


def modes_for(schema: Schema, properties: Mapping[str, str]) -> dict[int, MetricsMode]:
    """The metrics mode of every leaf column id under the table properties."""
    default = parse_mode(
        properties.get("write.metadata.metrics.default", DEFAULT_MODE), "write.metadata.metrics.default"
    )
    try:
        max_inferred = int(
            properties.get("write.metadata.metrics.max-inferred-column-defaults", DEFAULT_MAX_INFERRED)
        )
    except ValueError:
        raise ValidationError(
            "write.metadata.metrics.max-inferred-column-defaults must be an integer"
        ) from None
    prefix = "write.metadata.metrics.column."
    explicit = {k[len(prefix) :]: v for k, v in properties.items() if k.startswith(prefix)}
    out: dict[int, MetricsMode] = {}
    for i, leaf in enumerate(leaf_columns(schema)):
        text = explicit.get(leaf.name)
        if text is not None:
            out[leaf.field.id] = parse_mode(text, prefix + leaf.name)
        else:
            out[leaf.field.id] = default if i < max_inferred else NONE
    return out


@dataclass(frozen=True, slots=True)
class FileMetrics:
    """The metric maps of one data file, keyed by field id."""

    column_sizes: dict[int, int]
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    nan_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]
    upper_bounds: dict[int, bytes]


def _int(stats: Mapping[str, str], key: str) -> int | None:
    text = stats.get(key)
    return None if text is None else int(text)


def _bound(t: IcebergType, text: str | None, exact: bool, width: int | None, *, upper: bool) -> bytes | None:
    if text is None:
        return None
    try:
        value: Any = from_duck_text(t, text)
    except ValidationError:
        return None  # a value DuckDB prints in a form we do not read (BC dates, infinity): no bound
    kind = t.name
    if kind in ("float", "double"):
        if math.isnan(value):
            return None
        # Bounds must respect -0.0 < +0.0; the stats do not say which zeros the column holds.
        if value == 0.0:
            value = 0.0 if upper else -0.0
    if kind in ("string", "binary"):
        # DuckDB's inexact values are valid bounds already (a prefix; a prefix incremented).
        if width is not None:
            value = truncate_upper_bound(t, value, width) if upper else truncate_lower_bound(t, value, width)
            if value is None:
                return None
    elif not exact:
        return None
    try:
        return to_bytes(t, value)
    except ValidationError:
        return None


def file_metrics(
    stats: Mapping[str, Mapping[str, str]],
    leaves: list[LeafColumn],
    modes: Mapping[int, MetricsMode],
) -> FileMetrics:
    """Metric maps of one written file from its RETURN_STATS `column_statistics`."""
    out = FileMetrics({}, {}, {}, {}, {}, {})
    for leaf in leaves:
        mode = modes.get(leaf.field.id, NONE)
        column = stats.get(leaf.key)
        if column is None or not mode.counts:
            continue
        fid = leaf.field.id
        if (size := _int(column, "column_size_bytes")) is not None:
            out.column_sizes[fid] = size
        if (values := _int(column, "num_values")) is not None:
            out.value_counts[fid] = values
        if (nulls := _int(column, "null_count")) is not None:
            out.null_value_counts[fid] = nulls
        if leaf.field.type.name in ("float", "double"):
            out.nan_value_counts[fid] = _int(column, "nan_count") or 0
        if not (mode.bounds and leaf.bounds_allowed and is_primitive(leaf.field.type)):
            continue
        t = leaf.field.type
        lower = _bound(t, column.get("min"), column.get("min_is_exact") == "true", mode.width, upper=False)
        upper = _bound(t, column.get("max"), column.get("max_is_exact") == "true", mode.width, upper=True)
        if lower is not None:
            out.lower_bounds[fid] = lower
        if upper is not None:
            out.upper_bounds[fid] = upper
    return out


def iter_required_violations(
    stats: Mapping[str, Mapping[str, str]], schema: Schema
) -> Iterator[tuple[str, int]]:
    """(column, null count) of required columns (with only required ancestors) holding nulls."""

    def walk(fields: tuple[NestedField, ...], key: str, name: str) -> Iterator[tuple[str, int]]:
        for f in fields:
            if not f.required:
                continue
            k = f"{key}.{quote_ident(f.name)}" if key else quote_ident(f.name)
            n = f"{name}.{f.name}" if name else f.name
            if isinstance(f.type, StructType):
                yield from walk(f.type.fields, k, n)
            elif is_primitive(f.type):
                column = stats.get(k) or {}
                nulls = _int(column, "null_count") or 0
                if nulls:
                    yield n, nulls
            else:
                column = stats.get(k) or {}
                nulls = _int(column, "null_count") or 0
                if nulls:
                    yield n, nulls

    yield from walk(schema.fields, "", "")
