"""Single values between DuckDB's text form and iceduck's internal representation.

`from_duck_text(t, text)` reads what DuckDB prints for a value of Iceberg type `t` (statistics of
`COPY ... (RETURN_STATS)`, with the session time zone set to UTC). Typed literals for DuckDB are
`iceduck.vocabulary.duck_literal`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.types import DecimalType, IcebergType
from iceduck.spec.values import from_json, from_unscaled, unscaled

_TEXT_KINDS = frozenset(
    {"date", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns", "string", "uuid"}
)


def from_duck_text(t: IcebergType, text: str, *, hex_bytes: bool = True) -> Any:
    """The internal value of DuckDB's text for a value of type `t`; `ValidationError` if unreadable.

    Binary values are read as hex (how RETURN_STATS prints them) unless `hex_bytes` is False.
    """
    kind = t.name
    try:
        if kind == "boolean":
            if text.lower() in ("1", "true"):
                return True
            if text.lower() in ("0", "false"):
                return False
            raise ValueError(text)
        if kind in ("int", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
        if isinstance(t, DecimalType):
            value = Decimal(text)
            return from_unscaled(unscaled(value, t.scale), t.scale)
        if kind in ("binary", "fixed"):
            return bytes.fromhex(text) if hex_bytes else text.encode("latin-1")
        if kind in _TEXT_KINDS:
            return from_json(t, text)
    except (ValueError, ArithmeticError, ValidationError) as e:
        raise ValidationError(f"cannot read DuckDB value {text!r} as {t}: {e}") from None
    raise ValidationError(f"no DuckDB text form for type {t}")
