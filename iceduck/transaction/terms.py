"""Parsing partition and sort terms: `"service_date"`, `"day(ts)"`, `"bucket(16, id)"`, `"truncate(4, name)"`,
`"void(x)"`, `"year(ts) AS ts_year"`; sort terms `"id"`, `"ts DESC NULLS LAST"`, `"bucket(4, id) ASC"`.

Partition field names default to Java's: the column name for identity, else `<column>_<transform>`
(`_bucket`, `_trunc`, `_year`, `_month`, `_day`, `_hour`, `_null` for void).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.sorting import NullOrder, SortDirection, SortField, SortOrder
from iceduck.spec.transforms import (
    DAY,
    HOUR,
    IDENTITY,
    MONTH,
    VOID,
    YEAR,
    BucketTransform,
    Transform,
    TruncateTransform,
)
from iceduck.spec.types import Schema, is_primitive

_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\[\s*(\d+)\s*\])?\s*\((.*)\)\s*$", re.S)
_ALIAS = re.compile(r"^(.*?)\s+AS\s+(\"(?:[^\"]|\"\")+\"|[^\s]+)\s*$", re.I | re.S)
_SUFFIX = {
    "bucket": "bucket",
    "truncate": "trunc",
    "year": "year",
    "month": "month",
    "day": "day",
    "hour": "hour",
    "void": "null",
}
_SIMPLE = {"identity": IDENTITY, "year": YEAR, "years": YEAR, "month": MONTH, "months": MONTH, "day": DAY,
           "days": DAY, "date": DAY, "hour": HOUR, "hours": HOUR, "date_hour": HOUR, "void": VOID}  # fmt: skip


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == '"' and name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name


def _column(schema: Schema, text: str, term: str) -> int:
    name = _unquote(text)
    f = schema.field_by_name(name) or schema.field_by_name(name, case_sensitive=False)
    if f is None:
        known = ", ".join(n for _, n in ((f.id, f.name) for f in schema.fields))
        raise ValidationError(f"{term!r}: no column {name!r} (columns: {known})")
    if not is_primitive(f.type):
        raise ValidationError(
            f"{term!r}: column {name!r} has type {f.type}; only primitive columns can be partitioned or sorted by"
        )
    return f.id


def parse_transform_term(schema: Schema, term: str) -> tuple[Transform, int, str]:
    """(transform, source field id, source column name) of a term like `bucket(16, id)`."""
    m = _CALL.match(term)
    if m is None:
        fid = _column(schema, term, term)
        return IDENTITY, fid, schema.column_name(fid) or term
    fn, bracket, inner = m.group(1).lower(), m.group(2), m.group(3)
    args = [a.strip() for a in inner.split(",")] if inner.strip() else []
    if fn in ("bucket", "truncate"):
        width: int | None = int(bracket) if bracket is not None else None
        cols = []
        for a in args:
            if a.lstrip("-").isdigit() and width is None:
                width = int(a)
            else:
                cols.append(a)
        if width is None or len(cols) != 1:
            raise ValidationError(f"{term!r}: expected {fn}(N, column)")
        if width <= 0:
            raise ValidationError(f"{term!r}: {fn} width must be positive")
        fid = _column(schema, cols[0], term)
        transform: Transform = BucketTransform(width) if fn == "bucket" else TruncateTransform(width)
    elif fn in _SIMPLE:
        if len(args) != 1:
            raise ValidationError(f"{term!r}: expected {fn}(column)")
        fid = _column(schema, args[0], term)
        transform = _SIMPLE[fn]
    else:
        raise ValidationError(
            f"{term!r}: unknown transform {fn!r} (identity, bucket, truncate, year, month, day, hour, void)"
        )
    source = schema.find_type(fid)
    assert source is not None
    try:
        transform.result_type(source)
    except ValidationError as e:
        raise ValidationError(f"{term!r}: {e}") from None
    return transform, fid, schema.column_name(fid) or ""


def partition_fields(schema: Schema, terms: Iterable[str | PartitionField]) -> tuple[PartitionField, ...]:
    """Partition fields (ids unassigned: 0) for terms; `ValidationError` naming a bad term."""
    out = []
    for term in terms:
        if isinstance(term, PartitionField):
            out.append(term)
            continue
        alias = None
        m = _ALIAS.match(term)
        if m is not None:
            term, alias = m.group(1), _unquote(m.group(2))
        transform, fid, column = parse_transform_term(schema, term)
        if alias is None:
            kind = str(transform).split("[", 1)[0]
            alias = column if transform == IDENTITY else f"{column}_{_SUFFIX.get(kind, kind)}"
        out.append(PartitionField((fid,), 0, alias, transform))
    names = [f.name for f in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"partition field names must be unique: {', '.join(dupes)}")
    return tuple(out)


def partition_spec(
    schema: Schema, terms: Sequence[str | PartitionField] | None, spec_id: int = 0
) -> PartitionSpec:
    """A partition spec with field ids 1000, 1001, ... (for a new table)."""
    fields = partition_fields(schema, terms or ())
    numbered = tuple(
        PartitionField(f.source_ids, 1000 + i, f.name, f.transform) for i, f in enumerate(fields)
    )
    return PartitionSpec(spec_id, numbered)


_SORT = re.compile(r"^(.*?)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.I | re.S)


def sort_order(schema: Schema, terms: Sequence[str | SortField] | None, order_id: int = 1) -> SortOrder:
    """A sort order for terms like `"id"`, `"ts DESC NULLS LAST"`, `"bucket(4, id)"`."""
    fields = []
    for term in terms or ():
        if isinstance(term, SortField):
            fields.append(term)
            continue
        m = _SORT.match(term)
        assert m is not None
        expr, direction, nulls = m.group(1), (m.group(2) or "ASC").upper(), m.group(3)
        transform, fid, _ = parse_transform_term(schema, expr)
        d = SortDirection.DESC if direction == "DESC" else SortDirection.ASC
        if nulls is None:
            n = NullOrder.NULLS_FIRST if d == SortDirection.ASC else NullOrder.NULLS_LAST
        else:
            n = NullOrder.NULLS_FIRST if nulls.upper() == "FIRST" else NullOrder.NULLS_LAST
        fields.append(SortField((fid,), transform, d, n))
    if not fields:
        return SortOrder(0, ())
    return SortOrder(order_id, tuple(fields))
