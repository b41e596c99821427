"""The tables of ../shared/conformance/more/ as INVENTORY.md lists them, and the pieces a conformance
test needs: an order-independent row checksum, and a PyIceberg FileIO that finds a table's files
where the corpus keeps them (recorded locations are the writers' s3a://, s3://, file:/ paths)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyiceberg.io import InputFile, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO

_HEADING = re.compile(r"^## (\S+) / (\S+)$")


@dataclass(frozen=True, slots=True)
class MoreTable:
    """One table folder of more/ with what INVENTORY.md says about it."""

    folder: Path
    metadata: Path
    complete: bool
    formats: str
    location: str


def more_tables(root: Path) -> list[MoreTable]:
    """Every table INVENTORY.md lists, in its order."""
    text = (root / "INVENTORY.md").read_text()
    out: list[MoreTable] = []
    for block in text.split("\n## ")[1:]:
        lines = ("## " + block).splitlines()
        m = _HEADING.match(lines[0])
        if m is None:
            continue
        folder = root / m.group(1) / m.group(2)
        body = "\n".join(lines[1:])
        md = re.search(r"current metadata: `([^`]+)`", body)
        files = re.search(r"files in current snapshot: ([^;]+);", body)
        if md is None:
            continue
        metadata = folder / md.group(1)
        location = json.loads(metadata.read_text())["location"]
        out.append(
            MoreTable(folder, metadata, "complete: YES" in body, files.group(1) if files else "", location)
        )
    return out


def _norm(value: Any) -> Any:
    """One canonical form per value, whichever reader produced it."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return ("tz", value.isoformat())
        return ("ts", value.isoformat())
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value.normalize()) if value == value else "NaN"
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return tuple(sorted((str(k), _norm(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):  # a map as pairs
            return tuple(sorted((str(k), _norm(v)) for k, v in value))
        return tuple(_norm(v) for v in value)
    return value


def checksum(rows: list[tuple[Any, ...]] | list[dict[str, Any]]) -> tuple[int, str]:
    """(row count, order-independent digest of the rows' values)."""
    normed = sorted(
        repr(tuple(_norm(v) for v in (r.values() if isinstance(r, dict) else r))) for r in rows
    )
    return len(normed), hashlib.sha256("\n".join(normed).encode()).hexdigest()[:16]


class MovedFileIO(PyArrowFileIO):
    """PyIceberg FileIO reading a table moved from `iceduck.moved-from` to `iceduck.moved-to`
    (the same prefix replacement iceduck's resolver does for a moved table)."""

    def _local(self, location: str) -> str:
        src = self.properties["iceduck.moved-from"].rstrip("/")
        dst = self.properties["iceduck.moved-to"].rstrip("/")
        return dst + location[len(src) :] if location.startswith(src) else location

    def new_input(self, location: str) -> InputFile:
        return super().new_input(self._local(location))

    def new_output(self, location: str) -> OutputFile:
        return super().new_output(self._local(location))


def pyiceberg_properties(table: MoreTable) -> dict[str, str]:
    """StaticTable properties that make PyIceberg read `table` where the corpus keeps it."""
    return {
        "py-io-impl": "tests.support.more_corpus.MovedFileIO",
        "iceduck.moved-from": table.location,
        "iceduck.moved-to": str(table.folder),
    }


# ---------------------------------------------------------------------------------------------
# create.sql: the rows a table's own script implies, by running it in DuckDB
# ---------------------------------------------------------------------------------------------

_TYPES = [
    (re.compile(r"TIMESTAMP\(\d\)\s+WITH\s+TIME\s+ZONE", re.I), "TIMESTAMPTZ"),
    (re.compile(r"TIMESTAMP\(\d\)", re.I), "TIMESTAMP"),
    (re.compile(r"TIME\(\d\)", re.I), "TIME"),
    (re.compile(r"\bVARBINARY\b", re.I), "BLOB"),
    (re.compile(r"\bBINARY\b", re.I), "BLOB"),
    (re.compile(r"\bSTRING\b", re.I), "VARCHAR"),
    (re.compile(r"ARRAY<([A-Z0-9_(), ]+?)>", re.I), r"\1[]"),
]
_LITERALS = [
    # Trino's typed literals whose DuckDB reading would round or differ: let the column type decide.
    (re.compile(r"\b(?:DECIMAL|REAL|DOUBLE)\s+'([^']*)'", re.I), r"'\1'"),
    (re.compile(r"\bX'([0-9A-Fa-f]*)'"), lambda m: "from_hex('" + m.group(1) + "')"),
    (re.compile(r"\bARRAY\s*\(", re.I), "list_value("),
    (re.compile(r"\bARRAY\s*\[", re.I), "["),
]


def _outside_quotes(text: str, rules: list[tuple[re.Pattern[str], Any]]) -> str:
    """Apply the rewrite rules to the SQL outside string literals only."""
    parts = text.split("'")
    for i in range(0, len(parts), 2):
        for pattern, repl in rules:
            parts[i] = pattern.sub(repl, parts[i])
    return "'".join(parts)


class UntranslatableScript(Exception):
    """A create.sql statement DuckDB cannot run in an equivalent form."""


def translate_create_sql(text: str) -> tuple[str, list[str]]:
    """(table name, DuckDB statements) that build the rows a Trino/Spark create.sql leaves in its
    table. Statements that do not change rows (schemas, optimize, expiry, partitioning, SELECTs,
    session settings) are dropped; anything else unknown raises `UntranslatableScript`."""
    body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    types = list(_TYPES)
    if re.search(r"\bUSING\s+iceberg\b", body, re.I):
        # Spark: TIMESTAMP is with local time zone (Iceberg timestamptz), TIMESTAMP_NTZ without
        types = [
            (re.compile(r"\bTIMESTAMP_NTZ\b", re.I), "__NTZ__"),
            (re.compile(r"\bTIMESTAMP\b(?!\s*')", re.I), "TIMESTAMPTZ"),
            (re.compile(r"__NTZ__"), "TIMESTAMP"),
            *types,
        ]
    statements = [s.strip() for s in body.split(";") if s.strip()]
    name: str | None = None
    out: list[str] = []
    for s in statements:
        head = " ".join(s.split()[:3]).upper()
        if head.startswith(("CREATE SCHEMA", "SELECT", "SET ")) or re.search(
            r"\bEXECUTE\b|\bSET\s+PROPERTIES\b", s, re.I
        ):
            continue
        m = re.match(r"CREATE TABLE (?:IF NOT EXISTS )?([\w.]+)\s*\((.*)\)", s, re.I | re.S)
        if m:
            name = m.group(1).split(".")[-1]
            columns = m.group(2)
            # the column list ends at the parenthesis matching the first one
            depth, end = 0, len(columns)
            for i, ch in enumerate("(" + columns):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    end = i - 1
                    break
            columns = _outside_quotes(columns[:end], types)
            out.append(f"CREATE TABLE {name} ({columns})")
            continue
        if name is None:
            raise UntranslatableScript(f"statement before CREATE TABLE: {s[:60]}")
        s = re.sub(r"\b[\w]+\.[\w]+\." + name + r"\b", name, s)
        s = re.sub(r"\b[\w]+\." + name + r"\b", name, s)
        if re.match(r"ALTER TABLE \w+ ADD COLUMN", s, re.I):
            out.append(_outside_quotes(s, types))
            continue
        if re.match(r"(INSERT INTO|DELETE FROM|UPDATE)\b", s, re.I):
            s = _outside_quotes(s, types)
            for pattern, repl in _LITERALS:
                s = pattern.sub(repl, s)  # type: ignore[arg-type]
            out.append(s)
            continue
        raise UntranslatableScript(f"no DuckDB equivalent for: {s[:80]}")
    if name is None:
        raise UntranslatableScript("no CREATE TABLE")
    return name, out
