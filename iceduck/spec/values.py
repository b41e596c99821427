"""Single values of the Iceberg spec: binary form (bounds), JSON form (defaults), human-readable text.

Values are in the internal representation of `docs/architecture.md` ("Value representation"):
date → days, time → micros since midnight, timestamp(tz) → micros, timestamp(tz)_ns → nanos since
epoch, decimal → `Decimal`, uuid → `UUID`, fixed/binary → `bytes`. In addition:

* geometry/geography *bounds* are points: a tuple `(x, y)`, `(x, y, z)` or `(x, y, z, m)` of floats
  (z is NaN when only m is set), as in "Bound serialization" of Appendix D;
* nested values (JSON defaults only): struct → `dict[field_id, value]` holding the fields present,
  list → `list`, map → `dict` (keys must be hashable).

Calendar arithmetic is done on integers (proleptic Gregorian, astronomical year numbering), so every
representable value works, including years before 1 and after 9999 that `datetime` cannot hold.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from collections.abc import Mapping
from decimal import ROUND_FLOOR, Decimal, localcontext
from typing import Any, NoReturn

from iceduck.errors import InvalidMetadataError, UnsupportedFormatError, ValidationError
from iceduck.spec.types import (
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    StructType,
)

MICROS_PER_SECOND = 1_000_000
MICROS_PER_HOUR = 3_600 * MICROS_PER_SECOND
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
NANOS_PER_MICRO = 1_000
NANOS_PER_DAY = MICROS_PER_DAY * NANOS_PER_MICRO

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

_MICRO_TIMESTAMPS = frozenset({"timestamp", "timestamptz"})
_NANO_TIMESTAMPS = frozenset({"timestamp_ns", "timestamptz_ns"})
TIMESTAMP_TYPES = _MICRO_TIMESTAMPS | _NANO_TIMESTAMPS
_ZONED = frozenset({"timestamptz", "timestamptz_ns"})

# ---------------------------------------------------------------------------------------------
# Calendar arithmetic (days since 1970-01-01 <-> proleptic Gregorian civil date)
# ---------------------------------------------------------------------------------------------

# The Gregorian calendar repeats every 400 years = 146097 days; counting from 0000-03-01 puts the
# leap day at the end of each year, which makes month lengths a simple linear formula.
_DAYS_0000_03_01_TO_EPOCH = 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01; year 0 is 1 BC."""
    shifted = days + _DAYS_0000_03_01_TO_EPOCH
    era, day_of_era = divmod(shifted, 146_097)
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    march_month = (5 * day_of_year + 2) // 153  # 0 = March ... 11 = February
    day = day_of_year - (153 * march_month + 2) // 5 + 1
    month = march_month + 3 if march_month < 10 else march_month - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (no range check)."""
    y = year - 1 if month <= 2 else year
    era, year_of_era = divmod(y, 400)
    march_month = month - 3 if month > 2 else month + 9
    day_of_year = (153 * march_month + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - _DAYS_0000_03_01_TO_EPOCH


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _kind(t: IcebergType) -> str:
    return t.name


def _describe(data: bytes) -> str:
    shown = data[:32].hex()
    return shown + ("..." if len(data) > 32 else "")


def _fail(path: str | None, message: str) -> NoReturn:
    raise InvalidMetadataError(f"{path}: {message}" if path else message)


def unscaled(value: Decimal, scale: int) -> int:
    """The unscaled integer of a decimal at the given scale; raises if the value needs more digits."""
    if not isinstance(value, Decimal) or not value.is_finite():
        raise ValidationError(f"not a finite decimal value: {value!r}")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        n *= 10**shift
    else:
        n, remainder = divmod(n, 10**-shift)
        if remainder:
            raise ValidationError(f"decimal {value} has more than {scale} digits after the point")
    return -n if sign else n


def from_unscaled(n: int, scale: int) -> Decimal:
    """The decimal with unscaled value n and the given scale (exactly that exponent)."""
    return Decimal((1 if n < 0 else 0, tuple(int(c) for c in str(abs(n))), -scale))


def min_bytes_signed(n: int) -> bytes:
    """Two's-complement big-endian bytes of n, as few as hold it (at least one)."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _decimal_text(n: int, scale: int, *, leading_zero: bool = True) -> str:
    """Plain text of unscaled n at scale: exactly `scale` digits after the point, no exponent."""
    digits = str(abs(n))
    sign = "-" if n < 0 else ""
    if scale == 0:
        return sign + digits
    digits = digits.rjust(scale + 1, "0")
    whole, frac = digits[:-scale], digits[-scale:]
    if not leading_zero and whole == "0":
        whole = ""
    return f"{sign}{whole}.{frac}"


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _float_text(value: float) -> str:
    """Python's shortest round-trip text, which matches DuckDB's for doubles; NaN keeps its sign."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return repr(value)


def _float32_repr(value: float) -> str:
    """Text of a 32-bit float as DuckDB prints it (repr style).

    DuckDB prints the shortest digits that read back as the float, except when that choice is
    ambiguous - the nearest shortest candidate lying exactly halfway to a neighbouring float, or two
    shortest candidates equally close - where it prints the shortest digits of the value as a double instead
    (1048576.75, not 1048576.8; 171443792.0, not 171443790.0).
    """
    f = _float32(value)
    if not math.isfinite(f) or f == 0.0:
        return _float_text(f)
    magnitude = abs(f)
    sign = "-" if f < 0 else ""
    bits = struct.unpack("<I", struct.pack("<f", magnitude))[0]
    exact = Decimal(magnitude)
    below = Decimal(struct.unpack("<f", struct.pack("<I", bits - 1))[0])
    above = (
        Decimal(struct.unpack("<f", struct.pack("<I", bits + 1))[0])
        if bits + 1 < 0x7F800000
        else exact + (exact - below)  # the largest float: the gap above is as wide as below
    )
    with localcontext() as ctx:
        ctx.prec = 200  # exact arithmetic: float32 values have few significant digits
        low, high = (below + exact) / 2, (exact + above) / 2
        for digits in range(1, 10):
            # the two decimals of this many significant digits around the value
            step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
            down = (exact / step).to_integral_value(rounding=ROUND_FLOOR) * step
            up = down if down == exact else down + step
            inside = [c for c in {down, up} if low <= c <= high]
            if not inside:
                continue
            best = min(inside, key=lambda c: abs(c - exact))
            tie = len(inside) == 2 and exact - down == up - exact
            if tie or best in (low, high):
                return sign + repr(magnitude)
            return sign + repr(float(best))
    return sign + repr(magnitude)


# ---------------------------------------------------------------------------------------------
# Binary single-value serialization (Appendix D), with the bound rules for promoted types
# ---------------------------------------------------------------------------------------------


def from_bytes(t: IcebergType, data: bytes, *, path: str | None = None) -> Any:
    """Decode a binary single value (a lower/upper bound or partition summary bound).

    Bounds written before a type promotion keep their old width: a `long` bound may have 4 bytes
    (int), a `double` bound 4 bytes (float), a `timestamp`/`timestamp_ns` bound 4 bytes (date).
    `path` (optional) names the file in error messages.
    """
    kind = _kind(t)
    data = bytes(data)
    size = len(data)

    def expect(*sizes: int) -> None:
        if size not in sizes:
            wanted = " or ".join(str(s) for s in sizes)
            _fail(path, f"{t} value must have {wanted} bytes, found {size}: {_describe(data)}")

    if kind == "boolean":
        expect(1)
        return data[0] != 0
    if kind in ("int", "date"):
        expect(4)
        return int.from_bytes(data, "little", signed=True)
    if kind == "long":
        expect(4, 8)
        return int.from_bytes(data, "little", signed=True)
    if kind == "float":
        expect(4)
        return float(struct.unpack("<f", data)[0])
    if kind == "double":
        expect(4, 8)
        return float(struct.unpack("<f" if size == 4 else "<d", data)[0])
    if kind == "time":
        expect(8)
        return int.from_bytes(data, "little", signed=True)
    if kind in ("timestamp", "timestamp_ns"):
        expect(4, 8)
        n = int.from_bytes(data, "little", signed=True)
        if size == 4:  # written as a date before date -> timestamp promotion
            return n * (MICROS_PER_DAY if kind == "timestamp" else NANOS_PER_DAY)
        return n
    if kind in ("timestamptz", "timestamptz_ns"):
        expect(8)
        return int.from_bytes(data, "little", signed=True)
    if kind == "string":
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            _fail(path, f"string value is not valid UTF-8 ({e.reason} at byte {e.start}): {_describe(data)}")
    if kind == "uuid":
        expect(16)
        return uuid.UUID(bytes=data)
    if kind in ("fixed", "binary"):
        return data  # bounds of fixed columns may be truncated, so no length check
    if isinstance(t, DecimalType):
        if size == 0:
            _fail(path, f"{t} value has no bytes")
        return from_unscaled(int.from_bytes(data, "big", signed=True), t.scale)
    if isinstance(t, GeometryType | GeographyType):
        expect(16, 24, 32)
        return tuple(struct.unpack(f"<{size // 8}d", data))
    if kind == "variant":
        raise UnsupportedFormatError(
            (f"{path}: " if path else "") + "variant bounds are serialized variant objects; not decoded"
        )
    _fail(path, f"type {t} has no binary single-value form")


def to_bytes(t: IcebergType, value: Any) -> bytes:
    """Encode a value in the binary single-value form (for bounds and partition summaries)."""
    kind = _kind(t)
    try:
        if kind == "boolean":
            return b"\x01" if value else b"\x00"
        if kind in ("int", "date"):
            return struct.pack("<i", value)
        if kind in ("long", "time") or kind in TIMESTAMP_TYPES:
            return struct.pack("<q", value)
        if kind == "float":
            return struct.pack("<f", value)
        if kind == "double":
            return struct.pack("<d", value)
    except (struct.error, OverflowError) as e:
        raise ValidationError(f"{value!r} does not fit type {t}: {e}") from None
    if kind == "string":
        return str(value).encode("utf-8")
    if kind == "uuid":
        return _as_uuid(value).bytes
    if kind in ("fixed", "binary"):
        return bytes(value)
    if isinstance(t, DecimalType):
        return min_bytes_signed(_checked_unscaled(t, value))
    if isinstance(t, GeometryType | GeographyType):
        point = tuple(float(c) for c in value)
        if not 2 <= len(point) <= 4:
            raise ValidationError(f"a {t} bound is a point of 2 to 4 coordinates, got {value!r}")
        return struct.pack(f"<{len(point)}d", *point)
    raise ValidationError(f"type {t} has no binary single-value form")


def _as_uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes | bytearray) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    raise ValidationError(f"not a uuid value: {value!r}")


def _checked_unscaled(t: DecimalType, value: Any) -> int:
    n = unscaled(value if isinstance(value, Decimal) else Decimal(value), t.scale)
    if len(str(abs(n))) > t.precision:
        raise ValidationError(f"{value} does not fit {t}")
    return n


# ---------------------------------------------------------------------------------------------
# Text forms of dates and times
# ---------------------------------------------------------------------------------------------

_DATE_RE = r"([+-]?\d{4,})-(\d{2})-(\d{2})"
_TIME_RE = r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
_ZONE_RE = r"(Z|[+-]\d{2}(?::?\d{2})?)?"
_DATE = re.compile(rf"^{_DATE_RE}$")
_TIME = re.compile(rf"^{_TIME_RE}$")
_TIMESTAMP = re.compile(rf"^{_DATE_RE}[T ]{_TIME_RE}{_ZONE_RE}$")


def iso_year(year: int) -> str:
    """Year as ISO-8601 text: 4 digits, with a sign before year 0 and after 9999 (as java.time)."""
    # ISO 8601 expanded years, as java.time prints them: sign beyond 4 digits and before year 0.
    if 0 <= year <= 9999:
        return f"{year:04d}"
    return f"{'+' if year > 0 else '-'}{abs(year):04d}"


def iso_date(days: int) -> str:
    """ISO-8601 date text (`2017-11-16`) of a day count since 1970-01-01."""
    y, m, d = civil_from_days(days)
    return f"{iso_year(y)}-{m:02d}-{d:02d}"


def _clock(micros_or_nanos: int, per_second: int, digits: int, *, trim: bool) -> str:
    """HH:MM:SS[.fraction] of a time of day; fraction trimmed of trailing zeros when trim is set."""
    seconds, frac = divmod(micros_or_nanos, per_second)
    minutes, sec = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{hour:02d}:{minute:02d}:{sec:02d}"
    fraction = f"{frac:0{digits}d}"
    if trim:
        fraction = fraction.rstrip("0")
    return f"{text}.{fraction}" if fraction else text


def _parse_date(text: str) -> int:
    m = _DATE.match(text)
    if not m:
        raise ValidationError(f"not an ISO-8601 date: {text!r}")
    return _date_parts(text, m.group(1), m.group(2), m.group(3))


def _date_parts(text: str, y: str, mo: str, d: str) -> int:
    year, month, day = int(y), int(mo), int(d)
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        raise ValidationError(f"not a valid date: {text!r}")
    return days_from_civil(year, month, day)


def _time_parts(text: str, h: str, mi: str, s: str | None, frac: str | None, per_second: int) -> int:
    hour, minute, second = int(h), int(mi), int(s or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ValidationError(f"not a valid time of day: {text!r}")
    digits = len(str(per_second)) - 1
    fraction = (frac or "").ljust(9, "0")
    if fraction[digits:].strip("0"):
        raise ValidationError(f"{text!r} has more than {digits} fractional digits")
    return ((hour * 60 + minute) * 60 + second) * per_second + int(fraction[:digits] or 0)


def _zone_offset_seconds(text: str, zone: str) -> int:
    if zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 18 or minutes > 59:
        raise ValidationError(f"not a valid zone offset in {text!r}")
    return sign * (hours * 3600 + minutes * 60)


def _parse_timestamp(text: str, per_second: int, zoned: bool) -> int:
    m = _TIMESTAMP.match(text)
    if not m:
        raise ValidationError(f"not an ISO-8601 timestamp: {text!r}")
    days = _date_parts(text, m.group(1), m.group(2), m.group(3))
    in_day = _time_parts(text, m.group(4), m.group(5), m.group(6), m.group(7), per_second)
    zone = m.group(8)
    if zoned and zone is None:
        raise ValidationError(f"timestamptz value must include a zone offset: {text!r}")
    if not zoned and zone is not None:
        raise ValidationError(f"timestamp (without zone) value must not include a zone offset: {text!r}")
    offset = _zone_offset_seconds(text, zone) if zone else 0
    return days * 86_400 * per_second + in_day - offset * per_second


def _split_timestamp(kind: str, value: int) -> tuple[int, int, int, int]:
    """(days, time-of-day, units per second, fraction digits) of a timestamp value."""
    per_day, per_second, digits = (
        (NANOS_PER_DAY, 1_000_000_000, 9)
        if kind in _NANO_TIMESTAMPS
        else (MICROS_PER_DAY, MICROS_PER_SECOND, 6)
    )
    days, in_day = divmod(value, per_day)
    return days, in_day, per_second, digits


# ---------------------------------------------------------------------------------------------
# JSON single-value serialization (Appendix D)
# ---------------------------------------------------------------------------------------------


def from_json(t: IcebergType, obj: Any) -> Any:
    """Decode a JSON single value (field defaults, partition values in metadata) to internal form.

    JSON `null` is `None` for every type. Nested types: a struct is `{"<field id>": value}` (fields
    may be missing, e.g. the `{}` default), a list a JSON array, a map `{"keys": [...], "values": [...]}`.
    """
    if obj is None:
        return None
    kind = _kind(t)
    try:
        return _from_json(t, kind, obj)
    except (ValueError, TypeError, KeyError, ArithmeticError) as e:
        raise ValidationError(f"invalid JSON value for type {t}: {obj!r} ({e})") from None


def _from_json(t: IcebergType, kind: str, obj: Any) -> Any:
    if kind == "boolean":
        if not isinstance(obj, bool):
            raise ValidationError(f"boolean value must be true or false: {obj!r}")
        return obj
    if kind in ("int", "long"):
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise ValidationError(f"{kind} value must be a JSON integer: {obj!r}")
        low, high = (_INT_MIN, _INT_MAX) if kind == "int" else (_LONG_MIN, _LONG_MAX)
        if not low <= obj <= high:
            raise ValidationError(f"{obj} is out of range for {kind}")
        return obj
    if kind in ("float", "double"):
        if isinstance(obj, bool) or not isinstance(obj, int | float | str):
            raise ValidationError(f"{kind} value must be a JSON number: {obj!r}")
        value = float(obj)  # strings cover NaN / Infinity written by some JSON libraries
        return _float32(value) if kind == "float" else value
    if isinstance(t, DecimalType):
        if isinstance(obj, bool) or not isinstance(obj, str | int):
            raise ValidationError(f"decimal value must be a JSON string: {obj!r}")
        return from_unscaled(_checked_unscaled(t, Decimal(obj)), t.scale)
    if (kind in ("date", "time") or kind in TIMESTAMP_TYPES) and type(obj) is int:
        return obj  # lenient: some writers store the internal number instead of ISO text
    if kind in ("string", "date", "time", "uuid", "fixed", "binary") or kind in TIMESTAMP_TYPES:
        if not isinstance(obj, str):
            raise ValidationError(f"{t} value must be a JSON string: {obj!r}")
        return _from_json_text(t, kind, obj)
    if isinstance(t, GeometryType | GeographyType):
        if not isinstance(obj, str):
            raise ValidationError(f"{t} value must be a WKT JSON string: {obj!r}")
        return obj  # kept as WKT text; geospatial defaults must be null anyway
    if isinstance(t, StructType):
        if not isinstance(obj, Mapping):
            raise ValidationError(f"struct value must be a JSON object by field id: {obj!r}")
        out: dict[int, Any] = {}
        for key, item in obj.items():
            f = t.field_by_id(int(key))
            if f is None:
                raise ValidationError(f"struct value has no field with id {key}: {obj!r}")
            out[f.id] = from_json(f.type, item)
        return out
    if isinstance(t, ListType):
        if not isinstance(obj, list):
            raise ValidationError(f"list value must be a JSON array: {obj!r}")
        return [from_json(t.element, item) for item in obj]
    if isinstance(t, MapType):
        if not isinstance(obj, Mapping) or not isinstance(obj.get("keys"), list):
            raise ValidationError(f'map value must be {{"keys": [...], "values": [...]}}: {obj!r}')
        keys, values = obj["keys"], obj["values"]
        if not isinstance(values, list) or len(keys) != len(values):
            raise ValidationError(f"map value needs as many values as keys: {obj!r}")
        return {from_json(t.key, k): from_json(t.value, v) for k, v in zip(keys, values, strict=True)}
    raise ValidationError(f"type {t} only has the null value; got {obj!r}")


def _from_json_text(t: IcebergType, kind: str, text: str) -> Any:
    if kind == "string":
        return text
    if kind == "date":
        return _parse_date(text)
    if kind == "time":
        m = _TIME.match(text)
        if not m:
            raise ValidationError(f"not an ISO-8601 time: {text!r}")
        hour, minute, second, fraction = m.groups()
        return _time_parts(text, hour, minute, second, fraction, MICROS_PER_SECOND)
    if kind in TIMESTAMP_TYPES:
        per_second = MICROS_PER_SECOND if kind in _MICRO_TIMESTAMPS else 1_000_000_000
        return _parse_timestamp(text, per_second, kind in _ZONED)
    if kind == "uuid":
        return uuid.UUID(text)
    data = bytes.fromhex(text)
    if isinstance(t, FixedType) and len(data) != t.length:
        raise ValidationError(f"{t} value must have {t.length} bytes, got {len(data)}: {text!r}")
    return data


_TEMPORAL = frozenset({"date", "time", *TIMESTAMP_TYPES})
_TEXTUAL = _TEMPORAL | {"string", "uuid", "fixed", "binary"}


def _scalar_text(kind: str, value: Any, *, duck: bool) -> str:
    """A temporal, string, uuid, binary or geospatial value as the spec's JSON single-value text
    (ISO 8601 with `T`, `+00:00` and every fraction digit; hex bytes) or, with `duck`, as DuckDB
    prints it cast to VARCHAR (a space, `+00`, trailing zeros trimmed, DuckDB's form of years
    outside 1..9999; `\\x01` bytes): one rule for both spellings. Other kinds are geospatial."""
    if kind in _TEMPORAL:
        date_text = _duck_date if duck else iso_date
        if kind == "date":
            return date_text(value)
        if kind == "time":
            return _clock(value, MICROS_PER_SECOND, 6, trim=duck)
        days, in_day, per_second, digits = _split_timestamp(kind, value)
        text = f"{date_text(days)}{' ' if duck else 'T'}{_clock(in_day, per_second, digits, trim=duck)}"
        if kind in _ZONED:
            text += "+00" if duck else "+00:00"
        return text
    if kind == "string":
        return str(value)
    if kind == "uuid":
        return str(_as_uuid(value))
    if kind in ("fixed", "binary"):
        return _duck_blob(bytes(value)) if duck else bytes(value).hex()
    return value if isinstance(value, str) else _wkt_point(value)


def to_json(t: IcebergType, value: Any) -> Any:
    """Encode a value in the JSON single-value form (the inverse of `from_json`)."""
    if value is None:
        return None
    kind = _kind(t)
    if kind == "boolean":
        return bool(value)
    if kind in ("int", "long"):
        return int(value)
    if kind == "float":
        # the shortest text of the 32-bit value, so 1.1 stays 1.1 rather than 1.100000023841858
        return float(_float32_repr(float(value)))
    if kind == "double":
        return float(value)
    if isinstance(t, DecimalType):
        return _decimal_text(_checked_unscaled(t, value), t.scale)
    if kind in _TEXTUAL or isinstance(t, GeometryType | GeographyType):
        return _scalar_text(kind, value, duck=False)
    if isinstance(t, StructType):
        return {str(f.id): to_json(f.type, value[f.id]) for f in t.fields if f.id in value}
    if isinstance(t, ListType):
        return [to_json(t.element, item) for item in value]
    if isinstance(t, MapType):
        return {
            "keys": [to_json(t.key, k) for k in value],
            "values": [to_json(t.value, v) for v in value.values()],
        }
    raise ValidationError(f"type {t} only has the null value; got {value!r}")


# ---------------------------------------------------------------------------------------------
# Human-readable text (as DuckDB prints the value cast to VARCHAR, session time zone UTC)
# ---------------------------------------------------------------------------------------------


def _duck_date(days: int) -> str:
    y, m, d = civil_from_days(days)
    # DuckDB prints years up to 0 as "(BC)" with 1 BC = year 0.
    if y <= 0:
        return f"{1 - y:04d}-{m:02d}-{d:02d} (BC)"
    return f"{y:04d}-{m:02d}-{d:02d}"


def _duck_blob(data: bytes) -> str:
    # Printable ASCII stays as is, except the quotes and backslash; everything else is \xHH.
    return "".join(
        chr(b) if 0x20 <= b <= 0x7E and b not in (0x22, 0x27, 0x5C) else f"\\x{b:02X}" for b in data
    )


def _coordinate(c: float) -> str:
    text = repr(float(c))
    return text[:-2] if text.endswith(".0") else text


def _wkt_point(point: Any) -> str:
    coords = tuple(float(c) for c in point)
    if len(coords) == 4 and math.isnan(coords[2]):
        return "POINT M (" + " ".join(_coordinate(c) for c in (coords[0], coords[1], coords[3])) + ")"
    tag = {2: "POINT", 3: "POINT Z", 4: "POINT ZM"}.get(len(coords))
    if tag is None:
        raise ValidationError(f"a point has 2 to 4 coordinates: {point!r}")
    return f"{tag} (" + " ".join(_coordinate(c) for c in coords) + ")"


def to_human(t: IcebergType, value: Any) -> str:
    """Readable text of a value, in the form DuckDB gives when casting it to VARCHAR (UTC session).

    Examples: `2026-10-02`, `2026-10-02 12:34:56.123456`, `2026-10-02 12:34:56.123456+00`, `14.20`,
    `f79c3e09-677c-4bbd-a479-3f349cb785e7`, `\\x01\\x02`. Geospatial bound points print as WKT.
    `None` gives `"null"`.
    """
    if value is None:
        return "null"
    kind = _kind(t)
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("int", "long"):
        return str(int(value))
    if kind == "float":
        return _float32_repr(float(value))
    if kind == "double":
        return _float_text(float(value))
    if isinstance(t, DecimalType):
        n = _checked_unscaled(t, value)
        return _decimal_text(n, t.scale, leading_zero=t.precision != t.scale)
    if kind in _TEXTUAL or isinstance(t, GeometryType | GeographyType):
        return _scalar_text(kind, value, duck=True)
    if isinstance(t, StructType):
        parts = [f"'{f.name}': {to_human(f.type, value.get(f.id))}" for f in t.fields]
        return "{" + ", ".join(parts) + "}"
    if isinstance(t, ListType):
        return "[" + ", ".join(to_human(t.element, v) for v in value) + "]"
    if isinstance(t, MapType):
        return "{" + ", ".join(f"{to_human(t.key, k)}={to_human(t.value, v)}" for k, v in value.items()) + "}"
    return str(value)


# ---------------------------------------------------------------------------------------------
# Python objects
# ---------------------------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)


def to_python(t: IcebergType, value: Any) -> Any:
    """The natural Python object of a value: `datetime.date` / `time` / `datetime` for temporal types.

    timestamptz values become UTC-aware datetimes. Nanosecond timestamps lose the digits below a
    microsecond (floor). Raises `ValidationError` for dates outside `datetime`'s years 1..9999.
    Other values are returned unchanged.
    """
    if value is None:
        return None
    kind = _kind(t)
    try:
        if kind == "date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=value)
        if kind == "time":
            seconds, micros = divmod(value, MICROS_PER_SECOND)
            return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micros)
        if kind in TIMESTAMP_TYPES:
            micros = value // NANOS_PER_MICRO if kind in _NANO_TIMESTAMPS else value
            out = _EPOCH + dt.timedelta(microseconds=micros)
            return out.replace(tzinfo=dt.UTC) if kind in _ZONED else out
    except (OverflowError, ValueError) as e:
        raise ValidationError(f"{t} value {value} has no Python equivalent: {e}") from None
    return value


def from_python(t: IcebergType, obj: Any) -> Any:
    """The internal representation of a Python object (inverse of `to_python`, also accepts ints).

    Naive datetimes are taken as UTC for timestamptz; aware datetimes are converted to UTC.
    """
    if obj is None:
        return None
    kind = _kind(t)
    if kind == "date" and isinstance(obj, dt.date) and not isinstance(obj, dt.datetime):
        return obj.toordinal() - _EPOCH.toordinal()
    if kind == "time" and isinstance(obj, dt.time):
        return ((obj.hour * 60 + obj.minute) * 60 + obj.second) * MICROS_PER_SECOND + obj.microsecond
    if kind in TIMESTAMP_TYPES and isinstance(obj, dt.datetime):
        if obj.tzinfo is not None:
            obj = obj.astimezone(dt.UTC).replace(tzinfo=None)
        delta = obj - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds
        return micros * NANOS_PER_MICRO if kind in _NANO_TIMESTAMPS else micros
    if kind == "uuid" and isinstance(obj, str):
        return uuid.UUID(obj)
    if isinstance(t, DecimalType) and not isinstance(obj, Decimal):
        return from_unscaled(_checked_unscaled(t, Decimal(str(obj))), t.scale)
    return obj


# ---------------------------------------------------------------------------------------------
# Truncated bounds for metrics (string and binary)
# ---------------------------------------------------------------------------------------------


def truncate_lower_bound(t: IcebergType, value: Any, width: int) -> Any:
    """A lower bound no longer than `width` (code points for strings, bytes for binary/fixed).

    A prefix is never greater than the value, so it stays a valid lower bound. Other types are
    returned unchanged.
    """
    if width <= 0:
        raise ValidationError(f"truncation width must be positive, got {width}")
    kind = _kind(t)
    if kind == "string" or kind in ("binary", "fixed"):
        return value[:width]
    return value


_MAX_CODE_POINT = 0x10FFFF


def truncate_upper_bound(t: IcebergType, value: Any, width: int) -> Any:
    """An upper bound no longer than `width`, or None when none exists.

    A longer value is cut to `width` and its last code point (byte) that can be incremented is
    incremented, dropping those after it; strings skip the surrogate range, which UTF-8 cannot
    encode. When every code point is the maximum (every byte 0xFF) there is no such bound: None.
    Other types are returned unchanged.
    """
    if width <= 0:
        raise ValidationError(f"truncation width must be positive, got {width}")
    kind = _kind(t)
    if kind == "string":
        if len(value) <= width:
            return value
        text: str = value[:width]
        for i in range(len(text) - 1, -1, -1):
            cp = ord(text[i])
            if cp < _MAX_CODE_POINT:
                nxt = cp + 1
                if 0xD800 <= nxt <= 0xDFFF:
                    nxt = 0xE000
                return text[:i] + chr(nxt)
        return None
    if kind in ("binary", "fixed"):
        data = bytes(value)
        if len(data) <= width:
            return data
        prefix = data[:width]
        for i in range(len(prefix) - 1, -1, -1):
            if prefix[i] < 0xFF:
                return prefix[:i] + bytes([prefix[i] + 1])
        return None
    return value
